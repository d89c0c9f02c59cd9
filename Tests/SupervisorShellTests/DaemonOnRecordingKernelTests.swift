import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// The whole daemon, the real `Daemon` with its control server, process control and core, run
/// on the recording kernel as an embedded loop (in the manner of NIOEmbedded): the test plays
/// the host on a real control socket, the extension's runtime on the spawned runtime channel,
/// and the kernel's reports (stop, exit), and checks the kernel calls the daemon made and what
/// the host received.
struct DaemonOnRecordingKernelTests {
    static let id = "org.example.widget"
    /// The first descriptor number the recording kernel makes up (for opens, inotify): far
    /// above any real descriptor of this process.
    static let madeUpDescriptors: Int32 = 1_100_000_000
    /// The widget's leader (as the recording kernel spawns it) and its pidfd.
    static let leader: Int32 = 4242
    static let leaderPidfd: Int32 = 1_000_000_007
    static let executable = "/usr/libexec/widget"

    let kernel = RecordingKernel()
    let socketPath: String
    let daemon: Daemon
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireLimits.maxMessageSize, alignment: 8)

    init() throws {
        var template = Array("/tmp/extensiond-embedded-XXXXXX".utf8CString)
        let dir = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
        socketPath = String(cString: dir) + "/control.sock"
        let k = kernel
        // The daemon holds real sockets (the control socket, its connections, runtime
        // channels) beside the recording kernel's made-up descriptors, and a hand-over
        // document refuses a number named twice: the made-up numbers are far above any this
        // process can open (the kernel hands out the lowest free number, below RLIMIT_NOFILE),
        // so that they never meet a real one, however many descriptors other tests hold.
        k.nextFD = Self.madeUpDescriptors
        k.nextSpawn = (Self.leader, Self.leaderPidfd)
        k.userID = 1000
        k.groupID = 1000
        // No cgroup v2 mount is scripted: process-group containment, the fallback.
        k.directories["/ext"] = ["widget.json"]
        k.files["/ext/widget.json"] = #"{"id": "\#(Self.id)", "point": "widget", "executable": "\#(Self.executable)"}"#
        k.statuses["/ext/widget.json"] = FileStatus(
            kind: .regular, permissions: 0o644, owner: 1000, group: 1000, size: Int64(k.files["/ext/widget.json"]!.utf8.count),
            identity: FileIdentity(device: 1, inode: 10))
        // The test process is the clients' peer: alive, and in no extension's process group.
        k.files["/proc/\(getpid())/stat"] = Self.statLine(getpid())
        k.statuses[Self.executable] = FileStatus(kind: .regular, permissions: 0o755, owner: 0, group: 0, size: 1, identity: FileIdentity(device: 1, inode: 11))
        k.statuses["/usr/bin/extensiond"] = FileStatus(
            kind: .regular, permissions: 0o755, owner: 0, group: 0, size: 9, identity: FileIdentity(device: 1, inode: 12))
        var options = DaemonOptions(kernel: k, socketPath: socketPath, extensionDirectories: ["/ext"])
        options.stateDirectory = "/state"
        options.containment = .processGroup
        var logger = Logger(label: "embedded")
        logger.logLevel = .critical
        daemon = try Daemon(options: options, kernel: k, logger: logger)
        try daemon.start()
    }

    /// A client connected to the control socket (non-blocking) and accepted by the daemon: its
    /// socket and the fd of the daemon's watch on its connection.
    func connectClient() throws -> (socket: PacketSocket, watch: Int32) {
        let listenerFD = try #require(kernel.watches.first { !$0.cancelled }?.fd)
        let socket = try PacketSocket.connect(path: socketPath)
        try socket.setNonBlocking()
        let known = Set(kernel.watches.map(\.fd))
        #expect(kernel.fire(fd: listenerFD))
        return (socket, try #require(newestWatch(excluding: known)))
    }

    /// A /proc/PID/stat line of a sleeping process that leads its own process group.
    static func statLine(_ pid: Int32) -> String {
        "\(pid) (swift-test) S 1 \(pid) \(pid) 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 1000 0 0"
    }

    /// Ends the daemon and frees the receive buffer: the last thing each test does.
    func tearDown() {
        daemon.finish()
        buffer.deallocate()
    }

    func messages(on socket: PacketSocket) throws -> [(Message, Int32?)] {
        var found: [(Message, Int32?)] = []
        while case .datagram(let count, let descriptor, _) = try socket.receive(into: buffer) {
            found.append((try WireDecoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])), descriptor))
        }
        return found
    }

    func send(_ message: Message, on socket: PacketSocket) throws {
        #expect(try socket.send(try WireEncoder.encoded(message)) == .sent)
    }

    /// The fd of the newest live watch for which `isNew` holds.
    func newestWatch(excluding known: Set<Int32>) -> Int32? {
        kernel.watches.last { !$0.cancelled && !known.contains($0.fd) }?.fd
    }

    /// A peer gone before it is accepted cannot be told from an extension's process that
    /// connected, passed the socket on and exited: it is refused.
    @Test func aConnectionWhosePeerIsGoneIsRefused() throws {
        defer { tearDown() }
        let listenerFD = try #require(kernel.watches.first { !$0.cancelled }?.fd)
        kernel.files["/proc/\(getpid())/stat"] = nil
        let socket = try PacketSocket.connect(path: socketPath)
        defer { socket.close() }
        try socket.setNonBlocking()
        let known = Set(kernel.watches.map(\.fd))
        #expect(kernel.fire(fd: listenerFD))
        #expect(newestWatch(excluding: known) == nil, "not watched: refused")
        let answers = try messages(on: socket).map(\.0)
        #expect(answers == [.failure(tag: 0, code: .notPermitted, text: "the connecting process (pid \(getpid())) is gone")])
    }

    @Test func launchBeginDismissSuspendResumeKillExit() throws {
        let k = kernel
        defer { tearDown() }
        // Started: the control socket and the signals are watched through the kernel.
        #expect(k.calls.contains(.watchSignal(SignalNumber.child)))
        #expect(k.calls.contains(.watchSignal(SignalNumber.terminate)))
        let listenerFD = try #require(k.watches.first { !$0.cancelled }?.fd)

        // A host connects: accepted when the listener is readable.
        let host = try PacketSocket.connect(path: socketPath)
        defer { host.close() }
        try host.setNonBlocking()
        let known = Set(k.watches.map(\.fd))
        #expect(k.fire(fd: listenerFD))
        let connectionFD = try #require(newestWatch(excluding: known))

        // begin → the extension is spawned with a runtime channel, as the daemon's uid.
        k.clearCalls()
        try send(.begin(tag: 1, extensionID: Self.id), on: host)
        #expect(k.fire(fd: connectionFD))
        let request = try #require(k.spawnRequests.last)
        #expect(request.path == Self.executable)
        #expect(request.credentials == nil, "a daemon that is not root runs extensions as itself")
        #expect(request.environment.contains("EXTENSIOND_EXTENSION_ID=\(Self.id)"))
        let pid = Self.leader, pidfd = Self.leaderPidfd
        #expect(k.calls.contains(.watch(fd: pidfd, events: Poll.input)), "the leader's exit is watched through its pidfd")
        #expect(daemon.core.records[Self.id]?.state == .launching)
        #expect(try messages(on: host).isEmpty, "no answer before the runtime is ready")

        // The runtime says it is ready: the request is delivered with its stream, and the host
        // gets `begun` with the other end.
        let runtime = try #require(k.runtimeChannels[pid])
        defer { runtime.close() }
        try runtime.setNonBlocking()
        let channelFD = try #require(k.watches.last { !$0.cancelled && $0.fd != pidfd && $0.fd != connectionFD && $0.fd != listenerFD }?.fd)
        try send(.ready, on: runtime)
        #expect(k.fire(fd: channelFD))
        let delivered = try messages(on: runtime)
        #expect(delivered.count == 1)
        guard case .deliver(let requestID)? = delivered.first?.0 else { Issue.record("no deliver: \(delivered)"); return }
        let extensionStream = try #require(delivered.first?.1)
        let answers = try messages(on: host)
        #expect(answers.map(\.0) == [.begun(tag: 1, requestID: requestID, pid: pid, hasChannel: true)])
        let hostStream = try #require(answers.first?.1)
        // The two ends are one stream: what the host writes, the extension reads.
        #expect(write(hostStream, "hi", 2) == 2)
        var two = [UInt8](repeating: 0, count: 2)
        #expect(read(extensionStream, &two, 2) == 2 && two == Array("hi".utf8))
        close(hostStream)
        close(extensionStream)
        #expect(daemon.core.records[Self.id]?.state == .active)

        // Dismiss: the group is stopped at once, and the stop confirmed from the kernel's report.
        k.clearCalls()
        try send(.end(tag: 2, requestID: requestID), on: host)
        #expect(k.fire(fd: connectionFD))
        #expect(k.calls.contains(.kill(-pid, SignalNumber.stop)), "SIGSTOP to the extension's process group: \(k.calls)")
        #expect(try messages(on: host).map(\.0) == [.ok(tag: 2)])
        // The extension is told once its stop is confirmed, not while the stop is in flight.
        #expect(try messages(on: runtime).isEmpty, "ended before the stop was confirmed")
        k.stopped.insert(pidfd)
        k.raise(SignalNumber.child, sender: pid, code: childStoppedCode)
        #expect(k.calls.contains(.stopReported(pidfd: pidfd)))
        // The lock survey's read of /proc/locks goes to another thread; until it returns the
        // stop is not confirmed, and the loop serves meanwhile.
        #expect(k.calls.contains(.inBackground), "\(k.calls)")
        #expect(daemon.core.records[Self.id]?.phase == .stopping(wasExpiring: false))
        try send(.prewarm(tag: 20, extensionIDs: []), on: host)
        #expect(k.fire(fd: connectionFD))
        #expect(try messages(on: host).map(\.0) == [.ok(tag: 20)], "answered while the read is under way")
        #expect(try messages(on: runtime).isEmpty, "ended while the stop waits for its lock survey")
        k.finishBackgroundWork()
        #expect(daemon.core.records[Self.id]?.state == .suspended)
        #expect(try messages(on: runtime).map(\.0) == [.ended(requestID: requestID)])

        // begin again: resumed with SIGCONT, no new spawn. The leader was alone at its stop
        // (no child, no adopted orphan), so the signal goes to it alone.
        k.clearCalls()
        k.stopped.remove(pidfd)
        try send(.begin(tag: 3, extensionID: Self.id), on: host)
        #expect(k.fire(fd: connectionFD))
        #expect(k.calls.contains(.kill(pid, SignalNumber.cont)), "SIGCONT to the leader: \(k.calls)")
        #expect(!k.calls.contains { if case .spawn = $0 { true } else { false } })
        guard case .deliver(let second)? = try messages(on: runtime).first?.0 else { Issue.record("no second deliver"); return }
        let begun = try messages(on: host)
        #expect(begun.map(\.0) == [.begun(tag: 3, requestID: second, pid: pid, hasChannel: true)])
        for (_, fd) in begun { if let fd { close(fd) } }
        #expect(daemon.core.records[Self.id]?.state == .active)

        // Dismissed again 5 ms later, within `LockWatch.warmSeconds` of the last read of
        // /proc/locks: that read does not wait, so it is done on the loop's thread and the stop
        // is confirmed in the same iteration.
        k.advance(to: k.clock.adding(seconds: 0.005))
        k.clearCalls()
        try send(.end(tag: 5, requestID: second), on: host)
        #expect(k.fire(fd: connectionFD))
        #expect(try messages(on: host).map(\.0) == [.ok(tag: 5)])
        k.stopped.insert(pidfd)
        k.raise(SignalNumber.child, sender: pid, code: childStoppedCode)
        #expect(!k.calls.contains(.inBackground), "\(k.calls)")
        #expect(k.calls.contains { if case .readFD = $0 { true } else { false } }, "\(k.calls)")
        #expect(daemon.core.records[Self.id]?.state == .suspended)
        #expect(try messages(on: runtime).map(\.0) == [.ended(requestID: second)])

        // After a quiet spell the read goes to another thread again.
        k.clearCalls()
        k.stopped.remove(pidfd)
        try send(.begin(tag: 6, extensionID: Self.id), on: host)
        #expect(k.fire(fd: connectionFD))
        guard case .deliver(let third)? = try messages(on: runtime).last?.0 else { Issue.record("no third deliver"); return }
        for (_, fd) in try messages(on: host) { if let fd { close(fd) } }
        k.advance(to: k.clock.adding(seconds: 0.05))
        try send(.end(tag: 7, requestID: third), on: host)
        #expect(k.fire(fd: connectionFD))
        k.stopped.insert(pidfd)
        k.raise(SignalNumber.child, sender: pid, code: childStoppedCode)
        #expect(k.calls.contains(.inBackground), "\(k.calls)")
        #expect(daemon.core.records[Self.id]?.phase == .stopping(wasExpiring: false))
        k.finishBackgroundWork()
        #expect(daemon.core.records[Self.id]?.state == .suspended)
        k.stopped.remove(pidfd)
        _ = try messages(on: host)
        _ = try messages(on: runtime)

        // An administrator's kill (the test runs as root): SIGKILL to the group.
        k.clearCalls()
        try send(.kill(tag: 4, extensionID: Self.id, signal: SignalNumber.kill), on: host)
        #expect(k.fire(fd: connectionFD))
        #expect(k.calls.contains(.kill(-pid, SignalNumber.kill)), "\(k.calls)")

        // The leader exits: seen through its pidfd, reaped, and the extension is not running.
        k.exits[pidfd] = .signaled(SignalNumber.kill)
        #expect(k.fire(fd: pidfd))
        #expect(k.calls.contains(.exitStatus(pidfd: pidfd, reap: true)), "reaped through the pidfd")
        #expect(k.calls.contains(.close(pidfd)))
        #expect(daemon.core.records[Self.id]?.state == .notRunning)
        #expect(daemon.extensions.process(Self.id) == nil)
        let last = try messages(on: host).map(\.0)
        #expect(last.contains(.ok(tag: 4)), "the kill is answered: \(last)")
    }

    /// A re-exec starts the new program's check before it takes the snapshot, gives it the
    /// document on its stdin, writes the very same bytes to the memory file the new program
    /// takes over while the check runs, and execs the program on it (`/proc/self/fd/N`, N kept
    /// across the execve) only once the check accepted them. A refused document's memory file
    /// is closed and nothing is executed.
    @Test func reexecFeedsTheDocumentToACheckStartedFirst() throws {
        let k = kernel
        defer { tearDown() }
        func index(_ matches: (RecordingKernel.Call) -> Bool) throws -> Int {
            let found = k.calls.firstIndex(where: matches)
            return try #require(found, "\(k.calls)")
        }
        /// The memory file of the last attempt, which must have been closed since.
        func closedDocument() throws -> Int32 {
            let fd = try #require(k.memoryFiles.keys.max())
            #expect(k.calls.contains(.close(fd)), "the document's memory file \(fd) is closed")
            return fd
        }

        // Refused by the check.
        k.clearCalls()
        k.childResult = .success((.exited(1), "/dev/stdin is a corrupt hand-over document: damaged"))
        daemon.requestReexec(from: nil)
        k.advance(to: k.clock)
        #expect(k.childrenRun.map { Array($0.suffix(2)) } == [["--check-handover", "/dev/stdin"]])
        let started = try index { if case .startChild = $0 { true } else { false } }
        let written = try index { if case .memoryFile = $0 { true } else { false } }
        let fed = try index { if case .finishChild = $0 { true } else { false } }
        #expect(started < fed && fed < written, "the check starts first, and the document is written while it runs: \(k.calls)")
        #expect(!k.calls.contains { if case .execute = $0 { true } else { false } }, "a refused document is not taken over")
        let refused = try closedDocument()
        let input = try #require(k.childInputs.last ?? nil)
        #expect(k.memoryFiles[refused] == input, "the memory file holds what the check read")
        let document = try HandoverFile.decode(input, kernel: k)
        #expect(document.socketPath == socketPath)
        #expect(document.core.records.map(\.manifest.id) == [Self.id])
        #expect(!k.calls.contains { if case .replaceFile = $0 { true } else { false } }, "nothing is written on disk")

        // A check that exits 0 but does not say it read this document (a stub) is refused.
        for output in ["", "2 extension record(s), 0 process(es), 0 connection(s): decoded in 1.0 ms"] {
            k.clearCalls()
            k.childResult = .success((.exited(0), output))
            daemon.requestReexec(from: nil)
            k.advance(to: k.clock)
            #expect(k.calls.contains { if case .finishChild = $0 { true } else { false } })
            #expect(k.executions.isEmpty, "not confirmed by \"\(output)\"")
            _ = try closedDocument()
        }

        // Accepted: the program is executed on the document (which the recording kernel's
        // execve refuses, so this daemon goes on, and closes it).
        k.clearCalls()
        k.childResult = .success((.exited(0), "1 extension record(s), 0 process(es), 0 connection(s): decoded in 1.0 ms, restored in 0.1 ms"))
        // A SIGUSR2 pending meanwhile is taken, not left for the new program to re-execute on.
        k.pendingSignals = [SignalNumber.user2]
        daemon.requestReexec(from: nil)
        k.advance(to: k.clock)
        #expect(k.pendingSignals.isEmpty, "the SIGUSR2 that came during the re-exec is answered by it")
        #expect(k.childInputs.count == 4 && k.childInputs.allSatisfy { $0 != nil }, "no check was abandoned")
        let execution = try #require(k.executions.last)
        let accepted = try closedDocument()
        #expect(Array(execution.arguments.suffix(2)) == ["--handover", "/proc/self/fd/\(accepted)"])
        #expect(execution.keeping.contains(accepted), "the document's descriptor crosses the execve")
        let checked = try index { if case .finishChild = $0 { true } else { false } }
        #expect(try checked < index { if case .execute = $0 { true } else { false } })

        // The program is replaced on disk while it checks: what was checked is not what would be
        // executed, so nothing is, and the document is closed.
        k.clearCalls()
        k.childResult = nil
        let program = try #require(k.statuses["/usr/bin/extensiond"])
        k.whileAChildRuns = { k.statuses["/usr/bin/extensiond"]?.identity = FileIdentity(device: 1, inode: 13) }
        let executed = k.executions.count
        daemon.requestReexec(from: nil)
        k.advance(to: k.clock)
        #expect(k.calls.contains { if case .finishChild = $0 { true } else { false } })
        #expect(k.executions.count == executed, "a program replaced during its check is not executed")
        _ = try closedDocument()
        k.whileAChildRuns = nil
        k.statuses["/usr/bin/extensiond"] = program

        // The memory file cannot be made: refused, though the check accepted, and nothing executed.
        k.clearCalls()
        k.memoryFileFailure = SystemError("memfd_create", errno: EMFILE)
        daemon.requestReexec(from: nil)
        k.advance(to: k.clock)
        #expect(k.calls.contains { if case .finishChild = $0 { true } else { false } })
        #expect(k.executions.count == executed, "a document that could not be written is not taken over")
    }

    /// A host and `count` monitors connected, the widget begun, ready and dismissed, and a
    /// re-exec asked meanwhile, which waits for the stop in flight: the host, the monitors, the
    /// extension's end of its runtime channel, and the leader's pidfd (its exit is what
    /// settles the daemon). The caller closes the sockets.
    func dismissWithAReexecWaiting(monitors count: Int) throws -> (host: PacketSocket, monitors: [PacketSocket], runtime: PacketSocket, pidfd: Int32) {
        let k = kernel
        let listenerFD = try #require(k.watches.first { !$0.cancelled }?.fd)
        let (host, connectionFD) = try connectClient()
        var monitors: [(socket: PacketSocket, fd: Int32)] = []
        for _ in 0..<count {
            let (monitor, fd) = try connectClient()
            try send(.monitor(tag: 1), on: monitor)
            #expect(k.fire(fd: fd))
            _ = try messages(on: monitor)
            monitors.append((monitor, fd))
        }
        let (runtime, requestID) = try beginReady(host: host, watch: connectionFD, otherWatches: [listenerFD] + monitors.map(\.fd))
        // Dismissed: the SIGSTOP is sent and the stop is in flight.
        try send(.end(tag: 2, requestID: requestID), on: host)
        #expect(k.fire(fd: connectionFD))
        for m in monitors { _ = try messages(on: m.socket) }
        #expect(daemon.core.records[Self.id]?.phase == .stopping(wasExpiring: false))
        // SIGUSR2 meanwhile: the re-exec waits for the stop.
        daemon.requestReexec(from: nil)
        k.advance(to: k.clock)
        #expect(k.executions.isEmpty, "it waits while the stop is in flight")
        return (host, monitors.map(\.socket), runtime, Self.leaderPidfd)
    }

    /// The crash events the monitor `socket` had received when the execve came.
    func crashEventsAtTheExecve(on socket: PacketSocket, afterTheExitOf pidfd: Int32) throws -> [String] {
        var atExecve: [Message]?
        kernel.onExecute = { atExecve = (try? messages(on: socket))?.map(\.0) ?? [] }
        kernel.exits[pidfd] = .exited(3)
        #expect(kernel.fire(fd: pidfd))
        kernel.advance(to: kernel.clock.adding(seconds: 0.1))
        #expect(kernel.executions.count == 1, "the re-exec went ahead once the exit settled the daemon")
        return (atExecve ?? []).flatMap { m -> [String] in
            guard case .events(json: let objects) = m else { return [] }
            return objects.map { String(decoding: $0, as: UTF8.self) }.filter { $0.contains(#""event":"crash""#) }
        }
    }

    /// A re-exec waiting for a stop in flight goes ahead in the dispatch that settles it, here
    /// the leader's exit seen through its pidfd: the events of that dispatch (the crash) reach
    /// the monitor before the execve, which would otherwise take them along unsent.
    @Test func theEventsOfTheDispatchThatLetsAReexecGoAheadReachTheMonitorsFirst() throws {
        defer { tearDown() }
        let (host, monitors, runtime, pidfd) = try dismissWithAReexecWaiting(monitors: 1)
        defer { ([host, runtime] + monitors).forEach { $0.close() } }
        #expect(try !crashEventsAtTheExecve(on: monitors[0], afterTheExitOf: pidfd).isEmpty, "the monitor had the crash before the execve")
    }

    /// A client that does not read (here a host whose socket filled with the answers to its
    /// queries) cannot hold a re-exec off: at the end of the wait it is cut off, and the daemon
    /// is replaced.
    @Test func aClientThatDoesNotReadIsCutOffAtTheEndOfAReexecsWait() throws {
        let k = kernel
        defer { tearDown() }
        let (host, connectionFD) = try connectClient()
        defer { host.close() }
        var tag: UInt32 = 0
        while !daemon.server.isBusy && tag < 20_000 {
            tag += 1
            try send(.query(tag: tag, kind: .status, extensionIDs: []), on: host)
            #expect(k.fire(fd: connectionFD))
        }
        #expect(daemon.server.isBusy, "the answers wait in the daemon after \(tag) queries")

        daemon.requestReexec(from: nil)
        k.advance(to: k.clock.adding(seconds: Reexecution.settleSeconds - 0.5))
        #expect(k.executions.isEmpty, "it waits for the host to read")
        k.advance(to: k.clock.adding(seconds: 1))
        #expect(k.executions.count == 1, "the host was cut off and the daemon replaced")
        #expect(!daemon.server.isBusy)
    }

    /// The same when monitors that went away are dropped while the events are being sent (a
    /// send that fails dispatches, which looks whether to re-exec): the monitors after them in
    /// the send still get the events before the execve.
    @Test func monitorsDroppedDuringTheSendDoNotLetTheReexecTakeTheOthersEvents() throws {
        defer { tearDown() }
        let (host, monitors, runtime, pidfd) = try dismissWithAReexecWaiting(monitors: 20)
        defer { [host, runtime].forEach { $0.close() } }
        // Every monitor but one goes away; the daemon has not read their hang-ups.
        for m in monitors.dropFirst() { m.close() }
        defer { monitors[0].close() }
        #expect(try !crashEventsAtTheExecve(on: monitors[0], afterTheExitOf: pidfd).isEmpty, "the monitor kept had the crash before the execve")
    }

    /// A SIGUSR2 that came while the check blocked the loop is answered by the refusal, not by
    /// another attempt.
    @Test func aSIGUSR2DuringARefusedReexecIsAnsweredByTheRefusal() throws {
        let k = kernel
        defer { tearDown() }
        k.childResult = .success((.exited(1), "refused"))
        k.pendingSignals = [SignalNumber.user2]
        daemon.requestReexec(from: nil)
        k.advance(to: k.clock)
        #expect(k.childrenRun.count == 1)
        #expect(k.pendingSignals.isEmpty)
        k.advance(to: k.clock.adding(seconds: 1))
        #expect(k.childrenRun.count == 1, "no second attempt")
    }
}
