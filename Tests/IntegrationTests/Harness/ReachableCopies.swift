import Foundation

/// Copies of build products and fixtures in a directory every uid can search and read.
/// Extensions that run under their own uids, and a daemon run as nobody, cannot reach the
/// checkout when it lies below a private directory (a clone in a 0700 temporary directory, or
/// under /root); the tests that run them so use these copies.
enum ReachableCopies {
    /// A fresh directory in /tmp, mode 0755, made once per test process.
    static let directory: String = {
        var template = Array("/tmp/extensiond-reachable-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { fatalError("mkdtemp: \(String(cString: strerror(errno)))") }
        let path = String(cString: made)
        chmod(path, 0o755)
        return path
    }()

    /// A copy of `source` in `directory`, readable (and, with `executable`, runnable) by every
    /// uid. Made once per name; concurrent callers each rename a complete copy into place.
    static func copy(_ source: String, executable: Bool = true) throws -> String {
        let target = directory + "/" + URL(fileURLWithPath: source).lastPathComponent
        if FileManager.default.fileExists(atPath: target) { return target }
        let partial = target + ".\(getpid()).\(UUID().uuidString)"
        // The file itself, not a symbolic link to it (a library's link-time name, say). Written
        // through a close-on-exec descriptor: a daemon another test starts meanwhile must not
        // inherit it, or every exec of the copy fails with ETXTBSY while that daemon lives.
        let contents = try Data(contentsOf: URL(fileURLWithPath: source).resolvingSymlinksInPath())
        try Executables.write(Array(contents), to: partial, mode: executable ? 0o755 : 0o644)
        guard rename(partial, target) == 0 else {
            throw HarnessError("cannot place a copy of \(source) in \(directory): \(String(cString: strerror(errno)))")
        }
        return target
    }
}
