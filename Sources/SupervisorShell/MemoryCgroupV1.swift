import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// One cgroup v1 memory cgroup per extension, for hosts whose memory controller is bound to a
/// cgroup v1 hierarchy (the hybrid layout, where the v2 tree has no controllers; or v1 alone):
/// `memoryMaxBytes` is enforced there as `memory.limit_in_bytes`, as systemd enforces its
/// units' memory limits on such hosts. Used only where the extensions' v2 cgroups have no
/// memory controller.
///
/// Layout, below the daemon's own memory cgroup (the `memory` line of `/proc/self/cgroup`,
/// under the mount of the v1 hierarchy that has the `memory` option in `/proc/self/mountinfo`):
/// `extensions/<id>` under systemd, `extensiond-<tag>/<id>` standalone (the tag of
/// `CgroupTree.tag`, so a daemon on the same socket finds what a killed predecessor left).
///
/// The extension's first process joins its memory cgroup itself, as the first step after the
/// clone and before it runs anything of the extension (`shim_join_cgroup_v1`): everything it
/// executes and every process it starts is charged there. Owned by the daemon's loop thread.
final class MemoryCgroupV1Tree {
    let kernel: any Kernel
    /// Where the v1 memory hierarchy is mounted (`/sys/fs/cgroup/memory`).
    let mountPoint: String
    /// The directory holding one memory cgroup per extension.
    let basePath: String
    /// Whether `basePath` is removed at shutdown (standalone only).
    let standalone: Bool
    /// Whether this daemon created `basePath` (false when it was there already).
    let createdBase: Bool

    private init(kernel: any Kernel, mountPoint: String, basePath: String, standalone: Bool, createdBase: Bool) {
        self.createdBase = createdBase
        self.kernel = kernel
        self.mountPoint = mountPoint
        self.basePath = basePath
        self.standalone = standalone
    }

    /// Finds the v1 memory hierarchy and creates the directory of the extensions' memory
    /// cgroups, or says why that cannot be done.
    static func setUp(kernel: any Kernel, underSystemd: Bool, socketPath: String) -> Result<MemoryCgroupV1Tree, CgroupTree.Unavailable> {
        guard case .success(let mountinfo) = kernel.read("/proc/self/mountinfo"),
            let mount = memoryMount(String(decoding: mountinfo, as: UTF8.self))
        else { return .failure(CgroupTree.Unavailable(description: "no cgroup v1 hierarchy has the memory controller")) }
        guard case .success(let selfCgroup) = kernel.read("/proc/self/cgroup"),
            let own = memoryPath(String(decoding: selfCgroup, as: UTF8.self))
        else { return .failure(CgroupTree.Unavailable(description: "the daemon's memory cgroup is not in /proc/self/cgroup")) }
        let ownPath = own == "/" ? mount : mount + own
        let standalone = !(underSystemd && own != "/")
        let base = standalone ? ownPath + "/extensiond-" + CgroupTree.tag(socketPath) : ownPath + "/extensions"
        let made = kernel.makeDirectory(base)
        if let e = made, !e.isAlreadyExisting {
            return .failure(CgroupTree.Unavailable(description: "cannot create \(base) (\(e))"))
        }
        return .success(MemoryCgroupV1Tree(kernel: kernel, mountPoint: mount, basePath: base, standalone: standalone, createdBase: made == nil))
    }

    /// The mount point of the cgroup v1 hierarchy with the memory controller, in mountinfo text.
    static func memoryMount(_ mountinfo: String) -> String? {
        for line in mountinfo.split(separator: "\n") {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
            let fields = line.split(separator: " ")
            guard let dash = fields.firstIndex(of: "-"), dash + 3 < fields.count, fields.count > 4 else { continue }
            if fields[dash + 1] == "cgroup", fields[dash + 3].split(separator: ",").contains("memory") { return String(fields[4]) }
        }
        return nil
    }

    /// The path of the memory cgroup (the `N:memory:` line, or one whose controller list
    /// includes memory) in /proc/PID/cgroup text.
    static func memoryPath(_ text: String) -> String? {
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            if parts.count == 3, parts[1].split(separator: ",").contains("memory") { return String(parts[2]) }
        }
        return nil
    }

    /// The memory cgroup directory of an extension.
    func path(of extensionID: String) -> String { basePath + "/" + extensionID }

    /// Creates the memory cgroup of an extension about to be spawned (or takes over the one an
    /// earlier generation left), sets `memory.limit_in_bytes` to `limit`, notes its `oom_kill`
    /// count and opens its `cgroup.procs` for the child to join.
    func create(_ extensionID: String, limit: UInt64) -> Result<MemoryCgroupV1, SystemError> {
        let path = path(of: extensionID)
        let made = kernel.makeDirectory(path)
        if let e = made, !e.isAlreadyExisting {
            return .failure(e.during("create the memory cgroup \(path)"))
        }
        if let e = kernel.write(path + "/" + LimitEnforcement.memoryV1Control, "\(limit)") {
            return .failure(withoutDirectory(path, e.during("set limits.memoryMaxBytes in \(path)/\(LimitEnforcement.memoryV1Control)")))
        }
        // A cgroup just created has killed nothing (its count is not read); one taken over
        // from an earlier launch may have. A count that cannot be read counts as 0.
        let before = made == nil ? 0 : (try? MemoryCgroupV1Tree.oomKills(path, kernel: kernel).get()) ?? 0
        switch kernel.openForWriting(path + "/cgroup.procs") {
        case .success(let fd): return .success(MemoryCgroupV1(path: path, procsFD: fd, oomKillsAtStart: before))
        case .failure(let e):
            return .failure(withoutDirectory(path, e.during("open \(path)/cgroup.procs")))
        }
    }

    /// Removes the memory cgroup just created after `error`; the error, with the removal's
    /// own failure added when the directory stays behind.
    private func withoutDirectory(_ path: String, _ error: SystemError) -> SystemError {
        guard let e = kernel.removeDirectory(path), !e.isNoEntry else { return error }
        return error.during(error.operation + " (and \(path) could not be removed: \(e))")
    }

    /// The `oom_kill` count of a v1 memory cgroup's `memory.oom_control`, or why it cannot be read.
    static func oomKills(_ path: String, kernel: any Kernel) -> Result<Int, SystemError> {
        kernel.read(path + "/memory.oom_control").map { CgroupTree.oomKillCount($0) }
    }

    /// Whether the kernel's OOM killer ended a process of the cgroup since it was set up, or
    /// why that cannot be read.
    func limitReached(_ cgroup: MemoryCgroupV1) -> Result<Bool, SystemError> {
        MemoryCgroupV1Tree.oomKills(cgroup.path, kernel: kernel).map { $0 > cgroup.oomKillsAtStart }
    }

    /// Removes an extension's memory cgroup once its processes are gone (a v1 cgroup with a
    /// process left in it cannot be removed: it is taken over by the next launch instead).
    func remove(_ cgroup: MemoryCgroupV1, logger: Logger) {
        if let e = kernel.removeDirectory(cgroup.path), !e.isNoEntry {
            logger.warning("cannot remove the memory cgroup \(cgroup.path): \(e)")
        }
    }

    /// Removes the memory cgroups a daemon that did not shut down left (their processes were
    /// ended with their v2 cgroups or process groups; any still in one is killed, and its
    /// directory is taken over by the extension's next launch). Returns the paths removed.
    @discardableResult
    func removeLeftovers(logger: Logger) -> [String] {
        var removed: [String] = []
        for name in (kernel.listDirectory(basePath) ?? []).sorted() {
            let path = basePath + "/" + name
            guard case .success(let procs) = kernel.read(path + "/cgroup.procs") else { continue }
            if kernel.removeDirectory(path) == nil {
                removed.append(path)
                continue
            }
            for pid in CgroupTree.parsePIDs(procs) {
                logger.notice("killing pid \(pid), left in the memory cgroup \(path)", metadata: ["EXTENSION_ID": "\(name)"])
                if let e = kernel.kill(pid, SignalNumber.kill), !e.isNoProcess { logger.warning("cannot kill pid \(pid) in \(path): \(e)") }
            }
        }
        return removed
    }

    /// Removes the directory of the extensions' memory cgroups when this daemon created it
    /// (standalone) and a start-up failed before anything ran in it.
    func abandon(logger: Logger) {
        if createdBase { removeSubtree(logger: logger) }
    }

    /// Removes the directory of the extensions' memory cgroups at shutdown (standalone).
    func removeSubtree(logger: Logger) {
        guard standalone else { return }
        if let e = kernel.removeDirectory(basePath), !e.isNoEntry { logger.warning("cannot remove \(basePath): \(e)") }
    }
}

/// One extension's cgroup v1 memory cgroup.
struct MemoryCgroupV1: Equatable {
    var path: String
    /// Its `cgroup.procs`, open for writing until the spawn (the child joins through it).
    var procsFD: Int32
    /// `oom_kill` of its `memory.oom_control` when it was set up (non-zero in a taken-over one).
    var oomKillsAtStart: Int
}
