import Foundation  // the tests only: Date.formatted is the reference the formatter must match
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// `StatusDocument.Clock.iso8601` prints the times of docs/json.md exactly as Foundation's
/// `Date.formatted(.iso8601…)` did when the daemon used it.
struct ISO8601TimeTests {
    static let foundationStyle = Date.ISO8601FormatStyle.iso8601.year().month().day()
        .time(includingFractionalSeconds: true).timeZone(separator: .omitted)

    func foundation(_ s: Double) -> String { Date(timeIntervalSince1970: s).formatted(Self.foundationStyle) }
    func iso(_ s: Double) -> String { StatusDocument.Clock.iso8601(secondsSince1970: s) }

    @Test func knownInstants() {
        #expect(iso(0) == "1970-01-01T00:00:00.000Z")
        #expect(iso(-0.5) == "1969-12-31T23:59:59.500Z")
        #expect(iso(-1) == "1969-12-31T23:59:59.000Z")
        #expect(iso(978_307_200) == "2001-01-01T00:00:00.000Z")
        // Leap days: 2000 (divisible by 400) has one, 2100 does not, 2024 does.
        #expect(iso(951_782_400) == "2000-02-29T00:00:00.000Z")
        #expect(iso(951_868_800) == "2000-03-01T00:00:00.000Z")
        #expect(iso(4_107_542_399.5) == "2100-02-28T23:59:59.500Z")
        #expect(iso(4_107_542_400) == "2100-03-01T00:00:00.000Z")
        #expect(iso(1_709_164_800.25) == "2024-02-29T00:00:00.250Z")
        #expect(iso(1_735_689_599.999) == "2024-12-31T23:59:59.999Z")
        #expect(iso(1_735_689_600) == "2025-01-01T00:00:00.000Z")
        #expect(iso(1_795_315_849.512) == "2026-11-22T02:50:49.512Z")
        #expect(iso(253_402_300_799) == "9999-12-31T23:59:59.000Z")
    }

    @Test func millisecondsAreTruncatedLikeFoundation() {
        // 951868799.999 is 951868799.998999953… as a double: truncated, as Foundation does, to .998.
        #expect(iso(951_868_799.999) == "2000-02-29T23:59:59.998Z")
        #expect(iso(1_795_315_849.5129) == "2026-11-22T02:50:49.512Z")
        #expect(iso(0.9999) == "1970-01-01T00:00:00.999Z")
        #expect(iso(1_551_542_004.199.nextDown) == "2019-03-02T15:53:24.198Z")  // floor(s * 1000) would give .199
    }

    @Test func sameTextAsFoundation() {
        var samples: [Double] = [0, -0.5, 951_782_400, 951_868_799.999, 4_107_542_399.9996, 253_402_300_799.999]
        var random = SystemRandomNumberGenerator()
        for _ in 0..<20_000 { samples.append(Double.random(in: 1.0e9...2.2e9, using: &random)) }
        for _ in 0..<5_000 { samples.append(Double.random(in: -1.2e10...2.5e11, using: &random)) }  // 1589 to 9892
        for _ in 0..<5_000 {
            // Around millisecond boundaries, where truncation and rounding disagree.
            var s = Double(Int64.random(in: 1_000_000_000_000...2_200_000_000_000, using: &random)) / 1000
            s = s.nextDown.nextDown
            for _ in 0..<5 {
                samples.append(s)
                s = s.nextUp
            }
        }
        var mismatches: [String] = []
        for s in samples where iso(s) != foundation(s) {
            mismatches.append("\(s): \(iso(s)) != \(foundation(s))")
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(10))")
    }

    @Test func clockConvertsMonotonicInstants() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let now = Instant(nanoseconds: UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec))
        let clock = StatusDocument.Clock(monotonicNow: now, wallClock: Date().timeIntervalSince1970)
        let text = clock.iso(now)
        let wall = Date().timeIntervalSince1970
        // Within a second of the wall clock, and in the documented shape.
        #expect(text.count == 24 && text.hasSuffix("Z"))
        let expected = [foundation(wall - 1), foundation(wall), foundation(wall + 1)].map { String($0.prefix(16)) }
        #expect(expected.contains(String(text.prefix(16))), "\(text) vs \(expected)")
    }
}
