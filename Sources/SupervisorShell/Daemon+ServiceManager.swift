import SupervisorCore
import SupervisorKernel

/// What the daemon does after each dispatch for the service manager and for its successor.
extension Daemon {
    /// Runs once the event queue is drained: writes the process registry if a process was
    /// spawned (an exit alone waits for the next write: `ProcessRegistry`), and publishes
    /// `STATUS=` if the summary changed.
    func afterDispatch() {
        extensions.registry.flush()
        attemptReexec()
        guard serviceManager.awaitsSummary(of: core.stateVersion) else { return }
        serviceManager.stateChanged(version: core.stateVersion, logger: logger) { [unowned self] in
            (core.stateVersion, ServiceManager.Summary(core, shuttingDown: core.shuttingDown))
        }
    }

    /// The `STATUS=` summary of the extensions' current states.
    func statusLine() -> String {
        serviceManager.statusLine(core, shuttingDown: core.shuttingDown)
    }
}
