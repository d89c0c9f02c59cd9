import SupervisorCore
import Testing

@Suite("Resource limits")
struct ResourceLimitTests {
    @Test func theBuiltInPointsHaveLimitsAndAWidgetIsTheSmallest() {
        let widget = ExtensionPoints.builtIn.policies["widget"]!.limits
        let share = ExtensionPoints.builtIn.policies["share"]!.limits
        // Every limit but the container's size, which no built-in point sets.
        for key in ResourceLimits.keys where key != "diskMaxBytes" { #expect(widget.value(key) != nil, "widget \(key)") }
        #expect(widget.diskMaxBytes == nil && share.diskMaxBytes == nil)
        #expect(widget.memoryMaxBytes! < share.memoryMaxBytes!)
        #expect(widget.tasksMax! < share.tasksMax!)
        #expect(widget.openFilesMax! < share.openFilesMax!)
    }

    @Test func theManifestOverridesTheConfigWhichOverridesTheBuiltInPoint() throws {
        let config = try parseConfig(#"{"points": {"widget": {"limits": {"tasksMax": 32, "cpuWeight": 20}}, "gauge": {"limits": {"openFilesMax": 100}}}}"#)
            .get()
        let builtIn = ExtensionPoints.builtIn.policies["widget"]!.limits
        #expect(
            config.points.policies["widget"]!.limits
                == ResourceLimits(
                    memoryMaxBytes: builtIn.memoryMaxBytes, tasksMax: 32, openFilesMax: builtIn.openFilesMax, cpuWeight: 20))
        #expect(config.points.policies["gauge"]!.limits.openFilesMax == 100)
        #expect(config.points.policies["gauge"]!.limits.tasksMax == ExtensionPoints.builtIn.policies["default"]!.limits.tasksMax)
        let m = try parseManifest(
            #"{"id": "com.example.w", "point": "widget", "executable": "/bin/true", "limits": {"openFilesMax": 64, "cpuWeight": 10}}"#,
            points: config.points
        ).get()
        #expect(m.policy.limits == ResourceLimits(memoryMaxBytes: builtIn.memoryMaxBytes, tasksMax: 32, openFilesMax: 64, cpuWeight: 10))
    }

    @Test(arguments: [
        (#""limits": {"memoryMaxBytes": 1000}"#, "limits.memoryMaxBytes", "must be an integer from 1048576 to 1125899906842624, got 1000.0"),
        (#""limits": {"tasksMax": 0}"#, "limits.tasksMax", "must be an integer from 1 to 4194304, got 0.0"),
        (#""limits": {"openFilesMax": 1.5}"#, "limits.openFilesMax", "must be an integer from 16 to 1048576, got 1.5"),
        (#""limits": {"cpuWeight": 10001}"#, "limits.cpuWeight", "must be an integer from 1 to 10000, got 10001.0"),
        (#""limits": {"memoryMax": 1}"#, "limits.memoryMax", "unknown key (known: cpuWeight, diskMaxBytes, memoryMaxBytes, openFilesMax, tasksMax)"),
        (#""policy": {"limits": {"tasksMax": 4}}"#, "policy.limits", "unknown key"),
    ])
    func badLimitsAreRefusedNamingTheKey(json: String, field: String, problem: String) {
        guard case .failure(let e) = parseManifest(#"{"id": "com.example.l", "executable": "/bin/true", "# + json + "}") else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(e.field == field, "\(e)")
        #expect(e.problem.hasPrefix(problem), "\(e.problem)")
    }

    @Test func aBadLimitInTheConfigurationNamesThePoint() {
        guard case .failure(let e) = parseConfig(#"{"points": {"widget": {"limits": {"tasksMax": -3}}}}"#) else {
            Issue.record("accepted")
            return
        }
        #expect(e.field == "points.widget.limits.tasksMax", "\(e)")
    }

    let all = ResourceLimits(memoryMaxBytes: 1 << 30, tasksMax: 64, openFilesMax: 256, cpuWeight: 50)

    @Test func withEveryControllerTheCgroupEnforcesAllButOpenFiles() {
        #expect(
            all.enforcement(controllers: ["memory", "pids", "cpu"], ownUID: false) == [
                LimitEnforcement(key: "memoryMaxBytes", value: 1 << 30, by: .cgroup, control: "memory.max"),
                LimitEnforcement(key: "tasksMax", value: 64, by: .cgroup, control: "pids.max"),
                LimitEnforcement(key: "openFilesMax", value: 256, by: .rlimit, control: "RLIMIT_NOFILE"),
                LimitEnforcement(key: "cpuWeight", value: 50, by: .cgroup, control: "cpu.weight"),
            ])
        #expect(
            all.enforcement(controllers: ["memory", "pids", "cpu"], memoryCgroupV1: true, ownUID: false)[0].control == "memory.max",
            "the v2 memory controller comes first")
    }

    @Test func withoutTheV2MemoryControllerMemoryIsAV1MemoryCgroupOrElseRLIMIT_DATA() {
        let v1 = all.enforcement(controllers: [], memoryCgroupV1: true, ownUID: true)
        #expect(v1[0] == LimitEnforcement(key: "memoryMaxBytes", value: 1 << 30, by: .cgroup, control: "memory.limit_in_bytes"))
        #expect(v1[0].byMemoryCgroupV1)
        let rlimit = all.enforcement(controllers: ["pids"], memoryCgroupV1: false, ownUID: true)
        #expect(rlimit[0] == LimitEnforcement(key: "memoryMaxBytes", value: 1 << 30, by: .rlimit, control: "RLIMIT_DATA"))
        #expect(!rlimit[0].byMemoryCgroupV1)
        #expect(rlimit.map(\.control) == ["RLIMIT_DATA", "pids.max", "RLIMIT_NOFILE", nil])
    }

    @Test func withoutControllersRlimitsApplyAndTasksNeedAnOwnUID() {
        let own = all.enforcement(controllers: [], ownUID: true)
        #expect(own.map(\.by) == [.rlimit, .rlimit, .rlimit, .none])
        #expect(own.map(\.control) == ["RLIMIT_DATA", "RLIMIT_NPROC", "RLIMIT_NOFILE", nil])
        let shared = all.enforcement(controllers: [], ownUID: false)
        #expect(shared.map(\.by) == [.rlimit, .none, .rlimit, .none])
        #expect(shared[1].unenforcedReason?.hasPrefix("limits.tasksMax (64) cannot be enforced") == true)
        #expect(shared[3].unenforcedReason == "limits.cpuWeight (50) cannot be enforced: no cpu controller in the extension's cgroup")
        #expect(shared[0].unenforcedReason == nil)
    }

    @Test func anUnsetLimitIsNotReported() {
        #expect(
            ResourceLimits(openFilesMax: 64).enforcement(controllers: [], ownUID: false) == [
                LimitEnforcement(key: "openFilesMax", value: 64, by: .rlimit, control: "RLIMIT_NOFILE")
            ])
    }
}
