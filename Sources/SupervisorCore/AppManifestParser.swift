#if canImport(FoundationEssentials)
import ExtensionProtocol
import FoundationEssentials  // JSONDecoder: the daemon does not load libFoundation and ICU
#else
import Foundation
#endif

/// Parses app manifests (`"kind": "app"`, docs/manifest.md, "Apps"), and tells them from
/// extension manifests. Pure: the shell passes the bytes.
public enum AppManifestParser {
    /// URL schemes no app may claim: the session's own handlers keep them.
    public static let reservedSchemes: Set<String> = ["http", "https", "file", "ftp", "data", "javascript", "about", "blob", "mailto"]
    /// Most groups and URL schemes an app may list.
    public static let maxListCount = 64

    /// Whether `data` is an app manifest: a JSON object whose `kind` is `"app"`. Anything
    /// else (no `kind`, `"extension"`, not JSON) is for `ManifestParser`, which reports it.
    public static func isApp(_ data: [UInt8]) -> Bool {
        (try? JSONDecoder().decode(KindPeek.self, from: Data(data)))?.kind == "app"
    }

    /// Parses one app manifest; `directory` resolves a relative `executable`.
    public static func parse(_ data: [UInt8], file: String, directory: String) -> Result<AppManifest, ManifestError> {
        func fail(_ field: String?, _ problem: String) -> Result<AppManifest, ManifestError> {
            .failure(ManifestError(file: file, field: field, problem: problem))
        }
        let raw: RawApp
        do {
            raw = try JSONDecoder().decode(RawApp.self, from: Data(data))
        } catch let error as ManifestFieldError {
            return fail(error.field, error.problem)
        } catch let error as DecodingError {
            let (field, problem) = ManifestParser.describe(error)
            return fail(field, problem)
        } catch {
            return fail(nil, "invalid JSON: \(error)")
        }
        if let problem = ManifestParser.identifierProblem(raw.id) { return fail("id", problem) }
        if let name = raw.displayName {
            if name.isEmpty || name.utf8.count > 255 { return fail("displayName", "must be 1 to 255 bytes") }
            if name.unicodeScalars.contains(where: ManifestParser.isControl) {
                return fail("displayName", "must not contain control characters (C0, DEL, C1) or bidirectional formatting characters")
            }
        }
        let groups = raw.groups ?? []
        if groups.count > maxListCount { return fail("groups", "has \(groups.count) names, over the limit of \(maxListCount)") }
        for (i, name) in groups.enumerated() {
            if let problem = SharedContainer.problem(name) { return fail("groups[\(i)]", problem) }
            if groups[..<i].contains(name) { return fail("groups[\(i)]", "'\(name)' is listed twice") }
        }
        var schemes: [String] = []
        for (i, scheme) in (raw.urlSchemes ?? []).enumerated() {
            if i >= maxListCount { return fail("urlSchemes", "has more than \(maxListCount) schemes") }
            if let problem = schemeProblem(scheme) { return fail("urlSchemes[\(i)]", problem) }
            let lowered = scheme.lowercased()
            if schemes.contains(lowered) { return fail("urlSchemes[\(i)]", "'\(scheme)' is listed twice") }
            schemes.append(lowered)
        }
        let launch: AppLaunch
        switch (raw.dbusActivatable ?? false, raw.executable) {
        case (true, nil):
            if raw.arguments != nil { return fail("arguments", "is for an app started by its executable, not a D-Bus-activatable one") }
            launch = .dbusActivatable
        case (false, let executable?):
            if executable.isEmpty { return fail("executable", "must not be empty") }
            if let problem = ManifestParser.pathProblem(executable) { return fail("executable", problem) }
            let arguments = raw.arguments ?? []
            if arguments.count > ManifestParser.maxListCount {
                return fail("arguments", "has \(arguments.count) items, over the limit of \(ManifestParser.maxListCount)")
            }
            for (i, a) in arguments.enumerated() where a.utf8.count > ManifestParser.maxStringLength || a.utf8.contains(0) {
                return fail("arguments[\(i)]", "is longer than \(ManifestParser.maxStringLength) bytes or contains NUL")
            }
            launch = .executable(path: executable.hasPrefix("/") ? executable : ManifestParser.join(directory, executable), arguments: arguments)
        case (true, _?):
            return fail("executable", "an app is brought up either by D-Bus activation (dbusActivatable) or by its executable, not both")
        case (false, nil):
            return fail(nil, "says neither how to bring the app up: set \"dbusActivatable\": true (a D-Bus-activatable desktop entry) or \"executable\"")
        }
        return .success(
            AppManifest(id: raw.id, displayName: raw.displayName, groups: groups, urlSchemes: schemes, launch: launch, source: file, user: raw.user))
    }

    /// Why `scheme` cannot be an app's URL scheme (RFC 3986: a letter, then letters, digits,
    /// `+`, `-` or `.`; at most 64 bytes; not one the session keeps), or nil.
    public static func schemeProblem(_ scheme: String) -> String? {
        let bytes = Array(scheme.utf8)
        func letter(_ c: UInt8) -> Bool { (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) }
        guard let first = bytes.first, letter(first), bytes.count <= 64,
            bytes.allSatisfy({ letter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") })
        else {
            return "'\(scheme)' is not a URL scheme (a letter, then letters, digits, '+', '-' or '.'; at most 64 bytes; no ':')"
        }
        if reservedSchemes.contains(scheme.lowercased()) { return "'\(scheme)' is the session's, and no app may claim it" }
        return nil
    }
}

/// The `kind` of a manifest, and nothing else.
private struct KindPeek: Decodable {
    var kind: String?
}

/// An app manifest exactly as written.
private struct RawApp: Decodable {
    var id: String
    var displayName: String?
    var groups: [String]?
    var urlSchemes: [String]?
    var dbusActivatable: Bool?
    var executable: String?
    var arguments: [String]?
    var user: AccountReference?

    static let keys: Set<String> = ["kind", "id", "displayName", "groups", "urlSchemes", "dbusActivatable", "executable", "arguments", "user"]

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        try c.rejectUnknown(Self.keys, prefix: "")
        id = try c.decode(String.self, forKey: AnyKey(stringValue: "id"))
        displayName = try c.optional(String.self, "displayName")
        groups = try c.optional([String].self, "groups")
        urlSchemes = try c.optional([String].self, "urlSchemes")
        dbusActivatable = try c.optional(Bool.self, "dbusActivatable")
        executable = try c.optional(String.self, "executable")
        arguments = try c.optional([String].self, "arguments")
        user = try c.account("user")
    }
}
