import SupervisorCore

/// What the daemon does after each dispatch for the service manager and for its successor.
extension Daemon {
    /// Runs once the event queue is drained: writes the process registry if a process was
    /// spawned or reaped, and publishes `STATUS=` if the summary line changed.
    func afterDispatch() {
        registry.flush()
        // Only when a state changed (not on every message), and at most every
        // `statusInterval`: each sd_notify is a new socket and a datagram, and a
        // widget shown and dismissed changes the summary twice. A change inside the interval
        // is published when it ends (one timer, only while a change is held back).
        guard serviceManager.isListening, summarizedVersion != core.stateVersion, statusTimer == nil else { return }
        let now = loop.now()
        if let last = statusPublishedAt, now < last.adding(seconds: Daemon.statusInterval) {
            switch kernel.addTimer(at: last.adding(seconds: Daemon.statusInterval), { [unowned self] in
                statusTimer = nil
                publishStatus(at: loop.now())
            }) {
            case .success(let timer):
                statusTimer = timer
                return
            case .failure(let error):
                logger.warning("cannot arm the STATUS= timer (\(error)); publishing at once")
            }
        }
        publishStatus(at: now)
    }

    /// The least time between two `STATUS=` updates, in seconds.
    static let statusInterval = 0.1

    func publishStatus(at now: Instant) {
        guard summarizedVersion != core.stateVersion else { return }
        summarizedVersion = core.stateVersion
        statusPublishedAt = now
        serviceManager.update(summary: ServiceManager.Summary(core, shuttingDown: core.shuttingDown))
    }

    /// The `STATUS=` summary of the extensions' current states.
    func statusLine() -> String {
        ServiceManager.statusLine(core, shuttingDown: core.shuttingDown, containmentProblem: containmentProblem)
    }
}
