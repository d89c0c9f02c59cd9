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

    /// The directory holding the cgroups `delegatedCgroups` makes, in each hierarchy.
    static let cgroupParent = "extensiond-tests"

    /// The cgroup v2 mount point (`/sys/fs/cgroup/unified` on a hybrid host, `/sys/fs/cgroup`
    /// with v2 alone), and the v1 memory hierarchy's when there is one.
    static func hierarchies() -> [String] {
        let mountinfo = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        var found: [String] = []
        for line in mountinfo.split(separator: "\n") {
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { continue }
            let fields = halves[0].split(separator: " "), tail = halves[1].split(separator: " ")
            guard fields.count > 4, tail.count > 2 else { continue }
            if tail[0] == "cgroup2" || (tail[0] == "cgroup" && tail[2].split(separator: ",").contains("memory")) { found.append(String(fields[4])) }
        }
        return found
    }

    /// Cgroups named `name` made for one daemon, as systemd makes a service's with
    /// `Delegate=yes`: owned by root, mode 0755, in the v2 hierarchy and the v1 memory one.
    /// Without them the restricted daemon (no CAP_DAC_OVERRIDE) could not create its
    /// extensions' cgroups below the root cgroup (mode 0555) of a machine without systemd.
    static func delegatedCgroups(_ name: String) -> [String] {
        hierarchies().compactMap { mount in
            let path = mount + "/" + cgroupParent + "/" + name
            return (try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)) == nil ? nil : path
        }
    }

    /// Removes what `delegatedCgroups` made for a daemon that has exited (when empty).
    static func removeDelegatedCgroups(_ paths: [String]) {
        for path in paths { rmdir(path) }
    }

    /// The command line that runs a program under the unit's restrictions ("--" last), in
    /// the cgroups `cgroups`.
    static func wrapper(cgroups: [String] = []) throws -> [String] {
        let text = try String(contentsOfFile: unitFile, encoding: .utf8)
        var command = [BuildProducts.path("unit-restrictions")]
        for cgroup in cgroups { command += ["--cgroup", cgroup] }
        guard let capabilities = value("CapabilityBoundingSet", in: text), let umask = value("UMask", in: text) else {
            throw HarnessError("\(unitFile) has no CapabilityBoundingSet= or UMask=")
        }
        command += ["--capabilities", capabilities, "--umask", umask]
        if value("NoNewPrivileges", in: text) == "yes" { command.append("--no-new-privileges") }
        if value("RestrictSUIDSGID", in: text) == "yes" { command.append("--restrict-suid-sgid") }
        return command + ["--"]
    }
}
