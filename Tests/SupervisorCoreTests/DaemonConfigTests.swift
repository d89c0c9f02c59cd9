import SupervisorCore
import Testing

let configFile = "/etc/extensiond/config.json"

func parseConfig(_ json: String) -> Result<DaemonConfig, ManifestError> {
    DaemonConfig.parse(Array(json.utf8), file: configFile)
}

struct MalformedConfig: Sendable, CustomTestStringConvertible {
    var name: String
    var json: String
    var field: String?
    var testDescription: String { name }
    init(_ name: String, _ json: String, _ field: String?) {
        self.name = name
        self.json = json
        self.field = field
    }
}

@Suite("Daemon configuration")
struct DaemonConfigTests {
    @Test func anEmptyConfigurationKeepsTheBuiltIns() throws {
        let c = try parseConfig("{}").get()
        #expect(c == DaemonConfig())
        #expect(c.points == .builtIn)
        #expect(c.limits == SupervisorLimits())
        #expect(c.adminGroup == nil)
    }

    @Test func aBuiltInPointIsOverriddenOnlyWhereGiven() throws {
        let c = try parseConfig(
            #"{"points": {"widget": {"backgroundSeconds": 8, "suspend": "never", "transferTasksPerApp": 0, "transferBytesPerDay": 1000}}}"#
        ).get()
        var widget = ExtensionPoints.builtIn.policies["widget"]!
        widget.backgroundSeconds = 8
        widget.suspend = .never
        #expect(widget.transferTasksPerApp == Policy.defaultTransferTasksPerApp)
        widget.transferTasksPerApp = 0
        widget.transferBytesPerDay = 1000
        #expect(c.points.policies["widget"] == widget)
        for other in ["share", "action", "default"] {
            #expect(c.points.policies[other] == ExtensionPoints.builtIn.policies[other], "\(other) is untouched")
        }
    }

    @Test func aNewPointStartsFromTheDefaultPoint() throws {
        let c = try parseConfig(#"{"points": {"complication": {"suspendedLifetimeSeconds": 60}}}"#).get()
        var expected = ExtensionPoints.builtIn.policies["default"]!
        expected.suspendedLifetimeSeconds = 60
        #expect(c.points.policies["complication"] == expected)
        #expect(c.points.policies.count == ExtensionPoints.builtIn.policies.count + 1)

        // Manifests may then use it.
        let m = try ManifestParser.parse(
            Array(#"{"id": "a.b", "executable": "/x", "point": "complication"}"#.utf8),
            file: "m.json", directory: "/", points: c.points
        ).get()
        #expect(m.policy == expected)
    }

    @Test func limitsAndAdminGroupAreApplied() throws {
        let json = """
            {"limits": {"maxRequestsPerHost": 64, "maxAssertionsPerProcess": 8, "maxPrewarmed": 0,
                        "terminateGraceSeconds": 3, "crashBackoffBaseSeconds": 0.5, "crashBackoffMaxSeconds": 10,
                        "stableRunSeconds": 120},
             "adminGroup": 27}
            """
        let c = try parseConfig(json).get()
        var expected = SupervisorLimits()
        expected.maxRequestsPerHost = 64
        expected.maxAssertionsPerProcess = 8
        expected.maxPrewarmed = 0
        expected.terminateGraceSeconds = 3
        expected.crashBackoffBaseSeconds = 0.5
        expected.crashBackoffMaxSeconds = 10
        expected.stableRunSeconds = 120
        #expect(c.limits == expected)
        #expect(c.adminGroup == 27)
        #expect(c.points == .builtIn)
    }

    @Test func partialLimitsKeepTheOtherDefaults() throws {
        let c = try parseConfig(#"{"limits": {"maxPrewarmed": 3}}"#).get()
        var expected = SupervisorLimits()
        expected.maxPrewarmed = 3
        #expect(c.limits == expected)
    }

    static let malformed: [MalformedConfig] = [
        MalformedConfig("invalid JSON", "{", nil),
        MalformedConfig("top-level array", "[]", nil),
        MalformedConfig("unknown top-level key", #"{"point": {}}"#, "point"),
        MalformedConfig("points is an array", #"{"points": []}"#, "points"),
        MalformedConfig("a point is a number", #"{"points": {"widget": 5}}"#, "points.widget"),
        MalformedConfig("bad point name", #"{"points": {"my point": {}}}"#, "points.my point"),
        MalformedConfig("point name with ..", #"{"points": {"a..b": {}}}"#, "points.a..b"),
        MalformedConfig("override breaks the point's relations", #"{"points": {"widget": {"expiryGraceSeconds": 6}}}"#, "points.widget.expiryGraceSeconds"),
        MalformedConfig("new point with zero launch timeout", #"{"points": {"x": {"launchTimeoutSeconds": 0}}}"#, "points.x.launchTimeoutSeconds"),
        MalformedConfig("limits is a string", #"{"limits": "none"}"#, "limits"),
        MalformedConfig("unknown limit", #"{"limits": {"maxRequests": 4}}"#, "limits.maxRequests"),
        MalformedConfig("negative limit", #"{"limits": {"maxPrewarmed": -1}}"#, "limits.maxPrewarmed"),
        MalformedConfig("huge limit", #"{"limits": {"terminateGraceSeconds": 1000001}}"#, "limits.terminateGraceSeconds"),
        MalformedConfig("limit is a string", #"{"limits": {"maxRequestsPerHost": "64"}}"#, "limits.maxRequestsPerHost"),
        MalformedConfig("transfers per app over the limit", #"{"points": {"widget": {"transferTasksPerApp": 10001}}}"#, "points.widget.transferTasksPerApp"),
        MalformedConfig("no bytes a day", #"{"points": {"widget": {"transferBytesPerDay": 0}}}"#, "points.widget.transferBytesPerDay"),
        MalformedConfig("admin group is a name", #"{"adminGroup": "wheel"}"#, "adminGroup"),
    ]

    @Test(arguments: malformed)
    func malformedConfigurationsAreRefused(_ c: MalformedConfig) {
        switch parseConfig(c.json) {
        case .success(let config):
            Issue.record("accepted: \(config)")
        case .failure(let e):
            #expect(e.field == c.field, "problem: \(e.problem)")
            #expect(e.file == configFile)
            #expect(!e.problem.isEmpty)
        }
    }

    @Test func nonUTF8AndOversizedFilesAreRefused() {
        guard case .failure(let bad) = DaemonConfig.parse([0x7B, 0xC3, 0x28, 0x7D], file: configFile) else {
            Issue.record("accepted non-UTF-8")
            return
        }
        #expect(bad.field == nil)
        #expect(bad.problem.contains("UTF-8"))
        let big = Array("{}".utf8) + [UInt8](repeating: 0x20, count: 2 * 1024 * 1024)
        guard case .failure(let large) = DaemonConfig.parse(big, file: configFile) else {
            Issue.record("accepted a 2 MB file")
            return
        }
        #expect(large.field == nil)
    }
}
