import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The size limit of extensions' containers (`limits.diskMaxBytes`, docs/policies.md,
/// "Resource limits"): a measured limit. While an extension with one runs, its container is
/// measured every `diskCheckSeconds` on a thread of its own (`Kernel.measureTreeInBackground`:
/// bounded memory whatever the tree, with the daemon's own ids, whose CAP_DAC_READ_SEARCH
/// reads what the extension made unreadable to itself), and once more when it is suspended;
/// never while it is suspended, so an idle extension costs no wake-up. One walk per container
/// runs at a time, across the extension's relaunches, and its result counts for the process
/// running when it ends. A measurement over the
/// limit posts `diskLimitExceeded`, and the core ends the extension (`disk-limit`); so do
/// `failureLimit` failed measurements in a row (a tree reshaped under the walk on purpose must
/// not escape its limit). Where the container's file system enforces project quotas (ext4
/// mounted `prjquota`, XFS `pquota`), the container is also put under one at its launch
/// (`Kernel.limitTreeInBackground`, the extension's own uid as the project id), so that the
/// file system refuses a write past the limit; the measurement goes on beside it. Owned by
/// the daemon's loop thread.
final class ContainerQuota {
    /// One watched extension process.
    private final class Watched {
        let generation: UInt64
        let path: String
        let limit: UInt64
        var timer: (any Cancellable)?
        /// Failed measurements since the last one that succeeded.
        var failures = 0
        init(generation: UInt64, path: String, limit: UInt64) {
            self.generation = generation
            self.path = path
            self.limit = limit
        }
    }

    let kernel: any Kernel
    let logger: Logger
    let interval: Double
    weak var sink: (any EventSink)?
    /// Failed measurements in a row after which the container counts as over its limit.
    static let failureLimit = 3
    private var watched: [String: Watched] = [:]
    /// The containers being walked, each with the tree's `replacements` count when its walk
    /// began: one walk per container at a time, whatever the process that asked (a walk
    /// outlives the process it was started for: one of a crash-looping extension, relaunched
    /// many times during one walk, does not start a walk each time).
    private var walking: [String: Int] = [:]
    /// How many times each container was replaced by an empty one (`extctl reset`): a walk
    /// goes on in the tree it opened, set aside, and its result is not the new container's.
    private var replacements: [String: Int] = [:]
    /// The project quota each container should have: its limit (0: none) and its owner.
    private var wanted: [String: (limit: UInt64, owner: FileOwner, id: String)] = [:]
    /// The containers under a project quota, with the limit set (0: none), until replaced.
    private var limited: [String: UInt64] = [:]
    /// The limit whose setting failed on each container: not tried again until the limit
    /// changes or the container is replaced (a failure would otherwise walk the tree and warn
    /// at every launch).
    private var failedAt: [String: UInt64] = [:]
    /// The containers being put under one, each with the tree's `replacements` count when it
    /// began (a walk of a tree set aside by a reset does not hold up the new container's).
    private var limiting: [String: Int] = [:]
    /// The file systems (devices) that enforce no project quota, found at a first try, with
    /// why: not tried again.
    private var withoutProjectQuotas: [UInt64: SystemError] = [:]
    /// Those of them said in the log (once each, when a container there first has a limit).
    private var saidWithout: Set<UInt64> = []

    init(kernel: any Kernel, logger: Logger, interval: Double) {
        self.kernel = kernel
        self.logger = logger
        self.interval = interval
    }

    /// Generation `generation` of `id` has its container at `path`: measured every `interval`
    /// from now while `running` (false: suspended, as a process taken over at a re-exec may
    /// be), if it has a limit.
    /// `owner` owns its container, whose project id is the owner's uid where its file system
    /// enforces project quotas (`owner(of:)`), nil for none. The project gets `limit` when the
    /// extension runs `filtered` (under the sandbox's system-call filter, which keeps it from
    /// taking its files out of the project); without a limit, or without the filter, the
    /// project's limit is lifted (0), as an earlier launch may have set one.
    func started(
        _ id: String, generation: UInt64, path: String, limit: UInt64?, owner: FileOwner? = nil, filtered: Bool = true, running: Bool = true
    ) {
        ended(id)
        if let owner { want(id, path: path, owner: owner, limit: filtered ? limit ?? 0 : 0) }
        guard let limit else { return }
        let w = Watched(generation: generation, path: path, limit: limit)
        watched[id] = w
        if running { arm(id, w) }
    }

    /// The owner of the container of an extension with `credentials`, whose uid is its project
    /// id: only its own uid (not a uid another extension may share, nor root's: project 0 is
    /// none).
    static func owner(of credentials: Credentials?) -> FileOwner? {
        guard let c = credentials, c.ownUID, c.uid != 0 else { return nil }
        return FileOwner(uid: c.uid, gid: c.gid)
    }

    /// It was suspended: measured once more, then not until it resumes.
    func suspended(_ id: String) {
        guard let w = watched[id] else { return }
        w.timer = nil
        measure(id, w)
    }

    /// It resumed: measured every `interval` again.
    func resumed(_ id: String) {
        guard let w = watched[id] else { return }
        arm(id, w)
    }

    /// Its process is gone.
    func ended(_ id: String) {
        watched.removeValue(forKey: id)?.timer = nil
    }

    /// The container at `path` was replaced by an empty one (`extctl reset`): a walk of the old
    /// tree counts for nothing, and the new one may be walked at once.
    func containerReplaced(_ path: String) {
        replacements[path, default: 0] += 1
        limited[path] = nil
        failedAt[path] = nil
    }

    /// The container at `path`, which `owner` owns, should be under the project quota of the
    /// owner's uid limited to `limit` (0: none).
    private func want(_ id: String, path: String, owner: FileOwner, limit: UInt64) {
        wanted[path] = (limit, owner, id)
        putUnderProjectQuota(path)
    }

    /// Puts the container at `path` under the project quota it should have, unless it is under
    /// it, or is being put under one for this tree, or that failed, or its file system has
    /// none. When a walk ends, what is wanted then is set in turn (a limit changed or lifted
    /// meanwhile).
    private func putUnderProjectQuota(_ path: String) {
        let tree = replacements[path, default: 0]
        guard let (limit, owner, id) = wanted[path], limited[path] != limit, failedAt[path] != limit, limiting[path] != tree,
            case .success(let st) = kernel.status(path, followLinks: false)
        else { return }
        let device = st.identity.device
        if withoutProjectQuotas[device] != nil {
            sayWithout(device, path: path, limit: limit)
            return
        }
        limiting[path] = tree
        let started = kernel.limitTreeInBackground(path, owner: owner, limit: limit) { [weak self] result in
            guard let self else { return }
            if limiting[path] == tree { limiting[path] = nil }
            // A container replaced meanwhile is put under its quota at its next launch.
            guard replacements[path, default: 0] == tree else { return }
            switch result {
            case .success(.limited):
                limited[path] = limit
                if limit > 0 {
                    logger.info(
                        "\(id): its container is limited to \(limit) bytes by the file system (project quota \(owner.uid)); it is measured as well",
                        metadata: ["EXTENSION_ID": "\(id)"])
                }
            case .success(.unavailable(let why)):
                withoutProjectQuotas[device] = why
                sayWithout(device, path: path, limit: limit)
            case .failure(let e):
                failedAt[path] = limit
                if limit > 0 {
                    logger.warning(
                        "\(id): its container could not be put under a project quota: \(e); it is measured only", metadata: ["EXTENSION_ID": "\(id)"])
                }
            }
            putUnderProjectQuota(path)
        }
        if let started {
            if limiting[path] == tree { limiting[path] = nil }
            failedAt[path] = limit
            if limit > 0 {
                logger.warning(
                    "\(id): its container could not be put under a project quota: \(started); it is measured only", metadata: ["EXTENSION_ID": "\(id)"])
            }
        }
    }

    /// Says once that the file system `device` (of `path`) enforces no project quota, when a
    /// container there has a limit.
    private func sayWithout(_ device: UInt64, path: String, limit: UInt64) {
        guard limit > 0, let why = withoutProjectQuotas[device], saidWithout.insert(device).inserted else { return }
        logger.notice("container size limits on the file system of \(path) are measured only: it enforces no project quota (\(why))")
    }

    private func arm(_ id: String, _ w: Watched) {
        switch kernel.addTimer(
            at: kernel.now().adding(seconds: interval), priority: 0,
            { [weak self, weak w] in
                guard let self, let w, watched[id] === w else { return }
                measure(id, w)
                arm(id, w)
            })
        {
        case .success(let timer): w.timer = timer
        case .failure(let e): logger.error("cannot arm the container check of \(id): \(e); its limits.diskMaxBytes is checked at its suspensions only")
        }
    }

    private func measure(_ id: String, _ w: Watched) {
        let path = w.path
        let tree = replacements[path, default: 0]
        guard walking[path] != tree else { return }  // one walk at a time; the next check comes
        walking[path] = tree
        let started = kernel.measureTreeInBackground(path, owner: nil, limit: w.limit) { [weak self] result in
            guard let self else { return }
            walkEnded(path, tree)
            // The size of the container now, whichever of its processes the walk began under,
            // unless the container was replaced meanwhile.
            guard replacements[path, default: 0] == tree, let w = watched[id], w.path == path else { return }
            switch result {
            case .success(let bytes) where bytes > w.limit:
                w.failures = 0
                logger.warning(
                    "\(id): its container holds more than \(bytes) bytes, over its limits.diskMaxBytes (\(w.limit))",
                    metadata: ["EXTENSION_ID": "\(id)"])
                sink?.post(.diskLimitExceeded(extensionID: id, generation: w.generation, bytes: bytes))
            case .success: w.failures = 0
            case .failure(let e): failed(id, w, e)
            }
        }
        if let started {
            walkEnded(path, tree)
            failed(id, w, started)
        }
    }

    /// The walk of `path` begun at its `tree`th replacement ended (or never began).
    private func walkEnded(_ path: String, _ tree: Int) {
        if walking[path] == tree { walking[path] = nil }
    }

    private func failed(_ id: String, _ w: Watched, _ e: SystemError) {
        w.failures += 1
        logger.warning(
            "\(id): its container cannot be measured (\(w.failures) time(s) in a row): \(e)", metadata: ["EXTENSION_ID": "\(id)"])
        guard w.failures >= ContainerQuota.failureLimit else { return }
        logger.warning(
            "\(id): its container could not be measured \(w.failures) times in a row: it counts as over its limits.diskMaxBytes",
            metadata: ["EXTENSION_ID": "\(id)"])
        sink?.post(.diskLimitExceeded(extensionID: id, generation: w.generation, bytes: w.limit + 1))
    }
}
