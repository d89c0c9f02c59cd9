// A scriptable extension for the integration tests. Each request channel takes line commands:
//   ping                 -> "pong <pid>"
//   crash                -> abort()
//   exit <code>          -> exit(code)
//   spawn <n>            -> starts n children (/bin/sleep) and one double-forked grandchild in
//                           its process group; answers "spawned <pid> <pid> ..."
//   assert <secs> <why>  -> performExpiringActivity: answers "granted", "denied" or, when the
//                           expired call arrives while the work runs, "expired"; the work holds the
//                           assertion for <secs> seconds or until expiry, then answers "released"
//   ignore-expiry        -> further assert commands keep working after expiry (never release early)
// Arguments: --never-ready (never announce readiness), --crash-at-start, --ignore-term.
import ExtensionRuntime
import Foundation
import Synchronization

let arguments = CommandLine.arguments.dropFirst()
if arguments.contains("--ignore-term") { signal(SIGTERM, SIG_IGN) }
if arguments.contains("--crash-at-start") { abort() }
if arguments.contains("--never-ready") {
    while true { pause() }
}

let ignoreExpiry = Mutex(false)

func reply(_ channel: RequestChannel, _ line: String) {
    channel.write(line + "\n")
}

func spawnChildren(_ n: Int) -> [Int32] {
    var pids: [Int32] = []
    for _ in 0..<n {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("1000"), nil]
        if posix_spawn(&pid, "/bin/sleep", nil, nil, argv, environ) == 0 { pids.append(pid) }
        argv.forEach { free($0) }
    }
    // A double fork: the shell exits at once, its sleep child is orphaned but stays in our group.
    var shell: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup("/bin/sleep 1000 & echo $! > /dev/null"), nil]
    if posix_spawn(&shell, "/bin/sh", nil, nil, argv, environ) == 0 {
        var status: Int32 = 0
        waitpid(shell, &status, 0)
    }
    argv.forEach { free($0) }
    return pids
}

func assertion(_ channel: RequestChannel, seconds: Double, reason: String) {
    let expired = Mutex(false)
    let started = Mutex(false)
    ProcessInfo.processInfo.performExpiringActivity(withReason: reason) { isExpired in
        if isExpired {
            let wasStarted = started.withLock { $0 }
            expired.withLock { $0 = true }
            reply(channel, wasStarted ? "expired" : "denied")
            return
        }
        started.withLock { $0 = true }
        reply(channel, "granted")
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if expired.withLock({ $0 }) && !ignoreExpiry.withLock({ $0 }) { break }
            usleep(1_000)
        }
        reply(channel, "released")
    }
}

ExtensionMain.run { request in
    let channel = request.channel
    while let line = channel.readLine() {
        let words = line.split(separator: " ", maxSplits: 2).map(String.init)
        switch words.first {
        case "ping": reply(channel, "pong \(getpid())")
        case "crash": abort()
        case "exit": exit(Int32(words.count > 1 ? words[1] : "0") ?? 0)
        case "spawn": reply(channel, "spawned " + spawnChildren(Int(words.count > 1 ? words[1] : "1") ?? 1).map(String.init).joined(separator: " "))
        case "assert": assertion(channel, seconds: Double(words.count > 1 ? words[1] : "1") ?? 1, reason: words.count > 2 ? words[2] : "")
        case "ignore-expiry": ignoreExpiry.withLock { $0 = true }; reply(channel, "ok")
        default: reply(channel, "unknown command")
        }
    }
    channel.close()
}
