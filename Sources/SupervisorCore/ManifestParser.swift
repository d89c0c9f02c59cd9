#if canImport(FoundationEssentials)
import ExtensionProtocol
import FoundationEssentials  // JSONDecoder: the daemon does not load libFoundation and ICU
#else
import Foundation
#endif

/// Parses and validates manifest bytes. Pure: it reads no files; the shell passes the bytes,
/// the file's path and the directory used to resolve a relative executable path.
public enum ManifestParser {
    /// A scalar a name shown to people must not hold: C0 controls, DEL, C1 controls, and the
    /// bidirectional formatting characters (marks, embeddings, overrides and isolates), which
    /// would reorder the text around it where it is shown.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// Largest manifest file accepted, in bytes.
    public static let maxFileSize = 1 << 20
    /// Most arguments in `arguments`, and most variables in `environment`.
    public static let maxListCount = 256
    /// Longest argument, variable value or path, in bytes.
    public static let maxStringLength = 4_096

    /// Parses one manifest file's contents.
    /// - Parameters:
    ///   - data: the file's bytes.
    ///   - file: its path, for error messages and `Manifest.source`.
    ///   - directory: the directory a relative `executable` is resolved against.
    ///   - points: the extension points the daemon knows.
    public static func parse(
        _ data: [UInt8], file: String, directory: String, points: ExtensionPoints
    ) -> Result<Manifest, ManifestError> {
        func fail(_ field: String?, _ problem: String) -> Result<Manifest, ManifestError> {
            .failure(ManifestError(file: file, field: field, problem: problem))
        }
        if data.count > maxFileSize { return fail(nil, "file is \(data.count) bytes, over the \(maxFileSize)-byte limit") }
        if String(validating: data, as: UTF8.self) == nil { return fail(nil, "file is not valid UTF-8") }
        let raw: RawManifest
        do {
            raw = try JSONDecoder().decode(RawManifest.self, from: Data(data))
        } catch let error as ManifestFieldError {
            return fail(error.field, error.problem)
        } catch let error as DecodingError {
            let (field, problem) = describe(error)
            return fail(field, problem)
        } catch {
            return fail(nil, "invalid JSON: \(error)")
        }

        if let problem = identifierProblem(raw.id) { return fail("id", problem) }
        let pointName = raw.point ?? "default"
        guard let base = points.policies[pointName] else {
            let known = points.policies.keys.sorted().joined(separator: ", ")
            return fail("point", "unknown extension point '\(pointName)' (known: \(known))")
        }
        if raw.executable.isEmpty { return fail("executable", "must not be empty") }
        if let problem = pathProblem(raw.executable) { return fail("executable", problem) }
        let executable = raw.executable.hasPrefix("/") ? raw.executable : join(directory, raw.executable)

        let arguments = raw.arguments ?? []
        if arguments.count > maxListCount { return fail("arguments", "has \(arguments.count) items, over the limit of \(maxListCount)") }
        for (i, a) in arguments.enumerated() {
            if a.utf8.count > maxStringLength { return fail("arguments[\(i)]", "is longer than \(maxStringLength) bytes") }
            if a.utf8.contains(0) { return fail("arguments[\(i)]", "contains a NUL byte") }
        }
        let environment = raw.environment ?? [:]
        if environment.count > maxListCount { return fail("environment", "has \(environment.count) variables, over the limit of \(maxListCount)") }
        for (k, v) in environment {
            if !isEnvironmentName(k) { return fail("environment.\(k)", "is not a valid variable name") }
            if k.hasPrefix("EXTENSIOND_") { return fail("environment.\(k)", "EXTENSIOND_* variables are set by the supervisor") }
            if k.hasPrefix(SharedContainer.environmentPrefix) {
                return fail("environment.\(k)", "\(SharedContainer.environmentPrefix)* variables are set by the supervisor (sharedContainers)")
            }
            if v.utf8.count > maxStringLength || v.utf8.contains(0) {
                return fail("environment.\(k)", "value is longer than \(maxStringLength) bytes or contains NUL")
            }
        }
        var overrides = raw.policy ?? PolicyOverrides()
        overrides.limits = raw.limits
        var policy = overrides.applied(to: base)
        // `refresh` (the manifest's spelling) or `policy.refresh` (the configuration file's,
        // accepted too); the top-level key wins when both are given.
        if let refresh = raw.refresh ?? raw.policy?.refresh {
            if raw.readiness == .exec {
                let field = raw.refresh != nil ? "refresh" : "policy.refresh"
                return fail(field, "needs readiness 'runtime': an 'exec' extension has no runtime channel to be refreshed through")
            }
            policy.refresh = refresh
        } else if raw.readiness == .exec {
            policy.refresh = nil  // a point's default does not apply to an extension that cannot answer
        }
        if let (field, problem) = policy.violation() {
            return fail(field.hasPrefix("refresh.") && raw.refresh != nil ? field : "policy.\(field)", problem)
        }
        let containers = raw.sharedContainers ?? []
        if containers.count > 64 { return fail("sharedContainers", "has \(containers.count) names, over the limit of 64") }
        for (i, name) in containers.enumerated() {
            if let problem = SharedContainer.problem(name) { return fail("sharedContainers[\(i)]", problem) }
            if containers[..<i].contains(name) { return fail("sharedContainers[\(i)]", "'\(name)' is listed twice") }
        }
        if let network = raw.network {
            if network && !policy.network {
                return fail("network", "its extension point '\(pointName)' gives no network, and a manifest may only restrict what its point allows")
            }
            policy.network = network
        }
        let hosts = raw.hosts ?? HostRestriction()
        if let name = raw.displayName {
            if name.isEmpty { return fail("displayName", "must not be empty") }
            if name.utf8.count > 255 { return fail("displayName", "must be at most 255 bytes") }
            if name.unicodeScalars.contains(where: Self.isControl) {
                return fail("displayName", "must not contain control characters (C0, DEL, C1) or bidirectional formatting characters")
            }
        }

        var manifest = Manifest(
            id: raw.id, point: pointName, executable: executable, arguments: arguments,
            environment: environment, readiness: raw.readiness ?? .runtime, policy: policy,
            hosts: hosts, hostAccess: raw.hostAccess ?? false, displayName: raw.displayName, activation: raw.activation,
            source: file,
            credentialRequest: CredentialRequest(user: raw.user, group: raw.group, supplementaryGroups: raw.supplementaryGroups ?? []))
        manifest.sharedContainers = containers
        manifest.sandboxed = raw.sandbox != SandboxSetting.none
        if let app = raw.app {
            if let problem = identifierProblem(app) { return fail("app", problem) }
            manifest.app = app
        }
        return .success(manifest)
    }

    /// Why `id` is not a valid extension id, or nil (`Identifier.problem`).
    public static func identifierProblem(_ id: String) -> String? { Identifier.problem(id) }

    static func pathProblem(_ path: String) -> String? {
        if path.utf8.count > maxStringLength { return "path is longer than \(maxStringLength) bytes" }
        if path.utf8.contains(0) { return "path contains a NUL byte" }
        if path.split(separator: "/").contains("..") { return "path '\(path)' must not contain '..' components" }
        return nil
    }

    static func isEnvironmentName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(first >= 0x30 && first <= 0x39) else { return false }
        return name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F
        }
    }

    static func join(_ directory: String, _ relative: String) -> String {
        var rel = Substring(relative)
        while rel.hasPrefix("./") { rel = rel.dropFirst(2) }
        return directory.hasSuffix("/") ? directory + rel : directory + "/" + rel
    }

    /// Turns a decoding error into (field path, problem).
    static func describe(_ error: DecodingError) -> (String?, String) {
        func path(_ keys: [any CodingKey]) -> String? {
            var out = ""
            for key in keys {
                if let i = key.intValue { out += "[\(i)]" } else { out += out.isEmpty ? key.stringValue : "." + key.stringValue }
            }
            return out.isEmpty ? nil : out
        }
        switch error {
        case .typeMismatch(let type, let ctx):
            return (path(ctx.codingPath), "expected \(typeName(type))")
        case .valueNotFound(let type, let ctx):
            return (path(ctx.codingPath), "expected \(typeName(type)), found null")
        case .keyNotFound(let key, let ctx):
            return (path(ctx.codingPath + [key]), "is required")
        case .dataCorrupted(let ctx):
            let detail = (ctx.underlyingError.map { "\($0)" } ?? ctx.debugDescription)
            if ctx.codingPath.isEmpty { return (nil, "invalid JSON: \(detail)") }
            return (path(ctx.codingPath), ctx.debugDescription)
        @unknown default:
            return (nil, "\(error)")
        }
    }

    static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Double.Type, is Int.Type, is UInt32.Type: return "a number"
        case is Bool.Type: return "a boolean"
        case is [String].Type, is [UInt32].Type, is [Any].Type: return "an array"
        default:
            let name = "\(type)"
            return name.hasPrefix("Dictionary") || name.hasPrefix("Raw") || name.contains("Overrides") || name.contains("Restriction")
                ? "an object" : name
        }
    }
}

/// A problem found while decoding a specific field (unknown key, bad enum value).
struct ManifestFieldError: Error {
    var field: String
    var problem: String
}

/// A coding key for any JSON member name, used to find unknown keys.
struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

extension KeyedDecodingContainer where Key == AnyKey {
    /// Refuses members not in `known`, naming the first one in sorted order. `decoder` is the
    /// decoder the container came from, when there is one: a hand-over document's
    /// (`BinaryDecoder`) has its keys compared where they lie, without a `String` made of each.
    func rejectUnknown(_ known: Set<String>, prefix: String, in decoder: (any Decoder)? = nil) throws {
        let unknown: String?
        if let binary = decoder as? BinaryDecoding {
            unknown = try binary.keys(notIn: known).min()
        } else {
            unknown = allKeys.lazy.map(\.stringValue).filter { !known.contains($0) }.min()
        }
        guard let first = unknown else { return }
        throw ManifestFieldError(field: prefix + first, problem: "unknown key (known: \(known.sorted().joined(separator: ", ")))")
    }

    func optional<T: Decodable>(_ type: T.Type, _ name: String) throws -> T? {
        try decodeIfPresent(type, forKey: AnyKey(stringValue: name))
    }

    /// A maximum item count: an integer from 0 to 10,000; `default` when absent.
    func count(_ name: String, prefix: String, default fallback: Int = 0) throws -> Int {
        guard let v = try decodeIfPresent(Double.self, forKey: AnyKey(stringValue: name)) else { return fallback }
        guard v.rounded() == v, v >= 0, v <= Double(ActivationContent.maxCount) else {
            throw ManifestFieldError(field: prefix + name, problem: "must be an integer count from 0 to \(ActivationContent.maxCount), got \(v)")
        }
        return Int(v)
    }

    func seconds(_ name: String, prefix: String) throws -> Double? {
        guard let v = try decodeIfPresent(Double.self, forKey: AnyKey(stringValue: name)) else { return nil }
        if !v.isFinite || v < 0 { throw ManifestFieldError(field: prefix + name, problem: "must be a non-negative number of seconds, got \(v)") }
        if v > Policy.maximumSeconds {
            throw ManifestFieldError(field: prefix + name, problem: "must be at most \(Int(Policy.maximumSeconds)) seconds, got \(v)")
        }
        return v
    }

    /// A list of uids or gids. Decoded as numbers and range-checked here: Foundation reports an
    /// out-of-range integer as "not valid JSON" with no coding path.
    func ids(_ name: String, prefix: String) throws -> [UInt32] {
        guard let raw = try decodeIfPresent([Double].self, forKey: AnyKey(stringValue: name)) else { return [] }
        return try raw.enumerated().map { i, v in try Self.id(v, field: "\(prefix)\(name)[\(i)]") }
    }

    static func id(_ v: Double, field: String) throws -> UInt32 {
        guard v.rounded() == v, v >= 0, v <= Double(UInt32.max) else {
            throw ManifestFieldError(field: field, problem: "must be an integer between 0 and \(UInt32.max), got \(v)")
        }
        return UInt32(v)
    }

    func enumeration<T: RawRepresentable>(_ type: T.Type, _ name: String, prefix: String) throws -> T? where T.RawValue == String {
        guard let raw = try decodeIfPresent(String.self, forKey: AnyKey(stringValue: name)) else { return nil }
        guard let value = T(rawValue: raw) else {
            throw ManifestFieldError(field: prefix + name, problem: "unknown value '\(raw)'")
        }
        return value
    }
}

/// The manifest exactly as written, before resolution.
struct RawManifest: Decodable {
    var id: String
    var point: String?
    var executable: String
    var arguments: [String]?
    var environment: [String: String]?
    var readiness: Readiness?
    var policy: PolicyOverrides?
    var hosts: HostRestriction?
    var hostAccess: Bool?
    var displayName: String?
    var activation: ActivationRule?
    var refresh: RefreshSchedule?
    var user: AccountReference?
    var group: AccountReference?
    var supplementaryGroups: [AccountReference]?
    var limits: ResourceLimits?
    var sharedContainers: [String]?
    var sandbox: SandboxSetting?
    var network: Bool?
    var app: String?

    static let keys: Set<String> = [
        "id", "point", "executable", "arguments", "environment", "readiness", "policy", "hosts", "hostAccess", "displayName", "activation", "refresh",
        "user", "group", "supplementaryGroups", "limits", "sharedContainers", "sandbox", "network", "kind", "app",
    ]

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        try c.rejectUnknown(Self.keys, prefix: "", in: decoder)
        id = try c.decode(String.self, forKey: AnyKey(stringValue: "id"))
        point = try c.optional(String.self, "point")
        executable = try c.decode(String.self, forKey: AnyKey(stringValue: "executable"))
        arguments = try c.optional([String].self, "arguments")
        environment = try c.optional([String: String].self, "environment")
        readiness = try c.enumeration(Readiness.self, "readiness", prefix: "")
        policy = try c.optional(PolicyOverrides.self, "policy")
        hosts = try c.optional(HostRestriction.self, "hosts")
        hostAccess = try c.optional(Bool.self, "hostAccess")
        displayName = try c.optional(String.self, "displayName")
        activation = try c.optional(ActivationRule.self, "activation")
        refresh = try c.optional(RefreshSchedule.self, "refresh")
        user = try c.account("user")
        group = try c.account("group")
        if c.contains(AnyKey(stringValue: "supplementaryGroups")) {
            var list = try c.nestedUnkeyedContainer(forKey: AnyKey(stringValue: "supplementaryGroups"))
            var found: [AccountReference] = []
            while !list.isAtEnd {
                let field = "supplementaryGroups[\(found.count)]"
                if found.count >= ManifestParser.maxListCount {
                    throw ManifestFieldError(field: "supplementaryGroups", problem: "has more than \(ManifestParser.maxListCount) groups")
                }
                if let n = try? list.decode(Double.self) {
                    found.append(.number(try KeyedDecodingContainer<AnyKey>.id(n, field: field)))
                } else if let name = try? list.decode(String.self) {
                    found.append(try AccountReference.named(name, field: field))
                } else {
                    throw ManifestFieldError(field: field, problem: "expected a group name or number")
                }
            }
            supplementaryGroups = found
        }
        limits = try c.optional(ResourceLimits.self, "limits")
        sharedContainers = try c.optional([String].self, "sharedContainers")
        sandbox = try c.enumeration(SandboxSetting.self, "sandbox", prefix: "")
        network = try c.optional(Bool.self, "network")
        app = try c.optional(String.self, "app")
        if let kind = try c.optional(String.self, "kind"), kind != "extension" {
            throw ManifestFieldError(field: "kind", problem: "unknown value '\(kind)' (known: app, extension)")
        }
    }
}

/// A manifest's `sandbox`: `default` (the sandbox of docs/security.md) or `none`.
enum SandboxSetting: String, Decodable {
    case `default`
    case none
}

extension AccountReference {
    /// A user or group name as the account database allows it (no ':', '/', control
    /// characters or spaces, not empty, not all digits, at most 64 bytes).
    static func named(_ name: String, field: String) throws -> AccountReference {
        let bytes = Array(name.utf8)
        let valid =
            !bytes.isEmpty && bytes.count <= 64 && !bytes.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            && bytes.allSatisfy { $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: ":") && $0 != UInt8(ascii: "/") }
        guard valid else { throw ManifestFieldError(field: field, problem: "'\(name)' is not a valid user or group name") }
        return .name(name)
    }
}

extension KeyedDecodingContainer where Key == AnyKey {
    /// A user or group: a name or a number.
    func account(_ name: String, prefix: String = "") throws -> AccountReference? {
        let key = AnyKey(stringValue: name)
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let n = try? decode(Double.self, forKey: key) { return .number(try Self.id(n, field: prefix + name)) }
        if let s = try? decode(String.self, forKey: key) { return try AccountReference.named(s, field: prefix + name) }
        throw ManifestFieldError(field: prefix + name, problem: "expected a name or a number")
    }
}

extension ResourceLimits: Decodable {
    /// `keys` as a set, for `rejectUnknown`.
    static let knownKeys = Set(keys)

    /// Decodes a `limits` object. Unknown keys, and values that are not integers within each
    /// key's range, are refused naming the field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        // "limits." in a manifest, "points.<name>.limits." in the daemon configuration.
        let prefix = decoder.codingPath.map(\.stringValue).joined(separator: ".") + "."
        try c.rejectUnknown(Self.knownKeys, prefix: prefix, in: decoder)
        self.init()
        for key in Self.keys {
            guard let v = try c.decodeIfPresent(Double.self, forKey: AnyKey(stringValue: key)) else { continue }
            let range = Self.ranges[key]!
            guard v.rounded() == v, v >= Double(range.lowerBound), v <= Double(range.upperBound) else {
                throw ManifestFieldError(field: prefix + key, problem: "must be an integer from \(range.lowerBound) to \(range.upperBound), got \(v)")
            }
            switch key {
            case "memoryMaxBytes": memoryMaxBytes = UInt64(v)
            case "tasksMax": tasksMax = UInt64(v)
            case "openFilesMax": openFilesMax = UInt64(v)
            case "diskMaxBytes": diskMaxBytes = UInt64(v)
            default: cpuWeight = UInt64(v)
            }
        }
    }
}

extension RefreshSchedule: Decodable {
    /// Decodes a `refresh` object; an absent key keeps its default. Unknown keys and values
    /// that break `violation()` are refused naming the field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        var prefix = ""
        for key in decoder.codingPath { prefix += (prefix.isEmpty ? "" : ".") + key.stringValue }
        prefix += "."
        try c.rejectUnknown(["minimumIntervalSeconds", "dailyBudget"], prefix: prefix, in: decoder)
        self.init()
        if let v = try c.seconds("minimumIntervalSeconds", prefix: prefix) { minimumIntervalSeconds = v }
        dailyBudget = try c.count("dailyBudget", prefix: prefix, default: 48)
        if let (field, problem) = violation() { throw ManifestFieldError(field: prefix + field, problem: problem) }
    }
}

extension ActivationRule: Decodable {
    static let keys: Set<String> = ["text", "urls", "images", "files", "contentTypes"]

    /// Decodes an `activation` object; an absent key allows nothing of its kind. Unknown keys,
    /// bad counts and a MIME type listed twice are refused naming the field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        try c.rejectUnknown(Self.keys, prefix: "activation.", in: decoder)
        self.init()
        text = try c.optional(Bool.self, "text") ?? false
        urls = try c.count("urls", prefix: "activation.")
        images = try c.count("images", prefix: "activation.")
        files = try c.count("files", prefix: "activation.")
        contentTypes = try c.optional([ContentTypeLimit].self, "contentTypes") ?? []
        var seen = Set<String>()
        for (i, entry) in contentTypes.enumerated() where !seen.insert(entry.type).inserted {
            throw ManifestFieldError(field: "activation.contentTypes[\(i)].type", problem: "'\(entry.type)' is listed twice")
        }
    }
}

extension ActivationRule.ContentTypeLimit: Decodable {
    /// Decodes one `contentTypes` entry; `max` defaults to 1. Unknown keys and a `type` that is
    /// not a MIME type are refused naming the field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        var prefix = ""
        for key in decoder.codingPath {
            if let i = key.intValue { prefix += "[\(i)]" } else { prefix += (prefix.isEmpty ? "" : ".") + key.stringValue }
        }
        prefix += "."
        try c.rejectUnknown(["type", "max"], prefix: prefix, in: decoder)
        let type = try c.decode(String.self, forKey: AnyKey(stringValue: "type"))
        guard ActivationContent.isMIMEType(type, allowingWildcard: true) else {
            throw ManifestFieldError(field: prefix + "type", problem: "'\(type)' is not a MIME type such as application/pdf or image/*")
        }
        self.init(type: type, max: try c.count("max", prefix: prefix, default: 1))
    }
}

extension PolicyOverrides: Decodable {
    static let keys: Set<String> = [
        "backgroundSeconds", "expiryGraceSeconds", "assertionMaxSeconds", "launchTimeoutSeconds",
        "suspendedLifetimeSeconds", "suspend", "lockedWhileSuspended", "refreshSeconds", "refresh",
    ]
    /// Keys only a configured point has.
    static let pointKeys: Set<String> = ["limits", "network", "sandboxRequires", "openURLsPerMinute", "transferTasksPerApp", "transferBytesPerDay"]

    /// Decodes a manifest's `policy` or a configured point; an absent key stays nil. A
    /// configured point may also give `limits`, `network` and `sandboxRequires`. Unknown keys and
    /// values out of range are refused naming the field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        // "policy." in a manifest, "points.<name>." in the daemon configuration.
        let prefix = decoder.codingPath.isEmpty ? "policy." : decoder.codingPath.map(\.stringValue).joined(separator: ".") + "."
        // A manifest gives its limits at the top level (`limits`), a configured point inside it.
        let inManifest = decoder.codingPath.map(\.stringValue) == ["policy"] || decoder.codingPath.isEmpty
        try c.rejectUnknown(inManifest ? Self.keys : Self.keys.union(Self.pointKeys), prefix: prefix, in: decoder)
        self.init()
        backgroundSeconds = try c.seconds("backgroundSeconds", prefix: prefix)
        expiryGraceSeconds = try c.seconds("expiryGraceSeconds", prefix: prefix)
        assertionMaxSeconds = try c.seconds("assertionMaxSeconds", prefix: prefix)
        launchTimeoutSeconds = try c.seconds("launchTimeoutSeconds", prefix: prefix)
        suspendedLifetimeSeconds = try c.seconds("suspendedLifetimeSeconds", prefix: prefix)
        suspend = try c.enumeration(SuspendMode.self, "suspend", prefix: prefix)
        lockedWhileSuspended = try c.enumeration(LockContentionPolicy.self, "lockedWhileSuspended", prefix: prefix)
        refreshSeconds = try c.seconds("refreshSeconds", prefix: prefix)
        refresh = try c.optional(RefreshSchedule.self, "refresh")
        if !inManifest {
            limits = try c.optional(ResourceLimits.self, "limits")
            network = try c.optional(Bool.self, "network")
            if let perMinute = try c.optional(Int.self, "openURLsPerMinute") {
                guard (0...600).contains(perMinute) else {
                    throw ManifestFieldError(field: prefix + "openURLsPerMinute", problem: "\(perMinute) is not from 0 (no URL opened) to 600")
                }
                openURLsPerMinute = perMinute
            }
            if let tasks = try c.optional(Int.self, "transferTasksPerApp") {
                guard (0...10_000).contains(tasks) else {
                    throw ManifestFieldError(field: prefix + "transferTasksPerApp", problem: "\(tasks) is not from 0 (no background transfers) to 10000")
                }
                transferTasksPerApp = tasks
            }
            if let bytes = try c.optional(Int64.self, "transferBytesPerDay") {
                guard bytes > 0 else {
                    throw ManifestFieldError(field: prefix + "transferBytesPerDay", problem: "\(bytes) is not a positive number of bytes")
                }
                transferBytesPerDay = bytes
            }
            if c.contains(AnyKey(stringValue: "sandboxRequires")) {
                let names = try c.decode([String].self, forKey: AnyKey(stringValue: "sandboxRequires"))
                var parts: [SandboxPart] = []
                for (i, name) in names.enumerated() {
                    guard let part = SandboxPart(rawValue: name) else {
                        let known = SandboxPart.allCases.map(\.rawValue).joined(separator: ", ")
                        throw ManifestFieldError(field: prefix + "sandboxRequires[\(i)]", problem: "unknown sandbox part '\(name)' (known: \(known))")
                    }
                    if !parts.contains(part) { parts.append(part) }
                }
                sandboxRequires = parts
            }
        }
    }
}

extension HostRestriction: Decodable {
    /// Decodes `hosts`: lists of uids and gids, each absent list empty. Unknown keys and
    /// invalid ids are refused naming the field.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        try c.rejectUnknown(["uids", "gids"], prefix: "hosts.", in: decoder)
        self.init(uids: try c.ids("uids", prefix: "hosts."), gids: try c.ids("gids", prefix: "hosts."))
    }
}
