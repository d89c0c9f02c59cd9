/// Converts the daemon's instants (`CLOCK_MONOTONIC`, in nanoseconds) to the wall-clock times
/// of docs/json.md, `2026-11-21T02:50:49.512Z`. It reads no clock: the caller reads both clocks
/// once and gives their difference.
public struct WallClock: Sendable, Equatable {
    /// Wall-clock time (seconds since 1970) minus monotonic time (seconds), when both were read.
    public let offset: Double

    /// A clock whose wall-clock time is `offset` seconds ahead of the monotonic clock.
    public init(offset: Double) {
        self.offset = offset
    }

    /// The clock at the monotonic instant `monotonicNanoseconds`, when the wall clock read
    /// `wallClock` seconds since 1970.
    public init(monotonicNanoseconds: UInt64, wallClock: Double) {
        offset = wallClock - Double(monotonicNanoseconds) / 1e9
    }

    /// The monotonic instant `nanoseconds` as wall-clock ISO 8601 text (`iso8601`).
    public func iso(monotonicNanoseconds nanoseconds: UInt64) -> String {
        WallClock.iso8601(secondsSince1970: Double(nanoseconds) / 1e9 + offset)
    }

    /// `2026-11-21T02:50:49.512Z`: UTC, milliseconds, no time zone separator. The same text,
    /// character for character, as Foundation's
    /// `Date(timeIntervalSince1970: s).formatted(.iso8601.year().month().day()
    /// .time(includingFractionalSeconds: true).timeZone(separator: .omitted))` for every instant
    /// from 1583 to 9999 (Foundation switches to the Julian calendar before the Gregorian reform;
    /// the daemon's clock is never there). `ISO8601TimeTests` compares the two.
    ///
    /// The milliseconds are truncated, not rounded, and split off the way Foundation splits
    /// them: whole seconds since its reference date (2001-01-01) rounded down, then the
    /// fraction's milliseconds truncated. Rounding `s * 1000` instead would differ by 1 ms
    /// for about 6% of instants. The date is computed from the day count with integer
    /// arithmetic (H. Hinnant's civil-from-days).
    public static func iso8601(secondsSince1970 s: Double) -> String {
        let referenceDate = 978_307_200.0  // 2001-01-01T00:00:00Z, seconds since 1970
        // Within years 1 to 9999, and no trap on nonsense.
        let sinceReference = s.isFinite ? min(max(s - referenceDate, -63_000_000_000), 253_000_000_000) : 0
        let wholeSeconds = sinceReference.rounded(.down)
        let millisecond = min(Int64((sinceReference - wholeSeconds) * 1000), 999)
        let seconds = Int64(wholeSeconds) + Int64(referenceDate)  // since 1970, integer from here on

        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400  // rounded down
        let secondOfDay = seconds - days * 86_400
        // Civil from days: eras of 400 years (146,097 days) starting on March 1st, year 0.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097  // 0...146096
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365  // 0...399
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)  // 0...365, from March 1st
        let shiftedMonth = (5 * dayOfYear + 2) / 153  // 0...11, March is 0
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

        // Written straight into the string's storage: one allocation, no intermediate array.
        return String(unsafeUninitializedCapacity: 24) { text in
            var count = 0
            func put(_ byte: UInt8) {
                text[count] = byte
                count += 1
            }
            func digits(_ value: Int64, _ width: Int) {
                var divisor: Int64 = 1
                for _ in 1..<width { divisor *= 10 }
                var v = value
                while divisor > 0 {
                    put(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: v / divisor % 10))
                    v %= divisor
                    divisor /= 10
                }
            }
            digits(year, 4); put(UInt8(ascii: "-"))
            digits(month, 2); put(UInt8(ascii: "-"))
            digits(day, 2); put(UInt8(ascii: "T"))
            digits(secondOfDay / 3_600, 2); put(UInt8(ascii: ":"))
            digits(secondOfDay / 60 % 60, 2); put(UInt8(ascii: ":"))
            digits(secondOfDay % 60, 2); put(UInt8(ascii: "."))
            digits(millisecond, 3); put(UInt8(ascii: "Z"))
            return count
        }
    }
}
