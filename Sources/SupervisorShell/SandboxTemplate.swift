import ExtensionTransport
import Logging
import SupervisorKernel

/// The part of the sandboxed file system view every extension shares
/// (`Kernel.sandboxTemplateInBackground`): the system read-only, the private `/dev`, the masks.
/// Made on another thread when a sandboxed launch first asks for it, and kept while the daemon's
/// mount table does not change: a mount or an unmount on the system drops it (it holds the
/// mounts there were, and would keep an unmounted file system busy), and the next launch asks
/// for a new one. A launch that finds none ready builds its whole view, so the loop never
/// waits for one; each launch that finds one copies it and adds only what is its own. Only a
/// daemon that needs no user namespace uses one. Owned by the daemon's loop.
final class SandboxTemplate {
    private let kernel: any Kernel
    private let logger: Logger
    /// The template now, if one is made.
    private var current: SandboxTemplateRef?
    /// Whether a template is being made on another thread (one of an older generation of the
    /// mount table is let go when it arrives).
    private var building = false
    /// Counts the changes of the mount table the daemon saw.
    private var generation: UInt64 = 0
    /// The daemon's mount table, watched for changes (POLLPRI on `/proc/self/mountinfo`).
    private var mountTable: (fd: Int32, watch: any Watch)?
    /// Set for good when none can be had here (no CAP_SYS_CHROOT, no watch of the mount table,
    /// a launch that could not enter one): each launch then builds its whole view.
    private var unavailable = false
    /// Set when making one failed otherwise: tried again once the mount table changes.
    private var failedSinceMountChange = false
    /// How many templates were made (one, and one more after each change of the mount table
    /// that a launch followed).
    private var made = 0

    init(kernel: any Kernel, logger: Logger) {
        self.kernel = kernel
        self.logger = logger
    }

    /// The template made with `masks` (a plan's masks, in order), or nil when none is ready:
    /// one is then started, for the launches after this one. A change of the mount table the
    /// loop has not dispatched yet is seen here first: the template made before it is not used.
    func reference(masks: [String]) -> SandboxTemplateRef? {
        // The loop may have collected the change already (the watch is pending, and the file
        // will not report it again), or not yet (the file reports it here).
        if let mountTable, mountTable.watch.isPending || kernel.hasPriorityEvent(fd: mountTable.fd) { mountTableChanged() }
        if let current, current.masks == masks { return current }
        drop()
        guard !building, !unavailable, !failedSinceMountChange, watchMountTable() else { return nil }
        let started = generation
        if let e = kernel.sandboxTemplateInBackground(masks: masks, { [weak self] in self?.arrived($0, masks: masks, generation: started) }) {
            failed(e)
            return nil
        }
        building = true
        return nil
    }

    /// A template made on another thread arrived: kept when the mount table has not changed
    /// since it was started, let go otherwise (the next launch starts another).
    private func arrived(_ outcome: Result<Int32, SystemError>, masks: [String], generation started: UInt64) {
        building = false
        switch outcome {
        case .success(let fd):
            guard started == generation, !unavailable, current == nil else {
                kernel.close(fd)
                return
            }
            current = SandboxTemplateRef(fd: fd, masks: masks)
            made += 1
            logger.info("sandbox: the shared part of the file system view made (\(masks.count) mask(s), template \(made)); each sandboxed launch copies it")
        case .failure(let e) where e.isNotPermitted:
            disable("\(e)")
        case .failure(let e):
            guard started == generation else { return }
            failed(e)
        }
    }

    /// None could be made (`e`): tried again once the mount table changes.
    private func failed(_ e: SystemError) {
        failedSinceMountChange = true
        logger.warning("sandbox: no template of the file system view (\(e)); each sandboxed launch builds the whole view until the mount table changes")
    }

    /// Stops using templates for good (`why`: a launch could not enter one, or the daemon may
    /// not): each launch builds its whole view.
    func disable(_ why: String) {
        drop()
        guard !unavailable else { return }
        unavailable = true
        logger.warning("sandbox: no template of the file system view (\(why)); each sandboxed launch builds the whole view")
    }

    /// Lets the template go: the next launch makes a new one.
    func drop() {
        guard let current else { return }
        kernel.close(current.fd)
        self.current = nil
    }

    private func mountTableChanged() {
        generation += 1
        failedSinceMountChange = false
        drop()
    }

    private func watchMountTable() -> Bool {
        if mountTable != nil { return true }
        let fd: Int32
        switch kernel.open("/proc/self/mountinfo", directory: false) {
        case .success(let opened): fd = opened
        case .failure(let e):
            disable("the mount table cannot be watched: \(e)")
            return false
        }
        switch kernel.watch(fd: fd, events: Poll.priority, { [unowned self] _ in mountTableChanged() }) {
        case .success(let w):
            mountTable = (fd, w)
            return true
        case .failure(let e):
            kernel.close(fd)
            disable("the mount table cannot be watched: \(e)")
            return false
        }
    }
}
