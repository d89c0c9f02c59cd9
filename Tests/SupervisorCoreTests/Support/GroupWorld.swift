import SupervisorCore

/// The processes of one extension generation as the simulated kernel (`SimulatedKernel`)
/// holds them: each member's state, parent and process group, the cgroup's freezer, and the
/// leader's stop and exit as the kernel reports them. Signals and freezes take effect at a
/// later kernel step, running members fork, block in the kernel, leave the leader's process
/// group and exit (their children become orphans the daemon adopts), members blocked in the
/// kernel stop late, notifications wait for the loop:
/// the races the stop model must get right. It knows nothing of the shell's decisions.
final class GroupWorld {
    enum State: Equatable {
        case running
        /// SIGSTOP is pending: it still runs user code until the next kernel step.
        case stopPending
        case stopped
        /// In an uninterruptible sleep: runs no user code; a pending stop takes it late.
        case blocked
    }

    struct Process: Equatable {
        var state: State
        var parent: Int32
        /// Its process group: the leader's, or that of a member that called `setsid()`.
        var group: Int32
    }

    let leader: Int32
    let containment: Containment
    /// The cgroup's directory (nil on the process-group fallback).
    let cgroupPath: String?
    /// The live processes (an exited leader is a zombie, not a member).
    private(set) var members: [Int32: Process] = [:]
    /// The freeze asked for (`cgroup.freeze`), and whether the kernel has completed it.
    private(set) var freezeRequested = false
    private(set) var frozen = false
    /// Members killed, dying at the next kernel step.
    private(set) var dying: Set<Int32> = []
    /// Blocked members with a stop pending: stopped when they leave the kernel.
    private(set) var stopAsked: Set<Int32> = []
    /// The leader's stop happened and `waitid(WSTOPPED)` has not collected it.
    private(set) var leaderStopWaitable = false
    /// The leader's exit status once it exited, and whether its zombie was reaped.
    private(set) var leaderExit: ExitStatus?
    private(set) var leaderReaped = false
    /// `cgroup.events` changed (`populated` or `frozen`) since it was last read: its POLLPRI
    /// is pending. A read clears it, as a read of a kernfs file does.
    var eventsNotification = false
    /// The leader's pidfd became readable (it exited) and the loop has not dispatched it.
    var exitNotification = false
    /// A child of the daemon (the leader, or an orphan it adopted) stopped, continued or
    /// exited: a SIGCHLD is due.
    var childSignal = false
    /// Its processes ignore SIGTERM (only SIGKILL ends them).
    let ignoresTerm: Bool
    /// The daemon: the leader's parent, and the subreaper of every orphan.
    private let daemon: Int32
    private let allocatePid: () -> Int32

    init(
        leader: Int32, containment: Containment, cgroupPath: String?, extraMembers: Int, orphans: Int, ignoresTerm: Bool,
        daemon: Int32, allocatePid: @escaping () -> Int32
    ) {
        self.leader = leader
        self.containment = containment
        self.cgroupPath = cgroupPath
        self.ignoresTerm = ignoresTerm
        self.daemon = daemon
        self.allocatePid = allocatePid
        members[leader] = Process(state: .running, parent: daemon, group: leader)
        for _ in 0..<extraMembers { fork(by: leader) }
        for _ in 0..<orphans {
            // A helper started by a double fork: its parent exited, and the daemon adopted it.
            let parent = fork(by: leader)
            let helper = fork(by: parent)
            members[parent] = nil
            members[helper]!.parent = daemon
        }
    }

    var inCgroup: Bool { containment == .cgroup }
    var isEmpty: Bool { members.isEmpty }
    /// The leader exited and its zombie is not reaped yet.
    var isZombie: Bool { leaderExit != nil && !leaderReaped }

    /// A child of `parent`, running, in its process group.
    @discardableResult
    func fork(by parent: Int32) -> Int32 {
        let pid = allocatePid()
        members[pid] = Process(state: .running, parent: parent, group: members[parent]?.group ?? leader)
        return pid
    }

    /// Adds a member (for the checker's own tests).
    func addMember(_ state: State) {
        let pid = fork(by: leader)
        members[pid]?.state = state
    }

    /// Sets a member's state (for the checker's own tests).
    func setState(_ pid: Int32, _ state: State) { members[pid]?.state = state }

    /// The live members of the process group `pgid`.
    func group(_ pgid: Int32) -> [Int32] { members.keys.filter { members[$0]!.group == pgid }.sorted() }

    /// Whether a process of this world (the zombie leader included) is in the process group `pgid`.
    func hasGroup(_ pgid: Int32) -> Bool { !group(pgid).isEmpty || (pgid == leader && isZombie) }

    /// Whether `pid` is one of its processes (the zombie leader included).
    func has(_ pid: Int32) -> Bool { members[pid] != nil || (pid == leader && isZombie) }

    /// The children of `pid` (live ones: dead members other than the leader are reaped at once).
    func children(of pid: Int32) -> [Int32] {
        members.keys.filter { members[$0]!.parent == pid }.sorted()
    }

    /// Whether any member runs user code now (the thing a confirmed stop must exclude).
    var anyRunsUserCode: Bool {
        if frozen { return false }
        return members.values.contains { $0.state == .running || $0.state == .stopPending }
    }

    /// Whether any member is held: stopped, about to stop, or frozen.
    var anyHeld: Bool {
        frozen || freezeRequested || !stopAsked.isEmpty || members.values.contains { $0.state == .stopped || $0.state == .stopPending }
    }

    /// Whether the kernel still has something to do or report for this generation.
    var busy: Bool {
        if childSignal || eventsNotification || exitNotification || !dying.isEmpty { return true }
        if freezeRequested && !frozen { return true }
        return members.values.contains { $0.state == .stopPending } || !stopAsked.isEmpty
    }

    /// `cgroup.events` as the kernel shows it.
    var eventsText: String { "populated \(isEmpty ? 0 : 1)\nfrozen \(frozen ? 1 : 0)\n" }

    /// The state letter of /proc/PID/stat.
    func stateLetter(_ pid: Int32) -> Character? {
        guard let p = members[pid] else { return pid == leader && isZombie ? "Z" : nil }
        switch p.state {
        case .running, .stopPending: return frozen ? "S" : "R"
        case .stopped: return "T"
        case .blocked: return "D"
        }
    }

    /// `waitid(WSTOPPED | WNOHANG)` on the leader: collects its stop, once.
    func collectLeaderStop() -> Bool {
        defer { leaderStopWaitable = false }
        return leaderStopWaitable
    }

    /// `waitid(WEXITED | WNOHANG)` on the leader, reaping it or not (`WNOWAIT`).
    func collectLeaderExit(reap: Bool) -> ExitStatus? {
        guard let status = leaderExit else { return nil }
        if reap { leaderReaped = true }
        return status
    }

    /// Delivers `signal` to `pids`.
    func deliver(_ signal: Int32, to pids: [Int32]) {
        for pid in pids {
            guard let p = members[pid] else { continue }
            switch signal {
            case SignalNumber.stop:
                if p.state == .running { members[pid]!.state = .stopPending }
                if p.state == .blocked { stopAsked.insert(pid) }
            case SignalNumber.cont:
                if p.state == .stopPending || p.state == .stopped { members[pid]!.state = .running }
                if p.state == .stopped && p.parent == daemon { childSignal = true }
                stopAsked.remove(pid)
                if pid == leader { leaderStopWaitable = false }
            case SignalNumber.terminate where ignoresTerm:
                break
            default:
                dying.insert(pid)
            }
        }
    }

    /// `cgroup.kill`: every member dies.
    func killAll() { dying.formUnion(members.keys) }

    /// Writes `cgroup.freeze`. `atOnce`: every member froze within the write.
    func setFrozen(_ on: Bool, atOnce: Bool) {
        freezeRequested = on
        if on && atOnce && !frozen {
            frozen = true
            eventsNotification = true
        }
        if !on && frozen {
            frozen = false
            eventsNotification = true
        }
    }

    /// One step of the simulated kernel: pending stops land, blocked members wake or stop,
    /// running ones fork, block, leave the process group or exit, a freeze completes, killed
    /// members die. `chance` decides.
    func step(_ chance: (Double) -> Bool) {
        for pid in members.keys.sorted() {
            guard let p = members[pid], !dying.contains(pid) else { continue }
            switch p.state {
            case .stopPending where !frozen && chance(0.2) && members.count < 8:
                // It still runs user code until the stop lands, and forks: the child runs,
                // with no stop pending (the fork race).
                fork(by: pid)
            case .stopPending where chance(0.7):
                stopped(pid)
            case .blocked where chance(0.5):
                if stopAsked.remove(pid) != nil {
                    stopped(pid)
                } else {
                    members[pid]!.state = .running
                }
            case .running where !frozen:
                if chance(0.15) && members.count < 8 {
                    fork(by: pid)
                } else if chance(0.1) {
                    members[pid]!.state = .blocked
                } else if inCgroup && pid != leader && chance(0.05) {
                    members[pid]!.group = pid
                }  // setsid()
                else if pid != leader && chance(0.04) {
                    die(pid, .exited(0))
                }  // a helper that double-forked exits: its children are orphans
            default: break
            }
        }
        if freezeRequested && !frozen && chance(0.6) {
            frozen = true
            eventsNotification = true
        }
        if !dying.isEmpty && chance(0.7) {
            for pid in dying.sorted() { die(pid, .signaled(9)) }
            dying.removeAll()
        }
    }

    /// The leader exits on its own with `status` (its members, if any, stay).
    func leaderExits(_ status: ExitStatus) {
        guard members[leader] != nil else { return }
        dying.remove(leader)
        die(leader, status)
    }

    private func stopped(_ pid: Int32) {
        members[pid]!.state = .stopped
        if members[pid]!.parent == daemon { childSignal = true }
        if pid == leader { leaderStopWaitable = true }
    }

    /// `pid` ends: its children are reparented to the daemon (a child subreaper); the leader
    /// stays a zombie until it is reaped, any other member is reaped at once.
    private func die(_ pid: Int32, _ status: ExitStatus) {
        guard let p = members.removeValue(forKey: pid) else { return }
        stopAsked.remove(pid)
        for child in children(of: pid) { members[child]!.parent = daemon }
        if p.parent == daemon { childSignal = true }
        if pid == leader {
            leaderExit = status
            leaderStopWaitable = false
            exitNotification = true
        }
        if inCgroup && members.isEmpty { eventsNotification = true }
    }
}
