// A scriptable extension for the integration tests. Each request channel takes line commands:
//   ping                 -> "pong <pid>"
//   crash                -> abort()
//   exit <code>          -> exit(code)
//   spawn <n>            -> starts n children (/bin/sleep) and one double-forked grandchild in
//                           its process group; answers "spawned <pid> <pid> ..."
//   assert <secs> <why>  -> performExpiringActivity: answers "granted", or "denied" when the
//                           block is called with true only; when the expired call arrives while
//                           the work runs, "expired"; the work holds the assertion for <secs>
//                           seconds or until expiry, then answers "released"
//   async-assert <secs>  -> withExpiringActivity with a body that sleeps <secs> (cancellable):
//                           answers "completed" or "expired"
//   ignore-expiry        -> later assert commands keep working after expiry (never release early)
//   records <file> <n>   -> under an assertion, appends n records to <file> holding an exclusive
//                           flock, each written in three pieces; stops after the current record
//                           when expired; answers "writing" once the assertion is held, then
//                           "records <written>" ("records 0" when denied)
//   hold-lock <file>     -> takes an exclusive flock on <file> (no assertion) and keeps it;
//                           answers "locked"
//   fork-loop            -> keeps spawning short-lived children (/bin/true) from a thread;
//                           answers "forking"
//   flood                -> writes messages to its runtime channel as fast as it can, by hand
//   signal <pid>         -> kill(pid, 0): "signalled" or "refused: <error>"
//   allocate <MiB>       -> allocates and touches that much memory: "allocated <MiB>"; when
//                           malloc fails, answers "malloc failed after <n>" and aborts
//   spawn-until-refused  -> starts /bin/sleep children until one is refused: "started <n>: <error>"
//   write-file <path>, read-file <path> -> "written"/"read" or "refused: <error>"
//   container <name>     -> ExtensionContext.sharedContainerURL: "container <path>" or "no container"
//   getenv, home, list-dir, pids, syscall -> see SandboxProbes.swift
//   defaults-*, open-url -> see DefaultsProbes.swift
//   secret-*             -> see SecretProbes.swift
//   probe-control <sock> -> connects to the control socket itself and asks for `list`:
//                           answers "allowed" or "refused: <the daemon's reason>"
// Arguments: --never-ready, --crash-at-start, --ignore-term,
//   --mute (announces readiness by hand, then never reads its channel),
//   --standalone-assert (no supervisor: prints the block's argument and exits),
//   --empty-reason (calls performExpiringActivity with an empty reason),
//   --long-reason (calls it with a reason of 1,025 bytes; without the precondition, prints the
//           block's argument and exits),
//   --is-supervised (prints ExtensionMain.isSupervised and whether EXTENSIOND_CHANNEL_FD is
//           still set, as "supervised=<bool> variable=<set|unset>", and exits),
//   --deaf (speaks the channel protocol by hand: on its first request it takes one assertion
//           and then never reads its channel again),
//   --refresh <answer> (handles background refresh: new-data, no-data or failed; never: the
//           handler never answers; each refresh is counted, see the "refreshes" command).
// More commands: complete <text>, complete-bytes <n>, cancel <reason> (end the request
//   itself), observe <name> and hints (notification hints), observe-many <n> <prefix> (observes
//   <prefix>.1 to <prefix>.<n>: "observed <n>", or "observed <k>, then refused: <error>"),
//   escape (a setsid child),
//   refreshes -> "refreshes <n>", start-again (ExtensionMain.start a second time: the process
//   stops on its precondition).
import ExtensionProtocol
import ExtensionRuntime
import ExtensionTransport
import Foundation
import Synchronization

let arguments = CommandLine.arguments.dropFirst()
if arguments.contains("--ignore-term") { signal(SIGTERM, SIG_IGN) }
if arguments.contains("--crash-at-start") { abort() }
if arguments.contains("--never-ready") {
    while true { pause() }
}
if arguments.contains("--standalone-assert") {
    ProcessInfo.processInfo.performExpiringActivity(withReason: "standalone") { expired in
        print("expired=\(expired)")
        exit(0)
    }
    dispatchMain()
}
if arguments.contains("--empty-reason") {
    ProcessInfo.processInfo.performExpiringActivity(withReason: "") { _ in }
    dispatchMain()
}
if arguments.contains("--is-supervised") {
    let supervised = ExtensionMain.isSupervised
    print("supervised=\(supervised) variable=\(getenv("EXTENSIOND_CHANNEL_FD") == nil ? "unset" : "set")")
    exit(0)
}
if arguments.contains("--long-reason") {
    ProcessInfo.processInfo.performExpiringActivity(withReason: String(repeating: "r", count: WireLimits.maxReason + 1)) { expired in
        print("expired=\(expired)")
        exit(0)
    }
    dispatchMain()
}
if arguments.contains("--mute") {
    try? MessageChannel(socket: PacketSocket(fd: 3)).send(.ready)
    while true { pause() }
}
if arguments.contains("--deaf") {
    let channel = MessageChannel(socket: PacketSocket(fd: 3))
    try? channel.send(.ready)
    while true {
        guard let (message, fd) = try? channel.receive() else { exit(1) }
        if case .deliver = message {
            try? channel.send(.acquire(tag: 1, reason: "deaf work"))
            _ = try? channel.receive()  // granted
            while true { pause() }  // holds the assertion, never reads again
        }
        if let fd { close(fd) }
    }
}

/// Background refreshes handled, over the process's life.
let refreshesHandled = Mutex(0)
if let i = arguments.firstIndex(of: "--refresh"), arguments.index(after: i) < arguments.endIndex {
    let answer = arguments[arguments.index(after: i)]
    ExtensionMain.onRefresh { completion in
        refreshesHandled.withLock { $0 += 1 }
        switch answer {
        case "new-data": completion(.newData)
        case "no-data": completion(.noData)
        case "failed": completion(.failed)
        default: break  // "never": the refresh runs out of time
        }
    }
}

let ignoreExpiry = Mutex(false)
/// Notification hints received, over the process's life.
let hintsReceived = Mutex(0)

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

/// A child that leaves the process group and the session (`setsid()`, as a daemonizer does):
/// only the extension's cgroup still holds it.
func spawnEscapee() -> Int32? {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    posix_spawnattr_setflags(&attributes, 0x80)  // POSIX_SPAWN_SETSID (a GNU extension Glibc does not import)
    var pid: pid_t = 0
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("1000"), nil]
    defer { argv.forEach { free($0) } }
    return posix_spawn(&pid, "/bin/sleep", nil, &attributes, argv, environ) == 0 ? pid : nil
}

/// Waits on a condition variable until `expired` is set or the deadline passes (no polling).
final class ExpiryFlag: Sendable {
    let condition = NSCondition()
    let state = Mutex(false)

    func set() {
        condition.lock()
        state.withLock { $0 = true }
        condition.broadcast()
        condition.unlock()
    }

    var isSet: Bool { state.withLock { $0 } }

    /// Returns true if the flag was set before `deadline`.
    func wait(until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !isSet {
            if !condition.wait(until: deadline) { return isSet }
        }
        return true
    }
}

func assertion(_ channel: RequestChannel, seconds: Double, reason: String) {
    let expired = ExpiryFlag()
    let started = Mutex(false)
    ProcessInfo.processInfo.performExpiringActivity(withReason: reason) { isExpired in
        if isExpired {
            let wasStarted = started.withLock { $0 }
            reply(channel, wasStarted ? "expired" : "denied")
            expired.set()
            return
        }
        started.withLock { $0 = true }
        reply(channel, "granted")
        let deadline = Date().addingTimeInterval(seconds)
        if ignoreExpiry.withLock({ $0 }) {
            _ = ExpiryFlag().wait(until: deadline)  // works on regardless of expiry
        } else {
            _ = expired.wait(until: deadline)
        }
        reply(channel, "released")
    }
}

func asyncAssertion(_ channel: RequestChannel, seconds: Double) {
    Task {
        // The answer is written inside the body, under the assertion: once
        // withExpiringActivity returns, the assertion is released and the process may be
        // stopped at once, before anything written after it.
        let ran = ExpiryFlag()
        let outcome = try await withExpiringActivity(reason: "async work") {
            ran.set()
            do {
                try await Task.sleep(for: .seconds(seconds))
            } catch is CancellationError {
                reply(channel, "expired")
                throw CancellationError()
            }
            reply(channel, "completed")
            return "done"
        }
        if case .expired = outcome, !ran.isSet { reply(channel, "expired") }  // denied: the body never ran
    }
}

/// Appends records of a fixed shape, each in three write(2) calls, under an exclusive flock,
/// all inside one assertion; a stop in the middle would leave a torn record or a held lock.
func writeRecords(_ channel: RequestChannel, file: String, count: Int) {
    let expired = ExpiryFlag()
    let started = Mutex(false)
    ProcessInfo.processInfo.performExpiringActivity(withReason: "append records") { isExpired in
        if isExpired {
            expired.set()
            if !started.withLock({ $0 }) { reply(channel, "records 0") }  // denied: nothing written
            return
        }
        started.withLock { $0 = true }
        reply(channel, "writing")
        let fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return reply(channel, "records error \(errno)") }
        defer { close(fd) }
        var written = 0
        for i in 0..<count {
            if expired.isSet { break }
            flock(fd, LOCK_EX)
            let pieces = ["R\(getpid()):\(i):", String(repeating: "x", count: 64), ":end\n"]
            for piece in pieces { _ = piece.withCString { write(fd, $0, strlen($0)) } }
            flock(fd, LOCK_UN)
            written += 1
        }
        reply(channel, "records \(written)")
    }
}

ExtensionMain.run { request in
    let channel = request.channel
    while let line = channel.readLine() {
        let words = line.split(separator: " ", maxSplits: 2).map(String.init)
        func word(_ i: Int, _ fallback: String) -> String { words.count > i ? words[i] : fallback }
        switch words.first {
        case "ping": reply(channel, "pong \(getpid())")
        case "crash": abort()
        case "exit": exit(Int32(word(1, "0")) ?? 0)
        case "spawn": reply(channel, "spawned " + spawnChildren(Int(word(1, "1")) ?? 1).map(String.init).joined(separator: " "))
        case "complete":
            // The rest of the line is the result ("complete-bytes N": N bytes of 'x').
            do { try request.complete(returning: Array((words.count > 1 ? words[1...].joined(separator: " ") : "").utf8)) } catch {
                reply(channel, "refused: \(error)")
            }
        case "complete-bytes":
            do { try request.complete(returning: [UInt8](repeating: UInt8(ascii: "x"), count: Int(word(1, "0")) ?? 0)) } catch {
                reply(channel, "refused: \(error)")
            }
        case "cancel":
            do { try request.cancel(reason: words.count > 1 ? words[1...].joined(separator: " ") : "") } catch {
                reply(channel, "refused: \(error)")
            }
        case "observe":
            // Each hint is counted and reported on this request's channel.
            do {
                try ExtensionMain.observe(word(1, "")) { name in
                    hintsReceived.withLock { $0 += 1 }
                    reply(channel, "notified \(name)")
                }
                reply(channel, "observing")
            } catch {
                reply(channel, "refused: \(error)")
            }
        case "observe-many":
            let count = Int(word(1, "0")) ?? 0
            var observed = 0
            do {
                for k in stride(from: 1, through: count, by: 1) {
                    try ExtensionMain.observe("\(word(2, "hint")).\(k)") { name in reply(channel, "notified \(name)") }
                    observed += 1
                }
                reply(channel, "observed \(observed)")
            } catch {
                reply(channel, "observed \(observed), then refused: \(error)")
            }
        case "start-again": ExtensionMain.start { _ in }
        case "hints": reply(channel, "hints \(hintsReceived.withLock { $0 })")
        case "refreshes": reply(channel, "refreshes \(refreshesHandled.withLock { $0 })")
        case "escape": reply(channel, spawnEscapee().map { "escaped \($0)" } ?? "cannot spawn")
        case "assert": assertion(channel, seconds: Double(word(1, "1")) ?? 1, reason: word(2, ""))
        case "async-assert": asyncAssertion(channel, seconds: Double(word(1, "1")) ?? 1)
        case "ignore-expiry": ignoreExpiry.withLock { $0 = true }; reply(channel, "ok")
        case "records": writeRecords(channel, file: word(1, "/dev/null"), count: Int(word(2, "1")) ?? 1)
        case "hold-lock":
            let fd = open(word(1, "/dev/null"), O_RDWR | O_CREAT, 0o600)  // kept open: the lock lives with it
            flock(fd, LOCK_EX)
            reply(channel, "locked")
        case "fork-loop":
            Thread.detachNewThread {
                while true {
                    var pid: pid_t = 0
                    let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
                    if posix_spawn(&pid, "/bin/true", nil, nil, argv, environ) == 0 {
                        var status: Int32 = 0
                        waitpid(pid, &status, 0)
                    }
                    argv.forEach { free($0) }
                }
            }
            reply(channel, "forking")
        case "signal":
            // kill(pid, 0): whether this process may signal `pid`.
            let target = pid_t(word(1, "0")) ?? 0
            reply(channel, kill(target, 0) == 0 ? "signalled" : "refused: \(String(cString: strerror(errno)))")
        case "allocate":
            // Allocates and touches <MiB> mebibytes, one at a time; answers "allocated <MiB>".
            let count = Int(word(1, "1")) ?? 1
            var blocks: [UnsafeMutableRawPointer] = []
            for _ in 0..<count {
                guard let block = malloc(1 << 20) else {
                    reply(channel, "malloc failed after \(blocks.count)")
                    abort()  // as an extension without a handler would end, but named here
                }
                memset(block, 1, 1 << 20)
                blocks.append(block)
            }
            reply(channel, "allocated \(blocks.count)")
        case "spawn-until-refused":
            // Starts /bin/sleep children until the kernel refuses one (or 1000 of them):
            // answers "started <n>: <error>".
            var started = 0
            var problem = "none"
            while started < 1000 {
                var pid: pid_t = 0
                let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("1000"), nil]
                let rc = posix_spawn(&pid, "/bin/sleep", nil, nil, argv, environ)
                argv.forEach { free($0) }
                if rc != 0 {
                    problem = String(cString: strerror(rc))
                    break
                }
                started += 1
            }
            reply(channel, "started \(started): \(problem)")
        case "container":
            reply(channel, ExtensionContext.sharedContainerURL(forGroup: word(1, "")).map { "container \($0.path)" } ?? "no container")
        case "write-file":
            let fd = open(word(1, "/dev/null"), O_WRONLY | O_CREAT | O_TRUNC, 0o660)
            if fd < 0 {
                reply(channel, "refused: \(String(cString: strerror(errno)))")
            } else {
                _ = write(fd, "hello", 5)
                close(fd)
                reply(channel, "written")
            }
        case "fill":  // fill PATH BYTES: writes BYTES bytes (not a sparse file) and fsyncs them
            let fd = open(word(1, "/dev/null"), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            if fd < 0 {
                reply(channel, "refused: \(String(cString: strerror(errno)))")
            } else {
                let chunk = [UInt8](repeating: 0x5A, count: 65536)
                var left = Int(word(2, "0")) ?? 0
                while left > 0 {
                    let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, min(left, chunk.count)) }
                    if n <= 0 { break }
                    left -= n
                }
                fsync(fd)
                close(fd)
                reply(channel, left == 0 ? "filled" : "refused: \(String(cString: strerror(errno)))")
            }
        case "read-file":
            let fd = open(word(1, "/dev/null"), O_RDONLY)
            if fd < 0 {
                reply(channel, "refused: \(String(cString: strerror(errno)))")
            } else {
                close(fd)
                reply(channel, "read")
            }
        case "probe-control":
            do {
                let control = MessageChannel(socket: try PacketSocket.connect(path: word(1, "")))
                // A refused peer may find the connection closed before it sends; the reason
                // is still waiting to be read.
                try? control.send(.query(tag: 1, kind: .list, extensionIDs: []))
                switch try control.receive().0 {
                case .failure(_, _, let text): reply(channel, "refused: \(text)")
                default: reply(channel, "allowed")
                }
            } catch {
                reply(channel, "refused: \(error)")
            }
        case "flood":
            Thread.detachNewThread {
                let raw = PacketSocket(fd: 3)
                let bytes = try! WireEncoder.encoded(.release(assertionID: 999_999))
                while (try? raw.send(bytes)) != nil {}
            }
        default:
            let answer = defaultsProbe(line, channel) ?? secretProbe(line) ?? transferProbe(line) ?? sandboxProbe(words) ?? "unknown command"
            if !answer.isEmpty { reply(channel, answer) }  // "": the probe replied itself
        }
    }
    channel.close()
}
