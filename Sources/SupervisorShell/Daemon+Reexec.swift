import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// Replacing the daemon's program without touching an extension (`extctl reexec`, SIGUSR2):
/// the state goes into a `HandoverDocument`, the new program checks it, and the daemon execs
/// it in place, keeping its pid and the document's descriptors.
extension Daemon {
    /// The path by which the new program reads the hand-over document in memory file `fd`,
    /// which crosses the execve: `/proc/self/fd/N`.
    static func handoverPath(fd: Int32) -> String { "\(handoverDescriptorPrefix)\(fd)" }
    /// What `handoverPath(fd:)` starts with: a document read by such a path is a descriptor
    /// to close, not a file to remove.
    static let handoverDescriptorPrefix = "/proc/self/fd/"

    /// Asks for a re-exec; `requester` is answered by the new daemon, or with the reason it
    /// was refused (the old daemon then goes on unchanged).
    func requestReexec(from requester: HandoverDocument.Requester?) {
        if core.shuttingDown { return refuseReexec("the daemon is shutting down", to: requester) }
        if reexecution.isPending { return refuseReexec("a re-exec is already under way", to: requester) }
        logger.notice("re-exec asked\(requester.map { _ in " by extctl" } ?? " (SIGUSR2)"): waiting for stops in flight and unsent messages")
        reexecution.begin(requester: requester, deadline: kernel.now().adding(seconds: Reexecution.settleSeconds))
        // A request arrives in the batch of its connection's messages, which holds the
        // answers of that batch: the first look is on the loop's next turn, once it is sent.
        lookAgain(at: kernel.now())
    }

    /// Arms the timer of the next `attemptReexec`; refuses the re-exec if it cannot.
    private func lookAgain(at instant: Instant) {
        switch kernel.addTimer(at: instant, { [unowned self] in attemptReexec() }) {
        case .success(let timer): reexecution.keep(retry: timer)
        case .failure(let e):
            let requester = reexecution.requester
            reexecution.end()
            refuseReexec("cannot arm the re-exec's retry timer: \(e)", to: requester)
        }
    }

    /// Hands over if the daemon is settled (no stop in flight, no unsent message), else looks
    /// again shortly, until the deadline.
    func attemptReexec() {
        guard reexecution.isPending, let deadline = reexecution.deadline else { return }
        let requester = reexecution.requester
        if server.isBusy || extensions.isBusy || urlHandoffsInFlight > 0 {
            if kernel.now() >= deadline {
                // Clients that do not read their messages do not hold the replacement off: they
                // are cut off once, and what that causes (their requests end) gets its own wait.
                // Not while a stop is in flight, which would refuse the re-exec anyway.
                // Cutting one off ends its requests through the core, whose dispatch may hand
                // over at once (`afterDispatch`): the new wait is set first.
                if reexecution.mayCutOffLaggards && server.hasLaggards && !extensions.isBusy {
                    reexecution.laggardsCutOff(deadline: kernel.now().adding(seconds: Reexecution.settleSeconds))
                    server.cutOffLaggards("it did not read its messages while extensiond waited to re-execute")
                    if reexecution.isPending { lookAgain(at: kernel.now()) }
                    return
                }
                reexecution.end()
                return refuseReexec(
                    "stops in flight, URL hand-offs, or messages peers did not read did not settle within \(Int(Reexecution.settleSeconds)) s", to: requester)
            }
            return lookAgain(at: kernel.now().adding(seconds: Reexecution.retrySeconds))
        }
        reexecution.end()
        if let reason = reexec(requester: requester) {
            refuseReexec(reason, to: requester)
            // A SIGUSR2 that came while the check blocked the loop asked for this re-exec: it is
            // answered by its refusal, not by another attempt.
            if kernel.takePendingSignal(SignalNumber.user2) { logger.info("a SIGUSR2 that came during the re-exec is answered by its refusal") }
        }
    }

    /// Has the new program check the document, writes it, and execs that program. Returns why
    /// not when it did not (the daemon goes on as before, nothing changed).
    ///
    /// The check starts first and reads the document on its stdin (`--check-handover
    /// /dev/stdin`), so that its program's start overlaps the snapshot and its encoding.
    private func reexec(requester: HandoverDocument.Requester?) -> String? {
        let start = kernel.now()
        // The path the daemon was started as, unless it names no program now (an `argv[0]` set
        // by whoever started it, a file removed): then the running program's file.
        let invoked = reexecution.programPath.flatMap { path -> String? in
            if case .success(let st) = kernel.status(path, followLinks: true), st.kind == .regular { return path }
            logger.notice("\(path), the path extensiond was started as, names no program now: re-executing the running program's file")
            return nil
        }
        guard let executable = invoked ?? kernel.executablePath() else {
            return "the daemon's program cannot be found on disk (/proc/self/exe)"
        }
        // The file checked must be the file executed: its identity now, compared right before
        // the execve (a package upgrade that lands during the check is refused, not run
        // unchecked).
        let checkedFile: FileStatus
        switch kernel.status(executable, followLinks: true) {
        case .success(let st): checkedFile = st
        case .failure(let e): return "\(executable) cannot be run to check the hand-over: \(e)"
        }
        func stillTheFileChecked() -> Bool {
            guard case .success(let now) = kernel.status(executable, followLinks: true) else { return false }
            return now.identity == checkedFile.identity && now.size == checkedFile.size
        }
        let replaced = "\(executable) was replaced while it checked the hand-over; ask again to check the new file"
        // The check blocks the loop, and with it the watchdog's pings: one goes first, and the
        // check gets at most half the watchdog's interval.
        let checkSeconds = Reexecution.checkSeconds(watchdogMicroseconds: kernel.watchdogInterval())
        serviceManager.watchdogPing()
        let check: ChildProgram
        switch kernel.startChild(executable, arguments: reexecution.commandLine + ["--check-handover", "/dev/stdin"], seconds: checkSeconds) {
        case .success(let c): check = c
        case .failure(let e):
            // The file is there (it was just looked at): ENOENT names what it needs.
            let missing = e.isNoEntry ? " (the file exists: the interpreter or dynamic loader it names is missing)" : ""
            return "\(executable) cannot be run to check the hand-over: \(e)\(missing)"
        }
        func withoutCheck(_ reason: String) -> String {
            kernel.abandon(check)
            return reason
        }
        let snapshot: Supervisor.Snapshot
        switch core.snapshot() {
        case .success(let s): snapshot = s
        case .failure(let why): return withoutCheck("the supervisor's state cannot be handed over: \(why)")
        }
        guard let processes = extensions.handover() else { return withoutCheck("a stop is in flight") }
        let server = server.handover()
        let document = HandoverDocument(
            version: HandoverDocument.currentVersion, daemonVersion: daemonVersion, core: snapshot, recordParts: 0, listener: server.listener,
            socketPath: self.server.path,
            ownedSocketPath: server.ownedPath, nextHostID: server.nextHostID, connections: server.connections, processes: processes,
            requester: requester, sandbox: HandoverDocument.Sandbox(extensions.sandboxing.probe), sharedContainers: sources.containers.known,
            containersRoot: sources.containers.resolvedRoot, networkStacks: extensions.networks?.handover,
            apps: apps.sorted, defaults: defaults.handover, transfers: transfers.handover, outputs: extensions.outputs.handover)
        let parts: [[UInt8]]
        do {
            parts = try HandoverFile.encode(document, kernel: kernel)
        } catch {
            return withoutCheck("the hand-over document cannot be encoded: \(error)")
        }
        let written = kernel.now()
        // The check reads the document from its stdin; the memory file the new program takes
        // over is written meanwhile. Nothing is on disk: no file for another process to plant
        // or replace, none left behind by a crash, no full disk.
        var memoryFile: Result<Int32, SystemError>?  // set by `finish`, which always runs it
        let outcome = kernel.finish(check, input: parts) { memoryFile = kernel.memoryFile("extensiond-handover", withParts: parts) }
        let documentFD: Int32
        switch memoryFile {
        case .success(let fd)?: documentFD = fd
        case .failure(let e)?: return "the hand-over document cannot be written: \(e)"
        case nil: return "the hand-over document was not written"
        }
        func withoutDocument(_ reason: String) -> String {
            kernel.close(documentFD)
            return reason
        }
        let report: String
        switch outcome {
        case .failure(let e):
            return withoutDocument("the check of the hand-over by \(executable) did not end: \(e)")
        case .success((let status, let output)):
            let said = output.split(separator: "\n").last.map(String.init)
            guard status == .exited(0) else {
                let how = status.map { "\($0)" } ?? "did not finish within \(checkSeconds) s"
                return withoutDocument("\(executable) refused the hand-over (\(how))\(said.map { ": \(UntrustedText.escaped($0))" } ?? "")")
            }
            // Exiting 0 is not enough: the check says what it read, and that must be what was
            // written (a stub that exits 0 would otherwise replace the daemon).
            let expected = Self.checkReport(document)
            guard let said, said.hasPrefix(expected + ":") else {
                return withoutDocument(
                    "\(executable) exited 0 but did not confirm the hand-over (expected a line starting \"\(expected):\", got \(said.map { "\"\(UntrustedText.escaped($0))\"" } ?? "nothing"))"
                )
            }
            report = " (\(UntrustedText.escaped(said)))"
        }
        guard stillTheFileChecked() else { return withoutDocument(replaced) }
        let checked = kernel.now()
        logger.notice(
            "re-executing \(executable) with \(processes.count) extension process(es) and \(server.connections.count) connection(s); document of \(parts.reduce(0) { $0 + $1.count }) bytes written in \(Self.milliseconds(start, written)), checked in \(Self.milliseconds(written, checked))\(report)"
        )
        // A SIGUSR2 that came during this re-exec asked for what is happening: taken here, not
        // left pending across the execve, where it would make the new program re-execute again.
        if kernel.takePendingSignal(SignalNumber.user2) { logger.info("a SIGUSR2 that came during the re-exec is answered by it") }
        serviceManager.reexecuting()
        extensions.registry.flush(includingRemovals: true)
        // Once more, right before the execve, which runs the file by its path.
        guard stillTheFileChecked() else {
            serviceManager.ready(status: statusLine())
            return withoutDocument(replaced)
        }
        // The watches stay as they are: the exec ends the loop with the program, and a failed
        // exec leaves this daemon as it was.
        // The transfer worker ends first (its attempts go on from their files in the new program):
        // no write of the old worker may follow the new program's look at a partial file.
        transfers.pauseForReexec()
        // The bus connection does not cross the exec: it is closed, the name released; the bus
        // callers' requests are left as the snapshot has them, and the new program ends them at
        // its start (their hosts did not cross) and takes the name again.
        bus?.stop("the daemon is re-executing", reexecuting: true)
        let failure = kernel.execute(
            executable, arguments: reexecution.commandLine + ["--handover", Self.handoverPath(fd: documentFD)], keeping: document.descriptors + [documentFD])
        // Still here: the exec failed, and this daemon goes on.
        transfers.schedule()
        // The bus callers' connections were closed on their side: their requests end here.
        self.server.dropAdopted(reason: "the re-exec failed, and their bus connection was closed")
        bus?.start()
        bus?.reexecEnded(succeeded: false, previousVersion: daemonVersion, detail: "the execve of \(executable) failed: \(failure)")
        serviceManager.ready(status: statusLine())
        return withoutDocument("\(failure)")
    }

    /// What a check that read `document` says first: `1455 extension record(s), 1000
    /// process(es), 4 connection(s)` (then `: decoded in …`).
    static func checkReport(_ document: HandoverDocument) -> String {
        "\(document.core.records.count) extension record(s), \(document.processes.count) process(es), \(document.connections.count) connection(s)"
    }

    /// The time from `start` to `end` as `12.3 ms`.
    static func milliseconds(_ start: Instant, _ end: Instant) -> String {
        let tenths = (end.nanoseconds &- start.nanoseconds) / 100_000
        return "\(tenths / 10).\(tenths % 10) ms"
    }

    private func refuseReexec(_ reason: String, to requester: HandoverDocument.Requester?) {
        logger.error("re-exec refused: \(reason)")
        if let requester {
            server.send(.failure(tag: requester.tag, code: .internalError, text: "re-exec refused: \(reason)"), to: requester.host)
        }
    }

    /// Reads and decodes the hand-over document at `path`; throws naming what is wrong.
    static func readHandover(_ path: String, kernel: any Kernel) throws -> HandoverDocument {
        try decodeHandover(try handoverBytes(path, kernel: kernel), path: path, kernel: kernel)
    }

    /// The bytes of the hand-over document at `path`; throws naming the path when it cannot be
    /// read.
    static func handoverBytes(_ path: String, kernel: any Kernel) throws -> [UInt8] {
        switch kernel.read(path) {
        case .success(let bytes): return bytes
        case .failure(let e): throw DaemonError("the hand-over document \(path) cannot be read: \(e)")
        }
    }

    /// The document in `bytes`, checked: its version is this daemon's, and the core accepts its
    /// state. Throws naming what is wrong.
    static func decodeHandover(_ bytes: [UInt8], path: String, kernel: any Kernel) throws -> HandoverDocument {
        do {
            return try HandoverFile.decode(bytes, kernel: kernel)
        } catch {
            switch error {
            case .notADocument(let why): throw DaemonError("\(path) is not a hand-over document: \(why)")
            case .version(let found, let writer):
                throw DaemonError(
                    "\(path) is a hand-over document of version \(found) (from extensiond \(writer ?? "?")); this extensiond \(daemonVersion) reads version \(HandoverDocument.currentVersion)"
                )
            case .corrupt(let why): throw DaemonError("\(path) is a corrupt hand-over document: \(why)")
            }
        }
    }

    /// `extensiond --check-handover FILE`, given the daemon's own arguments: whether this
    /// program can take over the state in FILE with the configuration in `configFile` (read and
    /// checked as the take-over will). Succeeds with one line saying what it read and how long
    /// each part took (`1455 extension record(s), 1000 process(es), 4 connection(s): decoded in
    /// 31.2 ms, restored in 3.1 ms; the document read in 0.9 ms`: the read ends when FILE
    /// does, which on a pipe is when its writer is done); fails with why not.
    public static func checkHandover(at path: String, configFile: String?, kernel: any Kernel) -> Result<String, DaemonError> {
        do {
            var limits = try configuration(configFile, kernel: kernel).limits
            limits.daemonUID = kernel.userID
            let start = kernel.now()
            let bytes = try handoverBytes(path, kernel: kernel)
            let read = kernel.now()
            let document = try decodeHandover(bytes, path: path, kernel: kernel)
            let decoded = kernel.now()
            _ = try Supervisor(restoring: document.core, limits: limits, now: kernel.now())
            let restored = kernel.now()
            return .success(
                "\(checkReport(document)): decoded in \(milliseconds(read, decoded)), restored in \(milliseconds(decoded, restored)); the document read in \(milliseconds(start, read))"
            )
        } catch let error as DaemonError {
            return .failure(error)
        } catch {
            return .failure(DaemonError("\(error)"))
        }
    }
}
