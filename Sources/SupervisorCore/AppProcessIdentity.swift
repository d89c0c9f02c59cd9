import ExtensionProtocol

/// Which app a connecting process belongs to, by what the kernel says of it (docs/security.md,
/// "Identity"), never by what it says of itself. Pure: the shell reads `/proc/PID/cgroup`.
///
/// A desktop app is known by the systemd unit its cgroup is in, as desktops launch apps
/// (freedesktop's and systemd's desktop integration; Flatpak does the same for its apps): a
/// scope `app[-LAUNCHER]-APPID-RANDOM.scope`, or a service `app[-LAUNCHER]-APPID[@RANDOM].service`,
/// with the `-` of APPID escaped as `\x2d`. A process cannot move itself out of its cgroup, but
/// any process of the same user can start a scope of any name: this tells one user's apps
/// apart for that user, not against one another. `/.flatpak-info` is not read: a process
/// outside Flatpak can show one in a mount namespace of its own.
///
/// Only an id that an app manifest declares counts (the shell checks); anything else is a
/// process of no app, as before.
public enum AppProcessIdentity {
    /// The app id of the unit in a `/proc/PID/cgroup` (its cgroup v2 `0::` line: the last
    /// component that is an app's scope or service), or nil.
    public static func desktopApp(_ cgroupFile: [UInt8]) -> String? {
        let text = String(decoding: cgroupFile, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("0::") }) else { return nil }
        for component in line.dropFirst(3).split(separator: "/").reversed() {
            if let id = appID(unit: String(component)) { return id }
        }
        return nil
    }

    /// The app id in a unit name `app[-LAUNCHER]-APPID-RANDOM.scope` or
    /// `app[-LAUNCHER]-APPID[@RANDOM].service`, or nil.
    public static func appID(unit: String) -> String? {
        guard unit.hasPrefix("app-") else { return nil }
        var parts: [Substring]
        if unit.hasSuffix(".scope") {
            parts = unit.dropFirst(4).dropLast(6).split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count >= 2 else { return nil }
            parts.removeLast()  // RANDOM
        } else if unit.hasSuffix(".service") {
            let name = unit.dropFirst(4).dropLast(8)
            let base = name.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false).first ?? name
            parts = base.split(separator: "-", omittingEmptySubsequences: false)
        } else {
            return nil
        }
        // APPID is the last part left; a LAUNCHER may come before it.
        guard (1...2).contains(parts.count), let last = parts.last, let id = unescape(last), Identifier.problem(id) == nil, id.contains(".") else {
            return nil
        }
        return id
    }

    /// `s` without blanks (and a carriage return) at either end.
    static func trimmed(_ s: Substring) -> Substring {
        var t = s
        while let first = t.first, first == " " || first == "\t" { t = t.dropFirst() }
        while let last = t.last, last == " " || last == "\t" || last == "\r" { t = t.dropLast() }
        return t
    }

    /// A unit name part with systemd's `\xNN` escapes undone (only `\x2d`, `-`, and the other
    /// ASCII an app id may hold), or nil for any other escape.
    static func unescape(_ part: Substring) -> String? {
        var out = ""
        var rest = part[...]
        while let slash = rest.firstIndex(of: "\\") {
            out += rest[..<slash]
            let escape = rest[slash...].prefix(4)
            guard escape.count == 4, escape.dropFirst().first == "x", let code = UInt8(escape.dropFirst(2), radix: 16),
                code == 0x2D || code == 0x5F || code == 0x2E
            else { return nil }
            out.append(Character(Unicode.Scalar(code)))
            rest = rest[rest.index(slash, offsetBy: 4)...]
        }
        return out + rest
    }
}
