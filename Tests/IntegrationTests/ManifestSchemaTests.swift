import Foundation
import SupervisorCore
import Testing

/// The parser (`ManifestParser`) and the schema (docs/manifest.schema.json, checked with
/// Python's `jsonschema`, a real draft 2020-12 validator) agree on every manifest the docs show
/// and on the schema's own examples: both accept it or both refuse it. See docs/README.md.
@Suite struct ManifestSchemaTests {
    static let root = RuntimeC.packageRoot
    static let schemaPath = root + "/docs/manifest.schema.json"

    /// A manifest to check, where it comes from, and the verdict its source promises (nil: none,
    /// only agreement).
    struct Sample: CustomStringConvertible {
        var origin: String
        var json: String
        var expectValid: Bool?
        var description: String { origin }
    }

    /// Every ```json block of the docs that is a manifest (an object with `executable`, or an app
    /// manifest's `"kind": "app"`), and every block marked `<!-- example -->` (valid) or
    /// `<!-- invalid-example -->` (refused).
    static func documentedManifests() throws -> [Sample] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root + "/docs").filter { $0.hasSuffix(".md") }.sorted()
        var samples: [Sample] = []
        for doc in docs {
            for block in try DocBlock.all(in: root + "/docs/" + doc) where block.language == "json" {
                let marked = block.marker == "example" || block.marker == "invalid-example"
                let object = try? JSONSerialization.jsonObject(with: Data(block.text.utf8)) as? [String: Any]
                if marked && object == nil { throw HarnessError("\(block): a block marked \(block.marker!) is not a JSON object") }
                guard let object, object["executable"] != nil || object["kind"] as? String == "app" || marked else { continue }
                samples.append(Sample(origin: "\(block)", json: block.text, expectValid: marked ? block.marker == "example" : nil))
            }
        }
        return samples
    }

    /// The schema's top-level `examples` (whole manifests) and each property's `examples`, put
    /// in the smallest manifest at that property's place: all valid.
    static func schemaExamples() throws -> [Sample] {
        let schema = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: schemaPath))) as! [String: Any]
        var samples: [Sample] = []
        for (i, example) in (schema["examples"] as? [Any] ?? []).enumerated() {
            samples.append(Sample(origin: "schema examples[\(i)]", json: try json(example), expectValid: true))
        }
        let definitions = schema["$defs"] as? [String: Any] ?? [:]
        for (i, example) in ((definitions["app"] as? [String: Any])?["examples"] as? [Any] ?? []).enumerated() {
            samples.append(Sample(origin: "schema app examples[\(i)]", json: try json(example), expectValid: true))
        }
        func walk(_ properties: [String: Any], path: [String]) throws {
            for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
                guard let property = value as? [String: Any] else { continue }
                for (i, example) in (property["examples"] as? [Any] ?? []).enumerated() {
                    var manifest: [String: Any] = ["id": "org.example.schema", "executable": "/bin/true"]
                    if path.isEmpty { manifest[key] = example } else { manifest[path[0]] = [key: example] }
                    samples.append(
                        Sample(origin: "schema \((path + [key]).joined(separator: ".")) examples[\(i)]", json: try json(manifest), expectValid: true))
                }
                if path.isEmpty, let nested = property["properties"] as? [String: Any] { try walk(nested, path: [key]) }
            }
        }
        try walk((definitions["extension"] as? [String: Any])?["properties"] as? [String: Any] ?? [:], path: [])
        return samples
    }

    static func json(_ object: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    /// The schema's verdict on each document: nil when valid, else the first error.
    static func schemaVerdicts(_ documents: [String]) throws -> [String?] {
        let script = """
            import json, sys
            try:
                import jsonschema
            except ImportError:
                sys.exit("python3 has no jsonschema module: run scripts/dependencies.sh (Debian's python3-jsonschema)")
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            validator = jsonschema.Draft202012Validator(schema)
            out = []
            for text in json.load(sys.stdin):
                errors = sorted(validator.iter_errors(json.loads(text)), key=lambda e: list(e.path))
                out.append(None if not errors else f"{errors[0].json_path}: {errors[0].message}")
            print(json.dumps(out))
            """
        let input = try json(documents)
        let r = try runProgram("/usr/bin/python3", ["-c", script, schemaPath], stdin: input)
        guard r.status == 0, let verdicts = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [Any] else {
            throw HarnessError("the schema check failed: \(r.err)")
        }
        return verdicts.map { $0 as? String }
    }

    /// The parser's verdict: nil when it accepts the manifest, else its error. The built-in
    /// points; the file and program checks (ManifestFiles' and ManifestValidation's, which the schema cannot make)
    /// are not applied.
    static func parserVerdict(_ json: String) -> String? {
        let bytes = Array(json.utf8)
        if AppManifestParser.isApp(bytes) {
            if case .failure(let error) = AppManifestParser.parse(bytes, file: "example.json", directory: "/opt/example") { return error.description }
            return nil
        }
        switch ManifestParser.parse(bytes, file: "example.json", directory: "/opt/example", points: .builtIn) {
        case .success: return nil
        case .failure(let error): return error.description
        }
    }

    static func check(_ samples: [Sample]) throws {
        let verdicts = try schemaVerdicts(samples.map(\.json))
        for (sample, schemaError) in zip(samples, verdicts) {
            let parserError = parserVerdict(sample.json)
            #expect(
                (parserError == nil) == (schemaError == nil),
                "\(sample): the parser says \(parserError ?? "valid"), the schema says \(schemaError ?? "valid")\n\(sample.json)")
            if let want = sample.expectValid {
                #expect((parserError == nil) == want, "\(sample) is marked \(want ? "valid" : "invalid"): the parser says \(parserError ?? "valid")")
            }
        }
    }

    @Test func theParserAndTheSchemaAgreeOnEveryManifestInTheDocs() throws {
        let samples = try Self.documentedManifests()
        #expect(samples.count >= 10, "the docs' manifests were found: \(samples)")
        #expect(samples.contains { $0.expectValid == false }, "refused examples are checked too")
        try Self.check(samples)
    }

    @Test func theParserAcceptsEveryExampleOfTheSchema() throws {
        let samples = try Self.schemaExamples()
        #expect(samples.contains { $0.origin.hasPrefix("schema examples[") }, "the schema's whole manifests: \(samples)")
        #expect(samples.contains { $0.origin.hasPrefix("schema point examples[") }, "the properties' examples: \(samples)")
        try Self.check(samples)
    }

    /// `policy.refresh`, the configuration file's spelling of the schedule, is accepted by both,
    /// and refused by both with `exec` readiness or an out-of-range budget.
    @Test func policyRefreshIsAcceptedByBothAndCheckedAlike() throws {
        let base = #""id": "org.example.r", "executable": "/bin/true""#
        let samples = [
            Sample(origin: "policy.refresh", json: "{\(base), \"policy\": {\"refresh\": {\"dailyBudget\": 4}}}", expectValid: true),
            Sample(origin: "policy.refresh with exec", json: "{\(base), \"readiness\": \"exec\", \"policy\": {\"refresh\": {}}}", expectValid: nil),
            Sample(origin: "policy.refresh over budget", json: "{\(base), \"policy\": {\"refresh\": {\"dailyBudget\": 1441}}}", expectValid: false),
        ]
        #expect(
            Self.parserVerdict(samples[1].json)
                == "example.json: field 'policy.refresh': needs readiness 'runtime': an 'exec' extension has no runtime channel to be refreshed through")
        try Self.check([samples[0], samples[2]])
    }

    /// A `displayName` with a control character (C0, DEL, C1) or a bidirectional formatting
    /// character is refused by both; right-to-left text itself is accepted by both.
    @Test func displayNamesWithControlOrBidiCharactersAreRefusedByBoth() throws {
        let base = #""id": "org.example.d", "executable": "/bin/true""#
        var samples = ["\\u0007", "\\u007f", "\\u0085", "\\u200e", "\\u202e", "\\u2066"].map {
            Sample(origin: "displayName with \($0)", json: "{\(base), \"displayName\": \"a\($0)b\"}", expectValid: false)
        }
        samples.append(Sample(origin: "right-to-left displayName", json: "{\(base), \"displayName\": \"\\u0645\\u0644 Notes\"}", expectValid: true))
        try Self.check(samples)
    }
}
