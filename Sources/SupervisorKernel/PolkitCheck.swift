import CBus

#if canImport(Glibc)
import Glibc
#endif

/// Asking polkit whether a system-bus caller may do an action (docs/dbus.md, "Access"); any
/// thread: a connection of its own, bounded.
public struct PolkitCheck: Sendable {
    /// What polkit said.
    public enum Answer: Sendable, Equatable {
        /// The action is allowed (perhaps after the user authenticated).
        case allowed
        /// It is not.
        case refused
        /// No polkit on the system bus.
        case absent
        /// The check failed; why.
        case failed(String)
    }

    /// The caller's unique name on the system bus.
    public var sender: String
    /// The polkit action id.
    public var action: String

    /// A check of `action` for `sender`.
    public init(sender: String, action: String) {
        self.sender = sender
        self.action = action
    }

    /// Runs the check (a D-Bus call that may wait up to 25 s for the user's answer).
    public func perform() -> Answer {
        var allowed: Int32 = 0
        var why = [CChar](repeating: 0, count: 256)
        let rc = bus_polkit_check(sender, action, 25_000_000, &allowed, &why, why.count)
        if rc == -ESRCH { return .absent }
        guard rc >= 0 else { return .failed(String(cString: why)) }
        return allowed != 0 ? .allowed : .refused
    }
}
