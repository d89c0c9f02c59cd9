import SupervisorCore

/// Where the shell's parts report what they observe: the daemon, which feeds it to the core.
protocol EventSink: AnyObject {
    func post(_ event: Event)
    /// Runs `body`, which posts events, as one batch: what they record goes to the monitors
    /// together when it ends.
    func batch(_ body: () -> Void)
}
