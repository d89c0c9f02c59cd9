import ExtensionProtocol
import SupervisorCore

/// The lifecycle events recorded during one iteration of the daemon's loop, held for the
/// monitors until the iteration's work is done: each monitor then gets all of them, in order, in
/// one `events` datagram (more only when they exceed one; docs/protocol.md). Their JSON is
/// written then, with one reading of the clocks for all of them. Owned by the daemon's loop.
struct MonitorFeed {
    private var pending: [LifecycleEvent] = []
    /// The pending events are being sent. Sending can end a monitor's connection, and so record
    /// more events: those wait for the send in progress, which takes them next, in order.
    private var isSending = false

    /// Whether no event waits.
    var isEmpty: Bool { pending.isEmpty }

    /// Whether a send is in progress: events taken from the feed and not yet sent to every
    /// monitor.
    var isInProgress: Bool { isSending }

    /// Holds `e` for the monitors.
    mutating func append(_ e: LifecycleEvent) {
        pending.append(e)
    }

    /// Starts a send: false when no event waits or a send is already in progress.
    mutating func beginSending() -> Bool {
        guard !isSending, !pending.isEmpty else { return false }
        isSending = true
        return true
    }

    /// Ends the send begun by `beginSending`.
    mutating func endSending() {
        isSending = false
    }

    /// The `events` messages carrying every waiting event, in order, each with its wall-clock
    /// time from `clock`. No event waits afterwards.
    mutating func take(_ clock: StatusDocument.Clock) -> [Message] {
        let objects = pending.map { EventJSON.encode($0, time: clock.iso($0.at)) }
        pending.removeAll(keepingCapacity: true)
        return Message.events(carrying: objects)
    }
}
