/// The naming rule shared by extension ids and notification hint names: 1 to 255 bytes of
/// ASCII letters, digits, `.`, `-` and `_`, not starting or ending with `.` and without `..`
/// (conventionally reverse-DNS, `com.example.stocks.widget`).
public enum Identifier {
    /// Why `name` breaks the rule, for people, or nil when it follows it.
    public static func problem(_ name: String) -> String? {
        if name.isEmpty { return "must not be empty" }
        if name.utf8.count > WireLimits.maxIdentifier { return "must be at most \(WireLimits.maxIdentifier) bytes" }
        for c in name.utf8 {
            let ok = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x2D || c == 0x5F
            if !ok { return "'\(name)' may contain only letters, digits, '.', '-' and '_'" }
        }
        if name.hasPrefix(".") || name.hasSuffix(".") || name.contains("..") { return "'\(name)' must not start or end with '.' or contain '..'" }
        return nil
    }
}
