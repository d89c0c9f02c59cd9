import ArgumentParser
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus
import Foundation

/// `extctl defaults SUITE [KEY [VALUE]]`: read or write a shared defaults suite (administrators).
struct Defaults: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a shared defaults suite, one key of it, or set a key (root, the daemon's user and the administrator group).",
        discussion: """
            VALUE is read as --type says; with auto: true or false is a bool, a whole number an integer, any other number a \
            double, text starting with [ or { JSON (an array or a dictionary), anything else a string.
            """)

    enum ValueType: String, ExpressibleByArgument, CaseIterable {
        case auto, bool, integer, double, string, bytes, json
    }

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print JSON: {\"suite\", \"entries\": [{\"key\", \"type\", \"value\"}]} (bytes as base64).") var json = false
    @Flag(name: .long, help: "Remove KEY.") var delete = false
    @Option(name: .long, help: "How VALUE is read: auto, bool, integer, double, string, bytes (base64) or json.") var type: ValueType = .auto
    @Argument(help: "The suite: an app group, such as group.com.example.stocks.") var suite: String
    @Argument(help: "A key of the suite.") var key: String?
    @Argument(help: "The value to set.") var value: String?

    func validate() throws {
        if let problem = Identifier.problem(suite) { throw ValidationError("suite: '\(suite)' \(problem)") }
        if let key, let problem = DefaultsValue.keyProblem(key) { throw ValidationError("key: '\(key)' \(problem)") }
        if delete && (key == nil || value != nil) { throw ValidationError("--delete takes a KEY and no VALUE") }
        if value != nil && json { throw ValidationError("--json prints; it does not go with a VALUE") }
    }

    func run() throws {
        let client = try connection.connect()
        let defaults: HostGroupDefaults
        do { defaults = try HostGroupDefaults(suiteName: suite, client: client) } catch { throw Failure(error.message) }
        if let key, delete || value != nil {
            let parsed = try value.map { try Self.parse($0, as: type) }
            do { try defaults.set(parsed, forKey: key) } catch { throw Failure(error.message) }
            return
        }
        let entries: [String: DefaultsValue]
        do { entries = try defaults.dictionaryRepresentation() } catch { throw Failure("the suite '\(suite)' is malformed: \(error)") }
        var shown = entries.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        if let key {
            shown = shown.filter { $0.key == key }
            if shown.isEmpty && !json { throw Failure("the suite '\(suite)' has no key '\(key)'") }
        }
        if json {
            var writer = JSONWriter()
            writer.write(
                .object([
                    "suite": .string(suite),
                    "entries": .array(shown.map { .object(["key": .string($0.key), "type": .string(Self.typeName($0.value)), "value": Self.json($0.value)]) }),
                ]))
            print(String(decoding: writer.bytes, as: UTF8.self))
        } else if key != nil, let only = shown.first {
            print(safe(Self.text(only.value)))
        } else {
            for (k, v) in shown { print("\(safe(k)) = \(safe(Self.text(v)))") }
        }
    }

    /// The value's type, as docs/defaults.md names it.
    static func typeName(_ value: DefaultsValue) -> String {
        switch value {
        case .bool: "bool"
        case .integer: "integer"
        case .double: "double"
        case .string: "string"
        case .bytes: "bytes"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }

    /// The value as JSON: bytes as base64 strings.
    static func json(_ value: DefaultsValue) -> JSONValue {
        switch value {
        case .bool(let b): .bool(b)
        case .integer(let i): .integer(Int(i))
        case .double(let d): .number(d)
        case .string(let s): .string(s)
        case .bytes(let b): .string(Data(b).base64EncodedString())
        case .array(let a): .array(a.map(json))
        case .dictionary(let d): .object(d.mapValues(json))
        }
    }

    /// The value on one line: JSON, with bytes as base64 and a double always with a point.
    static func text(_ value: DefaultsValue) -> String {
        switch value {
        case .double(let d) where d.isFinite && d == d.rounded() && abs(d) < 1e16: return String(format: "%.1f", d)
        default:
            var writer = JSONWriter()
            writer.write(json(value))
            return String(decoding: writer.bytes, as: UTF8.self)
        }
    }

    /// VALUE read as `type` says.
    static func parse(_ text: String, as type: ValueType) throws -> DefaultsValue {
        func bad(_ what: String) -> ValidationError { ValidationError("VALUE '\(text)' is not \(what)") }
        switch type {
        case .bool:
            guard let b = Bool(text) else { throw bad("true or false") }
            return .bool(b)
        case .integer:
            guard let i = Int64(text) else { throw bad("an integer of 64 bits") }
            return .integer(i)
        case .double:
            guard let d = Double(text) else { throw bad("a number") }
            return .double(d)
        case .string: return .string(text)
        case .bytes:
            guard let data = Data(base64Encoded: text) else { throw bad("base64") }
            return .bytes(Array(data))
        case .json:
            do { return try JSONDecoder().decode(JSONDefaults.self, from: Data(text.utf8)).value } catch { throw bad("JSON (\(error))") }
        case .auto:
            if let b = Bool(text) { return .bool(b) }
            if let i = Int64(text) { return .integer(i) }
            if let d = Double(text), d.isFinite { return .double(d) }
            if text.hasPrefix("[") || text.hasPrefix("{") { return try parse(text, as: .json) }
            return .string(text)
        }
    }

    /// A defaults value read from JSON: booleans, integers, other numbers as doubles, strings,
    /// arrays and objects.
    struct JSONDefaults: Decodable {
        var value: DefaultsValue
        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let b = try? c.decode(Bool.self) {
                value = .bool(b)
            } else if let i = try? c.decode(Int64.self) {
                value = .integer(i)
            } else if let d = try? c.decode(Double.self) {
                value = .double(d)
            } else if let s = try? c.decode(String.self) {
                value = .string(s)
            } else if let a = try? c.decode([JSONDefaults].self) {
                value = .array(a.map(\.value))
            } else {
                value = .dictionary(try c.decode([String: JSONDefaults].self).mapValues(\.value))
            }
        }
    }
}
