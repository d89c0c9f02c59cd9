import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The running extension processes: how they are contained (a cgroup each, or process
/// groups), spawned (sandbox, container, limits), found (by id, by pid, by a process of
/// theirs), stopped, resumed and signalled (through `ProcessControl`), and reaped; and the
/// registry of them kept on disk for a successor. What the kernel reports about them is posted
/// to the sink as core events. Owned by the daemon's loop.
final class ExtensionProcesses {
    let kernel: any Kernel
    let logger: Logger
    /// Where the kernel's reports go as core events: the daemon, which owns this set and so
    /// outlives it (`unowned`: see `ControlServer.delegate`).
    private(set) unowned var sink: (any EventSink)?
    /// Who answers the runtimes' calls to the system (the daemon).
    unowned var calls: (any RuntimeCalls)?

    /// Posts the kernel's reports, and the lock watch's, to `sink` from now on (set once the
    /// daemon is made).
    func attach(_ sink: any EventSink) {
        self.sink = sink
        locks.attach(sink)
        quota.sink = sink
    }
    private var byID: [String: SupervisedProcess] = [:]
    /// The same processes by leader pid, for the kernel's stop reports (which name a pid).
    private var byPID: [Int32: SupervisedProcess] = [:]
    /// Stops, resumes, signals and exits.
    let processControl: ProcessControl
    /// How extensions are contained and limited here.
    let containment: Containment
    /// Each extension's own container.
    let containers: ExtensionContainers
    /// What the extensions' sandbox can be here, and each launch's plan.
    let sandboxing: Sandboxing
    /// The live extension processes, on disk for the next instance should this one be killed.
    let registry: ProcessRegistry
    /// The lock watch of suspended groups.
    let locks: LockWatch
    let buffers: WireBuffers
    /// The points' network stacks, for sandboxed extensions with the network (nil where
    /// there can be none: `Sandboxing.networkStackProgram`).
    let networks: NetworkStacks?
    /// The shared part of the sandboxed file system view, which each sandboxed launch copies.
    let sandboxTemplate: SandboxTemplate
    /// The measured size limit of the containers (`limits.diskMaxBytes`).
    let quota: ContainerQuota
    /// The extensions' last output lines and their followers (`extctl logs`).
    let outputs: OutputHistory

    /// Bytes an extension that does not read its channel may have queued before it is cut off.
    static let channelQueueLimit = 1 << 20
    /// Datagrams read from one runtime channel per wake-up.
    static let readBudget = 64
    /// How long a process may live after closing its runtime channel before it is ended.
    static let channelCloseGraceSeconds = 0.5

    init(
        kernel: any Kernel, logger: Logger, containment: Containment, isSubreaper: Bool, containers: ExtensionContainers, sandboxing: Sandboxing,
        registry: ProcessRegistry, locks: LockWatch, buffers: WireBuffers, networkNamespacePrefix: String? = nil, diskCheckSeconds: Double = 30
    ) {
        self.kernel = kernel
        self.logger = logger
        self.containment = containment
        self.containers = containers
        self.sandboxing = sandboxing
        self.registry = registry
        self.locks = locks
        self.buffers = buffers
        quota = ContainerQuota(kernel: kernel, logger: logger, interval: diskCheckSeconds)
        sandboxTemplate = SandboxTemplate(kernel: kernel, logger: logger)
        outputs = OutputHistory(wallClock: { [unowned kernel] in kernel.wallClock() })
        networks = sandboxing.networkStackProgram.flatMap { program in
            networkNamespacePrefix.map { NetworkStacks(kernel: kernel, logger: logger, program: program, pathPrefix: $0) }
        }
        processControl = ProcessControl(kernel: kernel, cgroups: containment.cgroups, isSubreaper: isSubreaper, logger: logger)
        processControl.attach(self)
    }

    /// Whether no extension process runs.
    var isEmpty: Bool { byID.isEmpty }
    /// How many extension processes run.
    var count: Int { byID.count }

    /// The running process of `id`, whatever its generation.
    func process(_ id: String) -> SupervisedProcess? { byID[id] }

    /// The process of `id` if it is still generation `generation`.
    func process(_ id: String, _ generation: UInt64) -> SupervisedProcess? {
        guard let p = byID[id], p.generation == generation else { return nil }
        return p
    }

    /// The process whose leader is `pid`.
    func process(leader pid: Int32) -> SupervisedProcess? { byPID[pid] }

    /// Who a connecting peer is, by its pid: a process of a running extension (`owningExtension`),
    /// another process, or gone (no longer alive, or a zombie), which then cannot be told apart:
    /// an extension's process may connect, pass the socket on and exit before it is accepted.
    /// The liveness is read after the attribution, so a peer alive then was the process read
    /// (its pid could not be reused meanwhile). A pid of 0 (a peer in another pid namespace)
    /// is another process.
    func controlPeer(_ pid: Int32) -> ControlPeer {
        let owner = owningExtension(of: pid)
        if pid > 0 {
            guard let s = processControl.table.stat(pid), !s.isGone else { return .gone }
        }
        return owner.map(ControlPeer.extensionProcess) ?? .other
    }

    /// What `controlPeer(_:)` found.
    enum ControlPeer: Equatable {
        case extensionProcess(String)
        case other
        case gone
    }

    /// The extension a process belongs to: by its cgroup (which it cannot leave), or by its
    /// process group on the fallback.
    func owningExtension(of pid: Int32) -> String? {
        if let tree = containment.cgroups {
            guard let path = processControl.table.cgroup(pid) else { return nil }
            let full = tree.mountRelative(path)
            guard full.hasPrefix(tree.extensionsPath + "/") else { return nil }
            let id = String(full.dropFirst(tree.extensionsPath.count + 1).prefix(while: { $0 != "/" }))
            return byID[id] != nil ? id : nil
        }
        guard let group = processControl.table.stat(pid)?.processGroup else { return nil }
        return byID.values.first(where: { $0.processGroup == group })?.extensionID
    }

    // MARK: - Spawning

    /// Launches generation `generation` of `id`; posts `spawned` (and `ready` for exec
    /// readiness) or `spawnFailed` naming what failed.
    func spawn(_ id: String, _ generation: UInt64, _ manifest: Manifest) {
        let sandbox: SandboxDecision
        switch sandboxing.decide(manifest) {
        case .success(let d): sandbox = d
        case .failure(let refusal):
            sink?.post(.spawnFailed(extensionID: id, generation: generation, error: refusal.description))
            return
        }
        let container: String
        switch containers.prepare(id, uid: manifest.credentials?.uid, gid: manifest.credentials?.gid) {
        case .success(let path): container = path
        case .failure(let e):
            sink?.post(.spawnFailed(extensionID: id, generation: generation, error: "cannot prepare its container: \(e)"))
            return
        }
        var cgroup: ExtensionCgroup?
        if let tree = containment.cgroups {
            switch tree.create(id, freezer: manifest.policy.suspend == .freeze, logger: logger) {
            case .success(let c): cgroup = c
            case .failure(let e):
                sink?.post(.spawnFailed(extensionID: id, generation: generation, error: "cannot create the cgroup \(tree.path(of: id)): \(e)"))
                return
            }
        }
        // A sandboxed extension with the network enters its point's network namespace.
        var networkNamespace: Int32?
        if Sandboxing.needsNetworkStack(sandbox) {
            switch networks.map({ $0.namespace(for: manifest.point) }) ?? .failure(SystemError.notSupported) {
            case .success(let fd): networkNamespace = fd
            case .failure(let e):
                cgroup.map { discardCgroup($0) }
                sink?.post(.spawnFailed(extensionID: id, generation: generation, error: "cannot start the network stack of point '\(manifest.point)': \(e)"))
                return
            }
        }
        let limits = containment.enforcement(manifest)
        var memoryCgroup: MemoryCgroupV1?
        let spawned: SpawnedProcess
        // Before the attempt: a launch that fails quotes none of an earlier process's lines.
        outputs.launched(id)
        do throws(SystemError) {
            if let cgroup, let problem = CgroupTree.applyLimits(limits, to: cgroup.path, kernel: kernel) { throw problem }
            if let tree = containment.memoryCgroupsV1, let memory = limits.first(where: \.byMemoryCgroupV1) {
                memoryCgroup = try tree.create(id, limit: memory.value).get()
            }
            var plan = sandboxing.plan(manifest, sandbox, container: container, cgroup: cgroup?.path)
            plan?.networkNamespaceFD = networkNamespace
            if let p = plan, sandboxing.canStartFromTemplate(p) {
                plan?.template = sandboxTemplate.reference(masks: sandboxing.templateMasks)
            }
            func attempt(_ plan: SandboxPlan?) throws(SystemError) -> SpawnedProcess {
                try Spawner.spawn(
                    manifest, kernel: kernel, cgroupFD: cgroup?.directoryFD, limits: limits, memoryCgroupProcsFD: memoryCgroup?.procsFD,
                    container: container, sandbox: plan)
            }
            do throws(SystemError) {
                spawned = try attempt(plan)
            } catch  where plan?.template != nil && Spawner.failedEnteringTemplate(error) {
                // A template that cannot be entered here (a security module's refusal): no
                // template from now on, and this launch builds its whole view.
                sandboxTemplate.disable("\(id) could not start from it: \(error)")
                plan?.template = nil
                spawned = try attempt(plan)
            }
        } catch {
            if let cgroup { discardCgroup(cgroup) }
            if let memoryCgroup, let tree = containment.memoryCgroupsV1 {
                kernel.close(memoryCgroup.procsFD)
                tree.remove(memoryCgroup, logger: logger)
            }
            sink?.post(.spawnFailed(extensionID: id, generation: generation, error: error.description, configuration: Spawner.isConfigurationError(error)))
            return
        }
        if let cgroup { kernel.close(cgroup.directoryFD) }
        if let memoryCgroup { kernel.close(memoryCgroup.procsFD) }
        let p = SupervisedProcess(
            extensionID: id, generation: generation, pid: spawned.pid, pidfd: spawned.pidfd, cgroup: cgroup, memoryCgroupV1: memoryCgroup,
            mechanism: manifest.policy.suspend, channel: spawned.channel, queueLimit: ExtensionProcesses.channelQueueLimit)
        if let old = byID[id] {
            processControl.forget(old)
            old.tearDown(kernel)
            byPID[old.pid] = nil
        }
        add(p)
        if networkNamespace != nil { networks?.running(id, point: manifest.point) }
        quota.started(
            id, generation: generation, path: container, limit: manifest.policy.limits.diskMaxBytes,
            owner: ContainerQuota.owner(of: manifest.credentials), filtered: sandbox.enabled && sandbox.enforced.contains(.syscalls))
        if let fd = spawned.output { p.output = startOutput(id, fd: fd) }
        let watched = watch(p)
        sink?.post(.spawned(extensionID: id, generation: generation, pid: spawned.pid))
        if !watched {
            endUnwatched(p)
            return
        }
        if manifest.readiness == .exec { sink?.post(.ready(extensionID: id, generation: generation)) }
    }

    /// Closes and removes the cgroup of a launch that failed before its process ran.
    private func discardCgroup(_ cgroup: ExtensionCgroup) {
        kernel.close(cgroup.directoryFD)
        cgroup.closeFiles(kernel)
        if let e = kernel.removeDirectory(cgroup.path), !e.isNoEntry { logger.warning("cannot remove \(cgroup.path): \(e)") }
    }

    /// Reads and logs the output of extension `id` from the pipe at `fd` (`ExtensionOutput`);
    /// nil, with `fd` closed, when the loop cannot watch it (the extension's writes then fail
    /// with EPIPE rather than block).
    private func startOutput(_ id: String, fd: Int32) -> ExtensionOutput? {
        let output = ExtensionOutput(extensionID: id, fd: fd, kernel: kernel, logger: logger, history: outputs)
        guard let e = output.start() else { return output }
        logger.warning("cannot read the output of \(id): \(e)", metadata: ["EXTENSION_ID": "\(id)"])
        kernel.close(fd)
        return nil
    }

    private func add(_ p: SupervisedProcess, startTicks: UInt64? = nil) {
        byID[p.extensionID] = p
        byPID[p.pid] = p
        registry.add(extensionID: p.extensionID, pid: p.pid, processGroup: p.processGroup, startTicks: startTicks)
    }

    /// Watches the leader's pidfd (its exit: a wake-up that cannot be lost), its cgroup's
    /// `cgroup.events` and its runtime channel; false when one of them cannot be watched.
    private func watch(_ p: SupervisedProcess) -> Bool {
        var watched = true
        var exitWatch: (any Cancellable)?
        switch kernel.watch(fd: p.pidfd, events: Poll.input, { [unowned self, unowned p] _ in processControl.leaderMayHaveExited(p) }) {
        case .success(let source): exitWatch = source
        case .failure(let e):
            logger.error("cannot watch the pidfd of \(p.pid) (\(p.extensionID)): \(e)")
            watched = false
        }
        var eventsWatch: (any Cancellable)?
        if let cgroup = p.cgroup {
            switch kernel.watch(fd: cgroup.eventsFD, events: Poll.priority, { [unowned self, unowned p] _ in processControl.cgroupEventsChanged(p) }) {
            case .success(let source): eventsWatch = source
            case .failure(let e):
                logger.error("cannot watch \(cgroup.path)/cgroup.events: \(e)")
                watched = false
            }
        }
        p.keep(exitWatch: exitWatch, eventsWatch: eventsWatch)
        if let channel = p.channel, let error = channel.watch(through: kernel, { [unowned self, unowned p] events in channelReadable(p, events: events) }) {
            logger.error("cannot watch the runtime channel of \(p.extensionID): \(error)")
            watched = false
        }
        return watched
    }

    /// Unsupervised a process must not run: it is ended, and its exit is still reported.
    private func endUnwatched(_ p: SupervisedProcess) {
        processControl.signal(p, SignalNumber.kill, thenContinue: true)
        if p.exitWatch == nil { processControl.leaderMayHaveExited(p) }
    }

    // MARK: - Hand-over

    /// Whether a stop is in flight, an exit has begun, or a channel has unsent messages: a
    /// hand-over waits until none is, so that none crosses the exec.
    var isBusy: Bool {
        locks.isSurveying || byID.values.contains { $0.group.snapshot == nil || $0.channel?.hasUnsent == true }
    }

    /// What crosses a hand-over, one entry per process; nil while `isBusy`.
    func handover() -> [HandoverDocument.Process]? {
        var list: [HandoverDocument.Process] = []
        for p in byID.values.sorted(by: { $0.extensionID < $1.extensionID }) {
            guard let group = p.group.snapshot, p.channel?.hasUnsent != true else { return nil }
            p.output?.handingOver()
            list.append(
                HandoverDocument.Process(
                    extensionID: p.extensionID, generation: p.generation, pid: p.pid, pidfd: p.pidfd, startTicks: registry.startTicks(of: p.pid),
                    channel: p.channel?.socket.fd, output: p.output?.openFD,
                    channelGraceUntil: p.channelGraceUntil, cgroup: p.cgroup?.path, cgroupEvents: p.cgroup?.eventsFD, cgroupProcs: p.cgroup?.procsFD,
                    cgroupFreeze: p.cgroup?.freezeFD, freezer: p.cgroup?.freezeFD != nil,
                    memoryCgroupV1: p.memoryCgroupV1?.path, memoryOOMKillsAtStart: p.memoryCgroupV1?.oomKillsAtStart, mechanism: p.group.mechanism,
                    group: group, locks: locks.handover(of: p)))
        }
        return list
    }

    /// Takes over the processes a previous daemon handed over: each keeps its pid, pidfd,
    /// channel and cgroup (its open files, or else re-opened by path), and its group control's
    /// settled state.
    func restore(_ processes: [HandoverDocument.Process]) {
        for h in processes {
            var cgroup: ExtensionCgroup?
            if let path = h.cgroup, let events = h.cgroupEvents, let procs = h.cgroupProcs {
                cgroup = ExtensionCgroup(path: path, directoryFD: -1, eventsFD: events, procsFD: procs, freezeFD: h.cgroupFreeze)
            } else if let path = h.cgroup, let tree = containment.cgroups {
                switch tree.open(path, freezer: h.freezer) {
                case .success(let c):
                    kernel.close(c.directoryFD)
                    cgroup = c
                case .failure(let e):
                    logger.error("\(h.extensionID): its cgroup \(path) cannot be opened after the hand-over (\(e)); it is ended")
                }
            }
            let memory = h.memoryCgroupV1.map { MemoryCgroupV1(path: $0, procsFD: -1, oomKillsAtStart: h.memoryOOMKillsAtStart ?? 0) }
            let p = SupervisedProcess(
                extensionID: h.extensionID, generation: h.generation, pid: h.pid, pidfd: h.pidfd, cgroup: cgroup, memoryCgroupV1: memory,
                mechanism: h.mechanism, channel: h.channel.map { PacketSocket(fd: $0) }, queueLimit: ExtensionProcesses.channelQueueLimit,
                group: GroupControl(leader: h.pid, containment: cgroup == nil ? .processGroup : .cgroup, mechanism: h.mechanism, restoring: h.group))
            add(p, startTicks: h.startTicks)
            if let fd = h.output { p.output = startOutput(h.extensionID, fd: fd) }
            guard watch(p), h.cgroup == nil || cgroup != nil else {
                if let fd = h.locks?.openWatch { kernel.close(fd) }
                endUnwatched(p)
                continue
            }
            // A stopped group takes no lock: the locks it held at its stop still hold (but those
            // of a member killed meanwhile), and the opens of their files made during the
            // hand-over wait in the watch's descriptor.
            if let handed = h.locks {
                let gone = Set(handed.holders.filter { processControl.table.stat($0)?.isGone ?? true })
                if let left = handed.without(gone) {
                    locks.restore(p, left)
                } else if let fd = handed.openWatch {
                    kernel.close(fd)
                }
            }
            if let until = h.channelGraceUntil { armChannelGrace(p, until: until) }
        }
    }

    /// Takes over the network stacks a previous daemon handed over; ends them if this one can
    /// have none (slirp4netns was removed meanwhile), its extensions keeping their namespace
    /// without the host's network.
    func restoreNetworkStacks(_ h: NetworkStacks.Handover) {
        if let networks {
            networks.restore(h)
            return
        }
        let ending = NetworkStacks(kernel: kernel, logger: logger, program: "", pathPrefix: "")
        ending.restore(h)
        logger.warning("this daemon can start no network stack (see the sandbox line above): the \(h.stacks.count) handed over are ended")
        ending.endAll()
    }

    // MARK: - Stopping, resuming, signalling

    /// Stops every process of generation `generation` of `id` (the core's `stop`).
    func suspend(_ id: String, _ generation: UInt64) {
        guard let p = process(id, generation) else { return }
        processControl.suspend(p)
        networks?.suspended(id)
        quota.suspended(id)
    }

    /// Resumes it (the core's `resume`); its lock watch ends.
    func resume(_ id: String, _ generation: UInt64) {
        guard let p = process(id, generation) else { return }
        p.locks.stop()
        networks?.resumed(id)
        quota.resumed(id)
        processControl.resume(p)
        sink?.post(.continueConfirmed(extensionID: id, generation: generation))
    }

    /// Signals it (the core's `signal`); its lock watch ends.
    func signal(_ id: String, _ generation: UInt64, _ signal: Int32, thenContinue: Bool) {
        guard let p = process(id, generation) else { return }
        p.locks.stop()
        processControl.signal(p, signal, thenContinue: thenContinue)
    }

    /// SIGCHLD: stop reports for the leaders waiting for one.
    func childrenChanged() { processControl.childrenChanged() }

    // MARK: - Status

    /// The processes of a running extension for `status`: the members of its cgroup (or
    /// process group), with their command names and /proc figures, and the cgroup's path and
    /// counters: `memory.current` where the memory controller is enabled, `cpu.stat` (present
    /// in every v2 cgroup). Where a counter is missing, status sums the members' /proc figures.
    func processEntries(_ r: ExtensionRecord) -> StatusDocument.ProcessesOfExtension {
        guard let p = byID[r.manifest.id] else { return .init() }
        let table = processControl.table
        let pids = processControl.memberPIDs(of: p)
        let entries = pids.sorted().compactMap { pid -> StatusDocument.ProcessEntry? in
            guard let s = table.stat(pid), !s.isGone else { return nil }
            return StatusDocument.ProcessEntry(
                pid: pid, state: s.state, command: table.command(pid) ?? "?", rssBytes: s.rssPages * table.pageSize,
                cpuSeconds: Double(s.cpuTicks) / table.ticksPerSecond)
        }
        var found = StatusDocument.ProcessesOfExtension(entries: entries, cgroup: p.cgroup?.path)
        if let path = p.cgroup?.path {
            if containment.cgroups?.controllers.contains("memory") == true, case .success(let bytes) = kernel.read(path + "/memory.current") {
                found.cgroupMemoryBytes = Int64(String(decoding: bytes.prefix(while: { $0 != UInt8(ascii: "\n") }), as: UTF8.self))
            }
            if case .success(let bytes) = kernel.read(path + "/cpu.stat"),
                let line = bytes.split(separator: UInt8(ascii: "\n")).first(where: { $0.starts(with: Array("usage_usec ".utf8)) }),
                let usec = Double(String(decoding: line.dropFirst(11), as: UTF8.self))
            {
                found.cgroupCPUSeconds = usec / 1e6
            }
        }
        return found
    }

    /// At shutdown: the registry file and the cgroup subtrees go when no process is left;
    /// otherwise the registry is written for the next instance.
    func finish() {
        if byID.isEmpty {
            registry.removeFile()
            containment.cgroups?.removeSubtree(logger: logger)
            containment.memoryCgroupsV1?.removeSubtree(logger: logger)
        } else {
            registry.flush(includingRemovals: true)
        }
    }
}

// MARK: - ProcessControlDelegate

extension ExtensionProcesses: ProcessControlDelegate {
    /// The stop counts as confirmed once the group's locks are known (`LockWatch.survey`, which
    /// may read /proc/locks and the members' descriptors on another thread while the loop goes
    /// on). A survey that returns after the suspension it belongs to ended (the process ended,
    /// resumed, or stopped again since) is dropped: it tells nothing about the present one.
    func stopConfirmed(_ p: SupervisedProcess, members: [Int32]) {
        let suspension = p.group.suspensions
        locks.survey(members: members) { [unowned self] survey in
            guard byID[p.extensionID] === p, p.group.suspensions == suspension, p.group.isSuspended else { return locks.discard(survey) }
            locks.watch(p, survey)
            sink?.post(.stopConfirmed(extensionID: p.extensionID, generation: p.generation, locks: survey.found.map(\.lock)))
        }
    }

    func stopRefused(_ p: SupervisedProcess, seconds: Double) {
        guard byID[p.extensionID] === p else { return }
        logger.warning("\(p.extensionID) (pid \(p.pid)) has not stopped after \(Int(seconds))s: its processes keep running; ending it")
        sink?.post(.stopRefused(extensionID: p.extensionID, generation: p.generation, seconds: seconds))
    }

    func exited(_ p: SupervisedProcess, status: ExitStatus, outlivedLeader: Bool, oomKills: Result<Int, SystemError>?) {
        guard byID[p.extensionID] === p else { return }
        // The cgroup is created afresh for every launch, so any count is this launch's.
        var memoryLimit = false
        switch oomKills {
        case nil: break
        case .success(let count): memoryLimit = count > 0
        case .failure(let e):
            logger.warning("cannot read \(p.cgroup?.path ?? "")/memory.events: \(e); the exit of \(p.extensionID) is not checked for the memory limit")
        }
        if let memory = p.memoryCgroupV1, let tree = containment.memoryCgroupsV1 {
            switch tree.limitReached(memory) {
            case .success(let reached): memoryLimit = memoryLimit || reached
            case .failure(let e):
                logger.warning("cannot read \(memory.path)/memory.oom_control: \(e); the exit of \(p.extensionID) is not checked for the memory limit")
            }
            tree.remove(memory, logger: logger)
        }
        registry.remove(pid: p.pid)
        p.tearDown(kernel)
        networks?.ended(p.extensionID)
        quota.ended(p.extensionID)
        byID[p.extensionID] = nil
        byPID[p.pid] = nil
        sink?.post(.exited(extensionID: p.extensionID, generation: p.generation, status: status, outlivedLeader: outlivedLeader, memoryLimit: memoryLimit))
    }

    func isLeader(_ pid: Int32) -> Bool { byPID[pid] != nil }
}
