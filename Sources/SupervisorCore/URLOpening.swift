import ExtensionProtocol

/// Deciding where a URL an extension asks to open goes (docs/extension-model.md, "Opening a
/// URL"): to the app that declares its scheme, or to the session's handler for
/// `x-scheme-handler/<scheme>`, found as `xdg-open` and GIO find it. Pure: the reading of files
/// and the D-Bus calls are the shell's.
public enum URLOpening {
    /// Where a URL goes.
    public enum Route: Equatable, Sendable {
        /// The declared app `app`, whose `urlSchemes` has the scheme.
        case app(AppManifest)
        /// The session's handler for the scheme.
        case schemeHandler(String)
    }

    /// The URL's scheme (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`, before `:`),
    /// lower-cased; nil when it has none.
    public static func scheme(of url: String) -> String? {
        guard let colon = url.firstIndex(of: ":") else { return nil }
        let scheme = url[..<colon]
        guard let first = scheme.unicodeScalars.first, first.isASCIILetter,
            scheme.unicodeScalars.allSatisfy({ $0.isASCIILetter || ("0"..."9").contains($0) || "+-.".unicodeScalars.contains($0) })
        else { return nil }
        return scheme.lowercased()
    }

    /// What is wrong with `url` as a URL to open, or nil: empty, over `WireLimits.maxURL`
    /// bytes, a space or control character, or no scheme.
    public static func problem(_ url: String) -> String? {
        if url.isEmpty { return "the URL is empty" }
        if url.utf8.count > WireLimits.maxURL { return "the URL is \(url.utf8.count) bytes long, over \(WireLimits.maxURL)" }
        if url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f }) { return "the URL contains a space or a control character" }
        if scheme(of: url) == nil { return "the URL has no scheme (such as stocks: in stocks://item/42)" }
        return nil
    }

    /// Where a URL of `scheme` goes: the extension's own app when it declares the scheme, else
    /// the first app (by id) that does, else the session's handler.
    public static func route(scheme: String, extensionApp: String?, apps: [AppManifest]) -> Route {
        let declaring = apps.filter { $0.urlSchemes.contains(scheme) }.sorted { $0.id < $1.id }
        if let own = declaring.first(where: { $0.id == extensionApp }) { return .app(own) }
        if let first = declaring.first { return .app(first) }
        return .schemeHandler(scheme)
    }

    /// The program to run for an app's `executable` with `arguments`, the URL last.
    public static func command(_ launch: AppLaunch, url: String) -> [String]? {
        guard case .executable(let path, let arguments) = launch else { return nil }
        return [path] + arguments + [url]
    }

    /// A desktop entry's `Exec` split into words (the Desktop Entry specification's quoting:
    /// double quotes, with `\"`, `` \` ``, `\$` and `\\` escaped inside them), its field codes
    /// expanded for one URL: `%u`, `%U`, `%f` and `%F` become the URL (a URL is always
    /// passed, as GIO passes it to a handler that takes files), `%%` a `%`, the others dropped.
    /// When no field code takes the URL it is appended. Nil when the quoting is broken, or when
    /// a field code stands inside quotes: the URL would be part of a word a shell may read
    /// (`sh -c "open %u"`), which GIO too refuses to fill unquoted.
    public static func expandExec(_ exec: String, url: String) -> [String]? {
        var words: [String] = []
        var current = ""
        var inWord = false, quoted = false, escaped = false, previous: Character = " "
        for c in exec {
            defer { previous = c }
            if quoted && previous == "%" && "uUfF".contains(c) { return nil }
            if quoted {
                if escaped {
                    current.append(c)
                    escaped = false
                } else if c == "\\" {
                    escaped = true
                } else if c == "\"" {
                    quoted = false
                } else {
                    current.append(c)
                }
            } else if c == "\"" {
                quoted = true
                inWord = true
            } else if c == " " || c == "\t" {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(c)
                inWord = true
            }
        }
        if quoted { return nil }
        if inWord { words.append(current) }
        var out: [String] = []
        var took = false
        for word in words {
            if ["%u", "%U", "%f", "%F"].contains(word) {
                if !took { out.append(url) }
                took = true
                continue
            }
            var expanded = ""
            var percent = false
            for c in word {
                if percent {
                    if c == "%" {
                        expanded.append("%")
                    } else if "uUfF".contains(c) && !took {
                        expanded += url
                        took = true
                    }
                    percent = false
                } else if c == "%" {
                    percent = true
                } else {
                    expanded.append(c)
                }
            }
            if !expanded.isEmpty { out.append(expanded) }
        }
        guard !out.isEmpty else { return nil }
        if !took { out.append(url) }
        return out
    }

    /// The desktop ids a `mimeapps.list` gives for `mimeType`: its `[Default Applications]`
    /// entries first, then `[Added Associations]`, each list split at `;`.
    public static func associations(inMimeApps text: String, for mimeType: String) -> [String] {
        var defaults: [String] = [], added: [String] = []
        var section = ""
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = raw.trimmingWhitespace()
            if line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                section = line
                continue
            }
            guard let eq = line.firstIndex(of: "="), line[..<eq].trimmingWhitespace() == mimeType else { continue }
            let ids = line[line.index(after: eq)...].split(separator: ";").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
            if section == "[Default Applications]" { defaults += ids } else if section == "[Added Associations]" { added += ids }
        }
        return defaults + added
    }

    /// The keys of a desktop entry's `[Desktop Entry]` group (localized keys left out).
    public static func desktopEntry(_ text: String) -> [String: String] {
        var out: [String: String] = [:]
        var inGroup = false
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = raw.trimmingWhitespace()
            if line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                inGroup = line == "[Desktop Entry]"
                continue
            }
            guard inGroup, let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingWhitespace()
            if key.contains("[") { continue }
            out[key] = line[line.index(after: eq)...].trimmingWhitespace()
        }
        return out
    }

    /// Whether a desktop entry (its keys) handles `mimeType` itself (its `MimeType` list), for
    /// the search of `mimeinfo.cache`-less directories.
    public static func entry(_ keys: [String: String], handles mimeType: String) -> Bool {
        (keys["MimeType"] ?? "").split(separator: ";").contains { $0.trimmingWhitespace() == mimeType }
    }
}

/// How many URLs one extension process opened in the last minute, against its point's
/// `openURLsPerMinute`.
public struct OpenURLRate: Sendable, Equatable {
    private var recent: [Instant] = []

    /// No opens yet.
    public init() {}

    /// Whether one more open at `now` is within `perMinute`; counts it when it is.
    public mutating func admit(at now: Instant, perMinute: Int) -> Bool {
        recent.removeAll { now.seconds(since: $0) >= 60 }
        guard recent.count < perMinute else { return false }
        recent.append(now)
        return true
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
}

extension StringProtocol {
    fileprivate func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s = s.dropLast() }
        return String(s)
    }
}
