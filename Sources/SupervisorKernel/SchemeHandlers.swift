import SupervisorCore

#if canImport(Glibc)
import Glibc
#endif

/// The session's handler for `x-scheme-handler/<scheme>`, found as `xdg-open` (xdg-mime) and
/// GIO find it, from the daemon's environment: the `mimeapps.list` files of
/// `$XDG_CONFIG_HOME`, `$XDG_CONFIG_DIRS`, and the `applications` directories of
/// `$XDG_DATA_HOME` and `$XDG_DATA_DIRS`, in that order, the first association whose desktop
/// entry exists winning; then any desktop entry there whose `MimeType` lists it.
enum SchemeHandlers {
    /// A desktop entry that handles the scheme.
    struct Handler {
        /// Its desktop id (`org.example.Browser`, without `.desktop`).
        var id: String
        /// Its file.
        var path: String
        var dbusActivatable: Bool
        var exec: String
    }

    static func find(scheme: String) -> Handler? {
        let mimeType = "x-scheme-handler/" + scheme
        let home = environment("HOME") ?? ""
        let configHome = environment("XDG_CONFIG_HOME") ?? home + "/.config"
        let configDirs = (environment("XDG_CONFIG_DIRS") ?? "/etc/xdg").split(separator: ":").map(String.init)
        let dataHome = environment("XDG_DATA_HOME") ?? home + "/.local/share"
        let dataDirs = (environment("XDG_DATA_DIRS") ?? "/usr/local/share:/usr/share").split(separator: ":").map(String.init)
        let applications = ([dataHome] + dataDirs).map { $0 + "/applications" }
        let lists = ([configHome] + configDirs).map { $0 + "/mimeapps.list" } + applications.map { $0 + "/mimeapps.list" }
        for list in lists {
            guard let text = read(list) else { continue }
            for desktopID in URLOpening.associations(inMimeApps: text, for: mimeType) {
                if let handler = entry(desktopID, in: applications) { return handler }
            }
        }
        for directory in applications {
            guard let dir = opendir(directory) else { continue }
            defer { closedir(dir) }
            var names: [String] = []
            while let e = readdir(dir) {
                let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name.hasSuffix(".desktop") { names.append(name) }
            }
            for name in names.sorted() {
                guard let text = read(directory + "/" + name) else { continue }
                let keys = URLOpening.desktopEntry(text)
                if URLOpening.entry(keys, handles: mimeType), let handler = handler(String(name.dropLast(8)), directory + "/" + name, keys) {
                    return handler
                }
            }
        }
        return nil
    }

    /// The entry `desktopID` (`org.example.Browser.desktop`) in the first directory that has it.
    private static func entry(_ desktopID: String, in applications: [String]) -> Handler? {
        let file = desktopID.hasSuffix(".desktop") ? desktopID : desktopID + ".desktop"
        for directory in applications {
            guard let text = read(directory + "/" + file) else { continue }
            return handler(String(file.dropLast(8)), directory + "/" + file, URLOpening.desktopEntry(text))
        }
        return nil
    }

    private static func handler(_ id: String, _ path: String, _ keys: [String: String]) -> Handler? {
        guard keys["Type"] == nil || keys["Type"] == "Application", keys["Hidden"] != "true" else { return nil }
        let dbus = keys["DBusActivatable"] == "true"
        guard dbus || keys["Exec"] != nil else { return nil }
        return Handler(id: id, path: path, dbusActivatable: dbus, exec: keys["Exec"] ?? "")
    }

    /// `program` as an absolute path: as it is, or found on `$PATH`.
    static func resolve(_ program: String) -> String? {
        if program.hasPrefix("/") { return access(program, X_OK) == 0 ? program : nil }
        for dir in (environment("PATH") ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") {
            let candidate = dir + "/" + program
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private static func environment(_ name: String) -> String? {
        guard let v = getenv(name), v.pointee != 0 else { return nil }
        return String(cString: v)
    }

    private static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while out.count < 1 << 20 {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
