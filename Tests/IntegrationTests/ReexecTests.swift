import CShims
import ExtensionHost
import ExtensionProtocol
import Foundation
import SupervisorCore
import Synchronization
import Testing

/// `extctl reexec`: the daemon replaces its program in place, keeping its pid, every
/// extension process in its state, their channels and assertions, every host connection and
/// monitor. With real processes, and the daemon's own binary (a copy the tests can replace).
@Suite(.serialized)
struct ReexecTests {
    static let active = "com.example.reexec.active"
    static let suspended = "com.example.reexec.suspended"
    static let background = "com.example.reexec.background"
    static let prewarmed = "com.example.reexec.prewarmed"
    /// backgroundSeconds 3, expiryGraceSeconds 1: the expire goes out 2 s after the dismissal.
    static var backgroundPolicy: [String: Any] { ["backgroundSeconds": 3.0, "expiryGraceSeconds": 1.0, "assertionMaxSeconds": 30] }

    /// A daemon started from its own copy of extensiond, which a test may replace on disk.
    func start() throws -> TestDaemon {
        let daemon = try TestDaemon(manifests: [
            "a.json": TestDaemon.testExtension(Self.active),
            "s.json": TestDaemon.testExtension(Self.suspended),
            "b.json": TestDaemon.testExtension(Self.background, policy: Self.backgroundPolicy),
            "p.json": TestDaemon.testExtension(Self.prewarmed),
        ])
        let copy = daemon.directory + "/extensiond"
        try Executables.copy(BuildProducts.path("extensiond"), to: copy)
        daemon.daemonExecutable = copy
        try daemon.start()
        return daemon
    }

    /// Replaces the daemon's program on disk by a new file (a new inode, as a package upgrade does).
    func replaceProgram(of daemon: TestDaemon, with source: String) throws {
        let staged = daemon.directory + "/extensiond.new"
        try Executables.copy(source, to: staged)
        #expect(rename(staged, daemon.daemonExecutable) == 0)
    }

    func pids(_ daemon: TestDaemon) throws -> [String: Int] {
        let status = try daemon.extctl(["status", "--json"])
        #expect(status.status == 0)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(status.out.utf8)) as? [String: Any])
        let extensions = try #require(document["extensions"] as? [[String: Any]])
        var found: [String: Int] = [:]
        for e in extensions { if let id = e["id"] as? String, let pid = e["pid"] as? Int { found[id] = pid } }
        return found
    }

    func states(_ daemon: TestDaemon) throws -> [String: String] {
        let status = try daemon.extctl(["status", "--json"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(status.out.utf8)) as? [String: Any])
        let extensions = try #require(document["extensions"] as? [[String: Any]])
        var found: [String: String] = [:]
        for e in extensions { if let id = e["id"] as? String, let state = e["state"] as? String { found[id] = state } }
        return found
    }

    func keepsEverything(replacing: Bool) throws {
        let daemon = try start()
        let daemonPID = try #require(daemon.process?.processIdentifier)
        // What the daemon inherited from whoever started it without close-on-exec (the test
        // harness may leave one open): not the daemon's doing.
        let inheritedAtStart = Set(try openDescriptors(of: daemonPID).filter { !$0.closeOnExec }.map(\.target))
        let host = try daemon.host()
        // Active, with an open request.
        let activeSession = try host.begin(Self.active)
        let activeChannel = try activeSession.hostChannel()
        activeChannel.send("ping")
        #expect(activeChannel.readLine() == "pong \(activeSession.pid)")
        // Suspended.
        let suspendedSession = try host.begin(Self.suspended)
        try host.dismiss(suspendedSession)
        try daemon.events.wait("suspend", of: Self.suspended)
        // In background, holding an assertion whose expire is due 2 s after the dismissal.
        let backgroundSession = try host.begin(Self.background)
        let backgroundChannel = try backgroundSession.hostChannel()
        backgroundChannel.send("assert 30 long-save")
        #expect(backgroundChannel.readLine() == "granted")
        try host.dismiss(backgroundSession)
        let end = try daemon.events.wait("end", of: Self.background)
        // Prewarmed (launched and suspended without a request).
        try host.prewarm([Self.prewarmed])
        try daemon.events.wait("suspend", of: Self.prewarmed)
        // An idle host connection.
        let idle = try daemon.host()
        let before = try pids(daemon)
        let statesBefore = try states(daemon)
        #expect(statesBefore[Self.suspended] == "suspended")
        #expect(statesBefore[Self.background] == "background")
        let eventsBefore = daemon.events.count

        // The suspended one is watched while the daemon is replaced: it must never run.
        let suspendedPID = Int32(suspendedSession.pid)
        let sampling = Atomic<Bool>(true)
        let notStopped = Mutex<[Character?]>([])
        let sampler = Thread {
            while sampling.load(ordering: .relaxed) {
                let state = processState(suspendedPID)
                if state != "T" { notStopped.withLock { $0.append(state) } }
                usleep(200)
            }
        }
        sampler.start()
        if replacing { try replaceProgram(of: daemon, with: BuildProducts.path("extensiond")) }
        // A request sent during the hand-over waits in its socket and is answered.
        let reexec = Process()
        reexec.executableURL = URL(fileURLWithPath: BuildProducts.path("extctl"))
        reexec.arguments = ["reexec", "--socket", daemon.socketPath]
        let out = Pipe()
        reexec.standardOutput = out
        reexec.standardError = out
        try reexec.run()
        let duringHandover = try daemon.extctl(["list"])
        reexec.waitUntilExit()
        sampling.store(false, ordering: .relaxed)
        while sampler.isExecuting { usleep(1000) }
        let said = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(reexec.terminationStatus == 0, "extctl reexec: \(said)")
        #expect(said.hasPrefix("extensiond 0.1.0 → 0.1.0"), "\(said)")
        #expect(duringHandover.status == 0 && duringHandover.out.contains(Self.active), "a list sent during the hand-over: \(duringHandover)")

        // The new program checked the document (its report, in the old daemon's log line) and
        // took over (its own log line), in the same process.
        let checked = daemon.log().split(separator: "\n").first { $0.contains("re-executing") }.map(String.init) ?? ""
        #expect(checked.contains("extension record(s), 4 process(es), ") && checked.contains(": decoded in "), "\(checked)")
        #expect(daemon.log().contains("took over from extensiond 0.1.0: 4 extension process(es)"), "\(daemon.log().suffix(2000))")
        // Same daemon, same extension processes, same states.
        #expect(daemon.process?.isRunning == true)
        #expect(daemon.process?.processIdentifier == daemonPID)
        #expect(try pids(daemon) == before)
        #expect(try states(daemon) == statesBefore)
        #expect(notStopped.withLock { $0 }.isEmpty, "the suspended extension left T: \(notStopped.withLock { $0 })")
        #expect(processState(suspendedPID) == "T")
        #expect(!daemon.events.all.dropFirst(eventsBefore).contains { $0.kind == "resume" || $0.kind == "launch" }, "nothing resumed or launched")
        // The descriptors that crossed the execve are close-on-exec again: no program the new
        // daemon starts (the next re-exec's check, say) inherits them.
        let inheritable = try openDescriptors(of: daemonPID).filter { !$0.closeOnExec && !inheritedAtStart.contains($0.target) }
        #expect(inheritable.isEmpty, "descriptors without close-on-exec after the hand-over: \(inheritable)")

        // The assertion expires at its original time, and the expiry is delivered.
        #expect(backgroundChannel.readLine() == "expired")
        let expire = try daemon.events.wait("expire", of: Self.background)
        #expect(abs(expire.monotonic - end.monotonic - 2.0) < 0.1, "expire \(expire.monotonic - end.monotonic)s after the dismissal; the policy says 2 s")

        // The open request still reaches the extension, and a dismissal suspends it as usual:
        // the monitor (the harness's) still receives events.
        activeChannel.send("ping")
        #expect(activeChannel.readLine() == "pong \(activeSession.pid)")
        try host.dismiss(activeSession)
        try daemon.events.wait("suspend", of: Self.active, after: eventsBefore)
        #expect(processState(Int32(activeSession.pid)) == "T")
        // The idle connection is still served.
        let again = try idle.begin(Self.suspended)
        #expect(again.pid == suspendedSession.pid, "resumed, not relaunched")
        try daemon.events.wait("resume", of: Self.suspended, after: eventsBefore)
    }

    /// The descriptors above stderr of process `pid`, with what they are and whether they are
    /// close-on-exec (`O_CLOEXEC` in the `flags:` line of /proc/PID/fdinfo/FD, in octal).
    func openDescriptors(of pid: Int32) throws -> [(fd: Int, target: String, closeOnExec: Bool)] {
        let names = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        // A descriptor closed between the listing and the read of its fdinfo is left out.
        return names.compactMap(Int.init).filter { $0 > 2 }.sorted().compactMap { fd in
            guard let info = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8) else { return nil }
            let flags = info.split(separator: "\n").first { $0.hasPrefix("flags:") }.flatMap {
                Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8)
            }
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) ?? "?"
            return (fd, target, (flags ?? 0) & Int(O_CLOEXEC) != 0)
        }
    }

    @Test func keepsEveryExtensionConnectionAndAssertion() throws {
        try keepsEverything(replacing: false)
    }

    @Test func keepsEverythingWhenANewProgramReplacedTheOldOne() throws {
        try keepsEverything(replacing: true)
    }

    @Test func aProgramThatFailsTheCheckIsRefusedAndTheDaemonGoesOn() throws {
        let daemon = try start()
        let host = try daemon.host()
        let session = try host.begin(Self.active)
        let pid = try #require(daemon.process?.processIdentifier)
        // The "new" program exits at once, whatever it is asked.
        let script = daemon.directory + "/broken"
        try Executables.write("#!/bin/sh\necho 'this extensiond cannot start' >&2\nexit 3\n", to: script)
        try replaceProgram(of: daemon, with: script)
        let refused = try daemon.extctl(["reexec"])
        #expect(refused.status != 0)
        #expect(refused.err.contains("refused"), "\(refused)")
        #expect(refused.err.contains("this extensiond cannot start") || refused.err.contains("exited(3)"), "the reason is named: \(refused)")
        // The old daemon serves on, unchanged.
        #expect(daemon.process?.processIdentifier == pid && daemon.process?.isRunning == true)
        #expect(try daemon.extctl(["list"]).status == 0)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)")
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.active)
    }

    /// A check that leaves its process group (here into the daemon's own) and hangs is still
    /// ended at its deadline: the daemon kills the check itself as well as its group.
    @Test func aCheckThatLeavesItsGroupIsStillEndedAtItsDeadline() throws {
        let daemon = try start()
        let script = daemon.directory + "/leaves-its-group"
        try Executables.write(
            "#!/usr/bin/python3\nimport os, time\nos.setpgid(0, os.getpgid(os.getppid()))\ntime.sleep(60)\n", to: script)
        try replaceProgram(of: daemon, with: script)
        let start = Date()
        let refused = try daemon.extctl(["reexec"])
        let took = Date().timeIntervalSince(start)
        #expect(refused.status != 0 && refused.err.contains("did not finish within"), "\(refused)")
        #expect(took < 30, "refused at the check's deadline (10 s), not when the check chose to exit: \(took) s")
        #expect(try daemon.extctl(["list"]).status == 0)
    }

    /// A new program whose interpreter is missing is refused naming that, not as a file that
    /// does not exist (posix_spawn's ENOENT).
    @Test func aProgramWhoseInterpreterIsMissingIsRefusedSayingSo() throws {
        let daemon = try start()
        let script = daemon.directory + "/no-interpreter"
        try Executables.write("#!/nonexistent/interpreter\n", to: script)
        try replaceProgram(of: daemon, with: script)
        let refused = try daemon.extctl(["reexec"])
        #expect(refused.status != 0 && refused.err.contains("interpreter or dynamic loader it names is missing"), "\(refused)")
        #expect(try daemon.extctl(["list"]).status == 0)
    }

    /// The check runs in a process group of its own, ended with it: a check that leaves a
    /// process behind (here a `sleep` it starts before it fails) leaves nothing running.
    @Test func whatACheckStartsEndsWithIt() throws {
        let daemon = try start()
        let pid = try #require(daemon.process?.processIdentifier)
        let left = daemon.directory + "/left.pid"
        let script = daemon.directory + "/leaves-a-process"
        try Executables.write("#!/bin/sh\nsleep 300 &\necho $! > \(left)\nexit 3\n", to: script)
        try replaceProgram(of: daemon, with: script)
        let refused = try daemon.extctl(["reexec"])
        #expect(refused.status != 0 && refused.err.contains("exited(3)"), "\(refused)")
        let sleeper = try #require(Int32(try String(contentsOfFile: left, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        // The group's SIGKILL went out before the refusal; the sleeper dies when it next runs,
        // which may be just after the answer (a process that is not its child tells nobody).
        try eventually("the check's sleep is not left running") {
            let state = processState(sleeper)
            return state == nil || state == "Z"
        }
        #expect(daemon.process?.processIdentifier == pid && daemon.process?.isRunning == true)
        #expect(try daemon.extctl(["list"]).status == 0)
    }

    /// The check runs with the daemon's own arguments, so a configuration the new program would
    /// refuse (broken on disk since the daemon started) refuses the re-exec before the
    /// `execve`, naming the file and what is wrong; the old daemon serves on.
    /// A daemon started through a symbolic link (`current` → one version, as some deployments
    /// switch versions) re-executes what the link names when asked, not the file it started
    /// from: the program is found by the path it was started as, not by `/proc/self/exe`.
    @Test func aDaemonStartedThroughALinkRunsWhatTheLinkNamesNow() throws {
        let daemon = try start()
        let pid = try #require(daemon.process?.processIdentifier)
        daemon.stop()
        let first = daemon.directory + "/v1-extensiond"
        let second = daemon.directory + "/v2-extensiond"
        #expect(rename(daemon.daemonExecutable, first) == 0)
        try Executables.copy(BuildProducts.path("extensiond"), to: second)
        let link = daemon.directory + "/current"
        #expect(symlink(first, link) == 0)
        daemon.daemonExecutable = link
        try daemon.start()
        let started = try #require(daemon.process?.processIdentifier)
        #expect(started != pid)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(started)/exe") == first)
        // The link now names the other version.
        #expect(unlink(link) == 0 && symlink(second, link) == 0)
        let reexec = try daemon.extctl(["reexec"])
        #expect(reexec.status == 0, "\(reexec)")
        #expect(daemon.process?.processIdentifier == started && daemon.process?.isRunning == true)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(started)/exe") == second, "the program the link names now runs")
        #expect(try daemon.extctl(["list"]).status == 0)
    }

    @Test func aConfigurationTheNewProgramRefusesRefusesTheReexec() throws {
        let daemon = try start()
        let pid = try #require(daemon.process?.processIdentifier)
        let config = daemon.directory + "/config.json"
        #expect(FileManager.default.fileExists(atPath: config), "the daemon was started with --config")
        try #"{"allowRootExtensions": "yes"}"#.write(toFile: config, atomically: true, encoding: .utf8)
        let refused = try daemon.extctl(["reexec"])
        #expect(refused.status != 0)
        #expect(refused.err.contains("refused") && refused.err.contains("config.json") && refused.err.contains("allowRootExtensions"), "\(refused)")
        #expect(daemon.process?.processIdentifier == pid && daemon.process?.isRunning == true)
        #expect(try daemon.extctl(["list"]).status == 0)
    }

    /// A new program that passes the check but crashes once it has the state (after the
    /// `execve`: the daemon's pid dies) is a crash like any other: the extensions it leaves,
    /// one active and one stopped, are in the process registry, and the next daemon on the
    /// socket ends them. None is left stopped or orphaned.
    @Test func aNewProgramThatCrashesAfterTheExecLeavesNothingBehind() throws {
        let daemon = try start()
        defer { daemon.stop() }
        let host = try daemon.host()
        let active = try host.begin(Self.active)
        let suspended = try host.begin(Self.suspended)
        try host.dismiss(suspended)
        try daemon.events.wait("suspend", of: Self.suspended)
        #expect(processState(Int32(suspended.pid)) == "T")
        // Pidfds taken now: each becomes readable when its process has exited.
        let watched = [Int32(active.pid), Int32(suspended.pid)].map { shim_pidfd_open($0) }
        defer { for fd in watched where fd >= 0 { close(fd) } }
        #expect(watched.allSatisfy { $0 >= 0 })

        // The new program checks like the real one, and kills itself when it would take over.
        let real = daemon.directory + "/extensiond.real"
        try Executables.copy(BuildProducts.path("extensiond"), to: real)
        let script = daemon.directory + "/crashing"
        try Executables.write("#!/bin/sh\ncase \" $* \" in *\" --handover \"*) kill -SEGV $$ ;; esac\nexec \(real) \"$@\"\n", to: script)
        try replaceProgram(of: daemon, with: script)
        let daemonPID = try #require(daemon.process?.processIdentifier)
        _ = try? daemon.extctl(["reexec"])  // its connection ends with the program: no answer
        #expect(daemon.waitForExit(timeout: 20), "the daemon's pid ended with the crash")
        #expect(daemon.process?.terminationReason == .uncaughtSignal && daemon.process?.terminationStatus == SIGSEGV, "\(daemonPID)")
        // Left running, and the stopped one still stopped: the crash alone ends nothing.
        #expect(kill(Int32(active.pid), 0) == 0 && processState(Int32(suspended.pid)) == "T")

        // The next daemon (the real program again) ends what was left.
        try Executables.copy(real, to: daemon.daemonExecutable)
        try daemon.start()
        for fd in watched {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&pfd, 1, 20_000) == 1, "every process the crashed daemon left has exited")
        }
        #expect(daemon.log().contains("leftover"), "\(daemon.log().suffix(2000))")
        #expect(try pids(daemon).isEmpty, "nothing runs under the new daemon until asked")
    }

    @Test func checkHandoverRefusesACorruptOrNewerDocumentNamingWhy() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let signature = Array("extensiond hand-over\n".utf8)
        struct Head: Encodable { var version: Int; var daemonVersion: String }
        let whole = try BinaryEncoder().encode(Head(version: 2, daemonVersion: "0.1.0"), signature: signature)
        let corrupt = directory + "/corrupt"
        try Data(whole.prefix(whole.count - 3)).write(to: URL(fileURLWithPath: corrupt))
        let c = try runProgram(BuildProducts.path("extensiond"), ["--check-handover", corrupt])
        #expect(c.status == 1)
        #expect(c.err.contains("/corrupt") && c.err.contains("not a hand-over document") && c.err.contains("truncated"), "\(c)")
        let notOne = directory + "/not-one"
        try Data(#"{"version": 1, "daemonVersion": "0.1.0"}"#.utf8).write(to: URL(fileURLWithPath: notOne))
        let j = try runProgram(BuildProducts.path("extensiond"), ["--check-handover", notOne])
        #expect(j.status == 1)
        #expect(j.err.contains("not a hand-over document") && j.err.contains("signature"), "\(j)")
        let newer = directory + "/newer"
        let head = try BinaryEncoder().encode(Head(version: 99, daemonVersion: "9.0.0"), signature: signature)
        try Data(head).write(to: URL(fileURLWithPath: newer))
        let n = try runProgram(BuildProducts.path("extensiond"), ["--check-handover", newer])
        #expect(n.status == 1)
        #expect(n.err.contains("version 99") && n.err.contains("9.0.0") && n.err.contains("reads version 2"), "\(n)")
        let missing = directory + "/missing"
        try Data(try BinaryEncoder().encode(Head(version: 2, daemonVersion: "0.1.0"), signature: signature)).write(to: URL(fileURLWithPath: missing))
        let m = try runProgram(BuildProducts.path("extensiond"), ["--check-handover", missing])
        #expect(m.status == 1)
        #expect(m.err.contains("corrupt hand-over document") && m.err.contains("core: missing"), "\(m)")
    }
}
