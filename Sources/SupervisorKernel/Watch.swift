import ExtensionTransport

/// A watch or timer registered with the event loop; `cancel()` ends it (twice is harmless).
public protocol Cancellable: AnyObject {
    /// Ends the watch or timer: its handler is not called after this returns. Calling it
    /// again does nothing.
    func cancel()
}

/// A descriptor watch of the event loop, whose epoll events can be changed while it lives.
public protocol Watch: Cancellable {
    /// Replaces the events watched (EPOLLIN, EPOLLOUT…); the error when the loop refused the
    /// change, which then watches what it did before.
    func setEvents(_ events: UInt32) -> SystemError?
    /// Whether the loop has collected an event for it that it has not dispatched yet (it
    /// dispatches one source per iteration).
    var isPending: Bool { get }
}

/// epoll event bits (Glibc does not export the EPOLL* constants to Swift).
public enum Poll {
    /// EPOLLIN: there is data to read (or a connection to accept).
    public static let input: UInt32 = 0x001
    /// EPOLLPRI: a kernfs file such as `cgroup.events` changed.
    public static let priority: UInt32 = 0x002
    /// EPOLLOUT: a write would not block.
    public static let output: UInt32 = 0x004
    /// EPOLLERR: an error is pending; epoll reports it whether or not it was asked for.
    public static let error: UInt32 = 0x008
    /// EPOLLHUP: the peer hung up; epoll reports it whether or not it was asked for.
    public static let hangup: UInt32 = 0x010
}
