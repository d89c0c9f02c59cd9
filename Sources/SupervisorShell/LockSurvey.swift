import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// Finds every file lock the processes of a stopped extension hold, and which locked files
/// another process has open: the facts of `HeldLock`, read from /proc through `FileReads`
/// (on a thread of its own: `LockWatch` runs a survey that reads descriptors there).
///
/// - POSIX, OFD and flock locks are found through each member's `/proc/PID/fdinfo/FD`, which
///   lists the locks held through that descriptor (OFD locks included, which /proc/locks shows
///   with pid -1); the path comes from `/proc/PID/fd/FD`. A lock seen through several members'
///   descriptors (an inherited flock or OFD lock) counts once.
/// - Only for an exclusive lock are other processes' descriptors (`/proc/*/fd`) compared with
///   the locked file (by device and inode); processes the daemon may not inspect are skipped,
///   so the result can miss an opener but never invents one.
/// - Nothing it reads asks a file system: `/proc` itself, and the identity of an open file from
///   the attributes the kernel has cached (`cachedIdentity`), so a descriptor on a FUSE or
///   network file system whose server does not answer cannot make it wait.
/// - A lock on a file below a shared container's directory names that container.
/// - Each lock says whether its file's file system checks permissions without asking a server
///   (`Found.watchable`, from the descriptor's `mnt_id` and the holder's mount table): only
///   such files are watched for opens (`survey(heldBy:procLocks:watchingOpens:)`), since the
///   watch is the one call that asks a file system.
/// - When /proc/locks shows no lock the members could hold, nothing else is read. A member
///   may hold a lock /proc/locks shows with its pid; an OFD lock (shown with pid -1); or a
///   flock another process took on a description it shares, which /proc/locks shows with the
///   pid that took it: a member's, or, once that process exited, a pid no longer alive. A
///   flock shown with the pid of a live process outside the group is that process's (and
///   whoever it shares the description with): it does not make the group's descriptors be read.
struct LockSurvey {
    let files: any FileReads
    /// The daemon's own pid (never counted as another opener).
    let ownPID: Int32
    /// The directory holding the shared containers (`<state>/containers`), as the kernel
    /// names it in `/proc/PID/fd` links (symbolic links resolved).
    var containersRoot: String?
    var proc = "/proc"
    /// The most descriptors (`/proc/PID/fdinfo/FD` files) one survey reads: about 30 µs each,
    /// so the stop of an extension with many processes and descriptors is confirmed within
    /// about half a second.
    var descriptorBudget = 16_384

    /// Whether process `pid` exists (`/proc/PID` does).
    private func isAlive(_ pid: Int32) -> Bool {
        pid > 0 && files.status("\(proc)/\(pid)", followLinks: false).isSuccess
    }

    /// A lock found, and the `/proc/PID/fd/N` link of the descriptor it is held through (which
    /// names the locked file even when it was renamed or deleted).
    struct Found: Sendable {
        var lock: HeldLock
        var link: String
        /// Whether the file is on a file system that checks permissions without asking a
        /// server (`LocalFileSystems`), so that it may be watched for opens; false when its
        /// file system cannot be told, or it has no link.
        var watchable = false
    }

    /// Whether /proc/locks (`procLocks`) shows a lock the `members` could hold: one with a
    /// member's pid, an OFD lock, or a flock whose taker is gone. Nil when telling would take
    /// more than `aliveChecks` checks of whether a flock's taker lives (a system with that many
    /// flocks of other processes).
    func mayHoldLocks(_ members: Set<Int32>, procLocks: [FileLocks.Entry], aliveChecks: Int) -> Bool? {
        var checksLeft = aliveChecks
        for entry in procLocks where !entry.waiting {
            if members.contains(entry.pid) || entry.pid == -1 { return true }
            guard entry.kind == "FLOCK" else { continue }
            guard checksLeft > 0 else { return nil }
            checksLeft -= 1
            if !isAlive(entry.pid) { return true }
        }
        return false
    }

    /// What a survey found, and the watch for opens it made of the locked files it may watch
    /// (`Found.watchable`; nil when it made none, or was not asked to).
    struct Outcome: Sendable {
        var found: [Found]
        var openWatch: OpenWatchMade?
        /// Why the watch the survey tried to make could not be made (nil when it made one, or
        /// tried none).
        var openWatchError: SystemError?
    }

    /// An inotify descriptor made for opens of `links` (`FileReads.watchOpens`), with the watch
    /// descriptor of each (nil for one that could not be watched). Its owner closes it.
    struct OpenWatchMade: Sendable {
        var fd: Int32
        var links: [String]
        var watches: [Int32?]
    }

    /// Every lock `members` hold, from /proc/locks (`procLocks`) and their descriptors.
    func locks(heldBy members: [Int32], procLocks: [FileLocks.Entry]) -> [Found] {
        survey(heldBy: members, procLocks: procLocks, watchingOpens: false).found
    }

    /// Every lock `members` hold, as `locks(heldBy:procLocks:)` finds them; with
    /// `watchingOpens`, the watchable locked files (`Found.watchable`) are watched for opens as
    /// soon as the members' descriptors are read, before other processes' descriptors are
    /// compared with the exclusively locked ones: for those, an open made after that
    /// comparison is reported by the watch, and one made before it is seen by it, so none falls
    /// between the two. (A file with only shared locks is not compared: a process that had it
    /// open before the watch and later waits for it is not noticed.) `Outcome.openWatch` is nil
    /// when no file may be watched, or no watch could be made (`Outcome.openWatchError` says
    /// why). Only files on local file systems
    /// are watched, whose permission checks do not wait for a server.
    func survey(heldBy members: [Int32], procLocks: [FileLocks.Entry], watchingOpens: Bool) -> Outcome {
        let memberSet = Set(members)
        guard mayHoldLocks(memberSet, procLocks: procLocks, aliveChecks: .max) == true else { return Outcome(found: [], openWatch: nil) }

        var found: [(lock: HeldLock, link: String, identity: FileIdentity?, mount: Int?)] = []
        var seen = Set<String>()
        // The members /proc/locks names first (their POSIX and flock locks), then the others
        // (OFD locks, flocks of a taker gone), at most `descriptorBudget` descriptors in all.
        let named = Set(procLocks.lazy.filter { !$0.waiting && memberSet.contains($0.pid) }.map(\.pid))
        var budget = descriptorBudget
        var incomplete = false
        let sorted = members.sorted()
        scan: for pid in sorted.filter(named.contains) + sorted.filter({ !named.contains($0) }) {
            for fd in files.listDirectory("\(proc)/\(pid)/fdinfo")?.sorted(by: numerically) ?? [] {
                guard budget > 0 else {
                    incomplete = true
                    break scan
                }
                budget -= 1
                guard case .success(let bytes) = files.read("\(proc)/\(pid)/fdinfo/\(fd)") else { continue }
                let fdinfo = String(decoding: bytes, as: UTF8.self)
                let entries = FileLocks.descriptorLocks(fdinfo).filter { seen.insert($0.key).inserted }
                guard !entries.isEmpty else { continue }
                let mount = LocalFileSystems.mountID(fdinfo: fdinfo)
                let link = "\(proc)/\(pid)/fd/\(fd)"
                let path = (try? files.readLink(link).get()) ?? "(unknown file \(entries[0].file))"
                let identity = try? files.cachedIdentity(link).get()
                for e in entries {
                    guard let kind = Self.kind(e.kind) else { continue }
                    let lock = HeldLock(kind: kind, exclusive: e.exclusive, path: path, pid: pid, openElsewhere: false, sharedContainer: container(of: path))
                    found.append((lock, link, identity, mount))
                }
            }
        }

        // A flock /proc/locks shows with a member's pid, held through a descriptor no member
        // has open (sent away over a unix socket, say): its file cannot be named or watched for
        // opens, and who else has it open cannot be known. It counts as open elsewhere: an
        // exclusive one blocks, and the group is checked for waiters while it stays suspended.
        // So does any POSIX or flock lock of a member whose descriptors were not all read.
        for entry in procLocks
        where !entry.waiting && (entry.kind == "FLOCK" || (incomplete && entry.kind == "POSIX")) && memberSet.contains(entry.pid)
            && seen.insert(entry.key).inserted
        {
            let path =
                incomplete
                ? "the inode \(entry.file) (the extension's descriptors were not all read: more than \(descriptorBudget))"
                : "the inode \(entry.file), through a descriptor no process of the extension has open"
            found.append(
                (HeldLock(kind: Self.kind(entry.kind) ?? .flock, exclusive: entry.exclusive, path: path, pid: entry.pid, openElsewhere: true), "", nil, nil))
        }

        // The type of each locked file's mount, from the mount table of the member holding it.
        var mountTypes: [Int32: [Int: String]] = [:]
        let watchable = found.map { f -> Bool in
            guard let mount = f.mount, !f.link.isEmpty else { return false }
            let pid = f.lock.pid
            if mountTypes[pid] == nil {
                let table = try? files.read("\(proc)/\(pid)/mountinfo").get()
                mountTypes[pid] = table.map { LocalFileSystems.mountTypes(String(decoding: $0, as: UTF8.self)) } ?? [:]
            }
            return mountTypes[pid]?[mount].map(LocalFileSystems.isLocal) ?? false
        }

        var openWatch: OpenWatchMade?
        var openWatchError: SystemError?
        // A lock already known to be open elsewhere has the group checked for waiters, not
        // watched (`LockWatch.watch`).
        if watchingOpens, !found.contains(where: \.lock.openElsewhere) {
            var links: [String] = []
            for (f, may) in zip(found, watchable) where may && !links.contains(f.link) { links.append(f.link) }
            if !links.isEmpty {
                switch files.watchOpens(links) {
                case .success(let (fd, watches)): openWatch = OpenWatchMade(fd: fd, links: links, watches: watches)
                case .failure(let error): openWatchError = error
                }
            }
        }

        let wanted = Set(found.compactMap { $0.lock.exclusive ? $0.identity : nil })
        if !wanted.isEmpty {
            let opened = openedElsewhere(wanted, skipping: memberSet.union([ownPID]))
            for i in found.indices where found[i].lock.exclusive {
                if let id = found[i].identity, opened.contains(id) { found[i].lock.openElsewhere = true }
            }
        }
        return Outcome(
            found: zip(found, watchable).map { Found(lock: $0.lock, link: $0.link, watchable: $1) },
            openWatch: openWatch, openWatchError: openWatchError)
    }

    /// Which of `locked` some process other than `skipping` has open.
    func openedElsewhere(_ locked: Set<FileIdentity>, skipping: Set<Int32>) -> Set<FileIdentity> {
        var opened = Set<FileIdentity>()
        for entry in files.listDirectory(proc) ?? [] {
            guard let pid = Int32(entry), !skipping.contains(pid) else { continue }
            for fd in files.listDirectory("\(proc)/\(pid)/fd") ?? [] {
                if case .success(let id) = files.cachedIdentity("\(proc)/\(pid)/fd/\(fd)"), locked.contains(id) {
                    opened.insert(id)
                    if opened.count == locked.count { return opened }
                }
            }
        }
        return opened
    }

    /// The shared container `path` lies in, if any: the first component below `containersRoot`.
    func container(of path: String) -> String? {
        guard let root = containersRoot, path.hasPrefix(root + "/") else { return nil }
        let name = path.dropFirst(root.count + 1).prefix { $0 != "/" }
        return name.isEmpty ? nil : String(name)
    }

    static func kind(_ name: String) -> HeldLock.Kind? {
        switch name {
        case "POSIX": .posix
        case "OFDLCK": .ofd
        case "FLOCK": .flock
        default: nil  // leases and delegations are not locks a process waits on
        }
    }

    private func numerically(_ a: String, _ b: String) -> Bool { (Int(a) ?? 0) < (Int(b) ?? 0) }
}
