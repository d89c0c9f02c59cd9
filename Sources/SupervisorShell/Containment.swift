import Logging
import SupervisorCore
import SupervisorKernel

/// How this daemon holds each extension's processes together and limits them: a cgroup v2
/// per extension (or, where none can be had, process groups, with the reason), and a cgroup v1
/// memory cgroup per extension where the v2 cgroups have no memory controller. Decided once
/// at start-up; what a killed predecessor left in the subtrees is ended then.
struct Containment {
    /// The cgroup v2 subtree with one cgroup per extension; nil on the process-group fallback.
    let cgroups: CgroupTree?
    /// Why there is no cgroup per extension (nil when there is one).
    let problem: String?
    /// One cgroup v1 memory cgroup per extension, where the v2 cgroups have no memory
    /// controller and the v1 memory hierarchy can be used; nil otherwise (RLIMIT_DATA then).
    let memoryCgroupsV1: MemoryCgroupV1Tree?

    /// Sets up containment for the daemon listening on `socketPath`, as `choice` asks; throws
    /// only when `choice` is `.cgroup` and no cgroup can be had.
    init(_ choice: DaemonOptions.ContainmentChoice, socketPath: String, kernel: any Kernel, logger: Logger) throws {
        switch choice == .processGroup
            ? .failure(CgroupTree.Unavailable(description: "process-group containment was asked for (--containment process-group)"))
            : CgroupTree.setUp(kernel: kernel, underSystemd: kernel.underServiceManager, socketPath: socketPath, logger: logger)
        {
        case .success(let tree):
            cgroups = tree
            problem = nil
        case .failure(let why):
            if choice == .cgroup { throw DaemonError("no cgroup per extension (--containment cgroup): \(why)") }
            cgroups = nil
            problem = why.description
        }
        if cgroups?.controllers.contains("memory") == true {
            memoryCgroupsV1 = nil
        } else {
            switch MemoryCgroupV1Tree.setUp(kernel: kernel, underSystemd: kernel.underServiceManager, socketPath: socketPath) {
            case .success(let tree):
                memoryCgroupsV1 = tree
                logger.info("memory limits: one cgroup v1 memory cgroup per extension under \(tree.basePath) (memory.limit_in_bytes)")
            case .failure(let why):
                memoryCgroupsV1 = nil
                logger.info("memory limits: RLIMIT_DATA of each process, because \(why)")
            }
        }
    }

    /// Undoes what this start created (the subtrees' roots, standalone) when the daemon does
    /// not start after all; what was there before, as another daemon's, stays.
    func abandon(logger: Logger) {
        cgroups?.abandon(logger: logger)
        memoryCgroupsV1?.abandon(logger: logger)
    }

    /// What `make` returns; when it throws, what this start created is undone (`abandon`)
    /// before the error goes on: a step of the start-up after containment that failed.
    func abandoningOnFailure<T>(logger: Logger, _ make: () throws -> T) throws -> T {
        do {
            return try make()
        } catch {
            abandon(logger: logger)
            throw error
        }
    }

    /// `cgroup` or `process-group`, as `status` says.
    var mode: String { cgroups == nil ? "process-group" : "cgroup" }

    /// Ends what a killed predecessor left in the subtrees, and says how extensions are contained.
    func endLeftovers(logger: Logger) {
        if let tree = cgroups {
            tree.endLeftovers(logger: logger)
            logger.info(
                "containment: one cgroup per extension under \(tree.extensionsPath)\(tree.controllers.isEmpty ? " (no controllers)" : " (controllers: \(tree.controllers.joined(separator: ", ")))")"
            )
        } else {
            logger.warning(
                "containment: process groups only, because \(problem ?? "?"); a process of an extension that leaves its process group (setsid) escapes suspension and termination"
            )
        }
        memoryCgroupsV1?.removeLeftovers(logger: logger)
    }

    /// How each limit of `manifest` is enforced here (`enforcedBy` of `status --json`).
    func enforcement(_ manifest: Manifest) -> [LimitEnforcement] {
        manifest.policy.limits.enforcement(
            controllers: Set(cgroups?.controllers ?? []), memoryCgroupV1: memoryCgroupsV1 != nil, ownUID: manifest.credentials?.ownUID ?? false)
    }

    /// A limit that nothing here can enforce is a warning at load, never dropped silently.
    func warnUnenforcedLimits(_ manifests: [Manifest], logger: Logger) {
        for m in manifests {
            for e in enforcement(m) {
                if let why = e.unenforcedReason { logger.warning("\(m.source): \(m.id): \(why)", metadata: ["EXTENSION_ID": "\(m.id)"]) }
            }
        }
    }
}
