import CSystemd
import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's side of the service manager's notification protocol (sd_notify(3)), through
/// libsystemd. Every notification the daemon sends is in this file:
///
/// * `READY=1` with the first `STATUS=`, once the control socket accepts and the manifests
///   are loaded;
/// * `STATUS=` whenever the one-line summary changes (never on a timer);
/// * `RELOADING=1` and `MONOTONIC_USEC=` before a manifest reload, `READY=1` after it;
/// * `STOPPING=1` as soon as shutdown starts.
///
/// `WATCHDOG=1` is not sent from here: the event loop sends it (`EventLoop.enableWatchdog`),
/// so a wedged loop stops it. Without `$NOTIFY_SOCKET` every call is a no-op.
/// Owned by the daemon's loop thread.
final class ServiceManager {
    /// Whether a service manager listens for notifications (`$NOTIFY_SOCKET` is set).
    let isListening: Bool
    private var lastStatus: String?

    init() {
        isListening = getenv("NOTIFY_SOCKET") != nil
    }

    /// The daemon accepts connections and has loaded its manifests.
    func ready(status: String) {
        lastStatus = status
        notify("READY=1\nSTATUS=\(status)")
    }

    /// Publishes `status` if it differs from the last line sent.
    func update(status: String) {
        guard isListening, status != lastStatus else { return }
        lastStatus = status
        notify("STATUS=\(status)")
    }

    /// A reload (SIGHUP or `extctl reload`) starts; `ready(status:)` ends it.
    func reloading() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let usec = UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1000
        notify("RELOADING=1\nSTATUS=reloading manifests\nMONOTONIC_USEC=\(usec)")
    }

    /// Shutdown starts: extensions are being terminated.
    func stopping(status: String) {
        lastStatus = status
        notify("STOPPING=1\nSTATUS=\(status)")
    }

    private func notify(_ state: String) {
        guard isListening else { return }
        _ = sd_notify(0, state)
    }

    /// The watchdog interval the service manager asked for (`$WATCHDOG_USEC`, for this pid),
    /// in microseconds; nil when there is none.
    static func watchdogInterval() -> UInt64? {
        var usec: UInt64 = 0
        return sd_watchdog_enabled(0, &usec) > 0 ? usec : nil
    }

    /// The one-line summary shown by `systemctl status`, e.g.
    /// `12 extensions: 2 active, 1 background, 6 suspended` (states with no extension are
    /// left out; not-running ones are only counted in the total).
    static func statusLine<Records: Collection<ExtensionRecord>>(_ records: Records, shuttingDown: Bool) -> String {
        var counts: [LifecycleState: Int] = [:]
        for r in records where r.state != .notRunning { counts[r.state, default: 0] += 1 }
        let order: [LifecycleState] = [.launching, .active, .background, .expiring, .suspended, .terminating]
        let parts = order.compactMap { s in counts[s].map { "\($0) \(s.rawValue)" } }
        let total = "\(records.count) extension\(records.count == 1 ? "" : "s")"
        let line = parts.isEmpty ? "\(total): none running" : "\(total): " + parts.joined(separator: ", ")
        return shuttingDown ? "shutting down; \(line)" : line
    }
}
