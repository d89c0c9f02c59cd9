import ExtensionProtocol

#if canImport(FoundationEssentials)
import FoundationEssentials  // JSONDecoder: the daemon does not load libFoundation and ICU
#else
import Foundation
#endif

/// The daemon's configuration file (`--config FILE`): extension-point policies and limits.
///
/// ```json
/// { "points": { "widget": { "backgroundSeconds": 8 }, "complication": { "suspendedLifetimeSeconds": 60 } },
///   "limits": { "maxRequestsPerHost": 64, "terminateGraceSeconds": 3 },
///   "adminGroup": 27 }
/// ```
/// A point named like a built-in one overrides only the keys given; a new point starts from
/// the `default` point's policy.
public struct DaemonConfig: Equatable, Sendable {
    /// Policies by extension point: the built-in points, with the file's `points` applied.
    public var points: ExtensionPoints = .builtIn
    /// The supervisor's limits: the defaults, with the file's `limits` applied.
    public var limits = SupervisorLimits()
    /// Members of this group may run administrative operations (kill, reload) besides root
    /// and the daemon's uid.
    public var adminGroup: UInt32?
    /// Whether a manifest may say `"user": "root"` (`allowRootExtensions`, off by default).
    public var allowRootExtensions = false
    /// Whether a manifest may say `"sandbox": "none"` (`allowUnsandboxedExtensions`, off by
    /// default): for trusted extensions only, never third parties.
    public var allowUnsandboxedExtensions = false
    /// The uids (and equal gids) given to extensions without `user` under a root daemon
    /// (`extensionUIDs`: `{"first": N, "count": M}`).
    public var extensionUIDs = IdentityRange.defaultRange
    /// Shared containers given an existing group (`sharedContainers`: name → `{"group": G}`),
    /// so that an administrator admits an app by adding its user to that group. Others get a
    /// gid allocated from `extensionUIDs`.
    public var containerGroups: [String: AccountReference] = [:]

    /// The configuration without a file: built-in points, default limits, no admin group,
    /// root and unsandboxed extensions refused, the default uid range, no container groups.
    public init() {}

    /// Parses a configuration file's bytes; errors name the file and field.
    public static func parse(_ data: [UInt8], file: String) -> Result<DaemonConfig, ManifestError> {
        if data.count > ManifestParser.maxFileSize {
            return .failure(ManifestError(file: file, problem: "file is \(data.count) bytes, over the \(ManifestParser.maxFileSize)-byte limit"))
        }
        if String(validating: data, as: UTF8.self) == nil { return .failure(ManifestError(file: file, problem: "file is not valid UTF-8")) }
        do {
            let raw = try JSONDecoder().decode(RawConfig.self, from: Data(data))
            var config = DaemonConfig()
            for (name, overrides) in raw.points ?? [:] {
                if ManifestParser.identifierProblem(name) != nil {
                    return .failure(ManifestError(file: file, field: "points.\(name)", problem: "is not a valid extension point name"))
                }
                let base = config.points.policies[name] ?? ExtensionPoints.builtIn.policies["default"]!
                let policy = overrides.applied(to: base)
                if let (field, problem) = policy.violation() {
                    return .failure(ManifestError(file: file, field: "points.\(name).\(field)", problem: problem))
                }
                config.points.policies[name] = policy
            }
            if let l = raw.limits { config.limits = l.applied(to: config.limits) }
            config.adminGroup = raw.adminGroup
            config.allowRootExtensions = raw.allowRootExtensions ?? false
            config.allowUnsandboxedExtensions = raw.allowUnsandboxedExtensions ?? false
            if let range = raw.extensionUIDs { config.extensionUIDs = range }
            config.containerGroups = raw.containerGroups
            return .success(config)
        } catch let error as ManifestFieldError {
            return .failure(ManifestError(file: file, field: error.field, problem: error.problem))
        } catch let error as DecodingError {
            let (field, problem) = ManifestParser.describe(error)
            return .failure(ManifestError(file: file, field: field, problem: problem))
        } catch {
            return .failure(ManifestError(file: file, problem: "invalid JSON: \(error)"))
        }
    }
}

struct RawConfig: Decodable {
    var points: [String: PolicyOverrides]?
    var limits: RawLimits?
    var adminGroup: UInt32?
    var allowRootExtensions: Bool?
    var allowUnsandboxedExtensions: Bool?
    var extensionUIDs: IdentityRange?
    var containerGroups: [String: AccountReference] = [:]

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        try c.rejectUnknown(
            ["points", "limits", "adminGroup", "allowRootExtensions", "allowUnsandboxedExtensions", "extensionUIDs", "sharedContainers"], prefix: "")
        if c.contains(AnyKey(stringValue: "sharedContainers")) {
            let containers = try c.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey(stringValue: "sharedContainers"))
            for key in containers.allKeys {
                let prefix = "sharedContainers.\(key.stringValue)"
                if let problem = SharedContainer.problem(key.stringValue) { throw ManifestFieldError(field: prefix, problem: problem) }
                let entry = try containers.nestedContainer(keyedBy: AnyKey.self, forKey: key)
                try entry.rejectUnknown(["group"], prefix: prefix + ".")
                guard let group = try entry.account("group", prefix: prefix + ".") else {
                    throw ManifestFieldError(field: prefix + ".group", problem: "is required")
                }
                if group == .number(0) || group == .name("root") {
                    throw ManifestFieldError(field: prefix + ".group", problem: "root's group would admit every root process and is refused")
                }
                containerGroups[key.stringValue] = group
            }
        }
        allowRootExtensions = try c.optional(Bool.self, "allowRootExtensions")
        allowUnsandboxedExtensions = try c.optional(Bool.self, "allowUnsandboxedExtensions")
        if c.contains(AnyKey(stringValue: "extensionUIDs")) {
            let r = try c.nestedContainer(keyedBy: AnyKey.self, forKey: AnyKey(stringValue: "extensionUIDs"))
            try r.rejectUnknown(["first", "count"], prefix: "extensionUIDs.")
            guard let first = try r.optional(Double.self, "first") else { throw ManifestFieldError(field: "extensionUIDs.first", problem: "is required") }
            guard let count = try r.optional(Double.self, "count") else { throw ManifestFieldError(field: "extensionUIDs.count", problem: "is required") }
            let f = try KeyedDecodingContainer<AnyKey>.id(first, field: "extensionUIDs.first")
            let n = try KeyedDecodingContainer<AnyKey>.id(count, field: "extensionUIDs.count")
            if f < 1000 { throw ManifestFieldError(field: "extensionUIDs.first", problem: "must be at least 1000, above the system users, got \(f)") }
            if n < 1 { throw ManifestFieldError(field: "extensionUIDs.count", problem: "must be at least 1") }
            if UInt64(f) + UInt64(n) > UInt64(UInt32.max) {
                throw ManifestFieldError(field: "extensionUIDs.count", problem: "the range \(f)+\(n) goes past the largest uid \(UInt32.max - 1)")
            }
            extensionUIDs = IdentityRange(first: f, count: n)
        }
        points = try c.optional([String: PolicyOverrides].self, "points")
        limits = try c.optional(RawLimits.self, "limits")
        adminGroup = try c.optional(Double.self, "adminGroup").map { try KeyedDecodingContainer<AnyKey>.id($0, field: "adminGroup") }
    }
}

struct RawLimits: Decodable {
    var values: [String: Double] = [:]
    static let keys: Set<String> = [
        "maxRequestsPerHost", "maxConnectionsPerUID", "maxAssertionsPerProcess", "maxPrewarmed", "terminateGraceSeconds",
        "crashBackoffBaseSeconds", "crashBackoffMaxSeconds", "stableRunSeconds", "diskCheckSeconds",
    ]

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        try c.rejectUnknown(Self.keys, prefix: "limits.", in: decoder)
        for key in c.allKeys {
            let v = try c.decode(Double.self, forKey: key)
            if !v.isFinite || v < 0 || v > 1_000_000 {
                throw ManifestFieldError(field: "limits.\(key.stringValue)", problem: "must be a number between 0 and 1000000, got \(v)")
            }
            values[key.stringValue] = v
        }
    }

    func applied(to base: SupervisorLimits) -> SupervisorLimits {
        var l = base
        if let v = values["maxRequestsPerHost"] { l.maxRequestsPerHost = Int(v) }
        if let v = values["maxConnectionsPerUID"] { l.maxConnectionsPerUID = Int(v) }
        if let v = values["maxAssertionsPerProcess"] { l.maxAssertionsPerProcess = Int(v) }
        if let v = values["maxPrewarmed"] { l.maxPrewarmed = Int(v) }
        if let v = values["terminateGraceSeconds"] { l.terminateGraceSeconds = v }
        if let v = values["crashBackoffBaseSeconds"] { l.crashBackoffBaseSeconds = v }
        if let v = values["crashBackoffMaxSeconds"] { l.crashBackoffMaxSeconds = v }
        if let v = values["stableRunSeconds"] { l.stableRunSeconds = v }
        if let v = values["diskCheckSeconds"] { l.diskCheckSeconds = max(v, 0.1) }
        return l
    }
}
