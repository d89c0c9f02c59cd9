#if canImport(Glibc)
import Glibc
#endif

/// The entry names of a directory (without "." and ".."), or nil when it cannot be opened.
/// The one place the shell reads directories (/proc, /proc/PID/task, extension directories).
func directoryEntries(_ path: String) -> [String]? {
    guard let dir = opendir(path) else { return nil }
    return entries(of: dir)
}

/// The entry names of the directory open at `fd` (a duplicate is read; `fd` stays open and
/// its position unchanged), or nil when it cannot be read.
func directoryEntries(fd: Int32) -> [String]? {
    let listing = dup(fd)
    guard listing >= 0 else { return nil }
    guard let dir = fdopendir(listing) else {
        close(listing)
        return nil
    }
    return entries(of: dir)
}

/// Reads and closes `dir`.
private func entries(of dir: OpaquePointer) -> [String] {
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
