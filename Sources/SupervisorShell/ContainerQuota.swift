import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The size limit of extensions' containers (`limits.diskMaxBytes`, docs/policies.md,
/// "Resource limits"): a measured limit. While an extension with one runs, its container is
/// measured every `diskCheckSeconds` on a thread of its own (`Kernel.measureTreeInBackground`:
/// bounded memory whatever the tree, with the extension's uid), and once more when it is
/// suspended; never while it is suspended, so an idle extension costs no wake-up. A
/// measurement over the limit posts `diskLimitExceeded`, and the core ends the extension
/// (`disk-limit`). Owned by the daemon's loop thread.
final class ContainerQuota {
    /// One watched extension process.
    private final class Watched {
        let generation: UInt64
        let path: String
        let owner: FileOwner?
        let limit: UInt64
        var timer: (any Cancellable)?
        var measuring = false
        /// Whether a failure to measure was logged (once per process, not at every check).
        var failureLogged = false
        init(generation: UInt64, path: String, owner: FileOwner?, limit: UInt64) {
            self.generation = generation
            self.path = path
            self.owner = owner
            self.limit = limit
        }
    }

    let kernel: any Kernel
    let logger: Logger
    let interval: Double
    weak var sink: (any EventSink)?
    private var watched: [String: Watched] = [:]

    init(kernel: any Kernel, logger: Logger, interval: Double) {
        self.kernel = kernel
        self.logger = logger
        self.interval = interval
    }

    /// Generation `generation` of `id` has its container at `path` (its owner's ids for the
    /// walk, nil for the daemon's): measured every `interval` from now while `running` (false:
    /// suspended, as a process taken over at a re-exec may be), if it has a limit.
    func started(_ id: String, generation: UInt64, path: String, owner: FileOwner?, limit: UInt64?, running: Bool = true) {
        ended(id)
        guard let limit else { return }
        let w = Watched(generation: generation, path: path, owner: owner, limit: limit)
        watched[id] = w
        if running { arm(id, w) }
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
        guard !w.measuring else { return }  // one walk at a time; the next check comes
        w.measuring = true
        let started = kernel.measureTreeInBackground(w.path, owner: w.owner, limit: w.limit) { [weak self, weak w] result in
            guard let self, let w else { return }
            w.measuring = false
            guard watched[id] === w else { return }  // it ended meanwhile
            switch result {
            case .success(let bytes) where bytes > w.limit:
                logger.warning(
                    "\(id): its container holds more than \(bytes) bytes, over its limits.diskMaxBytes (\(w.limit))",
                    metadata: ["EXTENSION_ID": "\(id)"])
                sink?.post(.diskLimitExceeded(extensionID: id, generation: w.generation, bytes: bytes))
            case .success: break
            case .failure(let e): failed(id, w, e)
            }
        }
        if let started {
            w.measuring = false
            failed(id, w, started)
        }
    }

    private func failed(_ id: String, _ w: Watched, _ e: SystemError) {
        guard !w.failureLogged else { return }
        w.failureLogged = true
        logger.warning(
            "\(id): its container cannot be measured, so its limits.diskMaxBytes is not enforced: \(e) (said once for this process)",
            metadata: ["EXTENSION_ID": "\(id)"])
    }
}
