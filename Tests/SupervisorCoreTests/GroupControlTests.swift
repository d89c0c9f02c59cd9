import SupervisorCore
import Testing

/// Every transition of the pure stop model, in simulated time.
@Suite("GroupControl: suspension, resume, signals and exit of one extension's processes")
struct GroupControlTests {
    static let leader: Int32 = 100
    static func at(_ s: Double) -> Instant { .seconds(s) }
    static func running(_ pids: Int32...) -> [Member] { pids.map { Member(pid: $0, state: .running) } }
    static func stopped(_ pids: Int32...) -> [Member] { pids.map { Member(pid: $0, state: .stopped) } }

    /// A stop confirmed with the leader alone, its stop reported, then a resume.
    static func stopAloneAndResume(_ g: inout GroupControl) {
        _ = g.suspend(at: at(0))
        _ = g.observe(.leaderStopReported, at: at(0.001))
        _ = g.observe(.members(stopped(leader)), at: at(0.001))
        _ = g.resume()
    }

    // MARK: SIGSTOP in a cgroup

    @Test func aLoneLeaderIsConfirmedAfterItsReportAndAStableRead() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        #expect(
            g.suspend(at: Self.at(0)) == [.signal(SignalNumber.stop, .all), .checkAgain(afterSeconds: GroupControl.firstRetrySeconds)],
            "every pid of cgroup.procs gets SIGSTOP at once, whatever its process group; no state is read")
        #expect(g.leaderStopReported == false)
        #expect(g.observe(.leaderStopReported, at: Self.at(0.001)) == [.readMembers])
        #expect(g.leaderStopReported)
        #expect(g.observe(.members(Self.stopped(100)), at: Self.at(0.001)) == [.cancelCheck, .stopConfirmed(members: [100])])
        #expect(g.stop == .stopped)
        #expect(g.mayBeHeld)
    }

    @Test func membersThatLeftTheProcessGroupAreSignalledByPid() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.leaderStopReported, at: Self.at(0.001)) == [.readMembers])
        // 102 has not stopped yet: it alone is signalled again, and checked later.
        let partial = g.observe(.members(Self.stopped(100, 101) + Self.running(102)), at: Self.at(0.001))
        #expect(partial == [.signal(SignalNumber.stop, .pids([102])), .checkAgain(afterSeconds: GroupControl.firstRetrySeconds * 2)])
        #expect(g.observe(.checkDue, at: Self.at(0.05)) == [.readMembers])
        #expect(g.observe(.members(Self.stopped(100, 101, 102)), at: Self.at(0.05)) == [.cancelCheck, .stopConfirmed(members: [100, 101, 102])])
    }

    @Test func membersThatCannotBeReadAreReadAgainLaterNeverTakenAsNone() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.leaderStopReported, at: Self.at(0.001)) == [.readMembers])
        #expect(g.observe(.membersUnreadable, at: Self.at(0.001)) == [.checkAgain(afterSeconds: GroupControl.firstRetrySeconds * 2)])
        #expect(g.stop != .stopped)
        #expect(g.observe(.checkDue, at: Self.at(0.02)) == [.readMembers])
        #expect(g.observe(.membersUnreadable, at: Self.at(0.02)) == [.checkAgain(afterSeconds: GroupControl.firstRetrySeconds * 4)], "backing off")
        #expect(g.observe(.checkDue, at: Self.at(0.06)) == [.readMembers])
        #expect(g.observe(.members(Self.stopped(100)), at: Self.at(0.06)) == [.cancelCheck, .stopConfirmed(members: [100])])
        #expect(g.observe(.membersUnreadable, at: Self.at(0.07)) == [], "nothing to do once stopped")
    }

    @Test func aForkDuringTheStopIsCaughtByTheReRead() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        _ = g.observe(.leaderStopReported, at: Self.at(0.001))
        // The leader forked 101 before its stop: 101 is new, so the set is not settled.
        #expect(g.observe(.members(Self.stopped(100) + Self.running(101)), at: Self.at(0.001)).first == .signal(SignalNumber.stop, .pids([101])))
        // 101 stopped, but forked 102 first: every member is stopped, yet the set changed: read again.
        #expect(g.observe(.members(Self.stopped(100, 101, 102)), at: Self.at(0.02)) == [.readMembers])
        // Unchanged and all stopped: confirmed.
        #expect(g.observe(.members(Self.stopped(100, 101, 102)), at: Self.at(0.02)) == [.cancelCheck, .stopConfirmed(members: [100, 101, 102])])
    }

    @Test func aMemberBlockedInTheKernelCountsAsStoppedOnTheSecondRead() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        _ = g.observe(.leaderStopReported, at: Self.at(0.001))
        let vforkParent = [Member(pid: 100, state: .stopped), Member(pid: 101, state: .blockedInKernel)]
        #expect(
            g.observe(.members(vforkParent), at: Self.at(0.001)) == [
                .signal(SignalNumber.stop, .pids([101])), .checkAgain(afterSeconds: GroupControl.firstRetrySeconds * 2),
            ],
            "signalled at its first blocked read, not confirmed yet")
        #expect(g.observe(.checkDue, at: Self.at(0.05)) == [.readMembers])
        #expect(
            g.observe(.members(vforkParent), at: Self.at(0.05)) == [.cancelCheck, .stopConfirmed(members: [100, 101])], "blocked in two reads in a row: stopped"
        )
    }

    @Test func aMemberFirstSeenBlockedInTheKernelIsSignalledToo() {
        // 102 was forked after the SIGSTOP to every member went out, and is blocked in the
        // kernel when it is first read: it has no stop pending unless it is signalled now.
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        #expect(g.suspend(at: Self.at(0)).first == .signal(SignalNumber.stop, .all))
        _ = g.observe(.leaderStopReported, at: Self.at(0.001))
        let read = [Member(pid: 100, state: .stopped), Member(pid: 102, state: .blockedInKernel)]
        #expect(g.observe(.members(read), at: Self.at(0.001)).contains(.signal(SignalNumber.stop, .pids([102]))))
        // Still blocked at the next read: already signalled, not signalled again.
        _ = g.observe(.checkDue, at: Self.at(0.05))
        #expect(g.observe(.members(read), at: Self.at(0.05)) == [.cancelCheck, .stopConfirmed(members: [100, 102])])
    }

    @Test func retriesBackOffAndASlowStopIsReportedOnce() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        var delays: [Double] = []
        var t = 0.0
        var actions = g.suspend(at: Self.at(t))
        var slow = 0
        for _ in 0..<80 {
            guard case .checkAgain(let d)? = actions.last else { break }
            delays.append(d)
            t += d
            let due = g.observe(.checkDue, at: Self.at(t))
            slow += due.filter { if case .slowStop = $0 { true } else { false } }.count
            actions = g.observe(.members(Self.running(100)), at: Self.at(t))
        }
        #expect(Array(delays.prefix(4)) == [0.02, 0.04, 0.08, 0.1])
        #expect(delays.max() == GroupControl.maxRetrySeconds)
        #expect(t > GroupControl.slowStopSeconds)
        #expect(slow == 1)
    }

    @Test func processesThatKeepRunningPastTheDeadlineRefuseTheStop() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        var t = 0.0
        var actions = g.suspend(at: Self.at(t))
        var refused: [GroupAction] = []
        while case .checkAgain(let d)? = actions.last {
            t += d
            _ = g.observe(.checkDue, at: Self.at(t))
            // A member keeps continuing the others: each read finds one running.
            actions = g.observe(.members(Self.stopped(100) + Self.running(101)), at: Self.at(t))
            refused = actions.filter { if case .stopRefused = $0 { true } else { false } }
            if !refused.isEmpty {
                #expect(actions == refused, "nothing else: no signal, no further check")
                break
            }
        }
        guard case .stopRefused(let seconds)? = refused.first, refused.count == 1 else {
            Issue.record("no refusal: \(actions)")
            return
        }
        #expect(abs(seconds - t) < 1e-6, "the time since the stop began, in seconds")
        #expect(t >= GroupControl.stopDeadlineSeconds && t < GroupControl.stopDeadlineSeconds + GroupControl.maxRetrySeconds + 1e-9)
        #expect(g.stop != .stopped)
    }

    @Test func aLoopThatWasLateIsNoRefusal() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        // The first check comes 30 s late (a loop that was blocked): its read finds a member
        // running, which is signalled again, not taken as a refusal.
        _ = g.observe(.checkDue, at: Self.at(30))
        #expect(g.observe(.members(Self.stopped(100) + Self.running(101)), at: Self.at(30)).first == .signal(SignalNumber.stop, .pids([101])))
    }

    @Test func aFreezeHasNoStopDeadline() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .freeze)
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.checkDue, at: Self.at(GroupControl.stopDeadlineSeconds * 3)).contains(.readFrozen))
    }

    @Test func anEmptyCgroupEndsTheStopWithoutConfirmingIt() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.members([]), at: Self.at(0)) == [.cancelCheck])
        #expect(g.stop != .stopped)
    }

    // MARK: SIGSTOP to a process group (no cgroup)

    @Test func aProcessGroupIsStoppedAtOnceAndConfirmedWhenItIsTheLeaderAlone() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        #expect(g.suspend(at: Self.at(0)) == [.signal(SignalNumber.stop, .all), .checkAgain(afterSeconds: GroupControl.firstRetrySeconds)])
        #expect(g.observe(.leaderStopReported, at: Self.at(0.001)) == [.readDescendants])
        #expect(
            g.observe(.descendants(.untracked), at: Self.at(0.001)) == [.readMembers],
            "not a subreaper: the leader's children do not account for every descendant, so the group is read")
        #expect(g.observe(.members(Self.stopped(100)), at: Self.at(0.001)) == [.cancelCheck, .stopConfirmed(members: [100])])
    }

    @Test func aProcessGroupLeaderWithNoDescendantIsConfirmedAloneWithNoRead() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.leaderStopReported, at: Self.at(0.001)) == [.readDescendants])
        #expect(
            g.observe(.descendants(.tracked(leaderHasChildren: false, orphansAdopted: false)), at: Self.at(0.001))
                == [.cancelCheck, .stopConfirmed(members: [Self.leader])], "no child and no orphan: the leader alone, with no scan")
        #expect(g.stop == .stopped)
        #expect(g.aloneAtLastStop)
        #expect(g.resume() == [.cancelCheck, .signal(SignalNumber.cont, .pids([Self.leader]))])
    }

    @Test(arguments: [
        Descendants.tracked(leaderHasChildren: true, orphansAdopted: false),
        .tracked(leaderHasChildren: false, orphansAdopted: true),
        .tracked(leaderHasChildren: true, orphansAdopted: true),
        .untracked,
    ])
    func aProcessGroupLeaderThatMayHaveDescendantsHasItsGroupRead(descendants: Descendants) {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        _ = g.observe(.leaderStopReported, at: Self.at(0.001))
        #expect(g.observe(.descendants(descendants), at: Self.at(0.001)) == [.readMembers])
        #expect(g.stop != .stopped)
        // The scan finds a member that is not stopped yet: signalled through the group, and
        // the descendants are asked again at the re-check.
        _ = g.observe(.members(Self.stopped(100) + Self.running(101)), at: Self.at(0.001))
        #expect(g.observe(.checkDue, at: Self.at(0.03)) == [.readDescendants])
        #expect(g.observe(.descendants(descendants), at: Self.at(0.03)) == [.readMembers])
        #expect(g.observe(.members(Self.stopped(100, 101)), at: Self.at(0.03)) == [.cancelCheck, .stopConfirmed(members: [100, 101])])
        #expect(!g.aloneAtLastStop)
    }

    @Test func theDescendantsCountOnlyInAProcessGroupWhoseLeadersStopWasReported() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        let none = Descendants.tracked(leaderHasChildren: false, orphansAdopted: false)
        #expect(g.observe(.descendants(none), at: Self.at(0)) == [], "no stop in flight")
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.descendants(none), at: Self.at(0.001)) == [], "its stop is not reported: it may still fork")
        #expect(g.observe(.checkDue, at: Self.at(0.02)) == [.readMembers], "before the report: the group is scanned")
        _ = g.signal(SignalNumber.terminate, thenContinue: true)
        #expect(g.observe(.descendants(none), at: Self.at(0.03)) == [], "the stop was abandoned")

        var c = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = c.suspend(at: Self.at(0))
        #expect(c.observe(.leaderStopReported, at: Self.at(0.001)) == [.readMembers], "a cgroup lists its members itself")
        #expect(c.observe(.descendants(none), at: Self.at(0.001)) == [])
        #expect(c.stop != .stopped)
    }

    // MARK: The leader's stop report

    @Test func theStopReportIsAwaitedOnlyWhileAStopWithSignalsWaitsForIt() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        #expect(!g.awaitsStopReport)
        _ = g.suspend(at: Self.at(0))
        #expect(g.awaitsStopReport)
        _ = g.observe(.members(Self.stopped(100) + Self.running(101)), at: Self.at(0.02))
        #expect(g.awaitsStopReport, "a read does not replace the report")
        _ = g.observe(.leaderStopReported, at: Self.at(0.03))
        #expect(!g.awaitsStopReport)
        #expect(g.leaderStopReported)

        _ = g.resume()
        #expect(!g.awaitsStopReport)
        _ = g.suspend(at: Self.at(1))
        #expect(g.awaitsStopReport)
        _ = g.signal(SignalNumber.terminate, thenContinue: true)
        #expect(!g.awaitsStopReport, "a signal abandons the stop")

        _ = g.suspend(at: Self.at(2))
        _ = g.observe(.leaderExited(.exited(0), populated: false), at: Self.at(2.01))
        #expect(!g.awaitsStopReport, "the leader exited")

        var confirmed = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = confirmed.suspend(at: Self.at(0))
        _ = confirmed.observe(.checkDue, at: Self.at(0.02))
        _ = confirmed.observe(.members([Member(pid: Self.leader, state: .blockedInKernel)]), at: Self.at(0.02))
        _ = confirmed.observe(.checkDue, at: Self.at(0.06))
        #expect(
            confirmed.observe(.members([Member(pid: Self.leader, state: .blockedInKernel)]), at: Self.at(0.06)).last
                == .stopConfirmed(members: [Self.leader]))
        #expect(!confirmed.awaitsStopReport, "confirmed without the report: no longer awaited")

        var frozen = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .freeze)
        _ = frozen.suspend(at: Self.at(0))
        #expect(!frozen.awaitsStopReport, "a freeze has no stop report")
    }

    @Test func aStopReportThatCannotComeIsNoLongerAwaitedAndTheLeaderIsRead() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.leaderStopUnreportable, at: Self.at(0.001)) == [], "the armed re-check goes on")
        #expect(!g.awaitsStopReport)
        #expect(!g.leaderStopReported)
        #expect(g.observe(.leaderStopReported, at: Self.at(0.002)) == [], "no report is taken after its failure")
        #expect(g.observe(.checkDue, at: Self.at(0.02)) == [.readMembers])
        // Without the report, a leader alone needs two equal reads, and is not taken to be alone.
        #expect(g.observe(.members(Self.stopped(100)), at: Self.at(0.02)) == [.readMembers])
        #expect(g.observe(.members(Self.stopped(100)), at: Self.at(0.02)) == [.cancelCheck, .stopConfirmed(members: [100])])
        #expect(!g.aloneAtLastStop)
        #expect(g.observe(.leaderStopUnreportable, at: Self.at(0.03)) == [], "nothing in flight")

        var p = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        _ = p.suspend(at: Self.at(0))
        _ = p.observe(.leaderStopUnreportable, at: Self.at(0.001))
        #expect(p.observe(.checkDue, at: Self.at(0.02)) == [.readMembers], "unreported: the group is scanned, no shortcut")
        #expect(p.observe(.descendants(.tracked(leaderHasChildren: false, orphansAdopted: false)), at: Self.at(0.02)) == [])
    }

    @Test func theConfirmationCarriesTheMembersOfTheConfirmingReadInTheirOrder() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        _ = g.observe(.leaderStopReported, at: Self.at(0.001))
        _ = g.observe(.members(Self.stopped(102, 100, 101)), at: Self.at(0.001))
        #expect(
            g.observe(.members(Self.stopped(101, 102, 100)), at: Self.at(0.001)) == [.cancelCheck, .stopConfirmed(members: [101, 102, 100])],
            "the same set in another order is settled; the pids come as read")
    }

    @Test func aProcessGroupWithMembersNeedsTwoEqualReads() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.members(Self.stopped(100, 101)), at: Self.at(0.02)) == [.readMembers])
        #expect(g.observe(.members(Self.stopped(100, 101)), at: Self.at(0.02)) == [.cancelCheck, .stopConfirmed(members: [100, 101])])
    }

    @Test func aRunningMemberOfAProcessGroupIsSignalledThroughTheGroup() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        #expect(g.observe(.members(Self.stopped(100) + Self.running(101)), at: Self.at(0.02)).first == .signal(SignalNumber.stop, .all))
    }

    // MARK: The freezer

    @Test func freezeIsConfirmedByFrozenAndSendsNoSignal() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .freeze)
        #expect(g.suspend(at: Self.at(0)) == [.setFrozen(true), .checkAgain(afterSeconds: GroupControl.slowStopSeconds), .readFrozen])
        #expect(g.observe(.frozen(false), at: Self.at(0.001)) == [])
        #expect(g.observe(.frozen(true), at: Self.at(0.001)) == [.cancelCheck, .stopConfirmed(members: nil)])
        #expect(g.stop == .frozen)
        #expect(g.resume() == [.cancelCheck, .setFrozen(false)], "resume thaws, no SIGCONT")
        #expect(g.stop == .running)
    }

    @Test func aSlowFreezeIsReportedAndReadAgainRarely() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .freeze)
        _ = g.suspend(at: Self.at(0))
        let due = g.observe(.checkDue, at: Self.at(5))
        #expect(due == [.slowStop(seconds: 5), .checkAgain(afterSeconds: GroupControl.slowStopSeconds), .readFrozen])
        #expect(g.observe(.checkDue, at: Self.at(10)) == [.checkAgain(afterSeconds: GroupControl.slowStopSeconds), .readFrozen])
    }

    @Test func freezeWithoutACgroupFallsBackToSignals() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .freeze)
        #expect(g.suspend(at: Self.at(0)).first == .signal(SignalNumber.stop, .all))
    }

    // MARK: Resume and signals

    @Test func resumeContinuesEveryMember() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        #expect(g.resume() == [.cancelCheck, .signal(SignalNumber.cont, .all)])
        #expect(!g.mayBeHeld)
    }

    @Test func aLeaderStoppedAloneIsResumedWithoutAMembershipRead() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        _ = g.observe(.leaderStopReported, at: Self.at(0.001))
        #expect(g.observe(.members(Self.stopped(100)), at: Self.at(0.001)) == [.cancelCheck, .stopConfirmed(members: [100])])
        #expect(g.aloneAtLastStop)
        #expect(
            g.resume() == [.cancelCheck, .signal(SignalNumber.cont, .pids([Self.leader]))],
            "confirmed alone, and stopped processes cannot fork: SIGCONT to the leader, no read")
    }

    @Test func aLeaderAloneAtItsLastStopIsStoppedThroughItsProcessGroupWithOneRead() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        Self.stopAloneAndResume(&g)
        #expect(
            g.suspend(at: Self.at(1)) == [.signal(SignalNumber.stop, .leaderGroup), .checkAgain(afterSeconds: GroupControl.firstRetrySeconds)],
            "alone last time: kill(-pgid), no membership read before the signal")
        #expect(g.observe(.leaderStopReported, at: Self.at(1.001)) == [.readMembers])
        // Since then it started a helper that called setsid(): the read finds it running.
        #expect(
            g.observe(.members(Self.stopped(100) + Self.running(101)), at: Self.at(1.001))
                == [.signal(SignalNumber.stop, .pids([101])), .checkAgain(afterSeconds: GroupControl.firstRetrySeconds * 2)])
        #expect(g.observe(.checkDue, at: Self.at(1.05)) == [.readMembers])
        #expect(g.observe(.members(Self.stopped(100, 101)), at: Self.at(1.05)) == [.cancelCheck, .stopConfirmed(members: [100, 101])])
        #expect(!g.aloneAtLastStop)
        #expect(g.resume() == [.cancelCheck, .signal(SignalNumber.cont, .all)])
        #expect(g.suspend(at: Self.at(2)).first == .signal(SignalNumber.stop, .all), "not alone last time: every pid of cgroup.procs at once")
    }

    @Test func withoutACgroupTheProcessGroupIsAlwaysEveryMember() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        Self.stopAloneAndResume(&g)
        #expect(g.suspend(at: Self.at(1)).first == .signal(SignalNumber.stop, .all))
    }

    @Test func aLeaderConfirmedBlockedInTheKernelIsNotTakenToBeAlone() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        // No stop report: the leader sat in D (inside fork(), say) in two reads in a row.
        let blocked = [Member(pid: Self.leader, state: .blockedInKernel)]
        _ = g.observe(.checkDue, at: Self.at(0.02))
        _ = g.observe(.members(blocked), at: Self.at(0.02))
        _ = g.observe(.checkDue, at: Self.at(0.06))
        #expect(g.observe(.members(blocked), at: Self.at(0.06)) == [.cancelCheck, .stopConfirmed(members: [Self.leader])])
        #expect(!g.aloneAtLastStop, "a child forked meanwhile may stop after this read: not alone")
        #expect(g.resume() == [.cancelCheck, .signal(SignalNumber.cont, .all)])
    }

    @Test func aGroupStoppedWithOtherMembersIsResumedByAFreshRead() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        _ = g.observe(.leaderStopReported, at: Self.at(0.001))
        _ = g.observe(.members(Self.stopped(100, 101)), at: Self.at(0.001))
        #expect(g.observe(.members(Self.stopped(100, 101)), at: Self.at(0.001)) == [.cancelCheck, .stopConfirmed(members: [100, 101])])
        #expect(!g.aloneAtLastStop)
        #expect(g.resume() == [.cancelCheck, .signal(SignalNumber.cont, .all)])
    }

    @Test func sigkillInACgroupIsCgroupKill() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .freeze)
        _ = g.suspend(at: Self.at(0))
        _ = g.observe(.frozen(true), at: Self.at(0))
        #expect(g.signal(SignalNumber.kill, thenContinue: true) == [.cancelCheck, .killAll])
    }

    @Test func aTerminatingSignalToAFrozenGroupThawsIt() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .freeze)
        _ = g.suspend(at: Self.at(0))
        _ = g.observe(.frozen(true), at: Self.at(0))
        #expect(
            g.signal(SignalNumber.terminate, thenContinue: true) == [
                .cancelCheck, .signal(SignalNumber.terminate, .all), .signal(SignalNumber.cont, .all), .setFrozen(false),
            ])
    }

    @Test func aSignalToARunningGroupIsJustTheSignal() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        #expect(g.signal(SignalNumber.hangup, thenContinue: false) == [.cancelCheck, .signal(SignalNumber.hangup, .all)])
        #expect(g.signal(SignalNumber.kill, thenContinue: false) == [.cancelCheck, .signal(SignalNumber.kill, .all)])
    }

    @Test func aSignalAbandonsAStopInFlight() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        _ = g.suspend(at: Self.at(0))
        _ = g.signal(SignalNumber.terminate, thenContinue: true)
        #expect(g.observe(.members(Self.stopped(100)), at: Self.at(0.01)) == [], "a late read no longer confirms anything")
        #expect(g.observe(.leaderStopReported, at: Self.at(0.01)) == [])
    }

    // MARK: Exits

    @Test func aLeaderExitingAloneIsAnExitAtOnce() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        #expect(g.observe(.leaderExited(.exited(0), populated: false), at: Self.at(1)) == [.cancelCheck, .exited(.exited(0), outlivedLeader: false)])
        #expect(g.observe(.emptied, at: Self.at(1)) == [], "reported once")
    }

    @Test func membersOutlivingTheLeaderAreKilledAndTheExitWaitsForTheEmptyCgroup() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        #expect(g.observe(.leaderExited(.exited(0), populated: true), at: Self.at(1)) == [.cancelCheck, .killAll])
        #expect(g.observe(.emptied, at: Self.at(1.01)) == [.exited(.exited(0), outlivedLeader: true)])
    }

    @Test func aSuspensionAfterTheLeaderExitedDoesNothing() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        #expect(g.observe(.leaderExited(.exited(0), populated: true), at: Self.at(1)) == [.cancelCheck, .killAll])
        #expect(g.suspend(at: Self.at(1.01)) == [], "the members left are being killed: no stop, no report awaited")
        #expect(g.stop == .running)
        #expect(!g.awaitsStopReport)
        #expect(g.observe(.emptied, at: Self.at(1.02)) == [.exited(.exited(0), outlivedLeader: true)])

        var f = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .freeze)
        _ = f.observe(.leaderExited(.exited(0), populated: true), at: Self.at(1))
        #expect(f.suspend(at: Self.at(1.01)) == [])
    }

    @Test func anEmptyCgroupBeforeTheLeaderReportWaitsForTheLeadersStatus() {
        var g = GroupControl(leader: Self.leader, containment: .cgroup, mechanism: .stop)
        #expect(g.observe(.emptied, at: Self.at(1)) == [])
        #expect(g.observe(.leaderExited(.signaled(9), populated: false), at: Self.at(1)) == [.cancelCheck, .exited(.signaled(9), outlivedLeader: false)])
    }

    @Test func aProcessGroupLeaderExitKillsWhatIsLeftOfTheGroup() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        #expect(
            g.observe(.leaderExited(.exited(3), populated: nil), at: Self.at(1)) == [
                .cancelCheck, .signal(SignalNumber.kill, .all), .signal(SignalNumber.cont, .all), .exited(.exited(3), outlivedLeader: false),
            ])
        #expect(g.suspend(at: Self.at(2)) == [], "nothing to suspend after the exit")
    }

    @Test func aProcessGroupWithMembersLeftWhenTheLeaderExitedRecordsThatTheyOutlivedIt() {
        var g = GroupControl(leader: Self.leader, containment: .processGroup, mechanism: .stop)
        #expect(
            g.observe(.leaderExited(.exited(0), populated: true), at: Self.at(1)) == [
                .cancelCheck, .signal(SignalNumber.kill, .all), .signal(SignalNumber.cont, .all), .exited(.exited(0), outlivedLeader: true),
            ])
    }
}
