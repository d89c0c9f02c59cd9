/// What the daemon does after each dispatch for the service manager and for its successor.
extension Daemon {
    /// Runs once the event queue is drained: writes the process registry if a process was
    /// spawned or reaped, and publishes `STATUS=` if the summary line changed.
    func afterDispatch() {
        registry.flush()
        // Only when a state changed (not on every message).
        if serviceManager.isListening && summarizedVersion != core.stateVersion {
            summarizedVersion = core.stateVersion
            serviceManager.update(summary: ServiceManager.Summary(core, shuttingDown: core.shuttingDown))
        }
    }

    /// The `STATUS=` summary of the extensions' current states.
    func statusLine() -> String {
        ServiceManager.statusLine(core, shuttingDown: core.shuttingDown)
    }
}
