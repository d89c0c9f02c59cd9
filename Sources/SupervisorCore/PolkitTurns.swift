/// Whose question goes to polkit next (docs/dbus.md, "Access"). Every question is a call
/// waiting for a reply on the daemon's one bus connection, and the bus caps those
/// (`max_replies_per_connection`): so at most `limit` questions are in flight across all callers,
/// at most `perUser` for callers of one uid, and callers wait their turn in the order they began
/// to wait. One uid's many connections, or an authentication agent that never answers, can hold
/// at most `perUser` of the slots; every other uid still gets an answer.
///
/// A caller has at most one question in flight (it asks about its oldest waiting call). Plain
/// state, no clock: the D-Bus front end drives it.
public struct PolkitTurns<Caller: Hashable> {
    /// Questions in flight across all callers, at most.
    public let limit: Int
    /// Questions in flight for callers of one uid, at most.
    public let perUser: Int
    /// Callers with a question in flight, and their uid.
    private var asking: [Caller: UInt32] = [:]
    /// How many questions each uid has in flight.
    private var askingPerUser: [UInt32: Int] = [:]
    /// Callers waiting for a turn, oldest first, and their uid.
    private var waiting: [(caller: Caller, uid: UInt32)] = []

    /// A scheduler with the given caps (each at least 1).
    public init(limit: Int, perUser: Int) {
        self.limit = max(1, limit)
        self.perUser = max(1, min(perUser, limit))
    }

    /// How many questions are in flight.
    public var inFlight: Int { asking.count }

    /// How many callers wait for a turn.
    public var waitingCount: Int { waiting.count }

    /// Whether `caller` has a question in flight.
    public func isAsking(_ caller: Caller) -> Bool { asking[caller] != nil }

    /// `caller` (of `uid`) has a call for polkit: it waits for a turn, unless it is asking or
    /// waiting already.
    public mutating func wait(_ caller: Caller, uid: UInt32) {
        guard asking[caller] == nil, !waiting.contains(where: { $0.caller == caller }) else { return }
        waiting.append((caller, uid))
    }

    /// The next caller to ask now, marked as asking: the oldest waiting one whose uid is under
    /// `perUser`, while fewer than `limit` ask. Nil when none may ask now.
    public mutating func next() -> Caller? {
        guard asking.count < limit, let i = waiting.firstIndex(where: { askingPerUser[$0.uid, default: 0] < perUser }) else { return nil }
        let (caller, uid) = waiting.remove(at: i)
        asking[caller] = uid
        askingPerUser[uid, default: 0] += 1
        return caller
    }

    /// `caller`'s question was answered (or could not be asked): its slot is free.
    public mutating func answered(_ caller: Caller) {
        guard let uid = asking.removeValue(forKey: caller) else { return }
        let left = askingPerUser[uid, default: 1] - 1
        askingPerUser[uid] = left > 0 ? left : nil
    }

    /// `caller` left: its question, if any, is over, and it waits no more.
    public mutating func leave(_ caller: Caller) {
        answered(caller)
        waiting.removeAll { $0.caller == caller }
    }
}
