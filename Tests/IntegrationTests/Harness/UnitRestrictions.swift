import Foundation

/// The restrictions of the shipped system unit (units/extensiond.service) that decide what a
/// root daemon may do to files and credentials: `CapabilityBoundingSet=`, `UMask=`,
/// `NoNewPrivileges=` and `RestrictSUIDSGID=`. `TestDaemon` starts every root daemon under
/// them (through the `unit-restrictions` fixture), as systemd would, so that a capability the
/// daemon needs and the unit lacks fails here and not only on a systemd machine.
enum UnitRestrictions {
    static let unitFile = SystemdSession.packageRoot + "/units/extensiond.service"

    /// The unit's value of `key` (its last assignment), or nil.
    static func value(_ key: String, in text: String) -> String? {
        text.split(separator: "\n").last { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    /// The command line that runs a program under the unit's restrictions ("--" last).
    static func wrapper() throws -> [String] {
        let text = try String(contentsOfFile: unitFile, encoding: .utf8)
        var command = [BuildProducts.path("unit-restrictions")]
        guard let capabilities = value("CapabilityBoundingSet", in: text), let umask = value("UMask", in: text) else {
            throw HarnessError("\(unitFile) has no CapabilityBoundingSet= or UMask=")
        }
        command += ["--capabilities", capabilities, "--umask", umask]
        if value("NoNewPrivileges", in: text) == "yes" { command.append("--no-new-privileges") }
        if value("RestrictSUIDSGID", in: text) == "yes" { command.append("--restrict-suid-sgid") }
        return command + ["--"]
    }
}
