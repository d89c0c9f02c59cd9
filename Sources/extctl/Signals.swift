import Foundation

/// Signals a command handles itself rather than by their default action: `monitor` (SIGINT,
/// SIGTERM, SIGPIPE) and `open` (SIGINT, SIGTERM).
///
/// The signals are blocked in the calling thread, and so in every thread started after it
/// (the control connection's reader included), and a thread of their own takes each one with
/// `sigwait(2)`. A blocked signal is queued even where its disposition is to ignore it, so none
/// is lost, whichever thread the kernel picks. Call `handle` before connecting to extensiond:
/// a thread started earlier would keep them unblocked and take the default action instead.
enum Signals {
    /// Blocks `signals` and calls `handler` with each one that arrives, on a thread of its own.
    static func handle(_ signals: [Int32], _ handler: @escaping @Sendable (Int32) -> Void) {
        var mask = sigset_t()
        sigemptyset(&mask)
        for s in signals { sigaddset(&mask, s) }
        pthread_sigmask(SIG_BLOCK, &mask, nil)
        Thread.detachNewThread {
            var mask = sigset_t()
            sigemptyset(&mask)
            for s in signals { sigaddset(&mask, s) }
            while true {
                var received: Int32 = 0
                if sigwait(&mask, &received) == 0 { handler(received) }
            }
        }
    }

    /// The status a shell reports for a command ended by `signal`: 128 + its number
    /// (130 for SIGINT, 141 for SIGPIPE, 143 for SIGTERM).
    static func exitStatus(_ signal: Int32) -> Int32 { 128 + signal }
}

/// Standard output without buffering, for output that streams (`monitor`, `open`).
enum Output {
    /// Writes all of `bytes` to standard output; false when it is closed (EPIPE) or fails.
    @discardableResult
    static func write(_ bytes: [UInt8]) -> Bool {
        fflush(nil)  // anything `print` buffered goes first
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(1, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    @discardableResult
    static func write(_ text: String) -> Bool { write(Array(text.utf8)) }
}
