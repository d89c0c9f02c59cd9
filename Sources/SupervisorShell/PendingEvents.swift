import SupervisorCore

/// The events waiting for the core while it handles one: an event raised while effects are
/// performed waits here and is handled afterwards, in order, so the core is never re-entered.
struct PendingEvents {
    private var events: [Event] = []
    private var position = 0
    private var dispatching = false

    /// Queues `event`; true when the caller is to dispatch (nothing is being dispatched), false
    /// when the dispatch in progress will reach it.
    mutating func add(_ event: Event) -> Bool {
        events.append(event)
        guard !dispatching else { return false }
        dispatching = true
        return true
    }

    /// The next event to dispatch, in order; nil once every one has been, which ends the dispatch.
    mutating func next() -> Event? {
        if position < events.count {
            defer { position += 1 }
            return events[position]
        }
        events.removeAll(keepingCapacity: true)
        position = 0
        dispatching = false
        return nil
    }
}
