import Foundation
import Logging
import SupervisorCore
import SupervisorKernel
import Synchronization
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// A lock survey returns while a file system does not answer, with real processes on the real
/// kernel. `fuse_stall.py serve` mounts a FUSE file system and then stops answering it; another
/// process has its file open. A stat(2) that follows a `/proc/PID/fd/N` link to that file waits
/// in the kernel until the server goes away (each test checks it does, so a survey that stats
/// an open file would not return): the survey takes open files' identities from the kernel's
/// cached attributes (`FileReads.cachedIdentity`), which never ask the file system.
@Suite(
    .enabled(
        if: FUSEStall.unavailable == nil,
        "needs /dev/fuse, /usr/bin/python3 and the right to mount a FUSE file system (root): `fuse_stall.py probe` failed"))
struct StalledFileSystemTests {
    /// A run of `fuse_stall.py` (python3) with its standard input and output on pipes.
    final class Fixture {
        let process = Process()
        let input = Pipe()
        let output = Pipe()

        init(_ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [FUSEStall.fixture] + arguments
            process.standardInput = input
            process.standardOutput = output
            try process.run()
        }

        var pid: Int32 { process.processIdentifier }

        /// The next line it writes; nil if none comes within `seconds` or its output ends.
        func readLine(seconds: Double = 10) -> String? {
            let fd = output.fileHandleForReading.fileDescriptor
            let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
            var line: [UInt8] = []
            while true {
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { return nil }
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let polled = poll(&ready, 1, Int32((left / .milliseconds(1)).rounded(.up)))
                if polled < 0 && errno == EINTR { continue }
                guard polled > 0 else { return nil }
                var byte: UInt8 = 0
                guard read(fd, &byte, 1) == 1 else { return nil }
                if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
                line.append(byte)
            }
        }

        func send(_ line: String) { try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8)) }

        /// Closes its standard input (EOF), waits up to `seconds` for it to exit, kills it if it
        /// has not, and reaps it.
        func end(seconds: Double) {
            try? input.fileHandleForWriting.close()
            while readLine(seconds: seconds) != nil {}
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// `fuse_stall.py open [--lock] FILE...`: the descriptor it opened each file on, in order,
    /// and "open", "locked" or "unlocked:ERRNO".
    /// `namespaceOf`: the process joins the mount namespace of that process first (the
    /// server's: the FUSE mount is then in its own mount table).
    func open(_ files: [String], lock: Bool, namespaceOf: Int32? = nil) throws -> (process: Fixture, descriptors: [(fd: Int32, state: String)]) {
        let process = try Fixture(["open"] + (lock ? ["--lock"] : []) + (namespaceOf.map { ["--namespace-of", "\($0)"] } ?? []) + files)
        let line = process.readLine()
        let fields = line?.split(separator: " ") ?? []
        let descriptors = fields.dropFirst().compactMap { field -> (fd: Int32, state: String)? in
            let parts = field.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let fd = Int32(parts[0]) else { return nil }
            return (fd, String(parts[1]))
        }
        guard fields.first == "opened", descriptors.count == files.count else {
            process.end(seconds: 0)
            throw StalledFileSystemError("fuse_stall.py open \(files): \(line ?? "no answer")")
        }
        return (process, descriptors)
    }

    /// Work on a thread of its own, waited for with a deadline: a call stuck in the kernel
    /// holds that thread, not the test.
    final class OnAThread<Value: Sendable>: Sendable {
        private let done = DispatchSemaphore(value: 0)
        private let value = Mutex<Value?>(nil)

        init(_ work: @escaping @Sendable () -> Value) {
            Thread { [self] in
                let result = work()
                value.withLock { $0 = result }
                done.signal()
            }
            .start()
        }

        /// What the work returned, if it returned within `seconds`.
        func wait(seconds: Double) -> Value? {
            guard done.wait(timeout: .now() + seconds) == .success else { return nil }
            done.signal()  // for the next wait
            return value.withLock { $0 }
        }
    }

    /// A FUSE file system served by `fuse_stall.py serve` (in its own mount namespace) in a
    /// new directory, a local file beside its mount point, the processes a test starts and the
    /// threads that may wait on the file system. `tearDown` releases the server first (the
    /// kernel then fails every request waiting on it, which frees those threads and lets the
    /// processes that have its file open exit), then ends the rest.
    final class Scene {
        let directory: String
        let server: Fixture
        var processes: [Fixture] = []
        var threads: [(name: String, hasReturned: (Double) -> Bool)] = []
        /// Descriptors a test made (a survey's inotify watch), closed by `tearDown`.
        var descriptors: [Int32] = []

        var mountPoint: String { directory + "/mnt" }
        var localFile: String { directory + "/local" }
        /// The file on the FUSE file system as processes outside its mount namespace reach it.
        var stalledFile: String { "/proc/\(server.pid)/root\(mountPoint)/file" }

        /// `defaultPermissions`: mounted with `default_permissions` (the kernel asks the server
        /// for the file's attributes at each permission check).
        init(defaultPermissions: Bool = false) throws {
            var template = Array("/tmp/extensiond-fuse-XXXXXX".utf8CString)
            // With links resolved, as the kernel names the files in /proc/PID/fd.
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }).flatMap({ realpath($0, nil) }) else {
                throw StalledFileSystemError("mkdtemp: errno \(errno)")
            }
            directory = String(cString: made)
            free(made)
            let local = creat(directory + "/local", 0o644)
            if local >= 0 { close(local) }
            do {
                guard mkdir(directory + "/mnt", 0o755) == 0, local >= 0 else { throw StalledFileSystemError("cannot create the files in \(directory)") }
                server = try Fixture(["serve"] + (defaultPermissions ? ["--default-permissions"] : []) + [directory + "/mnt"])
            } catch {
                unlink(directory + "/local")
                rmdir(directory + "/mnt")
                rmdir(directory)
                throw error
            }
            let ready = server.readLine()
            guard ready == "ready" else {
                tearDown()
                throw StalledFileSystemError("fuse_stall.py serve: \(ready ?? "no answer")")
            }
        }

        /// Stops the server answering: from now on, asking the file system waits.
        func stall() throws {
            server.send("stall")
            let answer = server.readLine()
            guard answer == "stalled" else { throw StalledFileSystemError("fuse_stall.py did not stall: \(answer ?? "no answer")") }
        }

        /// Runs `work` on a thread of its own, which `tearDown` expects to return once the
        /// server is released.
        func onAThread<Value: Sendable>(_ name: String, _ work: @escaping @Sendable () -> Value) -> OnAThread<Value> {
            let thread = OnAThread(work)
            threads.append((name, { thread.wait(seconds: $0) != nil }))
            return thread
        }

        func tearDown() {
            server.end(seconds: 5)
            if server.process.terminationReason != .exit || server.process.terminationStatus != 0 {
                Issue.record("fuse_stall.py serve did not release its file system and exit at EOF: it was killed")
            }
            for (name, hasReturned) in threads where !hasReturned(10) {
                Issue.record("\(name) still waits on the file system after its server was released")
            }
            for fd in descriptors { close(fd) }
            for process in processes { process.end(seconds: 5) }
            unlink(localFile)
            rmdir(mountPoint)
            rmdir(directory)
        }
    }

    /// The survey of `holder`'s locks, on a thread of its own: the reads LockWatch makes.
    /// The survey of `holder`'s locks as `LockWatch` makes it (watching the files it may watch
    /// for opens), on a thread of its own, waited for 10 s at most; the scene closes the watch
    /// it made.
    func survey(_ scene: Scene, holder: Int32) throws -> LockSurvey.Outcome {
        let procLocks = FileLocks.entries(String(decoding: try SystemFileReads().read("/proc/locks").get(), as: UTF8.self))
        let survey = scene.onAThread("the survey") {
            LockSurvey(files: SystemFileReads(), ownPID: getpid(), containersRoot: nil).survey(heldBy: [holder], procLocks: procLocks, watchingOpens: true)
        }
        let outcome = try #require(survey.wait(seconds: 10), "the survey did not return within 10 s")
        if let made = outcome.openWatch { scene.descriptors.append(made.fd) }
        return outcome
    }

    /// The file system is stalled indeed: a stat(2) following `link` (a `/proc/PID/fd/N` link
    /// to the file on it), as the survey once made, does not return.
    func expectAStatToWait(_ scene: Scene, following link: String) {
        let stat = scene.onAThread("a stat of \(link)") { SystemFileReads().status(link, followLinks: true).isSuccess }
        #expect(stat.wait(seconds: 1) == nil, "a stat following \(link) returned: the file system answers, so the survey's return shows nothing")
    }

    /// The surveyed process (`holder`) holds an exclusive lock on a local file; another process
    /// (`opener`) has the file on the stalled file system open, on a lower descriptor than the
    /// local file it also has open: the survey's comparison of every other process's
    /// descriptors with the locked file meets the stalled one before the one it looks for.
    @Test func aSurveyReturnsWhileAnotherProcessHasAFileOpenOnAStalledFileSystem() throws {
        let scene = try Scene()
        defer { scene.tearDown() }
        let (opener, opened) = try open([scene.stalledFile, scene.localFile], lock: false)
        scene.processes.append(opener)
        try #require(opened[0].fd < opened[1].fd, "\(opened)")
        let (holder, locked) = try open([scene.localFile], lock: true)
        scene.processes.append(holder)
        try #require(locked[0].state == "locked", "\(locked)")
        try scene.stall()

        let outcome = try survey(scene, holder: holder.pid)
        let found = outcome.found
        #expect(found.count == 1, "\(found.map(\.lock))")
        let lock = try #require(found.first?.lock)
        #expect(lock.path == scene.localFile)
        #expect(lock.kind == .posix && lock.exclusive && lock.pid == holder.pid, "\(lock)")
        #expect(lock.openElsewhere, "the opener has the locked file open, on the descriptor after the stalled one")

        expectAStatToWait(scene, following: "/proc/\(opener.pid)/fd/\(opened[0].fd)")
    }

    /// The surveyed process itself holds an exclusive lock on the file on the stalled file
    /// system (a lock the kernel keeps: the server did not ask for lock requests) as well as
    /// on a local file, and another process has both files open.
    @Test func aSurveyReturnsWhenALockedFileIsOnAStalledFileSystem() throws {
        let scene = try Scene()
        defer { scene.tearDown() }
        let (opener, _) = try open([scene.stalledFile, scene.localFile], lock: false)
        scene.processes.append(opener)
        let (holder, locked) = try open([scene.stalledFile, scene.localFile], lock: true)
        scene.processes.append(holder)
        try #require(locked.map(\.state) == ["locked", "locked"], "\(locked)")
        try scene.stall()

        let outcome = try survey(scene, holder: holder.pid)
        let found = outcome.found
        #expect(found.count == 2, "\(found.map(\.lock))")
        for (path, fd) in [(scene.mountPoint + "/file", locked[0].fd), (scene.localFile, locked[1].fd)] {
            let lock = try #require(found.first { $0.lock.path == path }, "no lock on \(path): \(found.map(\.lock))")
            #expect(lock.link == "/proc/\(holder.pid)/fd/\(fd)")
            #expect(lock.lock.kind == .posix && lock.lock.exclusive && lock.lock.pid == holder.pid, "\(lock.lock)")
            #expect(lock.lock.openElsewhere, "the opener has \(path) open")
            #expect(lock.watchable == (path == scene.localFile), "\(path): only a file on a local file system may be watched for opens")
        }
        // Reached through the server's /proc root, the FUSE mount is not in the holder's own
        // mount table: its file system cannot be told, and the file is not watched.
        #expect(outcome.openWatch?.links == ["/proc/\(holder.pid)/fd/\(locked[1].fd)"], "the survey watches the local file alone")

        expectAStatToWait(scene, following: "/proc/\(holder.pid)/fd/\(locked[0].fd)")
    }

    /// A watch of a locked file for opens (inotify) checks the permission to read the file,
    /// which on a file system mounted with `default_permissions` asks its server for the file's
    /// attributes: with the server stalled, that call does not return (checked first). The
    /// holder runs in the server's mount namespace, so its mount table has the FUSE mount; the
    /// survey reads its type there (from `/proc` alone), makes no watch of the file, and
    /// `LockWatch.watch` checks the group for waiters instead: both return at once, and a
    /// daemon's loop that calls them goes on serving.
    @Test func aLockedFileOnAStalledFileSystemIsCheckedForWaitersNotWatched() throws {
        let scene = try Scene(defaultPermissions: true)
        defer { scene.tearDown() }
        let (holder, locked) = try open([scene.mountPoint + "/file"], lock: true, namespaceOf: scene.server.pid)
        scene.processes.append(holder)
        try #require(locked.map(\.state) == ["locked"], "\(locked)")
        let fdinfo = String(decoding: try SystemFileReads().read("/proc/\(holder.pid)/fdinfo/\(locked[0].fd)").get(), as: UTF8.self)
        let mountinfo = String(decoding: try SystemFileReads().read("/proc/\(holder.pid)/mountinfo").get(), as: UTF8.self)
        let mount = try #require(LocalFileSystems.mountID(fdinfo: fdinfo))
        #expect(LocalFileSystems.mountTypes(mountinfo)[mount] == "fuse", "the holder's mount table names the FUSE mount")
        try scene.stall()
        let link = "/proc/\(holder.pid)/fd/\(locked[0].fd)"
        let direct = scene.onAThread("an inotify watch of \(link)") { (try? LinuxKernel(withLoop: false))?.watchOpens([link]).isSuccess }
        #expect(direct.wait(seconds: 1) == nil, "an inotify watch of \(link) returned: the file system answers, so this test shows nothing")

        let outcome = try survey(scene, holder: holder.pid)
        #expect(outcome.found.map(\.link) == [link])
        #expect(outcome.found.map(\.watchable) == [false], "a file on a FUSE file system counted as local")
        #expect(outcome.openWatch == nil, "the survey watched the file")

        // The lock watch on a kernel with its loop, all made and used on the thread.
        let holderPID = holder.pid
        let watched = scene.onAThread("LockWatch.watch") { () -> (watched: Bool, checked: Bool)? in
            guard let kernel = try? LinuxKernel() else { return nil }
            let watch = LockWatch(kernel: kernel, logger: Logger(label: "test"), containersRoot: { "/nonexistent" })
            let p = SupervisedProcess(
                extensionID: "stalled", generation: 1, pid: holderPID, pidfd: -1, cgroup: nil, mechanism: .stop, channel: nil, queueLimit: 16)
            watch.watch(p, outcome)
            return (p.locks.openWatch != nil, watch.handover(of: p)?.checking == true)
        }
        let result = try #require(watched.wait(seconds: 10) ?? nil, "LockWatch.watch waited for the stalled file system (or its kernel could not be made)")
        #expect(!result.watched, "the file on the stalled file system is watched for opens")
        #expect(result.checked, "the group is not checked for waiters")
    }
}

struct StalledFileSystemError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The fixture, and whether it can mount a FUSE file system here.
enum FUSEStall {
    static let fixture =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().path + "/Fixtures/fuse-stall/fuse_stall.py"

    /// Nil when a FUSE file system can be mounted here (`fuse_stall.py probe`), else why not.
    static let unavailable: String? = {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        probe.arguments = [fixture, "probe"]
        let errors = Pipe()
        probe.standardError = errors
        do { try probe.run() } catch { return "/usr/bin/python3 cannot be started: \(error)" }
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        probe.waitUntilExit()
        guard probe.terminationStatus == 0 else {
            print("StalledFileSystemTests disabled: \(message)")
            return message.isEmpty ? "fuse_stall.py probe failed" : message
        }
        return nil
    }()
}
