#if canImport(Glibc)
import Glibc
#endif
import Logging
@testable import SupervisorShell
import SupervisorCore
import Testing

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
        #expect(k.calls == [
            .write(Self.cgroup + "/memory.max", "268435456"),
            .write(Self.cgroup + "/pids.max", "32"),
            .write(Self.cgroup + "/cpu.weight", "50"),
        ])
        #expect(Spawner.rlimits(plan) == [ResourceLimit(resource: Int32(RLIMIT_NOFILE.rawValue), value: 64)])
    }

    @Test func withoutControllersNothingIsWrittenAndRlimitsApply() throws {
        let k = systemdKernel(controllers: "")
        let tree = try CgroupTree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock", logger: Logger(label: "test")).get()
        let plan = limits.enforcement(controllers: Set(tree.controllers), ownUID: true)
        k.calls.removeAll()
        #expect(CgroupTree.applyLimits(plan, to: Self.cgroup, kernel: k) == nil)
        #expect(k.calls.isEmpty)
        #expect(Spawner.rlimits(plan) == [
            ResourceLimit(resource: Int32(RLIMIT_AS.rawValue), value: 256 << 20),
            ResourceLimit(resource: Int32(__RLIMIT_NPROC.rawValue), value: 32),
            ResourceLimit(resource: Int32(RLIMIT_NOFILE.rawValue), value: 64),
        ])
    }

    @Test func aFailedLimitWriteIsReportedNamingTheKeyAndFile() {
        let k = RecordingKernel()
        k.failingWrites[Self.cgroup + "/pids.max"] = EACCES
        let plan = limits.enforcement(controllers: ["memory", "pids", "cpu"], ownUID: false)
        let e = CgroupTree.applyLimits(plan, to: Self.cgroup, kernel: k)
        #expect(e?.description == "set limits.tasksMax in \(Self.cgroup)/pids.max: Permission denied")
    }

    @Test func anOOMKillIsReadFromMemoryEvents() {
        let k = RecordingKernel()
        k.files[Self.cgroup + "/memory.events"] = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n"
        #expect(CgroupTree.oomKills(Self.cgroup, kernel: k) == 1)
        k.files[Self.cgroup + "/memory.events"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"
        #expect(CgroupTree.oomKills(Self.cgroup, kernel: k) == 0)
        k.files[Self.cgroup + "/memory.events"] = nil
        #expect(CgroupTree.oomKills(Self.cgroup, kernel: k) == 0, "no memory controller: no file")
    }
}
