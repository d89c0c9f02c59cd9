import SupervisorCore
import Testing

let manifestDirectory = "/etc/extensiond/manifests"
let manifestFile = "/etc/extensiond/manifests/test.json"

func parseManifest(_ json: String, directory: String = manifestDirectory, points: ExtensionPoints = .builtIn) -> Result<Manifest, ManifestError> {
    ManifestParser.parse(Array(json.utf8), file: manifestFile, directory: directory, points: points)
}

/// A minimal valid manifest with `extra` members appended (a JSON fragment starting with a comma).
func minimal(_ extra: String = "", id: String = "\"com.example.x\"", executable: String = "\"/usr/bin/x\"") -> String {
    "{\"id\": \(id), \"executable\": \(executable)\(extra)}"
}

struct MalformedManifest: Sendable, CustomTestStringConvertible {
    var name: String
    var json: String
    /// The field the error must name (nil: the whole file).
    var field: String?
    var testDescription: String { name }
    init(_ name: String, _ json: String, _ field: String?) {
        self.name = name
        self.json = json
        self.field = field
    }
}

@Suite("Manifest parser")
struct ManifestParserTests {
    // MARK: Good manifests

    @Test func aFullManifestIsResolved() throws {
        let json = """
            {
              "id": "com.example.stocks.widget",
              "point": "widget",
              "executable": "bin/stocks",
              "arguments": ["--symbols", "AAPL,MSFT"],
              "environment": {"LANG": "C.UTF-8", "_private1": "x"},
              "readiness": "exec",
              "policy": {"backgroundSeconds": 8, "suspend": "never"},
              "hosts": {"uids": [1000, 1001], "gids": [27]}
            }
            """
        let m = try parseManifest(json).get()
        #expect(m.id == "com.example.stocks.widget")
        #expect(m.point == "widget")
        #expect(m.executable == "/etc/extensiond/manifests/bin/stocks")
        #expect(m.arguments == ["--symbols", "AAPL,MSFT"])
        #expect(m.environment == ["LANG": "C.UTF-8", "_private1": "x"])
        #expect(m.readiness == .exec)
        #expect(m.hosts == HostRestriction(uids: [1000, 1001], gids: [27]))
        #expect(m.source == manifestFile)
        var expected = ExtensionPoints.builtIn.policies["widget"]!
        expected.backgroundSeconds = 8
        expected.suspend = .never
        #expect(m.policy == expected)
    }

    @Test func aMinimalManifestGetsTheDefaults() throws {
        let m = try parseManifest(minimal()).get()
        #expect(m.point == "default")
        #expect(m.executable == "/usr/bin/x")
        #expect(m.arguments.isEmpty)
        #expect(m.environment.isEmpty)
        #expect(m.readiness == .runtime)
        #expect(m.hosts == HostRestriction())
        #expect(m.policy == ExtensionPoints.builtIn.policies["default"]!)
        #expect(m.policy.suspend == .stop)
    }

    @Test(arguments: ["widget", "share", "action", "default"])
    func eachBuiltInPointSuppliesItsPolicy(point: String) throws {
        let m = try parseManifest(minimal(", \"point\": \"\(point)\"")).get()
        #expect(m.point == point)
        #expect(m.policy == ExtensionPoints.builtIn.policies[point]!)
    }

    @Test func overridesReplaceOnlyTheFieldsGiven() throws {
        let m = try parseManifest(
            minimal(
                #", "point": "share", "policy": {"expiryGraceSeconds": 1, "assertionMaxSeconds": 90, "launchTimeoutSeconds": 2.5, "suspendedLifetimeSeconds": 0}"#
            )
        ).get()
        let share = ExtensionPoints.builtIn.policies["share"]!
        #expect(m.policy.backgroundSeconds == share.backgroundSeconds)
        #expect(m.policy.expiryGraceSeconds == 1)
        #expect(m.policy.assertionMaxSeconds == 90)
        #expect(m.policy.launchTimeoutSeconds == 2.5)
        #expect(m.policy.suspendedLifetimeSeconds == 0)
        #expect(m.policy.suspend == share.suspend)
    }

    @Test func boundaryDurationsAreAccepted() throws {
        let m = try parseManifest(
            minimal(
                #", "policy": {"backgroundSeconds": 86400, "expiryGraceSeconds": 0, "assertionMaxSeconds": 86400, "suspendedLifetimeSeconds": 86400, "launchTimeoutSeconds": 0.001}"#
            )
        ).get()
        #expect(m.policy.backgroundSeconds == Policy.maximumSeconds)
        #expect(m.policy.expiryGraceSeconds == 0)
    }

    @Test(arguments: [
        ("bin/x", "/etc/extensiond/manifests", "/etc/extensiond/manifests/bin/x"),
        ("./x", "/etc/extensiond/manifests", "/etc/extensiond/manifests/x"),
        ("././x", "/d", "/d/x"),
        ("x", "/d/", "/d/x"),
        ("/opt/ext/x", "/d", "/opt/ext/x"),
        ("..x/y", "/d", "/d/..x/y"),
    ])
    func executablesResolveAgainstTheManifestDirectory(executable: String, directory: String, expected: String) throws {
        let m = try parseManifest(minimal(executable: "\"\(executable)\""), directory: directory).get()
        #expect(m.executable == expected)
    }

    @Test func configuredPointsAreKnown() throws {
        var points = ExtensionPoints.builtIn
        points.policies["complication"] = Policy(
            backgroundSeconds: 2, expiryGraceSeconds: 1, assertionMaxSeconds: 5, launchTimeoutSeconds: 1, suspendedLifetimeSeconds: 60)
        let m = try parseManifest(minimal(#", "point": "complication""#), points: points).get()
        #expect(m.policy == points.policies["complication"]!)
        #expect(throws: Never.self) { try parseManifest(minimal(#", "point": "widget""#), points: points).get() }
        guard case .failure(let e) = parseManifest(minimal(#", "point": "complication""#)) else {
            Issue.record("an unknown point must be refused")
            return
        }
        #expect(e.field == "point")
        #expect(e.problem.contains("complication"))
    }

    // MARK: Malformed manifests

    static let long4097 = String(repeating: "a", count: 4_097)
    static let malformed: [MalformedManifest] = [
        // Not a manifest at all.
        MalformedManifest("invalid JSON", "{\"id\": ", nil),
        MalformedManifest("empty file", "", nil),
        MalformedManifest("top-level array", "[1, 2]", nil),
        MalformedManifest("top-level string", "\"hello\"", nil),
        // Wrong types.
        MalformedManifest("id is a number", minimal(id: "5"), "id"),
        MalformedManifest("id is null", minimal(id: "null"), "id"),
        MalformedManifest("executable is an array", minimal(executable: "[\"/bin/x\"]"), "executable"),
        MalformedManifest("point is a number", minimal(#", "point": 3"#), "point"),
        MalformedManifest("arguments is a string", minimal(#", "arguments": "-v""#), "arguments"),
        MalformedManifest("argument is a number", minimal(#", "arguments": ["-v", 1]"#), "arguments[1]"),
        MalformedManifest("environment is an array", minimal(#", "environment": ["A=1"]"#), "environment"),
        MalformedManifest("environment value is a number", minimal(#", "environment": {"A": 1}"#), "environment.A"),
        MalformedManifest("readiness is a number", minimal(#", "readiness": 1"#), "readiness"),
        MalformedManifest("policy is a number", minimal(#", "policy": 5"#), "policy"),
        MalformedManifest("duration is a string", minimal(#", "policy": {"backgroundSeconds": "5"}"#), "policy.backgroundSeconds"),
        MalformedManifest("suspend is a boolean", minimal(#", "policy": {"suspend": false}"#), "policy.suspend"),
        MalformedManifest("hosts is an array", minimal(#", "hosts": [1000]"#), "hosts"),
        MalformedManifest("hosts.uids is a string", minimal(#", "hosts": {"uids": "1000"}"#), "hosts.uids"),
        // Unknown keys and values.
        MalformedManifest("unknown top-level key", minimal(#", "exectuable": "/bin/y""#), "exectuable"),
        MalformedManifest("unknown policy key", minimal(#", "policy": {"backgroundSecs": 5}"#), "policy.backgroundSecs"),
        MalformedManifest("unknown hosts key", minimal(#", "hosts": {"users": [1]}"#), "hosts.users"),
        MalformedManifest("unknown readiness", minimal(#", "readiness": "socket""#), "readiness"),
        MalformedManifest("unknown suspend mode", minimal(#", "policy": {"suspend": "sometimes"}"#), "policy.suspend"),
        MalformedManifest("unknown point", minimal(#", "point": "keyboard""#), "point"),
        // Missing members.
        MalformedManifest("missing id", #"{"executable": "/bin/x"}"#, "id"),
        MalformedManifest("missing executable", #"{"id": "a.b"}"#, "executable"),
        MalformedManifest("empty object", "{}", "id"),
        // Bad durations.
        MalformedManifest("negative duration", minimal(#", "policy": {"backgroundSeconds": -1}"#), "policy.backgroundSeconds"),
        MalformedManifest("negative zero point one", minimal(#", "policy": {"assertionMaxSeconds": -0.1}"#), "policy.assertionMaxSeconds"),
        MalformedManifest("over a day", minimal(#", "policy": {"suspendedLifetimeSeconds": 86401}"#), "policy.suspendedLifetimeSeconds"),
        MalformedManifest("huge", minimal(#", "policy": {"launchTimeoutSeconds": 1e300}"#), "policy.launchTimeoutSeconds"),
        MalformedManifest("zero launch timeout", minimal(#", "policy": {"launchTimeoutSeconds": 0}"#), "policy.launchTimeoutSeconds"),
        MalformedManifest("grace over background", minimal(#", "policy": {"backgroundSeconds": 2, "expiryGraceSeconds": 3}"#), "policy.expiryGraceSeconds"),
        MalformedManifest(
            "grace over the point's background", minimal(#", "point": "widget", "policy": {"expiryGraceSeconds": 6}"#), "policy.expiryGraceSeconds"),
        MalformedManifest("grace over assertion max", minimal(#", "policy": {"assertionMaxSeconds": 2}"#), "policy.expiryGraceSeconds"),
        // Executable paths.
        MalformedManifest("empty executable", minimal(executable: "\"\""), "executable"),
        MalformedManifest("leading ..", minimal(executable: "\"../bin/x\""), "executable"),
        MalformedManifest("inner ..", minimal(executable: "\"/opt/ext/../../bin/sh\""), "executable"),
        MalformedManifest("trailing ..", minimal(executable: "\"bin/..\""), "executable"),
        MalformedManifest("bare ..", minimal(executable: "\"..\""), "executable"),
        MalformedManifest("NUL in executable", minimal(executable: "\"/bin/x\\u0000y\""), "executable"),
        MalformedManifest("executable too long", minimal(executable: "\"/\(long4097)\""), "executable"),
        // Identifiers.
        MalformedManifest("empty id", minimal(id: "\"\""), "id"),
        MalformedManifest("space in id", minimal(id: "\"com.example x\""), "id"),
        MalformedManifest("slash in id", minimal(id: "\"com/example\""), "id"),
        MalformedManifest("non-ASCII id", minimal(id: "\"com.exämple\""), "id"),
        MalformedManifest("id starting with a dot", minimal(id: "\".example\""), "id"),
        MalformedManifest("id ending with a dot", minimal(id: "\"example.\""), "id"),
        MalformedManifest("id with ..", minimal(id: "\"com..example\""), "id"),
        MalformedManifest("id of 256 bytes", minimal(id: "\"\(String(repeating: "a", count: 256))\""), "id"),
        // Arguments and environment.
        MalformedManifest("257 arguments", minimal(", \"arguments\": [\(Array(repeating: "\"a\"", count: 257).joined(separator: ","))]"), "arguments"),
        MalformedManifest("argument too long", minimal(", \"arguments\": [\"ok\", \"\(long4097)\"]"), "arguments[1]"),
        MalformedManifest("NUL in argument", minimal(#", "arguments": ["a\u0000b"]"#), "arguments[0]"),
        MalformedManifest("EXTENSIOND_ variable", minimal(#", "environment": {"EXTENSIOND_SOCKET": "/tmp/s"}"#), "environment.EXTENSIOND_SOCKET"),
        MalformedManifest("variable starting with a digit", minimal(#", "environment": {"1A": "x"}"#), "environment.1A"),
        MalformedManifest("variable with a dash", minimal(#", "environment": {"A-B": "x"}"#), "environment.A-B"),
        MalformedManifest("variable with =", minimal(#", "environment": {"A=B": "x"}"#), "environment.A=B"),
        MalformedManifest("empty variable name", minimal(#", "environment": {"": "x"}"#), "environment."),
        MalformedManifest("NUL in a value", minimal(#", "environment": {"A": "x\u0000"}"#), "environment.A"),
        MalformedManifest("value too long", minimal(", \"environment\": {\"A\": \"\(long4097)\"}"), "environment.A"),
        MalformedManifest("257 variables", minimal(", \"environment\": {\((0..<257).map { "\"V\($0)\": \"x\"" }.joined(separator: ","))}"), "environment"),
    ]

    @Test(arguments: malformed)
    func malformedManifestsAreRefused(_ c: MalformedManifest) {
        switch parseManifest(c.json) {
        case .success(let m):
            Issue.record("accepted: \(m)")
        case .failure(let e):
            #expect(e.field == c.field, "problem: \(e.problem)")
            #expect(e.file == manifestFile)
            #expect(!e.problem.isEmpty)
            #expect(e.description.hasPrefix(manifestFile))
            if let field = c.field { #expect(e.description.contains("'\(field)'")) }
        }
    }

    @Test func nonUTF8BytesAreRefused() {
        var bytes = Array(minimal().utf8)
        bytes.insert(0xFF, at: 10)
        let result = ManifestParser.parse(bytes, file: manifestFile, directory: manifestDirectory, points: .builtIn)
        guard case .failure(let e) = result else { Issue.record("accepted non-UTF-8 bytes"); return }
        #expect(e.field == nil)
        #expect(e.problem.contains("UTF-8"))
    }

    @Test func oversizedFilesAreRefusedBeforeParsing() {
        // 2 MB of otherwise valid JSON (a long run of spaces).
        let padding = [UInt8](repeating: 0x20, count: 2 * 1024 * 1024)
        let result = ManifestParser.parse(Array(minimal().utf8) + padding, file: manifestFile, directory: manifestDirectory, points: .builtIn)
        guard case .failure(let e) = result else { Issue.record("accepted a 2 MB file"); return }
        #expect(e.field == nil)
        #expect(e.problem.contains("limit"))

        let justUnder = Array(minimal().utf8) + [UInt8](repeating: 0x20, count: ManifestParser.maxFileSize - minimal().utf8.count)
        #expect(justUnder.count == ManifestParser.maxFileSize)
        #expect(throws: Never.self) {
            try ManifestParser.parse(justUnder, file: manifestFile, directory: manifestDirectory, points: .builtIn).get()
        }
        guard case .failure = ManifestParser.parse(justUnder + [0x20], file: manifestFile, directory: manifestDirectory, points: .builtIn) else {
            Issue.record("accepted maxFileSize + 1 bytes")
            return
        }
    }

    @Test func identifierRules() {
        for good in ["a", "com.example.widget", "A-b_c.9", String(repeating: "z", count: 255), "x.y-z_0"] {
            #expect(ManifestParser.identifierProblem(good) == nil, "\(good)")
        }
        for bad in ["", ".", "a.", ".a", "a..b", "a b", "a/b", "a:b", "ü", String(repeating: "z", count: 256), "a\u{0}"] {
            #expect(ManifestParser.identifierProblem(bad) != nil, "\(bad)")
        }
    }
}
