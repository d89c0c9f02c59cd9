import CShims
import CSystemd
import ExtensionTransport
import SupervisorCore

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's one event loop: a thin owner of an sd-event loop (epoll, signalfd,
/// timerfd and pidfd underneath). All supervisor state is touched only from callbacks of
/// this loop, on the thread that runs it. Not Sendable: it never leaves that thread.
final class EventLoop {
    private let event: OpaquePointer
    private var timer: OpaquePointer?
    private var timerHandler: (() -> Void)?

    init() throws(SystemError) {
        var e: OpaquePointer?
        let rc = sd_event_new(&e)
        guard rc >= 0, let e else { throw SystemError("sd_event_new", errno: -rc) }
        event = e
    }

    /// The sd_event, for libraries that attach to it (sd-bus: `BusService`).
    var eventPointer: OpaquePointer { event }

    deinit {
        if let timer { sd_event_source_disable_unref(timer) }
        sd_event_unref(event)
    }

    /// The monotonic clock read now (vDSO, tens of nanoseconds), not the iteration's cached
    /// time: events are stamped when they are handled, so a message read late in a busy
    /// iteration does not carry the earlier wake-up time.
    static func clock() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Instant(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
    }

    /// The loop's cached monotonic time of the current iteration.
    func now() -> Instant {
        var usec: UInt64 = 0
        if sd_event_now(event, CLOCK_MONOTONIC, &usec) < 0 { return EventLoop.clock() }
        return Instant(nanoseconds: usec * 1000)
    }

    /// Watches `fd` for `events` (EPOLLIN, EPOLLOUT…); `handler` gets the returned events.
    func addIO(fd: Int32, events: UInt32, handler: @escaping (UInt32) -> Void) throws(SystemError) -> EventSource {
        let box = Unmanaged.passRetained(CallbackBox(io: handler))
        var source: OpaquePointer?
        let rc = sd_event_add_io(
            event, &source, fd, events,
            { _, _, revents, userdata in
                Unmanaged<CallbackBox>.fromOpaque(userdata!).takeUnretainedValue().io?(revents)
                return 0
            }, box.toOpaque())
        guard rc >= 0, let source else {
            box.release()
            throw SystemError("sd_event_add_io", errno: -rc)
        }
        EventSource.attachDestroy(source)
        return EventSource(source)
    }

    /// Handles `signal` (which must be blocked in every thread) from the loop.
    /// The handler gets the sender's pid and the si_code of the delivered instance (a standard
    /// signal coalesces: instances raised while one is pending are not delivered). A source
    /// with a `priority` above 0 (sd-event: larger runs later) waits while ordinary events are
    /// pending.
    func addSignal(_ signal: Int32, priority: Int64 = 0, handler: @escaping (_ pid: Int32, _ code: Int32) -> Void) throws(SystemError) -> EventSource {
        let box = Unmanaged.passRetained(CallbackBox(signal: handler))
        var source: OpaquePointer?
        let rc = sd_event_add_signal(
            event, &source, signal,
            { _, si, userdata in
                Unmanaged<CallbackBox>.fromOpaque(userdata!).takeUnretainedValue().signal?(
                    Int32(bitPattern: si?.pointee.ssi_pid ?? 0), si?.pointee.ssi_code ?? 0)
                return 0
            }, box.toOpaque())
        guard rc >= 0, let source else {
            box.release()
            throw SystemError("sd_event_add_signal(\(signal))", errno: -rc)
        }
        if priority != 0 { sd_event_source_set_priority(source, priority) }
        EventSource.attachDestroy(source)
        return EventSource(source)
    }

    /// A one-shot timer on the monotonic clock, firing at `at` (1 ms accuracy). With a
    /// `priority` above 0 (sd-event: larger runs later) it waits while events of a smaller
    /// priority are pending.
    func addTimer(at: Instant, priority: Int64 = 0, handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let box = Unmanaged.passRetained(CallbackBox(plain: handler))
        var source: OpaquePointer?
        let rc = sd_event_add_time(
            event, &source, CLOCK_MONOTONIC, at.nanoseconds / 1000, 1000,
            { _, _, userdata in
                Unmanaged<CallbackBox>.fromOpaque(userdata!).takeUnretainedValue().plain?()
                return 0
            }, box.toOpaque())
        guard rc >= 0, let source else {
            box.release()
            throw SystemError("sd_event_add_time", errno: -rc)
        }
        if priority != 0 { sd_event_source_set_priority(source, priority) }
        EventSource.attachDestroy(source)
        return EventSource(source)
    }

    /// Arms the loop's single supervisor timer for `at`, or disarms it for nil; sd-event's
    /// error when it could not. Deadlines are coalesced by the core into this one timer.
    func setDeadline(_ at: Instant?, handler: @escaping () -> Void) -> SystemError? {
        timerHandler = handler
        func failure(_ rc: Int32) -> SystemError? { rc < 0 ? SystemError(errno: -rc) : nil }
        guard let at else {
            guard let timer else { return nil }
            return failure(sd_event_source_set_enabled(timer, Int32(SD_EVENT_OFF)))
        }
        let usec = (at.nanoseconds + 999) / 1000
        if let timer {
            if let e = failure(sd_event_source_set_time(timer, usec)) { return e }
            return failure(sd_event_source_set_enabled(timer, Int32(SD_EVENT_ONESHOT)))
        }
        let unmanaged = Unmanaged.passUnretained(self)
        var source: OpaquePointer?
        let rc = sd_event_add_time(
            event, &source, CLOCK_MONOTONIC, usec, 1000,
            { _, _, userdata in
                Unmanaged<EventLoop>.fromOpaque(userdata!).takeUnretainedValue().timerHandler?()
                return 0
            }, unmanaged.toOpaque())
        if rc >= 0 { timer = source }
        return failure(rc)
    }

    /// Sends WATCHDOG=1 from this loop when the service manager asked for a watchdog.
    func enableWatchdog() -> Bool {
        sd_event_set_watchdog(event, 1) > 0
    }

    /// Runs until `exit` is called; returns the exit code.
    func run() -> Int32 {
        sd_event_loop(event)
    }

    /// Makes `run` return `code` after the current iteration.
    func exit(_ code: Int32) {
        sd_event_exit(event, code)
    }
}

/// Holds a Swift closure for a C callback; released by sd-event's destroy callback.
final class CallbackBox {
    let io: ((UInt32) -> Void)?
    let plain: (() -> Void)?
    let signal: ((Int32, Int32) -> Void)?

    init(io: ((UInt32) -> Void)? = nil, plain: (() -> Void)? = nil, signal: ((Int32, Int32) -> Void)? = nil) {
        self.io = io
        self.signal = signal
        self.plain = plain
    }
}

/// One registered sd-event source. `cancel()` disables and releases it (and its closure).
final class EventSource: Watch {
    private var source: OpaquePointer?

    init(_ source: OpaquePointer) { self.source = source }

    static func attachDestroy(_ source: OpaquePointer) {
        sd_event_source_set_destroy_callback(source) { userdata in
            if let userdata { Unmanaged<CallbackBox>.fromOpaque(userdata).release() }
        }
    }

    /// Changes the epoll events of an I/O source; sd-event's error when it could not.
    func setEvents(_ events: UInt32) -> SystemError? {
        guard let source else { return nil }
        let rc = sd_event_source_set_io_events(source, events)
        return rc < 0 ? SystemError(errno: -rc) : nil
    }

    /// `Watch.isPending`: `sd_event_source_get_pending`.
    var isPending: Bool {
        guard let source else { return false }
        return sd_event_source_get_pending(source) > 0
    }

    /// Hands the source to the loop, which keeps it until the loop itself goes; this object
    /// no longer refers to it.
    func float() {
        guard let source else { return }
        sd_event_source_set_floating(source, 1)
        sd_event_source_unref(source)
        self.source = nil
    }

    /// Disables the source and drops it; safe to call twice.
    func cancel() {
        if let source { sd_event_source_disable_unref(source) }
        source = nil
    }

    deinit { cancel() }
}
