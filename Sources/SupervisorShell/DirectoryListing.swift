#if canImport(Glibc)
import Glibc
#endif

/// The entry names of a directory (without "." and ".."), or nil when it cannot be opened.
/// The one place the shell reads directories (/proc, /proc/PID/task, extension directories).
func directoryEntries(_ path: String) -> [String]? {
    guard let dir = opendir(path) else { return nil }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}
