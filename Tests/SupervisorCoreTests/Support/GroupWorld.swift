import SupervisorCore

/// A simulated kernel for one process generation of an extension: the members of its cgroup
/// (or process group) and their states, driven by the `GroupControl` the shell would hold for
/// it. Signals and freezes take effect at a later kernel step, running members fork, members
/// blocked in the kernel stop late, notifications arrive late: the races the stop model must
/// get right. The `Simulation` owns one per live generation and plays the shell around it,
/// as `ProcessControl` does.
struct GroupWorld {
    enum State: Equatable {
        case running
        /// SIGSTOP is pending: it still runs user code until the next kernel step.
        case stopPending
        case stopped
        /// In an uninterruptible sleep: runs no user code; a pending stop takes it late.
        case blocked
    }

    let leader: Int32
    var control: GroupControl
    var members: [Int32: State]
    /// The freeze asked for, and whether the kernel has completed it.
    var freezeRequested = false
    var frozen = false
    /// `frozen 1` happened and its notification is not delivered yet.
    var frozenNotificationPending = false
    /// Members killed, dying at the next kernel step.
    var dying: Set<Int32> = []
    /// Blocked members with a stop pending: stopped when they leave the kernel.
    var stopAsked: Set<Int32> = []
    /// `populated 0` was reported.
    var emptiedReported = false
    /// The leader's stop happened and the kernel's report (SIGCHLD, waitid) is not delivered yet.
    var stopReportPending = false
    var leaderExit: ExitStatus?
    var leaderExitPending = false
    /// The stop model's pending check (`checkAgain`).
    var checkAt: Instant?
    /// Whether the containment is a cgroup (else a process group).
    var inCgroup: Bool { control.containment == .cgroup }
    var nextPid: Int32
    /// Its processes ignore SIGTERM (only SIGKILL ends them).
    let ignoresTerm: Bool

    init(leader: Int32, containment: Containment, mechanism: SuspendMode, extraMembers: Int, ignoresTerm: Bool) {
        self.leader = leader
        self.ignoresTerm = ignoresTerm
        control = GroupControl(leader: leader, containment: containment, mechanism: mechanism)
        members = [leader: .running]
        nextPid = leader * 100
        for _ in 0..<extraMembers { addMember(.running) }
    }

    /// Members that left the leader's process group (`setsid`), and their descendants: a
    /// signal to the group (`SignalTarget.leaderGroup`) does not reach them.
    var outsideGroup: Set<Int32> = []

    mutating func addMember(_ state: State, forkedBy parent: Int32? = nil) {
        nextPid += 1
        members[nextPid] = state
        if let parent, outsideGroup.contains(parent) { outsideGroup.insert(nextPid) }
    }

    /// The members a signal to the leader's process group reaches.
    var inLeaderGroup: [Int32] { members.keys.filter { !outsideGroup.contains($0) } }

    /// What a read of the membership shows (`ProcessControl.members`): a member with a stop
    /// pending still runs; the leader counts as stopped once its stop was reported.
    func observed() -> [Member] {
        members.keys.sorted().map { pid in
            let s = members[pid]!
            let state: MemberState
            if pid == leader && control.leaderStopReported {
                state = .stopped
            } else {
                switch s {
                case .running, .stopPending: state = frozen ? .stopped : .running
                case .stopped: state = .stopped
                case .blocked: state = .blockedInKernel
                }
            }
            return Member(pid: pid, state: state)
        }
    }

    /// Whether any member runs user code now (the thing a confirmed stop must exclude).
    var anyRunsUserCode: Bool {
        if frozen { return false }
        return members.values.contains { $0 == .running || $0 == .stopPending }
    }

    var isEmpty: Bool { members.isEmpty }

    /// Whether the kernel still has something to do or report for this generation.
    var busy: Bool {
        if stopReportPending || frozenNotificationPending || leaderExitPending || checkAt != nil || !dying.isEmpty { return true }
        if freezeRequested && !frozen { return true }
        if inCgroup && isEmpty && !emptiedReported { return true }
        if members.values.contains(where: { $0 == .stopPending }) || !stopAsked.isEmpty { return true }
        switch control.stop {
        case .stopping, .freezing: return true
        default: return false
        }
    }

    /// Delivers `signal` to `pids` (all members for nil).
    mutating func deliver(_ signal: Int32, to pids: [Int32]?) {
        for pid in pids ?? Array(members.keys) where members[pid] != nil {
            switch signal {
            case SignalNumber.stop:
                if members[pid] == .running { members[pid] = .stopPending }
                if members[pid] == .blocked { stopAsked.insert(pid) }
            case SignalNumber.cont:
                if members[pid] == .stopPending || members[pid] == .stopped { members[pid] = .running }
                stopAsked.remove(pid)
                if pid == leader { stopReportPending = false }
            case SignalNumber.terminate where ignoresTerm:
                break
            default:
                dying.insert(pid)
            }
        }
    }

    /// One step of the simulated kernel: pending stops land, blocked members wake or stop,
    /// running ones fork or block, a freeze completes, killed members die. `chance` decides.
    mutating func kernelStep(_ chance: (Double) -> Bool) {
        for pid in members.keys.sorted() {
            guard let s = members[pid], !dying.contains(pid) else { continue }
            switch s {
            case .stopPending where chance(0.2) && members.count < 8:
                // It still runs user code until the stop lands, and forks: the child runs,
                // with no stop pending (the fork race).
                addMember(.running, forkedBy: pid)
            case .stopPending where chance(0.7):
                members[pid] = .stopped
                if pid == leader { stopReportPending = true }
            case .blocked where chance(0.5):
                let stops = stopAsked.remove(pid) != nil
                members[pid] = stops ? .stopped : .running
                if stops && pid == leader { stopReportPending = true }
            case .running where !frozen:
                if chance(0.15) && members.count < 8 { addMember(.running, forkedBy: pid) }  // a fork
                else if chance(0.1) { members[pid] = .blocked }
                else if inCgroup && pid != leader && chance(0.05) { outsideGroup.insert(pid) }  // setsid()
            default: break
            }
        }
        if freezeRequested && !frozen && chance(0.6) {
            frozen = true
            frozenNotificationPending = true
        }
        if !dying.isEmpty && chance(0.7) {
            for pid in dying {
                members[pid] = nil
                if pid == leader && leaderExit == nil {
                    leaderExit = .signaled(9)
                    leaderExitPending = true
                }
            }
            dying.removeAll()
            stopAsked = stopAsked.filter { members[$0] != nil }
        }
    }

    /// The leader exits on its own with `status` (its members, if any, stay).
    mutating func leaderExits(_ status: ExitStatus) {
        guard members[leader] != nil, leaderExit == nil else { return }
        members[leader] = nil
        dying.remove(leader)
        stopAsked.remove(leader)
        leaderExit = status
        leaderExitPending = true
        stopReportPending = false
    }
}
