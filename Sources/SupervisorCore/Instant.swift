/// A point on the monotonic clock, in nanoseconds. The core never reads a clock: the shell
/// passes the current instant with every event, and tests pass simulated ones.
public struct Instant: Comparable, Hashable, Sendable, CustomStringConvertible, Codable {
    /// Nanoseconds since the clock's origin.
    public var nanoseconds: UInt64

    /// The instant `nanoseconds` after the clock's origin.
    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// An instant `seconds` after the clock's origin (convenient in tests).
    public static func seconds(_ seconds: Double) -> Instant { Instant(nanoseconds: UInt64(seconds * 1e9)) }

    /// Whether `a` is earlier than `b`.
    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// This instant moved `seconds` later (saturating; negative values move it earlier, not before zero).
    public func adding(seconds: Double) -> Instant {
        let delta = seconds * 1e9
        if delta >= 0 {
            let d = delta >= Double(UInt64.max) ? UInt64.max : UInt64(delta)
            let (sum, overflow) = nanoseconds.addingReportingOverflow(d)
            return Instant(nanoseconds: overflow ? .max : sum)
        }
        let d = UInt64(min(-delta, Double(nanoseconds)))
        return Instant(nanoseconds: nanoseconds - d)
    }

    /// Seconds from `earlier` to this instant (negative when `earlier` is later).
    public func seconds(since earlier: Instant) -> Double {
        nanoseconds >= earlier.nanoseconds
            ? Double(nanoseconds - earlier.nanoseconds) / 1e9
            : -Double(earlier.nanoseconds - nanoseconds) / 1e9
    }

    /// Seconds since the clock's origin with millisecond precision, such as `12.345s`.
    public var description: String { String(format_seconds: Double(nanoseconds) / 1e9) }
}

extension String {
    /// Seconds with millisecond precision, without Foundation.
    init(format_seconds s: Double) {
        let ms = Int64((s * 1000).rounded())
        let whole = ms / 1000
        let frac = abs(ms % 1000)
        let fracText = frac < 10 ? "00\(frac)" : frac < 100 ? "0\(frac)" : "\(frac)"
        self = "\(whole).\(fracText)s"
    }
}

extension Instant {
    /// Decodes the number of nanoseconds (how `encode(to:)` writes an instant).
    public init(from decoder: any Decoder) throws {
        nanoseconds = try decoder.singleValueContainer().decode(UInt64.self)
    }

    /// Encodes the number of nanoseconds.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(nanoseconds)
    }
}
