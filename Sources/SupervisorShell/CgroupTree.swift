import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The cgroup v2 subtree the daemon owns, with one cgroup per running extension below
/// `extensionsPath`:
///
/// - Under systemd, the service's own cgroup (the units set `Delegate=yes`). The daemon first
///   moves itself into the leaf `supervisor/`, so that the no-internal-processes rule lets
///   controllers be enabled for `extensions/`.
/// - Standalone, `extensiond-<tag>/` below the daemon's current cgroup, where the tag is
///   derived from the control socket's path (the same socket finds the same subtree, and with
///   it what a killed predecessor left).
///
/// Found from `/proc/self/mountinfo` (the `cgroup2` mount: `/sys/fs/cgroup` on most
/// distributions, `/sys/fs/cgroup/unified` in the hybrid layout) and the `0::` line of
/// `/proc/self/cgroup`. Owned by the daemon's loop thread.
final class CgroupTree {
    let kernel: any Kernel
    /// The subtree's root directory.
    let basePath: String
    /// Where the extensions' cgroups are created (one directory per extension id).
    let extensionsPath: String
    /// The daemon's own leaf under systemd, nil standalone.
    let supervisorPath: String?
    /// Controllers enabled for the extensions' cgroups (e.g. memory, pids, cpu); may be empty.
    let controllers: [String]
    /// Where the cgroup v2 file system is mounted.
    let mountPoint: String
    /// Whether this daemon created `basePath` (standalone; false when it was there already, as
    /// a killed predecessor's or another daemon's on the same socket).
    let createdBase: Bool

    /// Why cgroups cannot be used: said once in the log, in STATUS= and by `extctl status`.
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    private init(
        kernel: any Kernel, mountPoint: String, basePath: String, extensionsPath: String, supervisorPath: String?, controllers: [String],
        createdBase: Bool = false
    ) {
        self.createdBase = createdBase
        self.kernel = kernel
        self.mountPoint = mountPoint
        self.basePath = basePath
        self.extensionsPath = extensionsPath
        self.supervisorPath = supervisorPath
        self.controllers = controllers
    }

    /// Sets up the subtree, or says why it cannot be.
    static func setUp(kernel: any Kernel, underSystemd: Bool, socketPath: String, logger: Logger) -> Result<CgroupTree, Unavailable> {
        guard kernel.canSpawnIntoCgroup else {
            return .failure(
                Unavailable(
                    description:
                        "clone3 is not permitted (ENOSYS from a seccomp filter, such as systemd's RestrictNamespaces=), so no process can start inside its cgroup"
                ))
        }
        guard case .success(let mountinfo) = kernel.read("/proc/self/mountinfo"),
            let mount = cgroup2Mount(String(decoding: mountinfo, as: UTF8.self))
        else { return .failure(Unavailable(description: "no cgroup v2 file system is mounted")) }
        guard case .success(let selfCgroup) = kernel.read("/proc/self/cgroup"),
            let own = unifiedPath(String(decoding: selfCgroup, as: UTF8.self))
        else { return .failure(Unavailable(description: "the daemon's cgroup v2 path is not in /proc/self/cgroup")) }
        let ownPath = own == "/" ? mount : mount + own
        if underSystemd && own != "/" {
            let supervisor = ownPath + "/supervisor"
            if let e = kernel.makeDirectory(supervisor), !e.isAlreadyExisting {
                return .failure(Unavailable(description: "cannot create \(supervisor) (\(e)): the service's cgroup is not delegated to it (Delegate=yes)"))
            }
            if let e = kernel.write(supervisor + "/cgroup.procs", "\(kernel.processID)") {
                return .failure(Unavailable(description: "cannot move the daemon into \(supervisor) (\(e))"))
            }
            let extensions = ownPath + "/extensions"
            if let e = kernel.makeDirectory(extensions), !e.isAlreadyExisting {
                return .failure(Unavailable(description: "cannot create \(extensions) (\(e))"))
            }
            let tree = CgroupTree(
                kernel: kernel, mountPoint: mount, basePath: ownPath, extensionsPath: extensions, supervisorPath: supervisor,
                controllers: enableControllers(kernel, from: ownPath, through: [ownPath, extensions], logger: logger))
            return .success(tree)
        }
        let base = ownPath + "/extensiond-" + tag(socketPath)
        let made = kernel.makeDirectory(base)
        if let e = made, !e.isAlreadyExisting {
            return .failure(Unavailable(description: "cannot create \(base) (\(e)): the daemon's cgroup \(own) is not writable"))
        }
        // Standalone the daemon stays where it was started, so its own cgroup keeps a process
        // and cannot pass controllers down (no internal processes): extensions get none here.
        return .success(
            CgroupTree(
                kernel: kernel, mountPoint: mount, basePath: base, extensionsPath: base, supervisorPath: nil, controllers: [],
                createdBase: made == nil))
    }

    /// The mount point of the cgroup2 file system in mountinfo text, if any.
    static func cgroup2Mount(_ mountinfo: String) -> String? {
        for line in mountinfo.split(separator: "\n") {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
            let fields = line.split(separator: " ")
            guard let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count, fields.count > 4 else { continue }
            if fields[dash + 1] == "cgroup2" { return String(fields[4]) }
        }
        return nil
    }

    /// The cgroup v2 path (the `0::` line) in /proc/PID/cgroup text, if any.
    static func unifiedPath(_ text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            return String(line.dropFirst(3))
        }
        return nil
    }

    /// A short stable name for a socket path (FNV-1a, 64 bits, in hex).
    static func tag(_ socketPath: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in socketPath.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Enables the controllers of `root` that extensions can use, at each level of `levels`.
    private static func enableControllers(_ kernel: any Kernel, from root: String, through levels: [String], logger: Logger) -> [String] {
        guard case .success(let bytes) = kernel.read(root + "/cgroup.controllers") else { return [] }
        let available = Set(String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))
        var enabled = ["cpu", "memory", "pids"].filter(available.contains)
        for level in levels where !enabled.isEmpty {
            if let e = kernel.write(level + "/cgroup.subtree_control", enabled.map { "+" + $0 }.joined(separator: " ")) {
                logger.warning("cannot enable the \(enabled.joined(separator: ", ")) controllers in \(level): \(e)")
                enabled = []
            }
        }
        return enabled
    }

    /// The directory of a cgroup given by its path in /proc/PID/cgroup.
    func mountRelative(_ path: String) -> String { path == "/" ? mountPoint : mountPoint + path }

    /// The cgroup directory of an extension.
    func path(of extensionID: String) -> String { extensionsPath + "/" + extensionID }

    /// Creates the cgroup of an extension about to be spawned, ending whatever an earlier
    /// generation left in a cgroup of the same name.
    /// With `freezer`, `cgroup.freeze` is kept open too (`ExtensionCgroup.freezeFD`).
    func create(_ extensionID: String, freezer: Bool = false, logger: Logger) -> Result<ExtensionCgroup, SystemError> {
        let path = path(of: extensionID)
        if let e = kernel.makeDirectory(path) {
            guard e.isAlreadyExisting else { return .failure(e) }
            end(path, logger: logger)
            if let e = kernel.makeDirectory(path), !e.isAlreadyExisting { return .failure(e) }
        }
        return open(path, freezer: freezer)
    }

    /// Opens the files of the extension cgroup at `path` that are kept open for its life: its
    /// directory (the spawn's target), `cgroup.events`, `cgroup.procs`, and `cgroup.freeze`
    /// with `freezer`. (A hand-over re-opens a live extension's cgroup with it.)
    func open(_ path: String, freezer: Bool) -> Result<ExtensionCgroup, SystemError> {
        let directory: Int32
        switch kernel.open(path, directory: true) {
        case .success(let fd): directory = fd
        case .failure(let e): return .failure(e)
        }
        let events: Int32
        switch kernel.open(path + "/cgroup.events", directory: false) {
        case .success(let fd): events = fd
        case .failure(let e):
            kernel.close(directory)
            return .failure(e)
        }
        var cgroup: ExtensionCgroup
        switch kernel.open(path + "/cgroup.procs", directory: false) {
        case .success(let procs): cgroup = ExtensionCgroup(path: path, directoryFD: directory, eventsFD: events, procsFD: procs)
        case .failure(let e):
            kernel.close(directory)
            kernel.close(events)
            return .failure(e)
        }
        guard freezer else { return .success(cgroup) }
        switch kernel.openForWriting(path + "/cgroup.freeze") {
        case .success(let fd):
            cgroup.freezeFD = fd
            return .success(cgroup)
        case .failure(let e):
            kernel.close(directory)
            cgroup.closeFiles(kernel)
            return .failure(e)
        }
    }

    /// Writes the limits enforced by the v2 `cgroup` into the cgroup at `path` (`memory.max`,
    /// `pids.max`, `cpu.weight`) before its first process starts; the first failure is returned.
    /// (A memory limit of a cgroup v1 memory cgroup is `MemoryCgroupV1Tree`'s.)
    static func applyLimits(_ limits: [LimitEnforcement], to path: String, kernel: any Kernel) -> SystemError? {
        for l in limits where l.by == .cgroup && !l.byMemoryCgroupV1 {
            guard let file = Spawner.cgroupFile(l.key) else { continue }
            if let e = kernel.write(path + "/" + file, "\(l.value)") {
                return e.during("set limits.\(l.key) in \(path)/\(file)")
            }
        }
        return nil
    }

    /// The `oom_kill` count of the cgroup's `memory.events` (0 when the file has none), or why
    /// it cannot be read.
    static func oomKills(_ path: String, kernel: any Kernel) -> Result<Int, SystemError> {
        kernel.read(path + "/memory.events").map { oomKillCount($0) }
    }

    /// The `oom_kill N` line's count in the text of `memory.events` or `memory.oom_control`
    /// (0 without one).
    static func oomKillCount(_ bytes: [UInt8]) -> Int {
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, parts[0] == "oom_kill" { return Int(parts[1]) ?? 0 }
        }
        return 0
    }

    /// The pids in a cgroup (`cgroup.procs`), or nil when it cannot be read.
    func processes(_ path: String) -> [Int32]? {
        guard case .success(let bytes) = kernel.read(path + "/cgroup.procs") else { return nil }
        return CgroupTree.parsePIDs(bytes)
    }

    /// The pids in an extension's cgroup, read through its open `cgroup.procs` (a read from
    /// offset 0 lists the members anew, with no path lookup), or why they cannot be read.
    func processes(of cgroup: ExtensionCgroup) -> Result<[Int32], SystemError> {
        kernel.read(fd: cgroup.procsFD).map(CgroupTree.parsePIDs)
    }

    /// The pids of a `cgroup.procs` text: one decimal number per line (a line that is not one
    /// is skipped).
    static func parsePIDs(_ bytes: [UInt8]) -> [Int32] {
        var pids: [Int32] = []
        var value: Int64 = 0
        var digits = 0
        var valid = true
        func endLine() {
            if valid && digits > 0 && value <= Int64(Int32.max) { pids.append(Int32(value)) }
            value = 0
            digits = 0
            valid = true
        }
        for b in bytes {
            if b == UInt8(ascii: "\n") {
                endLine()
            } else if b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") && digits < 10 {
                value = value * 10 + Int64(b - UInt8(ascii: "0"))
                digits += 1
            } else {
                valid = false
            }
        }
        endLine()
        return pids
    }

    /// Kills every process in a cgroup, waits (on `cgroup.events`, up to `timeout` seconds)
    /// for it to be empty, and removes it. Used for leftovers of a killed predecessor.
    func end(_ path: String, logger: Logger, timeout: Double = 5) {
        if let e = kernel.write(path + "/cgroup.kill", "1"), !e.isNoEntry {
            logger.warning("cannot kill the processes of \(path): \(e)")
        }
        if case .success(let fd) = kernel.open(path + "/cgroup.events", directory: false) {
            defer { kernel.close(fd) }
            let deadline = kernel.now().adding(seconds: timeout)
            while case .success(let bytes) = kernel.read(fd: fd), CgroupEvents.parse(bytes).populated == true {
                let left = deadline.seconds(since: kernel.now())
                if left <= 0 { break }
                if !kernel.waitFor(fd: fd, events: Poll.priority, seconds: left) { break }  // the deadline passed
            }
        }
        if let e = kernel.removeDirectory(path), !e.isNoEntry {
            logger.warning("cannot remove \(path): \(e)")
        }
    }

    /// Ends every extension cgroup found in the subtree: what a daemon killed without a
    /// shutdown left behind. Returns the paths it ended.
    @discardableResult
    func endLeftovers(logger: Logger) -> [String] {
        var ended: [String] = []
        for name in (kernel.listDirectory(extensionsPath) ?? []).sorted() where isCgroupDirectory(name) {
            let path = extensionsPath + "/" + name
            let count = processes(path)?.count ?? 0
            logger.notice(
                "ending a leftover extension cgroup \(path) (\(count) process(es)), left by a daemon that did not shut down",
                metadata: ["EXTENSION_ID": "\(name)", "MESSAGE_ID": "\(MessageIDs.leftoverReaped)"])
            end(path, logger: logger)
            ended.append(path)
        }
        return ended
    }

    private func isCgroupDirectory(_ name: String) -> Bool {
        guard !name.hasPrefix("cgroup."), name != "supervisor", name != "extensions" else { return false }
        if case .success = kernel.read(extensionsPath + "/" + name + "/cgroup.procs") { return true }
        return false
    }

    /// Removes the subtree's root when this daemon created it and a start-up failed before
    /// anything ran in it.
    func abandon(logger: Logger) {
        if createdBase { removeSubtree(logger: logger) }
    }

    /// Removes the subtree's empty directories at shutdown (standalone; under systemd the
    /// service manager removes the service's cgroup).
    func removeSubtree(logger: Logger) {
        guard supervisorPath == nil else { return }
        if let e = kernel.removeDirectory(basePath), !e.isNoEntry { logger.warning("cannot remove \(basePath): \(e)") }
    }
}

/// One extension's cgroup: its directory, the descriptor it is spawned into, its watched
/// `cgroup.events`, and its `cgroup.procs`, kept open for the member reads of every stop.
struct ExtensionCgroup {
    var path: String
    var directoryFD: Int32
    var eventsFD: Int32
    var procsFD: Int32
    /// `cgroup.freeze`, kept open for an extension suspended by the freezer (nil otherwise).
    var freezeFD: Int32? = nil

    /// Closes the descriptors kept open for the cgroup's life (`directoryFD` is closed once the
    /// process is spawned into it).
    func closeFiles(_ kernel: any Kernel) {
        kernel.close(eventsFD)
        kernel.close(procsFD)
        if let freezeFD { kernel.close(freezeFD) }
    }
}

/// The `populated` and `frozen` fields of a `cgroup.events` file.
struct CgroupEvents: Equatable {
    var populated: Bool?
    var frozen: Bool?

    static func parse(_ bytes: [UInt8]) -> CgroupEvents {
        var result = CgroupEvents()
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let parts = line.split(separator: UInt8(ascii: " "))
            guard parts.count == 2 else { continue }
            let value = parts[1] == Array("1".utf8)[...]
            switch String(decoding: parts[0], as: UTF8.self) {
            case "populated": result.populated = value
            case "frozen": result.frozen = value
            default: break
            }
        }
        return result
    }
}
