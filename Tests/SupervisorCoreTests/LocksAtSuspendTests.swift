import ExtensionProtocol
import SupervisorCore
import Testing

/// Locks found when the stop is confirmed: the rule, the two policies, the grace of
/// "resume" in simulated time, and what is recorded.
@Suite("Locks held at suspension")
struct LocksAtSuspendTests {
    /// SQLite's write lock in WAL mode, while the app has the database open.
    let walWriteLock = HeldLock(kind: .posix, exclusive: true, path: "/data/app.db-shm", pid: 100, openElsewhere: true)
    /// What every open WAL connection holds, even idle.
    let walIdleLocks = [
        HeldLock(kind: .posix, exclusive: false, path: "/data/app.db", pid: 100, openElsewhere: true),
        HeldLock(kind: .posix, exclusive: false, path: "/data/app.db-shm", pid: 100, openElsewhere: true),
    ]
    /// A single-instance lock file nobody else has open.
    let privateLock = HeldLock(kind: .flock, exclusive: true, path: "/run/user/1000/widget.lock", pid: 100, openElsewhere: false)

    func policy(_ value: LockContentionPolicy) -> Policy {
        var p = testPolicy
        p.lockedWhileSuspended = value
        return p
    }

    /// Active with one request, then dismissed: the stop is in flight.
    func stopping(_ policy: Policy = testPolicy) -> Harness {
        var h = Harness(policy: policy)
        let request = h.activate(at: 0)
        #expect(h.end(request: request, at: 1).stops == [extID])
        return h
    }

    @Test func theRuleIsExclusiveLocksOnFilesOthersHaveOpenOrInASharedContainer() {
        #expect(walWriteLock.blocksOthers)
        #expect(!walIdleLocks.contains { $0.blocksOthers }, "shared locks never block at suspension")
        #expect(!privateLock.blocksOthers, "an exclusive lock nobody else can want")
        var shared = privateLock
        shared.sharedContainer = "/var/lib/extensiond/containers/group.example"
        #expect(shared.blocksOthers, "a file in a shared container may be opened by the app at any time")
        var sharedRead = shared
        sharedRead.exclusive = false
        #expect(!sharedRead.blocksOthers)
    }

    @Test func sharedLocksAndPrivateExclusiveLocksSuspendNormally() {
        var h = stopping()
        let e = h.stopConfirmed(at: 1.02, locks: walIdleLocks + [privateLock])
        #expect(h.state == .suspended)
        #expect(e.signals.isEmpty && e.resumes.isEmpty)
        #expect(e.events(.lockHeldAtSuspend).isEmpty)
        #expect(e.events(.suspend).count == 1)
        #expect(h.record.locksHeldAtSuspend == 0)
    }

    @Test func byDefaultTheHolderIsKilledAtOnceAndNeverCountsAsSuspended() {
        var h = stopping()
        let e = h.stopConfirmed(at: 1.02, locks: walIdleLocks + [walWriteLock])
        #expect(e.signals == [SignalSent(extensionID: extID, generation: h.gen, signal: SignalNumber.kill, thenContinue: true)])
        #expect(e.events(.suspend).isEmpty, "it is never suspended")
        #expect(h.state == .terminating)
        let reported = e.events(.lockHeldAtSuspend)
        #expect(reported.count == 1, "only the lock that blocks others is reported")
        #expect(reported.first?.lock == LockReport(path: "/data/app.db-shm", kind: .posix, decision: .terminate))
        #expect(reported.first?.detail == "exclusive posix lock on /data/app.db-shm held by pid 100 (open in another process): terminate")
        #expect(h.record.locksHeldAtSuspend == 1)
        h.exited(.signaled(9), at: 1.03)
        #expect(h.record.lastExit?.reason == .lockHeldAtSuspend)
        #expect(h.record.consecutiveCrashes == 0, "not a crash: it does not throttle the next launch")
        // The next request launches a fresh process at once.
        #expect(h.begin(at: 1.04).spawns.count == 1)
    }

    @Test func theResumePolicyGivesTheGraceThenSuspendsWhenTheLockIsGone() {
        var h = stopping(policy(.resume))
        let e = h.stopConfirmed(at: 1.02, locks: [walWriteLock])
        #expect(e.resumes == [extID])
        #expect(e.signals.isEmpty)
        #expect(e.events(.lockHeldAtSuspend).first?.lock?.decision == .resume)
        h.continueConfirmed(at: 1.021)
        #expect(h.phase == .expiring(stopAt: Instant.seconds(1.021).adding(seconds: 3)), "expiryGraceSeconds (3) to let go")
        #expect(h.acquire(at: 2).deniedTags == [7], "no new work during the grace")
        #expect(h.tick(at: 4.0).stops.isEmpty)
        #expect(h.tick(at: 4.021).stops == [extID])
        let after = h.stopConfirmed(at: 4.04, locks: walIdleLocks)
        #expect(h.state == .suspended)
        #expect(after.events(.suspend).count == 1)
        #expect(h.record.lockGrace == .none)
        #expect(h.record.locksHeldAtSuspend == 1)
    }

    @Test func theResumePolicyTerminatesALockStillHeldAfterTheGrace() {
        var h = stopping(policy(.resume))
        h.stopConfirmed(at: 1.02, locks: [walWriteLock])
        h.continueConfirmed(at: 1.021)
        #expect(h.tick(at: 4.021).stops == [extID])
        let e = h.stopConfirmed(at: 4.04, locks: [walWriteLock])
        #expect(e.signals.map(\.signal) == [SignalNumber.kill])
        #expect(e.resumes.isEmpty, "no second grace")
        let reported = e.events(.lockHeldAtSuspend)
        #expect(reported.first?.lock?.decision == .terminate)
        #expect(reported.first?.detail?.hasSuffix("terminate (still held after the grace)") == true)
        #expect(h.record.locksHeldAtSuspend == 2)
        h.exited(.signaled(9), at: 4.05)
        #expect(h.record.lastExit?.reason == .lockHeldAtSuspend)
    }

    @Test func aRequestDuringTheGraceEndsItAndTheNextStopGetsThePolicyAgain() {
        var h = stopping(policy(.resume))
        h.stopConfirmed(at: 1.02, locks: [walWriteLock])
        h.continueConfirmed(at: 1.021)
        let reopened = h.begin(at: 2)
        #expect(reopened.openRequests.count == 1, "a host may open it while it lets go")
        #expect(h.state == .active)
        #expect(h.record.lockGrace == .none)
        #expect(h.end(request: reopened.openRequests[0].requestID, at: 3).stops == [extID])
        let e = h.stopConfirmed(at: 3.02, locks: [walWriteLock])
        #expect(e.resumes == [extID], "a fresh grace, not a kill")
    }

    @Test func theGraceFollowsTheExpireSentBeforeTheStop() {
        // The writer holds an assertion: it is told to expire at stopAt - grace, and stopped at
        // stopAt still holding the lock; "resume" gives it the grace once more.
        var h = Harness(policy: policy(.resume))
        let request = h.activate(at: 0)
        let assertion = h.grant(at: 0.5)
        h.end(request: request, at: 1)
        #expect(h.tick(at: 8).expires == [assertion], "expire at background 10 - grace 3")
        #expect(h.tick(at: 11).stops == [extID])
        #expect(h.stopConfirmed(at: 11.02, locks: [walWriteLock]).resumes == [extID])
        h.continueConfirmed(at: 11.03)
        #expect(h.state == .expiring)
        #expect(h.tick(at: 14.03).stops == [extID])
        h.stopConfirmed(at: 14.05)
        #expect(h.state == .suspended)
    }

    @Test func manyLocksAreReportedUpToTheLimitWithTheRestCounted() {
        var h = stopping()
        let locks = (0..<7).map { HeldLock(kind: .ofd, exclusive: true, path: "/data/f\($0)", pid: 100, openElsewhere: true) }
        let reported = h.stopConfirmed(at: 1.02, locks: locks).events(.lockHeldAtSuspend)
        #expect(reported.count == Supervisor.locksReportedPerStop)
        #expect(reported.last?.detail?.hasSuffix("; 3 more") == true)
        #expect(h.record.locksHeldAtSuspend == 1, "counted once per stop")
    }

    @Test func aStopConfirmedForAResumedGroupIgnoresItsLocks() {
        var h = stopping()
        h.begin(at: 1.01)  // the host reopens while the stop is in flight
        let e = h.stopConfirmed(at: 1.02, locks: [walWriteLock])
        #expect(e.signals.isEmpty && e.events(.lockHeldAtSuspend).isEmpty)
    }

    @Test func withFreezeTheSameRuleApplies() {
        var p = testPolicy
        p.suspend = .freeze
        var h = stopping(p)
        h.stopConfirmed(at: 1.02, locks: [walWriteLock])
        #expect(h.state == .terminating)
    }
}
