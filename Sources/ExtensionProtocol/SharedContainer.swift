/// Shared containers: directories an app and its extensions share (docs/manifest.md,
/// `sharedContainers`). Names are reverse-DNS, such as `group.com.example.stocks`.
public enum SharedContainer {
    /// The prefix of the variables that carry container paths to extensions.
    public static let environmentPrefix = "EXTENSION_SHARED_CONTAINER_"

    /// The variable holding the path of container `name`: the prefix, then the name
    /// upper-cased with every character other than a letter or digit replaced by `_`
    /// (`group.com.example.stocks` → `EXTENSION_SHARED_CONTAINER_GROUP_COM_EXAMPLE_STOCKS`).
    public static func environmentName(for name: String) -> String {
        environmentPrefix
            + String(
                String.UnicodeScalarView(
                    name.unicodeScalars.map { c -> Unicode.Scalar in
                        switch c.value {
                        case 0x30...0x39, 0x41...0x5A: return c
                        case 0x61...0x7A: return Unicode.Scalar(c.value - 0x20)!
                        default: return "_"
                        }
                    }))
    }

    /// Why `name` is not a valid container name (reverse-DNS: at least two dot-separated
    /// labels of letters, digits, '-' and '_'), or nil.
    public static func problem(_ name: String) -> String? {
        if let problem = Identifier.problem(name) { return problem }
        if !name.contains(".") { return "'\(name)' is not in reverse-DNS form (such as group.com.example.stocks)" }
        return nil
    }
}
