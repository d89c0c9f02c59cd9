/// How the processes of one running extension are held together.
public enum Containment: Equatable, Sendable {
    /// The extension's own cgroup v2: membership is `cgroup.procs`, whatever process groups or
    /// sessions its processes moved to; the freezer and `cgroup.kill` are available.
    case cgroup
    /// Its process group only (no writable cgroup v2): a process that calls `setsid()` or
    /// `setpgid()` leaves it.
    case processGroup
}

/// The state of one member of a group, as the shell read it from the kernel.
public enum MemberState: Equatable, Sendable {
    /// Some thread can run user code.
    case running
    /// Every thread is stopped.
    case stopped
    /// Every thread is stopped or in uninterruptible sleep, at least one asleep (a vfork
    /// parent whose child was stopped before exec is the classic case).
    case blockedInKernel
}

/// One process of an extension, as observed.
public struct Member: Equatable, Sendable {
    /// Its pid.
    public var pid: Int32
    /// How far its threads are from running user code, as read.
    public var state: MemberState
    /// A member `pid` found in `state`.
    public init(pid: Int32, state: MemberState) {
        self.pid = pid
        self.state = state
    }
}

/// Which processes a signal goes to.
public enum SignalTarget: Equatable, Sendable {
    /// Every current member: `kill(-pgid)` for a process group, each pid of `cgroup.procs`
    /// for a cgroup (read at the moment of sending).
    case all
    /// These members only.
    case pids([Int32])
    /// The members still in the leader's process group: `kill(-pgid)`, with no membership read,
    /// atomic with respect to forks in the group. A member that left it (`setsid`) is not
    /// reached.
    case leaderGroup
}

/// What the shell knows of the descendants of an extension's leader, outside a cgroup.
public enum Descendants: Equatable, Sendable {
    /// The daemon is not a child subreaper: a descendant whose parent dies is reparented out
    /// of its sight, so the leader's children do not account for every descendant.
    case untracked
    /// The daemon is a child subreaper, so every descendant of the extension is in its
    /// leader's process tree or, orphaned, a child of the daemon. `leaderHasChildren`: the
    /// leader has children; `orphansAdopted`: the daemon has children other than extension
    /// leaders (orphans of any extension).
    case tracked(leaderHasChildren: Bool, orphansAdopted: Bool)
}

/// What `GroupControl` asks the shell to do. The shell performs them in order and reports
/// what it observes back through `GroupControl.observe(_:at:)`.
public enum GroupAction: Equatable, Sendable {
    /// Read the current members and their states; report `.members`.
    case readMembers
    /// Read what the kernel shows of the extension's descendants (the process-group fallback,
    /// once the leader's stop was reported); report `.descendants`.
    case readDescendants
    /// Read `frozen` from `cgroup.events`; report `.frozen`.
    case readFrozen
    /// Send the signal to the target's processes.
    case signal(Int32, SignalTarget)
    /// Write `cgroup.freeze` (true: freeze, false: thaw).
    case setFrozen(Bool)
    /// Write `cgroup.kill`: SIGKILL to every member, frozen or stopped ones included.
    case killAll
    /// Report `.checkDue` after this many seconds (replaces any pending check).
    case checkAgain(afterSeconds: Double)
    /// Cancel the pending check.
    case cancelCheck
    /// The stop is confirmed by the kernel: every member is stopped (or frozen). `members`:
    /// the pids of the read that confirmed it, in the order read (stopped processes cannot
    /// fork, so they are every member); nil for a freeze, confirmed by `frozen 1` with no read.
    case stopConfirmed(members: [Int32]?)
    /// The stop has not completed after this many seconds (a warning; the stop goes on).
    case slowStop(seconds: Double)
    /// A stop with signals that a read still finds running after `stopDeadlineSeconds` (and
    /// `refusalReads` reads): processes that keep running (one that continues the others as they
    /// are stopped, say) refuse it. Report it to the core, which ends the extension; no check
    /// follows.
    case stopRefused(seconds: Double)
    /// Every process is gone: reap the leader, remove the cgroup, report the exit to the core.
    /// `outlivedLeader` says whether members were still alive when the leader exited.
    case exited(ExitStatus, outlivedLeader: Bool)
}

/// What the shell observed about the group.
public enum GroupObservation: Equatable, Sendable {
    /// The kernel reported the leader's group stop (`waitid` WSTOPPED on its pidfd).
    case leaderStopReported
    /// The kernel cannot report the leader's stop: `waitid` on its pidfd failed (ECHILD: the
    /// leader is gone, and its exit is on its way through the pidfd).
    case leaderStopUnreportable
    /// A fresh read of the members, leader included while it lives.
    case members([Member])
    /// The members could not be read (`cgroup.procs` failed): nothing is known of them.
    case membersUnreadable
    /// What the shell read of the extension's descendants (`.readDescendants`).
    case descendants(Descendants)
    /// `frozen` from `cgroup.events`.
    case frozen(Bool)
    /// The leader exited. `populated`: whether other processes of the extension still lived
    /// (the cgroup's `populated`; for a process group, a scan of its live members), or nil
    /// when it could not be read.
    case leaderExited(ExitStatus, populated: Bool?)
    /// `populated 0` in `cgroup.events`: the cgroup has no process left.
    case emptied
    /// The check armed by `.checkAgain` is due.
    case checkDue
}

/// The decisions about the processes of one running extension: how a suspension is made and
/// when it counts as confirmed (retries, the fork race, stop versus freeze), how resume and
/// signals reach every member, and when the extension counts as exited. Pure: driven by
/// observations and injected time, no system calls. One value per process generation, owned
/// by the shell's handle on that process.
///
/// Guarantees:
/// - `.stopConfirmed` is returned only when the latest read found every member stopped (or
///   blocked in the kernel in two reads in a row) and the same set of members as the read
///   before it (a process forked while the stop was in flight is found by the re-read and
///   stopped in turn), or, for `.freeze`, when the kernel reported `frozen 1`. In a process
///   group, the leader whose stop the kernel reported counts as its only member with no read
///   of the members only when the shell found it has no child and the daemon, a child
///   subreaper, has adopted no orphan.
/// - `awaitsStopReport` is true exactly while a stop with signals is in flight and the
///   kernel's report of the leader's stop (or its failure) has not come: it is the shell's
///   one source for which leaders to ask about at a SIGCHLD.
/// - With `.freeze`, no signal is ever sent to suspend or resume: the processes cannot observe
///   the suspension.
/// - A terminating signal to a group that may be stopped or frozen is followed by SIGCONT or a
///   thaw, so it acts at once.
/// - With a cgroup, `.exited` comes only once the cgroup is empty and the leader's status is
///   known; members that outlived the leader are killed first.
public struct GroupControl: Equatable, Sendable {
    /// The leader's pid: the process that was spawned, whose process group is the extension's
    /// on the fallback.
    public let leader: Int32
    /// How the processes are held together: a cgroup, or the leader's process group.
    public let containment: Containment
    /// How the processes are suspended: SIGSTOP, or the freezer (in a cgroup only).
    public let mechanism: SuspendMode

    /// Where the kernel's report of the leader's stop stands, during a stop with signals.
    public enum LeaderReport: Equatable, Sendable {
        /// Awaited: the shell asks the kernel for it at each SIGCHLD.
        case awaited
        /// The kernel reported the leader's group stop: its state is known without a read.
        case reported
        /// It cannot come (`.leaderStopUnreportable`): the leader's state is read like any
        /// member's.
        case unavailable
    }

    /// Where a suspension stands.
    public enum StopState: Equatable, Sendable {
        /// No suspension holds or is in flight.
        case running
        /// Stopping with signals: `lastMembers` from the previous read (nil before the first).
        case stopping(since: Instant, lastMembers: Set<Int32>?, report: LeaderReport, lastBlocked: Set<Int32>, retry: Double, warned: Bool)
        /// Freezing: waiting for `frozen 1`.
        case freezing(since: Instant, warned: Bool)
        /// Every member stopped, as confirmed.
        case stopped
        /// The cgroup frozen, as the kernel reported.
        case frozen
    }

    /// Where the suspension stands.
    public private(set) var stop: StopState = .running
    /// How many suspensions began here (`suspend`). Work that belongs to one suspension (the
    /// survey of the locks held at its confirmed stop) compares it, with `isSuspended`, to tell
    /// whether that suspension still holds: the count changed when another began since, and
    /// `isSuspended` is false once the group was resumed or signalled.
    public private(set) var suspensions: UInt64 = 0
    /// Whether a suspension is confirmed and holds: every member stopped, or the cgroup frozen.
    public var isSuspended: Bool { stop == .stopped || stop == .frozen }
    /// The reads of the stop in flight that found members running (none stopped the stop yet).
    private var readsWithRunningMembers = 0
    /// The latest confirmed stop found the leader as the only member, stopped as the kernel
    /// reported. While that stop holds, resuming needs no membership read (a stopped process
    /// cannot fork, and the leader's pid stays its own until it is reaped); the next
    /// suspension signals the leader's process group first and reads the members once, at the
    /// confirmation.
    public private(set) var aloneAtLastStop = false
    /// The leader's exit status, once it exited.
    public private(set) var leaderStatus: ExitStatus?
    /// Members were alive when the leader exited, and were killed.
    public private(set) var outlivedLeader = false
    /// The cgroup reported empty.
    public private(set) var empty = false
    /// `.exited` was returned: nothing more is done for these processes.
    public private(set) var exitReported = false

    /// The first retry of a stop check (each next one doubles it).
    public static let firstRetrySeconds = 0.02
    /// The longest wait between two stop checks.
    public static let maxRetrySeconds = 0.1
    /// A stop (or freeze) still incomplete after this long is reported as slow, once.
    public static let slowStopSeconds = 5.0
    /// A stop with signals still incomplete after this long is refused (`.stopRefused`) once a
    /// read finds members running and at least `refusalReads` reads have: a member blocked in
    /// the kernel counts as stopped after two reads, so only processes that keep running are
    /// left by then (the reads make it evidence, not a loop that was merely late). A freeze has
    /// no such deadline: no signal undoes it.
    public static let stopDeadlineSeconds = 10.0
    /// The reads with members running a stop must have had before it is refused.
    public static let refusalReads = 20

    /// The decisions for the processes of the extension whose leader is `leader`, held by
    /// `containment`, suspended by `mechanism`; none of them is suspended yet.
    public init(leader: Int32, containment: Containment, mechanism: SuspendMode) {
        self.leader = leader
        self.containment = containment
        // `never` has no suspension; it never reaches `suspend`.
        self.mechanism = mechanism
    }

    /// Whether the kernel reported the leader's stop during the suspension in flight.
    public var leaderStopReported: Bool {
        if case .stopping(_, _, .reported, _, _, _) = stop { return true }
        return false
    }

    /// Whether the kernel's report of the leader's stop is awaited: a stop with signals is in
    /// flight, and neither the report nor its failure came. These are exactly the processes
    /// whose leader the shell asks about (`waitid` on its pidfd) at a SIGCHLD.
    public var awaitsStopReport: Bool {
        if case .stopping(_, _, .awaited, _, _, _) = stop { return true }
        return false
    }

    /// Whether the processes may be stopped or frozen now (so a terminating signal needs a
    /// continue or thaw to act).
    public var mayBeHeld: Bool { stop != .running }

    /// Begins a suspension. Once the leader exited there is none: what is left of the group
    /// is being killed, and the exit is on its way.
    public mutating func suspend(at now: Instant) -> [GroupAction] {
        guard leaderStatus == nil else { return [] }
        suspensions += 1
        if mechanism == .freeze && containment == .cgroup {
            stop = .freezing(since: now, warned: false)
            // `frozen 1` is read once right after the write: a group whose members freeze at
            // once is confirmed without waiting for the notification, which the kernel holds
            // back when the file notified less than 10 ms before (a thaw just before, say).
            // The check is armed before the read, so a confirmation by the read cancels it.
            return [.setFrozen(true), .checkAgain(afterSeconds: GroupControl.slowStopSeconds), .readFrozen]
        }
        stop = .stopping(since: now, lastMembers: nil, report: .awaited, lastBlocked: [], retry: GroupControl.firstRetrySeconds, warned: false)
        readsWithRunningMembers = 0
        // In a cgroup, `.all` is every pid its `cgroup.procs` lists, whatever its process group
        // (no state is read: all of them get SIGSTOP); a member forked between that read and
        // the signals is found by the re-read that follows the leader's stop report, which
        // closes the fork race. In a process group, kill(-pgid) reaches every member atomically
        // with respect to forks in the group. A leader that was alone at its last stop is
        // likely alone again: its process group is signalled with no read, and the read after
        // its stop report finds any member outside the group, which is signalled then.
        let target: SignalTarget = containment == .cgroup && aloneAtLastStop ? .leaderGroup : .all
        return [.signal(SignalNumber.stop, target), .checkAgain(afterSeconds: nextRetry())]
    }

    /// Resumes every member. The shell reports `continueConfirmed` to the core once the
    /// actions are performed: the kernel clears the stop (or the freeze) inside the call.
    public mutating func resume() -> [GroupAction] {
        let wasFrozen: Bool
        switch stop {
        case .freezing, .frozen: wasFrozen = true
        default: wasFrozen = false
        }
        let alone = stop == .stopped && aloneAtLastStop
        stop = .running
        // A freeze may still be in place when its state was dropped (the leader exited
        // meanwhile): with the freeze mechanism in a cgroup, resuming always thaws.
        if wasFrozen || (mechanism == .freeze && containment == .cgroup) { return [.cancelCheck, .setFrozen(false)] }
        return [.cancelCheck, .signal(SignalNumber.cont, alone ? .pids([leader]) : .all)]
    }

    /// Sends `signal` to every member; a suspension in flight is abandoned. With
    /// `thenContinue` (the group may be stopped or frozen) the signal is followed by SIGCONT
    /// and a thaw so that it acts at once.
    public mutating func signal(_ signal: Int32, thenContinue: Bool) -> [GroupAction] {
        let held = mayBeHeld
        stop = .running
        var actions: [GroupAction] = [.cancelCheck]
        if signal == SignalNumber.kill && containment == .cgroup {
            // cgroup.kill ends frozen and stopped members too, and new forks cannot escape it.
            actions.append(.killAll)
            return actions
        }
        actions.append(.signal(signal, .all))
        if thenContinue || held {
            actions.append(.signal(SignalNumber.cont, .all))
            if containment == .cgroup && mechanism == .freeze { actions.append(.setFrozen(false)) }
        }
        return actions
    }

    /// Feeds an observation; returns what to do next.
    public mutating func observe(_ observation: GroupObservation, at now: Instant) -> [GroupAction] {
        switch observation {
        case .leaderStopReported:
            guard case .stopping(let since, let last, .awaited, let blocked, let retry, let warned) = stop else { return [] }
            stop = .stopping(since: since, lastMembers: last, report: .reported, lastBlocked: blocked, retry: retry, warned: warned)
            return [readMembers]
        case .leaderStopUnreportable:
            // The armed re-check reads the members, the leader's state with them.
            guard case .stopping(let since, let last, .awaited, let blocked, let retry, let warned) = stop else { return [] }
            stop = .stopping(since: since, lastMembers: last, report: .unavailable, lastBlocked: blocked, retry: retry, warned: warned)
            return []
        case .members(let members):
            return membersRead(members, at: now)
        case .membersUnreadable:
            // Neither confirmed nor given up: the stop is read again later, backing off.
            guard case .stopping = stop else { return [] }
            return [.checkAgain(afterSeconds: nextRetry())]
        case .descendants(let descendants):
            guard containment == .processGroup, leaderStopReported else { return [] }
            // The leader's stop was reported, so it cannot fork. With no child, and no orphan
            // anywhere that could be one of its descendants, its group is the leader alone:
            // no scan of /proc is needed to know it.
            if descendants == .tracked(leaderHasChildren: false, orphansAdopted: false) {
                return membersRead([Member(pid: leader, state: .stopped)], at: now)
            }
            return [.readMembers]
        case .frozen(let isFrozen):
            guard case .freezing = stop, isFrozen else { return [] }
            stop = .frozen
            return [.cancelCheck, .stopConfirmed(members: nil)]
        case .checkDue:
            return checkDue(at: now)
        case .leaderExited(let status, let populated):
            guard leaderStatus == nil else { return [] }
            leaderStatus = status
            stop = .running
            switch containment {
            case .processGroup:
                // The leader stays an unreaped zombie until now, so its group id cannot be
                // reused: what is left of the group is killed (and continued, so that stopped
                // members die at once) before the exit is reported.
                exitReported = true
                return [.cancelCheck, .signal(SignalNumber.kill, .all), .signal(SignalNumber.cont, .all), .exited(status, outlivedLeader: populated == true)]
            case .cgroup:
                if populated == false { empty = true }
                if empty { return [.cancelCheck] + reportExit() }
                outlivedLeader = true
                return [.cancelCheck, .killAll]
            }
        case .emptied:
            empty = true
            return leaderStatus == nil ? [] : reportExit()
        }
    }

    private mutating func reportExit() -> [GroupAction] {
        guard !exitReported, let status = leaderStatus else { return [] }
        exitReported = true
        return [.exited(status, outlivedLeader: outlivedLeader)]
    }

    /// How the members are read: in a process group whose leader's stop was reported, what
    /// is known of its descendants first (it may make a scan of /proc unnecessary).
    private var readMembers: GroupAction {
        containment == .processGroup && leaderStopReported ? .readDescendants : .readMembers
    }

    private mutating func nextRetry() -> Double {
        guard case .stopping(let since, let last, let report, let blocked, let retry, let warned) = stop else { return GroupControl.firstRetrySeconds }
        stop = .stopping(
            since: since, lastMembers: last, report: report, lastBlocked: blocked, retry: min(retry * 2, GroupControl.maxRetrySeconds), warned: warned)
        return retry
    }

    private mutating func checkDue(at now: Instant) -> [GroupAction] {
        switch stop {
        case .stopping(let since, let last, let report, let blocked, let retry, false) where now.seconds(since: since) >= GroupControl.slowStopSeconds:
            stop = .stopping(since: since, lastMembers: last, report: report, lastBlocked: blocked, retry: retry, warned: true)
            return [.slowStop(seconds: now.seconds(since: since)), readMembers]
        case .stopping:
            return [readMembers]
        case .freezing(let since, let warned):
            // A safety net behind the cgroup.events notification, rare and backing off.
            var actions: [GroupAction] = []
            if !warned {
                stop = .freezing(since: since, warned: true)
                actions.append(.slowStop(seconds: now.seconds(since: since)))
            }
            return actions + [.checkAgain(afterSeconds: GroupControl.slowStopSeconds), .readFrozen]
        default:
            return []
        }
    }

    private mutating func membersRead(_ members: [Member], at now: Instant) -> [GroupAction] {
        guard case .stopping(let since, let last, let report, let lastBlocked, let retry, let warned) = stop else { return [] }
        let reported = report == .reported
        // No member left: the exit is on its way.
        guard !members.isEmpty else { return [.cancelCheck] }
        let ids = Set(members.map(\.pid))
        var blocked: Set<Int32> = []
        var notStopped: [Int32] = []
        for m in members {
            switch m.state {
            case .stopped: break
            case .running: notStopped.append(m.pid)
            case .blockedInKernel:
                // It runs no user code; a pending stop takes it on its way back. It counts as
                // stopped once two reads in a row found it so, and is signalled at the first.
                blocked.insert(m.pid)
                if !lastBlocked.contains(m.pid) { notStopped.append(m.pid) }
            }
        }
        let settled = ids == last || (ids == [leader] && reported)
        if notStopped.isEmpty && settled {
            stop = .stopped
            // Alone only with the leader's stop reported: a leader that merely sat blocked in
            // the kernel may be inside fork(), whose child inherits a group SIGSTOP and stops
            // after this confirmation, unseen by it.
            aloneAtLastStop = ids == [leader] && reported
            return [.cancelCheck, .stopConfirmed(members: members.map(\.pid))]
        }
        stop = .stopping(since: since, lastMembers: ids, report: report, lastBlocked: blocked, retry: retry, warned: warned)
        if notStopped.isEmpty {
            // Every member is stopped but the set changed since the previous read: read again
            // at once (stopped processes cannot fork, so this converges).
            return [readMembers]
        }
        // Running members, and members first seen blocked: a process forked after the
        // signals went out can be blocked in the kernel at its first read, with no SIGSTOP
        // pending. The signal waits for it there and stops it on its way back to user space.
        // Members blocked in two reads in a row were signalled at the first one.
        readsWithRunningMembers += 1
        if now.seconds(since: since) >= GroupControl.stopDeadlineSeconds && readsWithRunningMembers >= GroupControl.refusalReads {
            return [.stopRefused(seconds: now.seconds(since: since))]
        }
        var actions: [GroupAction] = []
        switch containment {
        case .cgroup: actions.append(.signal(SignalNumber.stop, .pids(notStopped.sorted())))
        case .processGroup: actions.append(.signal(SignalNumber.stop, .all))
        }
        actions.append(.checkAgain(afterSeconds: nextRetry()))
        return actions
    }
}

extension GroupControl {
    /// How a settled group stands, for a hand-over of the daemon: what `GroupControl`
    /// decides from afterwards. Only a group with no suspension in flight and no exit begun
    /// has one (`snapshot`).
    public struct Snapshot: Codable, Equatable, Sendable {
        /// Where the group stands.
        public enum State: String, Codable, Sendable {
            /// Not stopped.
            case running
            /// Stopped with signals, as the kernel confirmed.
            case stopped
            /// Frozen by the cgroup freezer, as the kernel confirmed.
            case frozen
        }
        /// Whether it runs, is stopped, or is frozen.
        public var state: State
        /// The latest confirmed stop found the leader alone (see `aloneAtLastStop`).
        public var aloneAtLastStop: Bool
    }

    /// The group's settled state, or nil while a stop or freeze is in flight or its exit has
    /// begun (the daemon waits for those to end before it hands over).
    public var snapshot: Snapshot? {
        guard leaderStatus == nil, !empty, !exitReported else { return nil }
        switch stop {
        case .running: return Snapshot(state: .running, aloneAtLastStop: aloneAtLastStop)
        case .stopped: return Snapshot(state: .stopped, aloneAtLastStop: aloneAtLastStop)
        case .frozen: return Snapshot(state: .frozen, aloneAtLastStop: aloneAtLastStop)
        case .stopping, .freezing: return nil
        }
    }

    /// The group of `leader` as a previous daemon left it (`snapshot`).
    public init(leader: Int32, containment: Containment, mechanism: SuspendMode, restoring snapshot: Snapshot) {
        self.init(leader: leader, containment: containment, mechanism: mechanism)
        switch snapshot.state {
        case .running: stop = .running
        case .stopped: stop = .stopped
        case .frozen: stop = .frozen
        }
        aloneAtLastStop = snapshot.aloneAtLastStop
    }
}
