import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// The cgroup v2 path of resource limits, through the recording fake of the kernel interface
/// (the development machines have no controllers in their v2 tree; the rlimit path runs for
/// real in the integration tests).
struct CgroupLimitTests {
    static let service = "/sys/fs/cgroup/system.slice/extensiond.service"
    static let cgroup = service + "/extensions/org.example.x"
    let limits = ResourceLimits(memoryMaxBytes: 256 << 20, tasksMax: 32, openFilesMax: 64, cpuWeight: 50)

    func systemdKernel(controllers: String) -> RecordingKernel {
        let k = RecordingKernel()
        k.files["/proc/self/mountinfo"] = "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n"
        k.files["/proc/self/cgroup"] = "0::/system.slice/extensiond.service\n"
        k.files[Self.service + "/cgroup.controllers"] = controllers
        return k
    }

    @Test func withControllersTheLimitsAreWrittenToTheCgroupAndOnlyOpenFilesIsAnRlimit() throws {
        let k = systemdKernel(controllers: "cpuset cpu io memory pids\n")
        let tree = try CgroupTree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock", logger: Logger(label: "test")).get()
        #expect(tree.controllers == ["cpu", "memory", "pids"])
        let plan = limits.enforcement(controllers: Set(tree.controllers), ownUID: true)
        k.calls.removeAll()
        #expect(CgroupTree.applyLimits(plan, to: Self.cgroup, kernel: k) == nil)
        #expect(
            k.calls == [
                .write(Self.cgroup + "/memory.max", "268435456"),
                .write(Self.cgroup + "/pids.max", "32"),
                .write(Self.cgroup + "/cpu.weight", "50"),
            ])
        #expect(Spawner.rlimits(plan) == [ResourceLimit(resource: .openFiles, value: 64)])
    }

    @Test func withoutControllersNothingIsWrittenAndRlimitsApply() throws {
        let k = systemdKernel(controllers: "")
        let tree = try CgroupTree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock", logger: Logger(label: "test")).get()
        let plan = limits.enforcement(controllers: Set(tree.controllers), ownUID: true)
        k.calls.removeAll()
        #expect(CgroupTree.applyLimits(plan, to: Self.cgroup, kernel: k) == nil)
        #expect(k.calls.isEmpty)
        #expect(
            Spawner.rlimits(plan) == [
                ResourceLimit(resource: .data, value: 256 << 20),
                ResourceLimit(resource: .processes, value: 32),
                ResourceLimit(resource: .openFiles, value: 64),
            ])
    }

    @Test func aFailedLimitWriteIsReportedNamingTheKeyAndFile() {
        let k = RecordingKernel()
        k.failingWrites[Self.cgroup + "/pids.max"] = EACCES
        let plan = limits.enforcement(controllers: ["memory", "pids", "cpu"], ownUID: false)
        let e = CgroupTree.applyLimits(plan, to: Self.cgroup, kernel: k)
        #expect(e?.description == "set limits.tasksMax in \(Self.cgroup)/pids.max: Permission denied")
    }

    @Test func anOOMKillIsReadFromMemoryEvents() throws {
        let k = RecordingKernel()
        k.files[Self.cgroup + "/memory.events"] = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n"
        #expect(try CgroupTree.oomKills(Self.cgroup, kernel: k).get() == 1)
        k.files[Self.cgroup + "/memory.events"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"
        #expect(try CgroupTree.oomKills(Self.cgroup, kernel: k).get() == 0)
        k.files[Self.cgroup + "/memory.events"] = nil
        #expect(CgroupTree.oomKills(Self.cgroup, kernel: k) == .failure(SystemError(errno: ENOENT)), "the reason it cannot be read")
    }

    // MARK: - cgroup v1 memory cgroups (a host whose memory controller is bound to v1)

    static let hybridMountinfo = """
        31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
        32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw

        """

    func hybridKernel(memoryLine: String = "4:memory:/system.slice/extensiond.service") -> RecordingKernel {
        let k = RecordingKernel()
        k.files["/proc/self/mountinfo"] = Self.hybridMountinfo
        k.files["/proc/self/cgroup"] = "5:devices:/system.slice/extensiond.service\n\(memoryLine)\n1:cpu:/\n0::/system.slice/extensiond.service\n"
        return k
    }

    @Test func theV1MemoryHierarchyIsFoundFromMountinfoAndProcSelfCgroup() {
        #expect(MemoryCgroupV1Tree.memoryMount(Self.hybridMountinfo) == "/sys/fs/cgroup/memory")
        #expect(MemoryCgroupV1Tree.memoryMount("36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n") == nil)
        #expect(
            MemoryCgroupV1Tree.memoryMount("30 25 0:26 / /sys/fs/cgroup rw shared:9 - cgroup2 cgroup2 rw,memory_recursiveprot\n") == nil,
            "a cgroup2 mount option is not the v1 controller")
        #expect(MemoryCgroupV1Tree.memoryPath("4:memory:/a/b\n0::/\n") == "/a/b")
        #expect(MemoryCgroupV1Tree.memoryPath("7:cpuset,memory:/x\n") == "/x")
        #expect(MemoryCgroupV1Tree.memoryPath("0::/user.slice\n") == nil)
    }

    @Test func underSystemdTheMemoryCgroupsAreBelowTheServicesOwn() throws {
        let k = hybridKernel()
        let tree = try MemoryCgroupV1Tree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock").get()
        #expect(tree.basePath == "/sys/fs/cgroup/memory/system.slice/extensiond.service/extensions")
        #expect(k.calls.contains(.makeDirectory(tree.basePath)))
        let standalone = try MemoryCgroupV1Tree.setUp(kernel: hybridKernel(memoryLine: "4:memory:/"), underSystemd: false, socketPath: "/run/x.sock").get()
        #expect(standalone.basePath == "/sys/fs/cgroup/memory/extensiond-" + CgroupTree.tag("/run/x.sock"))
    }

    @Test func withoutAV1MemoryHierarchyThereIsNoTreeAndTheReasonIsGiven() {
        let k = RecordingKernel()
        k.files["/proc/self/mountinfo"] = "30 25 0:26 / /sys/fs/cgroup rw shared:9 - cgroup2 cgroup2 rw\n"
        k.files["/proc/self/cgroup"] = "0::/\n"
        guard case .failure(let why) = MemoryCgroupV1Tree.setUp(kernel: k, underSystemd: false, socketPath: "/run/x.sock") else {
            Issue.record("a tree without a v1 memory hierarchy")
            return
        }
        #expect(why.description == "no cgroup v1 hierarchy has the memory controller")
    }

    /// The hybrid host: no v2 memory controller, so memoryMaxBytes is the v1 memory cgroup's
    /// `memory.limit_in_bytes`, nothing for it is written to the v2 cgroup, and it is no rlimit.
    @Test func onAHybridHostMemoryIsTheV1CgroupsLimitAndTheChildJoinsIt() throws {
        let k = hybridKernel()
        let tree = try MemoryCgroupV1Tree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock").get()
        let plan = limits.enforcement(controllers: [], memoryCgroupV1: true, ownUID: true)
        k.calls.removeAll()
        #expect(CgroupTree.applyLimits(plan, to: Self.cgroup, kernel: k) == nil)
        #expect(k.calls.isEmpty, "no v2 controller file is written")
        #expect(
            Spawner.rlimits(plan) == [
                ResourceLimit(resource: .processes, value: 32),
                ResourceLimit(resource: .openFiles, value: 64),
            ])
        let path = tree.path(of: "org.example.x")
        k.files[path + "/memory.oom_control"] = "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"
        let memory = try tree.create("org.example.x", limit: try #require(plan.first { $0.byMemoryCgroupV1 }).value).get()
        #expect(
            k.calls == [
                .makeDirectory(path),
                .write(path + "/memory.limit_in_bytes", "268435456"),
                .openForWriting(path + "/cgroup.procs"),
            ], "a cgroup just made has killed nothing: its count is not read")
        #expect(memory.oomKillsAtStart == 0)

        let manifest = Manifest(
            id: "org.example.x", executable: "/bin/true", readiness: .exec, policy: try #require(ExtensionPoints.builtIn.policies["widget"]))
        _ = try Spawner.spawn(manifest, kernel: k, cgroupFD: 7, limits: plan, memoryCgroupProcsFD: memory.procsFD)
        let request = try #require(k.spawnRequests.last)
        #expect(request.cgroupFD == 7 && request.memoryCgroupProcsFD == memory.procsFD, "the v2 cgroup to start in, the v1 one to join")
        #expect(request.resourceLimits == Spawner.rlimits(plan))

        #expect(try !tree.limitReached(memory).get())
        k.files[path + "/memory.oom_control"] = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"
        #expect(try tree.limitReached(memory).get(), "a rise of oom_kill is the limit ending a process")
    }

    @Test func aTakenOverV1CgroupCountsOnlyNewOOMKills() throws {
        let k = hybridKernel()
        let tree = try MemoryCgroupV1Tree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock").get()
        let path = tree.path(of: "org.example.x")
        // Left behind by an earlier launch (a process of it was still inside).
        #expect(k.makeDirectory(path) == nil)
        k.files[path + "/memory.oom_control"] = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
        let memory = try tree.create("org.example.x", limit: 1 << 30).get()
        #expect(memory.oomKillsAtStart == 3)
        #expect(try !tree.limitReached(memory).get())
        k.files[path + "/memory.oom_control"] = "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n"
        #expect(try tree.limitReached(memory).get())
    }

    @Test func aFailedV1LimitWriteIsReportedAndTheCgroupRemoved() throws {
        let k = hybridKernel()
        let tree = try MemoryCgroupV1Tree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock").get()
        let path = tree.path(of: "org.example.x")
        k.failingWrites[path + "/memory.limit_in_bytes"] = EBUSY
        guard case .failure(let e) = tree.create("org.example.x", limit: 1 << 20) else {
            Issue.record("the create succeeded")
            return
        }
        #expect(e.description == "set limits.memoryMaxBytes in \(path)/memory.limit_in_bytes: Device or resource busy")
        #expect(k.calls.last == .removeDirectory(path))
    }

    /// A host with the v2 memory controller: memory.max, and no v1 memory cgroup at all.
    @Test func withTheV2MemoryControllerMemoryMaxIsUsedAndNoV1Cgroup() throws {
        let k = systemdKernel(controllers: "cpu memory pids\n")
        let tree = try CgroupTree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock", logger: Logger(label: "test")).get()
        let plan = limits.enforcement(controllers: Set(tree.controllers), memoryCgroupV1: true, ownUID: true)
        #expect(plan[0] == LimitEnforcement(key: "memoryMaxBytes", value: 256 << 20, by: .cgroup, control: "memory.max"))
        #expect(!plan.contains { $0.byMemoryCgroupV1 })
        k.calls.removeAll()
        #expect(CgroupTree.applyLimits(plan, to: Self.cgroup, kernel: k) == nil)
        #expect(k.calls.first == .write(Self.cgroup + "/memory.max", "268435456"))
        #expect(!Spawner.rlimits(plan).contains { $0.resource == .data })
    }
}
