import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// Extension processes: spawning into their cgroup, and the reports of `ProcessControl`.
extension Daemon: ProcessControlDelegate {
    func spawn(_ id: String, _ generation: UInt64, _ manifest: Manifest) {
        let sandbox: SandboxDecision
        switch sandboxing.decide(manifest) {
        case .success(let d): sandbox = d
        case .failure(let refusal):
            post(.spawnFailed(extensionID: id, generation: generation, error: refusal.description))
            return
        }
        let container: String
        switch extensionContainers.prepare(id, uid: manifest.credentials?.uid, gid: manifest.credentials?.gid) {
        case .success(let path): container = path
        case .failure(let e):
            post(.spawnFailed(extensionID: id, generation: generation, error: "cannot prepare its container: \(e)"))
            return
        }
        var cgroup: ExtensionCgroup?
        if let tree = cgroups {
            switch tree.create(id, freezer: manifest.policy.suspend == .freeze, logger: logger) {
            case .success(let c): cgroup = c
            case .failure(let e):
                post(.spawnFailed(extensionID: id, generation: generation, error: "cannot create the cgroup \(tree.path(of: id)): \(e)"))
                return
            }
        }
        let limits = limitEnforcement(manifest)
        var memoryCgroup: MemoryCgroupV1?
        let spawned: SpawnedProcess
        do throws(SystemError) {
            if let cgroup, let problem = CgroupTree.applyLimits(limits, to: cgroup.path, kernel: kernel) { throw problem }
            if let tree = memoryCgroupsV1, let memory = limits.first(where: \.byMemoryCgroupV1) {
                memoryCgroup = try tree.create(id, limit: memory.value).get()
            }
            spawned = try Spawner.spawn(
                manifest, kernel: kernel, cgroupFD: cgroup?.directoryFD, limits: limits, memoryCgroupProcsFD: memoryCgroup?.procsFD,
                container: container, sandbox: sandboxing.plan(manifest, sandbox, container: container))
        } catch {
            if let cgroup {
                kernel.close(cgroup.directoryFD)
                cgroup.closeFiles(kernel)
                _ = kernel.removeDirectory(cgroup.path)
            }
            if let memoryCgroup, let tree = memoryCgroupsV1 {
                kernel.close(memoryCgroup.procsFD)
                tree.remove(memoryCgroup, logger: logger)
            }
            post(.spawnFailed(extensionID: id, generation: generation, error: error.description))
            return
        }
        if let cgroup { kernel.close(cgroup.directoryFD) }
        if let memoryCgroup { kernel.close(memoryCgroup.procsFD) }
        let p = SupervisedProcess(
            extensionID: id, generation: generation, pid: spawned.pid, pidfd: spawned.pidfd, cgroup: cgroup,
            mechanism: manifest.policy.suspend, channel: spawned.channel, queueLimit: Daemon.connectionQueueLimit)
        p.memoryCgroupV1 = memoryCgroup
        if let old = processes[id] {
            control.forget(old)
            old.tearDown(kernel)
            processesByPID[old.pid] = nil
        }
        processes[id] = p
        processesByPID[p.pid] = p
        registry.add(extensionID: id, pid: spawned.pid, processGroup: p.processGroup)
        var watched = true
        // A pidfd becomes readable when the process exits: that wake-up cannot be lost.
        switch kernel.watch(fd: spawned.pidfd, events: Poll.input, { [unowned self, unowned p] _ in control.leaderMayHaveExited(p) }) {
        case .success(let source): p.exitSource = source
        case .failure(let e):
            logger.error("cannot watch the pidfd of \(spawned.pid) (\(id)): \(e)")
            watched = false
        }
        if let cgroup {
            switch kernel.watch(fd: cgroup.eventsFD, events: Poll.priority, { [unowned self, unowned p] _ in control.cgroupEventsChanged(p) }) {
            case .success(let source): p.eventsSource = source
            case .failure(let e):
                logger.error("cannot watch \(cgroup.path)/cgroup.events: \(e)")
                watched = false
            }
        }
        if let channel = p.channel, let error = channel.watch(through: kernel, { [unowned self, unowned p] events in channelReadable(p, events: events) }) {
            logger.error("cannot watch the runtime channel of \(id): \(error)")
            watched = false
        }
        post(.spawned(extensionID: id, generation: generation, pid: spawned.pid))
        if !watched {
            // Unsupervised it must not run: end it, and its exit is still reported.
            control.signal(p, SignalNumber.kill, thenContinue: true)
            if p.exitSource == nil { control.leaderMayHaveExited(p) }
            return
        }
        if manifest.readiness == .exec { post(.ready(extensionID: id, generation: generation)) }
    }

    /// SIGCHLD: stop reports for the leaders waiting for one, and a diagnostic for a stop
    /// nobody here asked for (a coalesced one goes unnoticed).
    func childrenChanged(sender: Int32, code: Int32) {
        control.childrenChanged()
        if code == childStoppedCode, let p = processesByPID[sender], p.control.stop == .running,
           let state = core.records[p.extensionID]?.state, [.active, .background, .expiring].contains(state),
           control.table.stat(p.pid)?.isStopped == true {
            logger.warning("pid \(p.pid) of \(p.extensionID) was stopped by someone other than extensiond")
        }
    }

    // MARK: - ProcessControlDelegate

    func stopConfirmed(_ p: SupervisedProcess, members: [Int32]) {
        let locks = locksAtStop(p, members: members)
        post(.stopConfirmed(extensionID: p.extensionID, generation: p.generation, locks: locks))
    }

    func exited(_ p: SupervisedProcess, status: ExitStatus, outlivedLeader: Bool) {
        guard processes[p.extensionID] === p else { return }
        var memoryLimit = p.cgroup.map { oomKilled(cgroup: $0.path) } ?? false
        if let memory = p.memoryCgroupV1, let tree = memoryCgroupsV1 {
            memoryLimit = memoryLimit || tree.limitReached(memory)
            tree.remove(memory, logger: logger)
        }
        registry.remove(pid: p.pid)
        p.tearDown(kernel)
        processes[p.extensionID] = nil
        processesByPID[p.pid] = nil
        post(.exited(extensionID: p.extensionID, generation: p.generation, status: status, outlivedLeader: outlivedLeader, memoryLimit: memoryLimit))
    }

    /// Whether the OOM killer ended a process of the cgroup at its `memory.max`: `oom_kill` of
    /// its `memory.events` (absent without the memory controller). The cgroup is created
    /// afresh for every launch, so any count is this launch's. (With a cgroup v1 memory cgroup
    /// instead, `MemoryCgroupV1Tree.limitReached`.)
    func oomKilled(cgroup path: String) -> Bool {
        guard cgroups?.controllers.contains("memory") == true else { return false }
        return CgroupTree.oomKills(path, kernel: kernel) > 0
    }

    func isLeader(_ pid: Int32) -> Bool { processesByPID[pid] != nil }
}
