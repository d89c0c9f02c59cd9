import Logging
import SupervisorCore
import SupervisorKernel

/// The daemon's side of the service manager's notification protocol (sd_notify(3)), through
/// libsystemd. Every notification the daemon sends is in this file:
///
/// * `READY=1` with the first `STATUS=`, once the control socket accepts and the manifests
///   are loaded;
/// * `STATUS=` when the one-line summary changes, at most every `statusInterval` (`stateChanged`);
/// * `RELOADING=1` and `MONOTONIC_USEC=` before a manifest reload, `READY=1` after it;
/// * `STOPPING=1` as soon as shutdown starts.
///
/// `WATCHDOG=1` is sent from here only before the re-exec's check blocks the loop; otherwise the event loop sends it (`EventLoop.enableWatchdog`),
/// so a wedged loop stops it. Without `$NOTIFY_SOCKET` every call is a no-op.
/// Owned by the daemon's loop thread.
final class ServiceManager {
    /// Whether a service manager listens for notifications (`$NOTIFY_SOCKET` is set).
    let isListening: Bool
    let kernel: any Kernel
    private var lastStatus: String?
    /// The summary `lastStatus` was made from, when it came from `update(summary:)`.
    private var lastSummary: Summary?

    /// What every status line ends with: the process-group fallback (`containmentProblem`),
    /// said on each line so that `systemctl status` always shows it.
    private let suffix: String

    /// Notifications through `kernel`, whose status lines say `containmentProblem` when the
    /// daemon has no cgroup per extension.
    init(kernel: any Kernel, containmentProblem: String?) {
        self.kernel = kernel
        isListening = kernel.environment("NOTIFY_SOCKET") != nil
        suffix = containmentProblem.map { "; process groups only (no cgroups: \($0))" } ?? ""
    }

    /// The daemon accepts connections and has loaded its manifests.
    func ready(status: String) {
        lastStatus = status
        lastSummary = nil
        notify("READY=1\nSTATUS=\(status)")
    }

    /// Publishes the status line of `summary` if it differs from the last line sent. Cheap
    /// when nothing changed (the line is only built when the counts differ), so it can run
    /// after every dispatch.
    func update(summary: Summary) {
        guard isListening, summary != lastSummary else { return }
        lastSummary = summary
        let status = summary.line + suffix
        guard status != lastStatus else { return }
        lastStatus = status
        notify("STATUS=\(status)")
    }

    /// The least time between two `STATUS=` updates from `stateChanged`, in seconds.
    static let statusInterval = 0.1
    /// The state version last summarized, when the last update went out, and the timer that
    /// publishes a change held back by `statusInterval`.
    private var summarizedVersion: UInt64?
    private var publishedAt: Instant?
    private var heldBack: (any Cancellable)?

    /// Called after each dispatch with the core's state version. Only when it changed (not on
    /// every message), and at most every `statusInterval`: each sd_notify is a new socket and a
    /// datagram, and a widget shown and dismissed changes the summary twice. A change inside
    /// the interval is published when it ends, by one timer armed through `kernel` and only
    /// while a change is held back; `current` gives the state version and summary then.
    func stateChanged(
        version: UInt64, logger: Logger, current: @escaping () -> (version: UInt64, summary: Summary)
    ) {
        guard awaitsSummary(of: version) else { return }
        let now = kernel.now()
        if let last = publishedAt, now < last.adding(seconds: ServiceManager.statusInterval) {
            switch kernel.addTimer(
                at: last.adding(seconds: ServiceManager.statusInterval),
                { [unowned self] in
                    heldBack = nil
                    publish(current(), at: kernel.now())
                })
            {
            case .success(let timer):
                heldBack = timer
                return
            case .failure(let error):
                logger.warning("cannot arm the STATUS= timer (\(error)); publishing at once")
            }
        }
        publish(current(), at: now)
    }

    /// Whether `stateChanged(version:…)` would do anything: the caller checks first, so that
    /// the usual dispatch, which changes nothing or falls inside a held-back interval, builds no
    /// closure.
    func awaitsSummary(of version: UInt64) -> Bool {
        isListening && summarizedVersion != version && heldBack == nil
    }

    private func publish(_ state: (version: UInt64, summary: Summary), at now: Instant) {
        guard summarizedVersion != state.version else { return }
        summarizedVersion = state.version
        publishedAt = now
        update(summary: state.summary)
    }

    /// A reload (SIGHUP or `extctl reload`) starts; `ready(status:)` ends it.
    func reloading() {
        let usec = kernel.now().nanoseconds / 1000
        notify("RELOADING=1\nSTATUS=reloading manifests\nMONOTONIC_USEC=\(usec)")
    }

    /// `WATCHDOG=1` now, before the loop is blocked (the re-exec's check), when the service
    /// manager asked for a watchdog.
    func watchdogPing() {
        guard kernel.watchdogInterval() != nil else { return }
        notify("WATCHDOG=1")
    }

    /// The daemon is about to exec its replacement, which sends `READY=1` once it serves.
    func reexecuting() {
        lastStatus = nil
        lastSummary = nil
        notify("STATUS=re-executing")
    }

    /// Shutdown starts: extensions are being terminated.
    func stopping(status: String) {
        lastStatus = status
        lastSummary = nil
        notify("STOPPING=1\nSTATUS=\(status)")
    }

    private func notify(_ state: String) {
        guard isListening else { return }
        kernel.notifyServiceManager(state)
    }

    /// The one-line summary shown by `systemctl status`, e.g.
    /// `12 extensions: 2 active, 1 background, 6 suspended`.
    func statusLine(_ core: Supervisor, shuttingDown: Bool) -> String {
        Summary(core, shuttingDown: shuttingDown).line + suffix
    }

    /// The extensions counted by public state: what the status line says. The counts are the
    /// core's (kept per state as records change), so a summary costs O(states), not a pass
    /// over the records; the text is built only when the counts change.
    struct Summary: Equatable {
        /// The states shown, in this order; not-running ones are only in the total.
        static let shown: [LifecycleState] = [.launching, .active, .background, .expiring, .suspended, .terminating]
        var total = 0
        /// Counts in the order of `shown`.
        var running = [Int](repeating: 0, count: Summary.shown.count)
        var shuttingDown = false

        init(_ core: Supervisor, shuttingDown: Bool) {
            self.shuttingDown = shuttingDown
            total = core.records.count
            let counts = core.stateCounts
            running = Summary.shown.map { counts[$0] ?? 0 }
        }

        /// `12 extensions: 2 active, 1 background, 6 suspended` (states with no extension are
        /// left out; `none running` when nothing runs; `shutting down; ` first during shutdown).
        var line: String {
            let parts = zip(Summary.shown, running).filter { $0.1 > 0 }.map { "\($0.1) \($0.0.rawValue)" }
            let count = "\(total) extension\(total == 1 ? "" : "s")"
            let text = parts.isEmpty ? "\(count): none running" : "\(count): " + parts.joined(separator: ", ")
            return shuttingDown ? "shutting down; \(text)" : text
        }
    }
}
