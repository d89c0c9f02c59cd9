import ExtensionTransport
import FoundationEssentials  // JSONDecoder only (libFoundation and ICU stay out of the daemon)
import Logging
import SupervisorCore
import SupervisorKernel

/// The extension processes a daemon has running, kept in a file next to the control socket
/// (`control.sock` → `control.processes.json`), so that a daemon killed without a shutdown
/// (SIGKILL, abort, watchdog) leaves its successor a list of what to clean up.
///
/// Each entry is a process group leader: pid, process group, start time (field 22 of
/// /proc/PID/stat, which tells a live process from a later one that reused its pid) and the
/// extension id. The file is replaced atomically (written to a temporary file, then renamed)
/// at the end of a dispatch in which an extension was spawned, never on the suspend/resume
/// path. Exits are written within `removalDelaySeconds` of the first of them, all at once: a
/// mass exit writes the list a few times rather than once per exit. The entry of a leader that
/// exited stays in the file no longer than that, because a successor ends the members of a
/// gone leader's group by its id, which a later session could reuse. It is not fsynced: it
/// lives in a runtime directory (tmpfs) and only has to survive the daemon, not the machine.
///
/// At startup, `reapLeftovers` ends the groups of the previous instance; see
/// docs/operations.md for why they are terminated rather than re-adopted.
/// Owned by the daemon's loop thread.
final class ProcessRegistry {
    /// One extension process group leader.
    struct Entry: Equatable {
        var extensionID: String
        var pid: Int32
        var processGroup: Int32
        /// Start time after boot, in clock ticks (/proc/PID/stat field 22).
        var startTicks: UInt64
    }

    /// What `reapLeftovers` did about one process.
    struct Reaped: Equatable {
        var extensionID: String
        var pid: Int32
        /// The group's leader was gone; this was a member left in its group.
        var orphanedMember: Bool
    }

    let path: String
    let logger: Logger
    let table: ProcessTable
    private(set) var entries: [Int32: Entry] = [:]
    /// A leader was added since the last write.
    private var dirty = false
    /// A leader was removed since the last write.
    private var stale = false
    /// The timer that writes the removals, while one is pending.
    private var removalWrite: (any Cancellable)?
    /// The last write failed (logged once, until a write succeeds again).
    private var failing = false

    init(path: String, logger: Logger, table: ProcessTable) {
        self.path = path
        self.logger = logger
        self.table = table
    }

    /// The registry file of a control socket: in the socket's directory, named after it.
    static func path(forSocket socketPath: String) -> String {
        let base = socketPath.hasSuffix(".sock") ? String(socketPath.dropLast(5)) : socketPath
        return base + ".processes.json"
    }

    /// Records a group leader: freshly spawned (its start time is read from /proc now), or
    /// handed over with the start time the replaced daemon had recorded.
    func add(extensionID: String, pid: Int32, processGroup: Int32, startTicks known: UInt64? = nil) {
        guard let start = known ?? table.stat(pid)?.startTicks else { return }
        entries[pid] = Entry(extensionID: extensionID, pid: pid, processGroup: processGroup, startTicks: start)
        dirty = true
    }

    /// The recorded start time of the leader `pid`, if it is recorded.
    func startTicks(of pid: Int32) -> UInt64? { entries[pid]?.startTicks }

    /// How soon after an exit the file loses its entry (with every exit until then).
    static let removalDelaySeconds = 0.1

    /// Forgets a leader whose exit has been handled (its group has been killed); the file
    /// loses its entry within `removalDelaySeconds`, or at the end of the dispatch when no
    /// timer can be armed.
    func remove(pid: Int32) {
        guard entries.removeValue(forKey: pid) != nil else { return }
        stale = true
        guard removalWrite == nil else { return }
        let kernel = table.kernel
        switch kernel.addTimer(
            at: kernel.now().adding(seconds: Self.removalDelaySeconds),
            { [unowned self] in
                removalWrite = nil
                flush(includingRemovals: true)
            })
        {
        case .success(let timer): removalWrite = timer
        case .failure: dirty = true
        }
    }

    /// Writes the file if a leader was added since the last write (or, with
    /// `includingRemovals`, if anything changed). Returns false (and keeps the changes
    /// pending) when it cannot be written; the first failure is logged.
    @discardableResult
    func flush(includingRemovals: Bool = false) -> Bool {
        guard dirty || (includingRemovals && stale) else { return true }
        removalWrite?.cancel()
        removalWrite = nil
        let error = write()
        if let error, !failing {
            logger.warning("cannot write the process registry \(path): \(error); a crash would leave extension processes behind")
        }
        failing = error != nil
        return error == nil
    }

    /// Replaces the file; returns what failed, if anything. The file is
    /// `{"daemonPID":P,"processes":[{"id":…,"pid":…,"processGroup":…,"startTicks":…},…],"version":1}`
    /// and a newline, entries sorted by pid, written member by member with `JSONWriter` (it is
    /// rewritten after every spawn and burst of exits, so it avoids Foundation's serializer).
    private func write() -> SystemError? {
        var json = JSONWriter(capacity: 64 + 96 * entries.count)
        json.beginObject()
        json.member("daemonPID"); json.integer(table.kernel.processID)
        json.member("processes"); json.beginArray()
        for e in entries.values.sorted(by: { $0.pid < $1.pid }) {
            json.element()
            json.beginObject()
            json.member("id"); json.string(e.extensionID)
            json.member("pid"); json.integer(e.pid)
            json.member("processGroup"); json.integer(e.processGroup)
            json.member("startTicks"); json.integer(e.startTicks)
            json.endObject()
        }
        json.endArray()
        json.member("version"); json.integer(1)
        json.endObject()
        json.newline()
        if let error = table.kernel.replaceFile(path, with: json.bytes, mode: 0o600, durable: false) { return error }
        dirty = false
        stale = false
        return nil
    }

    /// Removes the file (after a clean shutdown, when no extension process is left).
    func removeFile() {
        if let e = table.kernel.removeFile(path), !e.isNoEntry { logger.warning("cannot remove the process registry \(path): \(e)") }
        entries.removeAll()
        dirty = false
        stale = false
        removalWrite?.cancel()
        removalWrite = nil
    }

    /// The entries of a registry file; empty when it is absent or unreadable. A file that is
    /// not a regular file owned by the daemon's uid, or that others may write, is ignored (and
    /// `logger` told): it could make the daemon kill processes it never started.
    static func read(_ path: String, kernel: any Kernel, logger: Logger? = nil) -> [Entry] {
        guard case .success(let st) = kernel.status(path, followLinks: false) else { return [] }
        guard st.kind == .regular, st.owner == kernel.userID, st.permissions & 0o022 == 0 else {
            logger?.warning("ignoring the process registry \(path): not a regular file owned by uid \(kernel.userID) and writable only by it")
            return []
        }
        let bytes: [UInt8]
        switch kernel.read(path) {
        case .success(let b): bytes = b
        case .failure(let e):
            logger?.warning("ignoring the process registry \(path): it cannot be read: \(e)")
            return []
        }
        guard let file = try? JSONDecoder().decode(File.self, from: Data(bytes)) else {
            logger?.warning("ignoring the process registry \(path): it is not the registry's JSON (corrupt or truncated); processes it listed are not ended")
            return []
        }
        return file.processes.compactMap(\.entry)
    }

    /// The part of the file `read` uses: `processes`. An entry that is not an object with `id`
    /// (a string), `pid`, `processGroup` and `startTicks` (integers), pid and group above 1 and
    /// start time not negative, is skipped on its own; the rest of the file still counts.
    private struct File: Decodable {
        var processes: [Lenient]

        struct Lenient: Decodable {
            var entry: Entry?

            enum Key: String, CodingKey { case id, pid, processGroup, startTicks }

            init(from decoder: any Decoder) throws {
                guard let o = try? decoder.container(keyedBy: Key.self),
                    let id = try? o.decode(String.self, forKey: .id), let pid = try? o.decode(Int.self, forKey: .pid),
                    let group = try? o.decode(Int.self, forKey: .processGroup),
                    let start = try? o.decode(Int.self, forKey: .startTicks),
                    pid > 1, group > 1, start >= 0
                else { return }
                entry = Entry(
                    extensionID: id, pid: Int32(truncatingIfNeeded: pid), processGroup: Int32(truncatingIfNeeded: group),
                    startTicks: UInt64(start))
            }
        }
    }

    /// Ends what a previous daemon instance left running, as recorded in `path`, and
    /// truncates the file. For each entry:
    ///
    /// * the leader is alive with the recorded start time: its group gets SIGKILL, then
    ///   SIGCONT (SIGKILL ends stopped processes too; SIGCONT is sent for symmetry with every
    ///   other kill of a group that may be stopped);
    /// * the pid is alive with another start time: it was reused and nothing is touched;
    /// * the leader is gone: members still in its group and its session, started after it,
    ///   are killed one by one through a pidfd, after their start time is checked again (a
    ///   group id cannot be reused while any member of the group lives).
    @discardableResult
    static func reapLeftovers(at path: String, table: ProcessTable, logger: Logger) -> [Reaped] {
        let leftovers = read(path, kernel: table.kernel, logger: logger)
        var reaped: [Reaped] = []
        for e in leftovers {
            if let leader = table.stat(e.pid), !leader.isGone {
                guard leader.startTicks == e.startTicks, leader.processGroup == e.processGroup else { continue }
                for signal in [SignalNumber.kill, SignalNumber.cont] {
                    if let error = table.kernel.kill(-e.processGroup, signal), !error.isNoProcess {
                        logger.warning("cannot signal the leftover process group \(e.processGroup) of \(e.extensionID): \(error)")
                    }
                }
                reaped.append(Reaped(extensionID: e.extensionID, pid: e.pid, orphanedMember: false))
                continue
            }
            for m in table.groupMembers(e.processGroup)
            where m.session == e.processGroup && m.startTicks >= e.startTicks && killExactly(m, table) {
                reaped.append(Reaped(extensionID: e.extensionID, pid: m.pid, orphanedMember: true))
            }
        }
        for r in reaped {
            logger.notice(
                "reaped leftover pid \(r.pid) of \(r.extensionID) from a previous run\(r.orphanedMember ? " (left in the group of its exited leader)" : "")",
                metadata: ["EXTENSION_ID": "\(r.extensionID)", "EXTENSION_PID": "\(r.pid)", "MESSAGE_ID": "\(MessageIDs.leftoverReaped)"])
        }
        if !leftovers.isEmpty || table.kernel.status(path, followLinks: false).isSuccess {
            // Truncate: the new instance writes its own entries from now on.
            let registry = ProcessRegistry(path: path, logger: logger, table: table)
            registry.dirty = true
            registry.flush()
        }
        return reaped
    }

    /// SIGKILL to exactly the process `stat` describes: through a pidfd opened first and
    /// checked against the start time afterwards, so a reused pid is never signalled.
    private static func killExactly(_ stat: ProcessStat, _ table: ProcessTable) -> Bool {
        guard case .success(let pidfd) = table.kernel.openPidfd(stat.pid) else { return false }
        defer { table.kernel.close(pidfd) }
        guard let now = table.stat(stat.pid), now.startTicks == stat.startTicks else { return false }
        return table.kernel.signal(pidfd: pidfd, SignalNumber.kill) == nil
    }
}
