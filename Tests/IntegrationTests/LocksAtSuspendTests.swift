import ExtensionHost
import ExtensionProtocol
import Foundation
import Testing

/// Locks held when an extension is suspended (docs/reliability.md, "Locks at suspension"), with
/// real SQLite (python3's sqlite3 module) and real flock, POSIX and OFD locks. The app's wait is
/// measured from the dismiss; nothing here sleeps: every step waits for an event or an answer.
@Suite(.serialized)
struct LocksAtSuspendTests {
    static let id = "com.example.sqlite"
    /// The bound asserted on the app's write after a dismiss (measured figures are printed).
    static let appWriteBound = 1.0

    /// A daemon whose extension took a lock (`command`, given the daemon's directory), was
    /// dismissed and is suspended; `mark` is the event count before the dismiss. `prepare`
    /// runs before the daemon starts.
    static func suspended(prepare: (TestDaemon) throws -> Void = { _ in }, holding command: (String) -> String) throws
        -> (daemon: TestDaemon, host: ExtensionHostConnection, session: ExtensionSession, mark: Int)
    {
        let daemon = try TestDaemon(manifests: ["s.json": sqliteLocksExtension(id, policy: [:])])
        try prepare(daemon)
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(id)
        let channel = try session.hostChannel()
        channel.send(command(daemon.directory))
        #expect(channel.readLine(timeout: 20) == "locked")
        let mark = daemon.events.count
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: id, after: mark)
        return (daemon, host, session, mark)
    }

    /// Waits until the daemon notices the open of `path`, which the suspended extension holds
    /// an exclusive POSIX lock on, and ends the holder; returns its exit event.
    @discardableResult
    static func holderEndedForTheOpen(of path: String, _ daemon: TestDaemon, after mark: Int) throws -> StreamedEvent {
        let noticed = try daemon.events.wait("lock-held-while-suspended", of: id, after: mark, timeout: 10)
        #expect(noticed.detail?.contains("exclusive posix lock on \(path)") == true, "\(noticed)")
        return try daemon.events.wait("exit", of: id, after: mark)
    }

    /// Starts a process that waits for an exclusive flock on `path`, which the suspended
    /// extension holds a shared lock on, and waits until the daemon notices it and ends the
    /// holder and the waiter has finished; returns the waiter.
    static func waiterNoticed(on path: String, _ daemon: TestDaemon, after mark: Int) throws -> Process {
        let waiter = Process()
        waiter.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        waiter.arguments = ["--exclusive", path, "/bin/true"]
        try waiter.run()
        let noticed = try daemon.events.wait("lock-held-while-suspended", of: id, after: mark, timeout: 10)
        #expect(noticed.detail?.contains("wait for") == true, "\(noticed)")
        try daemon.events.wait("exit", of: id, after: mark)
        waiter.waitUntilExit()
        return waiter
    }

    func statusJSON(_ daemon: TestDaemon) throws -> [String: Any] {
        let result = try daemon.extctl(["status", "--json", Self.id])
        let document = try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any]
        return (document?["extensions"] as? [[String: Any]])?.first ?? [:]
    }

    /// A writer stopped mid-transaction is ended at once; the app's write goes through.
    @Test(arguments: ["wal", "delete"])
    func aWriterStoppedMidTransactionIsEndedAndTheAppWrites(mode: String) throws {
        let daemon = try TestDaemon(manifests: ["s.json": sqliteLocksExtension(Self.id, policy: [:])])
        try daemon.start()
        let db = daemon.directory + "/app.db"
        let app = try SQLiteApp(database: db, mode: mode)
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("sqlite-write \(db) \(mode)")
        #expect(channel.readLine(timeout: 20) == "holding")
        let mark = daemon.events.count
        let dismissed = Date()
        try host.dismiss(session)
        let answer = app.ask("write after the dismiss") ?? "no answer"
        let latency = Date().timeIntervalSince(dismissed)
        #expect(answer.hasPrefix("ok "), "the app's write: \(answer)")
        #expect(latency < Self.appWriteBound, "the app waited \(latency) s")
        let reported = try daemon.events.wait("lock-held-at-suspend", of: Self.id, after: mark)
        let lockedFile = mode == "wal" ? db + "-shm" : db
        #expect(reported.lock == ["path": lockedFile, "kind": "posix", "decision": "terminate"], "\(reported)")
        let exit = try daemon.events.wait("exit", of: Self.id, after: mark)
        #expect(exit.detail?.hasPrefix("lock-held-at-suspend") == true, "\(exit)")
        #expect(!daemon.events.all.dropFirst(mark).contains { $0.kind == "suspend" && $0.id == Self.id }, "never counted as suspended")
        #expect(app.ask("check 1") == "integrity ok batches 0 torn 0 extension-rows 0", "the cut transaction was rolled back")
        let status = try statusJSON(daemon)
        #expect((status["lastExit"] as? [String: Any])?["reason"] as? String == "lock-held-at-suspend")
        #expect(status["locksHeldAtSuspend"] as? Int == 1)
        let text = try daemon.extctl(["status", Self.id]).out
        #expect(text.contains("Locks: held a lock that blocks others when stopped, 1 time(s)"), "\(text)")
        print("locks at suspension, \(mode): the app's write succeeded \(String(format: "%.1f", latency * 1000)) ms after the dismiss")
    }

    /// flock, POSIX and OFD holders of a file the app also has open; the app polls (LOCK_NB /
    /// F_SETLK), which /proc/locks never shows as a waiter.
    @Test(arguments: ["flock", "posix", "ofd"])
    func aHolderOfAFileTheAppHasOpenIsEnded(kind: String) throws {
        let daemon = try TestDaemon(manifests: ["s.json": sqliteLocksExtension(Self.id, policy: [:])])
        try daemon.start()
        let db = daemon.directory + "/app.db"
        let file = daemon.directory + "/shared.lock"
        let app = try SQLiteApp(database: db, mode: "wal")
        #expect(app.ask("open-file \(file)") == "opened")
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("lock \(kind) \(file)")
        #expect(channel.readLine(timeout: 20) == "locked")
        let mark = daemon.events.count
        let dismissed = Date()
        try host.dismiss(session)
        let answer = app.ask("lockwait \(kind) \(file)") ?? "no answer"
        let latency = Date().timeIntervalSince(dismissed)
        #expect(answer.hasPrefix("locked "), "\(answer)")
        #expect(latency < Self.appWriteBound, "the app waited \(latency) s")
        let reported = try daemon.events.wait("lock-held-at-suspend", of: Self.id, after: mark)
        #expect(reported.lock == ["path": file, "kind": kind, "decision": "terminate"], "\(reported)")
        try daemon.events.wait("exit", of: Self.id, after: mark)
        print("locks at suspension, \(kind): the app had the lock \(String(format: "%.1f", latency * 1000)) ms after the dismiss")
    }

    /// The survey of a stopped extension's descriptors runs on a thread of its own: an
    /// extension holding a lock and 16,000 descriptors (a few hundred milliseconds of reads)
    /// does not hold the daemon meanwhile. From the dismiss until the stop is confirmed, a
    /// client asks for the extension's state over and over: every answer comes quickly, where a
    /// survey on the daemon's thread would keep one request waiting for the whole survey.
    @Test func theDaemonAnswersWhileTheSurveyOfManyDescriptorsRuns() throws {
        var manifest = try sqliteLocksExtension(Self.id, policy: [:])
        manifest["limits"] = ["openFilesMax": 17_000]
        let daemon = try TestDaemon(manifests: ["s.json": manifest])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("lock posix \(daemon.directory)/held.lock")
        #expect(channel.readLine(timeout: 20) == "locked")
        channel.send("descriptors 16000")
        #expect(channel.readLine(timeout: 20) == "descriptors 16000")
        let client = try ControlClient(socketPath: daemon.socketPath)
        defer { client.close() }
        let dismissed = Date()
        try host.dismiss(session)
        var longest = 0.0
        var answers = 0
        var state: String?
        while state != "suspended" && Date().timeIntervalSince(dismissed) < 30 {
            let asked = Date()
            guard case .json(let bytes) = try client.call({ .query(tag: $0, kind: .list, extensionIDs: [Self.id]) }) else {
                Issue.record("no list document")
                return
            }
            longest = max(longest, Date().timeIntervalSince(asked))
            answers += 1
            let list = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
            state = ((list?["extensions"] as? [[String: Any]])?.first)?["state"] as? String
        }
        let confirmed = Date().timeIntervalSince(dismissed)
        #expect(state == "suspended")
        #expect(longest < confirmed / 2, "a request waited \(longest) s of the \(confirmed) s the stop took: the survey held the daemon")
        print(
            String(
                format: "a survey of 16,000 descriptors: the stop confirmed %.1f ms after the dismiss; %d requests meanwhile, the slowest answered in %.1f ms",
                confirmed * 1000, answers, longest * 1000))
    }

    /// Every WAL connection holds shared locks, even idle: no alarm, same process after resume.
    @Test func anIdleWALConnectionIsSuspendedAndResumedNormally() throws {
        let daemon = try TestDaemon(manifests: ["s.json": sqliteLocksExtension(Self.id, policy: [:])])
        try daemon.start()
        let db = daemon.directory + "/app.db"
        let app = try SQLiteApp(database: db, mode: "wal")
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("sqlite-open \(db)")
        #expect(channel.readLine(timeout: 20) == "open")
        let mark = daemon.events.count
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        #expect(processState(session.pid) == "T")
        #expect(app.ask("write beside an idle reader")?.hasPrefix("ok ") == true)
        let again = try host.begin(Self.id)
        #expect(again.pid == session.pid, "resumed, not relaunched")
        try daemon.events.wait("resume", of: Self.id, after: mark)
        #expect(!daemon.events.all.contains { $0.kind == "lock-held-at-suspend" })
        #expect(try statusJSON(daemon)["locksHeldAtSuspend"] as? Int == 0)
        try host.dismiss(again)
    }

    /// An exclusive lock on a file nobody else has open (a single-instance lock) is no alarm.
    @Test func aPrivateSingleInstanceLockIsSuspendedNormally() throws {
        let (daemon, host, session, _) = try Self.suspended { "lock flock \($0)/instance.lock" }
        let again = try host.begin(Self.id)
        #expect(again.pid == session.pid)
        #expect(!daemon.events.all.contains { $0.kind == "lock-held-at-suspend" })
    }

    /// `"resume"`: the holder was told to expire, is slower than the grace, gets the grace once
    /// more when the stop finds its lock, commits, and is then suspended (same process).
    @Test func theResumePolicyLetsTheHolderReleaseThenSuspends() throws {
        let policy: [String: Any] = ["backgroundSeconds": 2.0, "expiryGraceSeconds": 1.0, "lockedWhileSuspended": "resume"]
        let daemon = try TestDaemon(manifests: ["s.json": sqliteLocksExtension(Self.id, policy: policy)])
        try daemon.start()
        let db = daemon.directory + "/app.db"
        let app = try SQLiteApp(database: db, mode: "wal")
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("sqlite-write-assertion \(db) 1.5")
        #expect(channel.readLine(timeout: 20) == "holding")
        let mark = daemon.events.count
        try host.dismiss(session)
        try daemon.events.wait("expire", of: Self.id, after: mark)
        let reported = try daemon.events.wait("lock-held-at-suspend", of: Self.id, after: mark)
        #expect(reported.lock?["decision"] == "resume", "\(reported)")
        #expect(channel.readLine(timeout: 10) == "committed")
        let suspended = try daemon.events.wait("suspend", of: Self.id, after: mark)
        #expect(suspended.monotonic > reported.monotonic)
        #expect(processState(session.pid) == "T")
        #expect(app.ask("write after the release")?.hasPrefix("ok ") == true)
        #expect(app.ask("check 1")?.hasSuffix("extension-rows 1") == true, "the late transaction committed")
        #expect(!daemon.events.all.contains { $0.kind == "exit" && $0.id == Self.id })
        #expect(try host.begin(Self.id).pid == session.pid)
    }

    /// The second line, with no timer while nobody else touches the file: a file locked
    /// exclusively by the suspended extension and opened by another process afterwards now
    /// blocks others, and the policy applies at once (the open is an inotify event).
    @Test func aPrivateLockFileOpenedAfterTheStopEndsTheHolder() throws {
        let (daemon, _, _, mark) = try Self.suspended { "lock posix \($0)/instance.lock" }
        let path = "\(daemon.directory)/instance.lock"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        let exit = try Self.holderEndedForTheOpen(of: path, daemon, after: mark)
        #expect(exit.detail?.hasPrefix("lock-held-while-suspended") == true, "\(exit)")
        var probe = flock(l_type: Int16(F_WRLCK), l_whence: Int16(SEEK_SET), l_start: 0, l_len: 0, l_pid: 0)
        #expect(fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type == Int16(F_UNLCK), "the lock went with the holder")
    }

    /// The watch of a suspended holder's locks crosses a re-exec (its inotify descriptor and its
    /// locks are handed over, not read again): an open of the locked file after the new
    /// program took over ends the holder as before.
    @Test func theLockWatchOfASuspendedHolderCrossesAReexec() throws {
        let (daemon, _, _, mark) = try Self.suspended { "lock posix \($0)/instance.lock" }
        let before = try statusJSON(daemon)["pid"] as? Int
        let reexec = try daemon.extctl(["reexec"])
        #expect(reexec.status == 0, "\(reexec)")
        #expect(try statusJSON(daemon)["pid"] as? Int == before && before != nil, "the holder was kept, suspended")
        #expect(try statusJSON(daemon)["state"] as? String == "suspended")
        let path = "\(daemon.directory)/instance.lock"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        try Self.holderEndedForTheOpen(of: path, daemon, after: mark)
    }

    /// An open of the locked file made *during* the hand-over (after the old daemon's last
    /// loop turn, before the new one watches anything) is seen by the new program: the watch's
    /// inotify descriptor crossed the `execve` with the event waiting in it. The program on
    /// disk is a wrapper whose check opens the file first, as an app would at that moment.
    @Test func anOpenOfTheLockedFileDuringTheHandOverIsSeenByTheNewProgram() throws {
        var program = "", real = ""
        let (daemon, _, _, mark) = try Self.suspended(prepare: { daemon in
            program = daemon.directory + "/extensiond"
            real = daemon.directory + "/extensiond.real"
            for copy in [program, real] { try Executables.copy(BuildProducts.path("extensiond"), to: copy) }
            daemon.daemonExecutable = program
        }) { "lock posix \($0)/instance.lock" }
        let path = "\(daemon.directory)/instance.lock"
        let wrapper = daemon.directory + "/extensiond.wrapper"
        try Executables.write(
            """
            #!/bin/sh
            for a in "$@"; do [ "$a" = --check-handover ] && exec 3<'\(path)'; done
            exec '\(real)' "$@"

            """, to: wrapper)
        #expect(rename(wrapper, program) == 0)
        let reexec = try daemon.extctl(["reexec"])
        #expect(reexec.status == 0, "\(reexec)")
        try Self.holderEndedForTheOpen(of: path, daemon, after: mark)
    }

    /// The same for a shared lock: after the re-exec, an open starts the check for waiters, and
    /// a process blocked for an exclusive lock is noticed.
    @Test func aWaiterBehindASharedLockIsNoticedAfterAReexec() throws {
        let (daemon, _, _, mark) = try Self.suspended { "lock-shared flock \($0)/readers.lock" }
        let reexec = try daemon.extctl(["reexec"])
        #expect(reexec.status == 0, "\(reexec)")
        let waiter = try Self.waiterNoticed(on: "\(daemon.directory)/readers.lock", daemon, after: mark)
        #expect(waiter.terminationStatus == 0)
    }

    /// A shared lock is no alarm at the stop, nor when another process opens the file; a
    /// process that then blocks for an exclusive lock is noticed by the check for waiters that
    /// the open started, and the holder is ended.
    @Test func aWaiterBlockedBehindASharedLockOfTheSuspendedExtensionIsNoticed() throws {
        let (daemon, _, _, mark) = try Self.suspended { "lock-shared flock \($0)/readers.lock" }
        let waiter = try Self.waiterNoticed(on: "\(daemon.directory)/readers.lock", daemon, after: mark)
        #expect(waiter.terminationStatus == 0, "the waiter got the lock once the holder was gone")
        #expect(!daemon.events.all.contains { $0.kind == "lock-held-at-suspend" }, "a shared lock is no alarm at the stop")
    }

    /// Under its own uid (the daemon's default), with its database in a shared container the
    /// app has not opened yet: a write lock in a shared container blocks others by the rule,
    /// so the writer is ended at the stop, and the app's first write goes through.
    @Test func aWriterUnderItsOwnUIDInASharedContainerIsEndedBeforeTheAppOpensTheDatabase() throws {
        let name = "group.com.example.sqlite"
        var manifest = try sqliteLocksExtension(Self.id, policy: [:])
        manifest["sharedContainers"] = [name]
        // The script and the runtime library from copies the extension's own uid can reach.
        manifest["arguments"] = [try ReachableCopies.copy(SQLiteApp.script, executable: false), "extension"]
        manifest["environment"] = ["EXTENSION_RUNTIME_LIB": try ReachableCopies.copy(try RuntimeC.library())]
        let daemon = try TestDaemon(manifests: ["s.json": manifest], extensionsAsRoot: false)
        // Let the extension's uid pass through the daemon's private directory (search only).
        chmod(daemon.directory, 0o711)
        try daemon.start()
        let db = daemon.directory + "/state/containers/" + name + "/app.db"
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        #expect(try CredentialTests.statusField(session.pid, "Uid") != "0", "runs under its own uid")
        let channel = try session.hostChannel()
        channel.send("sqlite-write \(db) wal")
        #expect(channel.readLine(timeout: 20) == "holding")
        let mark = daemon.events.count
        try host.dismiss(session)
        let reported = try daemon.events.wait("lock-held-at-suspend", of: Self.id, after: mark)
        #expect(reported.lock == ["path": db + "-shm", "kind": "posix", "decision": "terminate"], "\(reported)")
        #expect(reported.detail?.contains("in the shared container \(name)") == true, "\(reported)")
        #expect(reported.detail?.contains("open in another process") == false, "nobody else had it open")
        let exit = try daemon.events.wait("exit", of: Self.id, after: mark)
        #expect(exit.detail?.hasPrefix("lock-held-at-suspend") == true, "\(exit)")
        let app = try SQLiteApp(database: db, mode: "wal")
        #expect(app.ask("write after the dismiss")?.hasPrefix("ok ") == true)
        #expect(app.ask("check 1") == "integrity ok batches 0 torn 0 extension-rows 0", "the cut transaction was rolled back")
    }
}
