import Testing

@testable import SupervisorShell

/// How long the re-exec's check may block the loop: never long enough to miss the watchdog.
struct ReexecutionTests {
    @Test func theCheckGetsHalfTheWatchdogsIntervalAtMostTenSeconds() {
        #expect(Reexecution.checkSeconds(watchdogMicroseconds: nil) == 10)
        #expect(Reexecution.checkSeconds(watchdogMicroseconds: 10_000_000) == 5, "WatchdogSec=10s, as the units set it")
        #expect(Reexecution.checkSeconds(watchdogMicroseconds: 3_000_000) == 1.5)
        #expect(Reexecution.checkSeconds(watchdogMicroseconds: 60_000_000) == 10)
        #expect(Reexecution.checkSeconds(watchdogMicroseconds: 0) == 10)
    }
}
