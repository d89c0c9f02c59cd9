import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// What `ProcessControl` reports to its owner.
protocol ProcessControlDelegate: AnyObject {
    /// Every member of `p` is stopped or frozen, as the kernel confirmed; `members` are their
    /// pids (the read that confirmed the stop: stopped processes cannot fork).
    func stopConfirmed(_ p: SupervisedProcess, members: [Int32])
    /// The processes of `p` kept running `seconds` into its stop (`GroupAction.stopRefused`).
    func stopRefused(_ p: SupervisedProcess, seconds: Double)
    /// Every process of `p` is gone and its leader reaped; `outlivedLeader`: members were
    /// still alive when the leader exited, and were killed. `oomKills`: the `oom_kill` count
    /// of its cgroup's `memory.events`, read before the cgroup was removed (nil: no cgroup, or
    /// no memory controller in it).
    func exited(_ p: SupervisedProcess, status: ExitStatus, outlivedLeader: Bool, oomKills: Result<Int, SystemError>?)
    /// Whether `pid` is the leader of a running extension (the daemon's other children are
    /// adopted orphans, which it reaps).
    func isLeader(_ pid: Int32) -> Bool
}

/// Carries out the decisions of each extension's `GroupControl` through the kernel interface,
/// and feeds back what the kernel reports: stop reports (SIGCHLD and pidfds), `cgroup.events`
/// notifications, leader exits and membership reads. The one place the shell signals,
/// freezes, kills or reads the members of an extension. Owned by the daemon's loop.
final class ProcessControl {
    let kernel: any Kernel
    let table: ProcessTable
    let cgroups: CgroupTree?
    let logger: Logger
    /// Who is told of stops, continues and exits: the process set that owns this control and
    /// so outlives it (`unowned`: see `ControlServer.delegate`).
    private(set) unowned var delegate: (any ProcessControlDelegate)?

    /// Tells `delegate` of stops, continues and exits from now on.
    func attach(_ delegate: any ProcessControlDelegate) { self.delegate = delegate }
    /// Orphaned descendants of extensions are reparented to the daemon (a child subreaper).
    let isSubreaper: Bool
    /// The priority of the SIGCHLD source (sd-event: larger runs later): after the ordinary
    /// events, so that a burst of dismissals is handled before the stops it caused are collected.
    static let childSignalPriority: Int64 = 10
    /// The priority of stop re-checks: after the SIGCHLD source.
    static let checkPriority: Int64 = 20
    /// The daemon's own pid (its children include adopted orphans).
    private var ownPID: Int32 { kernel.processID }
    /// The processes whose `GroupControl` awaits the kernel's report of the leader's stop
    /// (`awaitsStopReport`), for the SIGCHLD handler to ask about. Derived: `apply`, the one
    /// place a `GroupControl` changes, sets each entry from that property; `forget` drops a
    /// handle that is torn down.
    private var awaitingStopReport: [ObjectIdentifier: SupervisedProcess] = [:]

    init(kernel: any Kernel, cgroups: CgroupTree?, isSubreaper: Bool, logger: Logger) {
        self.kernel = kernel
        self.table = ProcessTable(kernel: kernel)
        self.cgroups = cgroups
        self.isSubreaper = isSubreaper
        self.logger = logger
    }

    // MARK: - Requests from the core

    func suspend(_ p: SupervisedProcess) {
        let now = kernel.now()
        apply(p) { $0.suspend(at: now) }
    }

    func resume(_ p: SupervisedProcess) {
        apply(p) { $0.resume() }
    }

    func signal(_ p: SupervisedProcess, _ signal: Int32, thenContinue: Bool) {
        apply(p) { $0.signal(signal, thenContinue: thenContinue) }
    }

    /// Forgets a process whose handle is being torn down: it is asked about no more.
    func forget(_ p: SupervisedProcess) {
        awaitingStopReport[ObjectIdentifier(p)] = nil
    }

    /// Changes `p`'s `GroupControl`, keeps `awaitingStopReport` derived from it, and carries
    /// out the actions it returned.
    private func apply(_ p: SupervisedProcess, _ change: (inout GroupControl) -> [GroupAction]) {
        let actions = p.decide(change)
        awaitingStopReport[ObjectIdentifier(p)] = p.group.awaitsStopReport ? p : nil
        perform(actions, for: p)
    }

    // MARK: - What the kernel reports

    /// SIGCHLD: asks the kernel, through each pidfd (`waitid(P_PIDFD, WSTOPPED | WNOHANG)`, O(1)),
    /// whether the leaders still waiting for their stop report have stopped, in the order of
    /// their pids. SIGCHLD coalesces, so every waiting leader is asked, not only the sender.
    /// Exits are not taken here: they are watched and reaped through each pidfd.
    func childrenChanged() {
        // An orphan the daemon adopted (a descendant of an extension whose parent died) that
        // exited is reaped now, while its extension runs: left, each would count against its
        // extension's task limit and the system's pids. One look, without reaping; an exited
        // leader is reaped by its own exit, which reaps orphans too (`finishExit`).
        if isSubreaper, let pid = kernel.exitedChild(), !(delegate?.isLeader(pid) ?? false) { _ = adoptedOrphans() }
        for p in awaitingStopReport.values.sorted(by: { $0.pid < $1.pid }) {
            // A report handled earlier in this loop may have changed what is awaited.
            guard awaitingStopReport[ObjectIdentifier(p)] != nil else { continue }
            switch kernel.stopReported(pidfd: p.pidfd) {
            case .success(false): continue
            case .success(true):
                observe(.leaderStopReported, for: p)
            case .failure(let e):
                // ECHILD: the leader is gone (its exit is on its way through the pidfd).
                if !e.isNoChild { logger.warning("waitid on the pidfd of \(p.pid) (\(p.extensionID)): \(e)") }
                observe(.leaderStopUnreportable, for: p)
            }
        }
    }

    /// The leader's pidfd became readable: it exited (a wake-up that cannot be lost).
    func leaderMayHaveExited(_ p: SupervisedProcess) {
        switch kernel.exitStatus(pidfd: p.pidfd, reap: false) {
        case .success(nil): return
        case .success(let status?):
            // The zombie keeps the pidfd readable until it is reaped, after the group is gone.
            p.stopExitWatch()
            observe(.leaderExited(status, populated: othersLive(p)), for: p)
        case .failure(let e):
            logger.error("waitid on the pidfd of \(p.pid) (\(p.extensionID)): \(e)")
        }
    }

    /// Whether processes of `p` other than its exited leader still live: the cgroup's
    /// `populated`, or, for a process group, a scan of its live members (the leader is a
    /// zombie until reaped, so the group id cannot have been reused).
    private func othersLive(_ p: SupervisedProcess) -> Bool? {
        if let cgroup = p.cgroup { return readEvents(cgroup)?.populated }
        return table.groupMembers(p.processGroup).contains { $0.pid != p.pid }
    }

    /// `cgroup.events` changed (POLLPRI): the cgroup emptied, or froze.
    func cgroupEventsChanged(_ p: SupervisedProcess) {
        guard let cgroup = p.cgroup else { return }
        let events: CgroupEvents
        switch kernel.read(fd: cgroup.eventsFD) {
        case .success(let bytes): events = CgroupEvents.parse(bytes)
        case .failure(let e) where e.isNoDevice:
            // Removed by someone else (another daemon ending what it took for leftovers): the
            // watch would report it at every turn of the loop. The leader's pidfd still reports
            // its exit.
            logger.warning("\(cgroup.path) was removed while \(p.extensionID) (pid \(p.pid)) ran; no longer watching its cgroup.events")
            p.stopWatchingEvents()
            return
        case .failure(let e):
            logger.warning("cannot read \(cgroup.path)/cgroup.events: \(e)")
            return
        }
        if events.frozen == true { observe(.frozen(true), for: p) }
        if events.populated == false { observe(.emptied, for: p) }
    }

    private func readEvents(_ cgroup: ExtensionCgroup) -> CgroupEvents? {
        switch kernel.read(fd: cgroup.eventsFD) {
        case .success(let bytes): return CgroupEvents.parse(bytes)
        case .failure(let e):
            logger.warning("cannot read \(cgroup.path)/cgroup.events: \(e)")
            return nil
        }
    }

    private func observe(_ observation: GroupObservation, for p: SupervisedProcess) {
        let now = kernel.now()
        apply(p) { $0.observe(observation, at: now) }
    }

    // MARK: - Carrying out decisions

    private func perform(_ actions: [GroupAction], for p: SupervisedProcess) {
        for action in actions {
            switch action {
            case .readMembers:
                switch members(of: p) {
                case .success(let members): observe(.members(members), for: p)
                case .failure(let e):
                    logger.warning("cannot read the processes of \(p.extensionID) (pid \(p.pid)): \(e); reading them again later")
                    observe(.membersUnreadable, for: p)
                }
            case .readDescendants:
                observe(.descendants(descendants(of: p)), for: p)
            case .readFrozen:
                if let cgroup = p.cgroup, let events = readEvents(cgroup) { observe(.frozen(events.frozen == true), for: p) }
            case let .signal(signal, target):
                send(signal, to: target, of: p)
            case .setFrozen(let frozen):
                guard let cgroup = p.cgroup else { break }
                let value = frozen ? "1" : "0"
                let failed: SystemError?
                if let fd = cgroup.freezeFD {
                    failed = kernel.write(fd: fd, value)
                } else {
                    failed = kernel.write(cgroup.path + "/cgroup.freeze", value)
                }
                if let e = failed {
                    logger.error("cannot \(frozen ? "freeze" : "thaw") \(cgroup.path): \(e)")
                }
            case .killAll:
                guard let cgroup = p.cgroup else { break }
                if let e = kernel.write(cgroup.path + "/cgroup.kill", "1"), !e.isNoEntry {
                    logger.error("cannot kill the processes of \(cgroup.path): \(e)")
                }
            case .checkAgain(let seconds):
                p.keepCheck(nil)
                // After the SIGCHLD source: when a burst of stops keeps the loop busy past the
                // first retry, the kernel's stop reports confirm them before any re-check runs.
                switch kernel.addTimer(
                    at: kernel.now().adding(seconds: seconds), priority: ProcessControl.checkPriority,
                    { [unowned self, unowned p] in
                        p.checkFired()
                        observe(.checkDue, for: p)
                    })
                {
                case .success(let timer): p.keepCheck(timer)
                case .failure(let e):
                    logger.error("cannot arm the stop check of \(p.extensionID): \(e); the stop waits for the kernel's report")
                }
            case .cancelCheck:
                p.keepCheck(nil)
            case .stopConfirmed(let members):
                // A stop is confirmed by the read just made; a freeze by `frozen 1`, with no read.
                delegate?.stopConfirmed(p, members: members ?? memberPIDs(of: p))
            case .slowStop(let seconds):
                logger.warning("\(p.extensionID) (pid \(p.pid)) has not stopped after \(Int(seconds))s; still waiting")
            case .stopRefused(let seconds):
                delegate?.stopRefused(p, seconds: seconds)
            case let .exited(status, outlivedLeader):
                finishExit(p, status: status, outlivedLeader: outlivedLeader)
            }
        }
    }

    /// `kill(-pgid)` of `p`'s process group. ESRCH: the group is gone (the leader exited and was
    /// reaped meanwhile); its exit is reported through its pidfd. The leader leads its session,
    /// so it cannot leave it.
    private func signalGroup(_ signal: Int32, of p: SupervisedProcess) {
        if let e = kernel.kill(-p.processGroup, signal), !e.isNoProcess {
            logger.warning("signal \(signal) to group \(p.processGroup) of \(p.extensionID): \(e)")
        }
        // The leader may have dropped it (the first process of its pid namespace).
        if let substitute = leaderSignal(signal, of: p), substitute != signal { kill(p.pid, substitute, of: p) }
    }

    /// The signal that has `signal`'s effect on `p`'s leader: `signal` itself, except when the
    /// leader is the first process of its own pid namespace (a sandboxed extension), where the
    /// kernel drops a signal from outside that it has no handler for (`NamespaceInitSignals`).
    /// Only such a signal costs a read of `/proc/PID/status`.
    private func leaderSignal(_ signal: Int32, of p: SupervisedProcess) -> Int32? {
        if signal == SignalNumber.kill || signal == SignalNumber.stop || signal == SignalNumber.cont { return signal }
        guard case .success(let status) = kernel.read("/proc/\(p.pid)/status"), let facts = NamespaceInitSignals(status: status) else {
            return signal  // exited meanwhile: its pidfd reports it
        }
        return facts.deliverable(signal)
    }

    /// kill(2) of one member; ESRCH (it exited meanwhile) is reported by its cgroup or its
    /// leader's pidfd.
    private func kill(_ pid: Int32, _ signal: Int32, of p: SupervisedProcess) {
        if let e = kernel.kill(pid, signal), !e.isNoProcess {
            logger.warning("signal \(signal) to pid \(pid) of \(p.extensionID): \(e)")
        }
    }

    private func send(_ signal: Int32, to target: SignalTarget, of p: SupervisedProcess) {
        let pids: [Int32]
        switch target {
        case .pids(let list): pids = list
        case .leaderGroup:
            return signalGroup(signal, of: p)
        case .all:
            // Without its cgroup's list, the process group is what can be signalled.
            switch p.cgroup.flatMap({ cgroups?.processes(of: $0) }) {
            case .success(let members): pids = members
            case .failure(let e):
                logger.warning("cannot read the processes of \(p.extensionID) (pid \(p.pid)): \(e); signalling its process group")
                return signalGroup(signal, of: p)
            case nil:
                return signalGroup(signal, of: p)
            }
        }
        for pid in pids {
            if pid != p.pid {
                kill(pid, signal, of: p)
            } else if let deliverable = leaderSignal(signal, of: p) {
                // SIGKILL in place of a signal that would end the first process of the pid
                // namespace would end every other one at once (the kernel kills them with it):
                // while others live, they get their grace, and the leader the SIGKILL at its end.
                if deliverable == SignalNumber.kill && signal != SignalNumber.kill && pids.count > 1 { continue }
                kill(pid, deliverable, of: p)
            }
        }
    }

    /// The pids of `p`'s processes (no state read): its cgroup's, or its process group's (also
    /// when its cgroup's cannot be read, which is logged).
    func memberPIDs(of p: SupervisedProcess) -> [Int32] {
        switch p.cgroup.flatMap({ cgroups?.processes(of: $0) }) {
        case .success(let pids): return pids
        case .failure(let e):
            logger.warning("cannot read the processes of \(p.extensionID) (pid \(p.pid)): \(e); taking its process group's")
            return table.groupMembers(p.processGroup).map(\.pid)
        case nil: return table.groupMembers(p.processGroup).map(\.pid)
        }
    }

    /// The members of `p` with their states: its cgroup's, or its process group's (a scan of
    /// /proc). The leader's state comes from the kernel's stop report when there is one (no
    /// /proc read). Fails when its cgroup's list cannot be read.
    func members(of p: SupervisedProcess) -> Result<[Member], SystemError> {
        let reported = p.group.leaderStopReported
        func state(_ pid: Int32) -> MemberState {
            if pid == p.pid && reported { return .stopped }
            switch table.threadsStopped(pid) {
            case .stopped: return .stopped
            case .running: return .running
            case .blockedInKernel: return .blockedInKernel
            }
        }
        if let cgroup = p.cgroup, let cgroups {
            return cgroups.processes(of: cgroup).map { $0.map { Member(pid: $0, state: state($0)) } }
        }
        return .success(table.groupMembers(p.processGroup).map { Member(pid: $0.pid, state: state($0.pid)) })
    }

    /// What the kernel shows of the descendants of `p`'s leader: as a child subreaper, whether
    /// the daemon adopted orphans and whether the leader has children (`GroupControl` decides
    /// from them whether its group is the leader alone).
    private func descendants(of p: SupervisedProcess) -> Descendants {
        guard isSubreaper else { return .untracked }
        let orphansAdopted = !adoptedOrphans().isEmpty
        return .tracked(leaderHasChildren: !table.children(of: p.pid).isEmpty, orphansAdopted: orphansAdopted)
    }

    /// Children of the daemon that are not extension leaders: descendants of extensions whose
    /// parent died (the daemon is their subreaper). Exited ones are reaped here.
    func adoptedOrphans() -> [Int32] {
        table.children(of: ownPID).filter { pid in
            if delegate?.isLeader(pid) ?? false { return false }
            return !kernel.reapIfExited(pid)
        }
    }

    /// Reaps the leader and any orphan that died with it, reads the cgroup's `memory.events`,
    /// removes the cgroup (whose files go with it), and reports.
    private func finishExit(_ p: SupervisedProcess, status: ExitStatus, outlivedLeader: Bool) {
        if case .failure(let e) = kernel.exitStatus(pidfd: p.pidfd, reap: true) {
            logger.warning("cannot reap pid \(p.pid) of \(p.extensionID): \(e)")
        }
        _ = adoptedOrphans()
        var oomKills: Result<Int, SystemError>?
        if let cgroup = p.cgroup {
            if cgroups?.controllers.contains("memory") == true { oomKills = CgroupTree.oomKills(cgroup.path, kernel: kernel) }
            if let e = kernel.removeDirectory(cgroup.path), !e.isNoEntry { logger.warning("cannot remove \(cgroup.path): \(e)") }
        }
        delegate?.exited(p, status: status, outlivedLeader: outlivedLeader, oomKills: oomKills)
    }
}
