import CShims
import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// Extension processes: spawning, stop and resume confirmed by the kernel, exits.
extension Daemon {
    func spawn(_ id: String, _ generation: UInt64, _ manifest: Manifest) {
        let spawned: SpawnedProcess
        do {
            spawned = try Spawner.spawn(manifest)
        } catch {
            post(.spawnFailed(extensionID: id, generation: generation, error: error.description))
            return
        }
        let p = SupervisedProcess(
            extensionID: id, generation: generation, pid: spawned.pid, pidfd: spawned.pidfd, channel: spawned.channel,
            queueLimit: Daemon.connectionQueueLimit)
        if let old = processes[id] {
            old.tearDown()
            processesByPID[old.pid] = nil
        }
        processes[id] = p
        processesByPID[p.pid] = p
        registry.add(extensionID: id, pid: spawned.pid, processGroup: p.processGroup)
        do {
            // A pidfd becomes readable when the process exits: that wake-up cannot be lost.
            p.exitSource = try loop.addIO(fd: spawned.pidfd, events: Poll.input) { [unowned self, unowned p] _ in
                childMayHaveExited(p)
            }
            if let channel = spawned.channel {
                p.channelSource = try loop.addIO(fd: channel.fd, events: Poll.input) { [unowned self, unowned p] events in
                    channelReadable(p, events: events)
                }
            }
        } catch {
            logger.error("cannot watch pid \(spawned.pid) of \(id): \(error); killing it")
            _ = shim_kill(-spawned.pid, SIGKILL)
        }
        post(.spawned(extensionID: id, generation: generation, pid: spawned.pid))
        if manifest.readiness == .exec { post(.ready(extensionID: id, generation: generation)) }
    }

    /// The priority of the SIGCHLD source: after ordinary events, before the idle pass.
    static let childSignalPriority: Int64 = 10

    /// SIGCHLD: asks the kernel, through each pidfd (`waitid(P_PIDFD, WSTOPPED | WNOHANG)`,
    /// O(1)), whether the processes still waiting for their stop report have stopped. SIGCHLD
    /// coalesces, so every waiting process is asked, not only the sender. The cost is one call
    /// per waiting process per delivery; deliveries wait behind ordinary events, so a burst
    /// of dismisses is collected in few passes. (`waitid(P_ALL)` scans every child of the
    /// daemon per call, and sd-event's child sources call waitid once per watched child on
    /// every SIGCHLD: both made a mass dismiss of 1,000 extensions quadratic.) Exits are not
    /// taken here: they are watched and reaped through each pidfd.
    func childrenStopped(sender: Int32, code: Int32) {
        for (key, p) in awaitingStopReport {
            guard p.stopPending, !p.leaderStopReported, processes[p.extensionID] === p else {
                awaitingStopReport[key] = nil
                continue
            }
            var c: Int32 = 0, s: Int32 = 0
            guard shim_waitid_pidfd(p.pidfd, WSTOPPED, &c, &s) == 1, c == Int32(CLD_STOPPED) || c == Int32(CLD_TRAPPED) else { continue }
            awaitingStopReport[key] = nil
            p.leaderStopReported = true
            queueStopVerification(p)
        }
        // A stop nobody here asked for (diagnostic only: a coalesced one goes unnoticed).
        if code == Int32(CLD_STOPPED), let p = processesByPID[sender], !p.stopPending,
           let state = core.records[p.extensionID]?.state, [.active, .background, .expiring].contains(state),
           ProcessTable.stat(p.pid)?.isStopped == true {
            logger.warning("pid \(p.pid) of \(p.extensionID) was stopped by someone other than extensiond")
        }
    }

    /// The pidfd became readable: the process exited (this wake-up cannot be lost, unlike
    /// SIGCHLD, which coalesces).
    func childMayHaveExited(_ p: SupervisedProcess) {
        var code: Int32 = 0, status: Int32 = 0
        guard shim_waitid_pidfd(p.pidfd, WEXITED | WNOWAIT, &code, &status) == 1 else { return }
        processExited(p, code: code, status: status)
    }

    /// While the exited leader is an unreaped zombie its group id cannot be reused, so
    /// whatever is left of the group is killed first (continued, so SIGKILL acts at once on
    /// stopped members); then the leader is reaped, and the core told.
    func processExited(_ p: SupervisedProcess, code: Int32, status: Int32) {
        guard processes[p.extensionID] === p else { return }
        _ = shim_kill(-p.processGroup, SIGKILL)
        _ = shim_kill(-p.processGroup, SIGCONT)
        var c: Int32 = 0, s: Int32 = 0
        _ = shim_waitid_pidfd(p.pidfd, WEXITED, &c, &s)
        registry.remove(pid: p.pid)
        p.tearDown()
        processes[p.extensionID] = nil
        processesByPID[p.pid] = nil
        awaitingStopReport[ObjectIdentifier(p)] = nil
        let exit: ExitStatus = code == Int32(CLD_EXITED) ? .exited(status) : .signaled(status)
        post(.exited(extensionID: p.extensionID, generation: p.generation, status: exit))
    }

    /// How long after SIGSTOP the stop is verified from /proc even without a notification.
    static let stopCheckDelay = 0.02

    /// SIGSTOP to the whole group. Confirmation comes from CLD_STOPPED for the leader plus a
    /// /proc check of the other members; a fallback check from /proc alone runs shortly after,
    /// in case a notification was coalesced away.
    func requestStop(_ p: SupervisedProcess) {
        p.stopPending = true
        p.leaderStopReported = false
        p.lastMembers = []
        p.stopRequestedAt = loop.now()
        p.stopRetryDelay = Daemon.stopCheckDelay
        awaitingStopReport[ObjectIdentifier(p)] = p
        _ = shim_kill(-p.processGroup, SIGSTOP)
        scheduleStopCheck(p)
    }

    func scheduleStopCheck(_ p: SupervisedProcess) {
        let delay = p.stopRetryDelay
        p.stopRetryDelay = min(p.stopRetryDelay * 2, 0.1)
        p.stopRetry?.cancel()
        p.stopRetry = try? loop.addTimer(at: loop.now().adding(seconds: delay)) { [unowned self, unowned p] in queueStopVerification(p) }
    }

    /// Queues a stop verification. Verifications queued by a burst of events (a host
    /// dismissing many extensions at once) are done together, after the burst, with one scan
    /// of /proc and one read of /proc/locks.
    func queueStopVerification(_ p: SupervisedProcess) {
        pendingVerifications[ObjectIdentifier(p)] = p
        guard verificationPass == nil else { return }
        verificationPass = try? loop.addIdleOnce { [unowned self] in
            verificationPass = nil
            let batch = pendingVerifications.values.filter(\.stopPending)
            pendingVerifications.removeAll()
            // The fast path: the daemon is a child subreaper, so every descendant of an
            // extension is either in its leader's process tree or, orphaned, a child of the
            // daemon. With no adopted orphan anywhere and a leader without children whose
            // group stop the kernel reported, the group is the leader alone: no /proc scan.
            // The kernel's report says every thread of the leader is stopped, so the leader's
            // entry is made from it rather than read from /proc.
            let orphans = adoptedOrphans()
            var alone: [ObjectIdentifier: ProcessStat] = [:]
            for p in batch where isSubreaper && orphans.isEmpty && p.leaderStopReported && ProcessTable.children(of: p.pid).isEmpty {
                alone[ObjectIdentifier(p)] = ProcessStat(
                    pid: p.pid, state: "T", parent: getpid(), processGroup: p.processGroup, session: p.pid,
                    cpuTicks: 0, startTicks: 0, rssPages: 0)
            }
            let scanned = ProcessTable.members(ofGroups: Set(batch.filter { alone[ObjectIdentifier($0)] == nil }.map(\.processGroup)))
            var locks: [FileLocks.Lock]?
            for p in batch {
                let members = alone[ObjectIdentifier(p)].map { [$0] } ?? scanned[p.processGroup] ?? []
                verifyStop(p, members: members) { locks = locks ?? FileLocks.current(); return locks! }
            }
        }
    }

    /// Children of the daemon that are not extension leaders: descendants of extensions whose
    /// parent died (the daemon is their subreaper). Exited ones are reaped here.
    func adoptedOrphans() -> [Int32] {
        let leaders = Set(processes.values.map(\.pid))
        return ProcessTable.children(of: getpid()).filter { pid in
            guard !leaders.contains(pid) else { return false }
            if ProcessTable.stat(pid)?.isGone ?? true {  // a zombie (or already gone): reap it
                var status: Int32 = 0
                _ = waitpid(pid, &status, WNOHANG)
                return false
            }
            return true
        }
    }

    /// Confirms the stop when every member of the group is stopped (every thread, unless the
    /// kernel reported the leader's group stop) and the membership did not change since the
    /// previous scan (a fork racing the stop is caught by the re-scan).
    func verifyStop(_ p: SupervisedProcess, members: [ProcessStat], locks: () -> [FileLocks.Lock]) {
        guard p.stopPending else { return }
        let ids = Set(members.map(\.pid))
        // A thread in uninterruptible sleep (D) cannot stop until it returns to user space,
        // where the pending stop takes it: it runs no user code meanwhile. The classic case is
        // a vfork parent whose child was stopped before it could exec: it never leaves D.
        // Such a member counts as stopped once two scans in a row found it so.
        var uninterruptible: Set<Int32> = []
        let allStopped = members.allSatisfy { m in
            if m.isStopped && m.pid == p.pid && p.leaderStopReported { return true }
            switch ProcessTable.threadsStopped(m.pid) {
            case .stopped: return true
            case .running: return false
            case .blockedInKernel:
                uninterruptible.insert(m.pid)
                return p.lastUninterruptible.contains(m.pid)
            }
        }
        p.lastUninterruptible = uninterruptible
        let settled = ids == [p.pid] || ids == p.lastMembers
        if allStopped && settled {
            p.stopPending = false
            p.stopRetry?.cancel()
            p.stopRetry = nil
            watchLocks(p, members: ids, locks: locks())
            post(.stopConfirmed(extensionID: p.extensionID, generation: p.generation))
            return
        }
        if !allStopped || ids != p.lastMembers { _ = shim_kill(-p.processGroup, SIGSTOP) }
        p.lastMembers = ids
        if let since = p.stopRequestedAt, loop.now().seconds(since: since) > 5 {
            logger.warning("group \(p.processGroup) of \(p.extensionID) has not stopped after 5s; still waiting")
            p.stopRequestedAt = nil
        }
        scheduleStopCheck(p)
    }

    /// SIGCONT to the whole group. The kernel clears the stop of every task of the group inside
    /// kill(2) (and wakes them), so its success is the confirmation: no /proc read.
    func resume(_ p: SupervisedProcess) {
        p.stopLockWatch()
        p.stopPending = false
        p.stopRetry?.cancel()
        p.stopRetry = nil
        let rc = shim_kill(-p.processGroup, SIGCONT)
        if rc != 0 {
            // ESRCH: the group is gone; its exit (pidfd) is already on its way to the core.
            logger.debug("SIGCONT to group \(p.processGroup) of \(p.extensionID): errno \(-rc)")
        }
        post(.continueConfirmed(extensionID: p.extensionID, generation: p.generation))
    }
}
