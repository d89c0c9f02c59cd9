import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads what manifest loading judges, and decides nothing: the manifest files of the
/// extension directories (each opened without following a symbolic link, examined through
/// its descriptor, read when it is a regular file), and the status of the executables the
/// manifests name. `ManifestValidation` (core) judges the result.
///
/// Every kernel call of loading is here: listing a directory, `open` with `O_NOFOLLOW |
/// O_NONBLOCK` (a FIFO cannot block the daemon), `fstat`, `read`, `close`, and `stat` and
/// `access(X_OK)` of an executable.
enum ManifestFiles {
    /// Each directory's manifest files (`ManifestDirectory.manifestNames`), in order.
    static func read(_ directories: [String]) -> [ManifestDirectory] {
        directories.map { directory in
            guard let entries = directoryEntries(directory) else {
                return ManifestDirectory(path: directory, listing: .unreadable(reason: String(cString: strerror(errno))))
            }
            let files = ManifestDirectory.manifestNames(entries).map { name in
                let path = ManifestDirectory.path(of: name, in: directory)
                return ManifestFile(path: path, directory: directory, reading: reading(path))
            }
            return ManifestDirectory(path: directory, listing: .files(files))
        }
    }

    /// What `stat` and `access(X_OK)` say of each executable, keyed by its path.
    static func examine(_ executables: [String]) -> [String: ExecutableFacts] {
        var facts: [String: ExecutableFacts] = [:]
        for path in executables {
            var st = stat()
            if stat(path, &st) != 0 {
                facts[path] = .missing(reason: String(cString: strerror(errno)))
            } else if (st.st_mode & S_IFMT) != S_IFREG {
                facts[path] = .notRegular
            } else {
                facts[path] = .regular(status(st), executable: access(path, X_OK) == 0)
            }
        }
        return facts
    }

    /// Opens, examines and (a regular file) reads one manifest file, to its end or to one
    /// byte past `ManifestParser.maxFileSize`.
    private static func reading(_ path: String) -> ManifestFile.Reading {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return .notOpened(reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .notExamined(reason: String(cString: strerror(errno))) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return .notRegular }
        let limit = ManifestParser.maxFileSize + 1
        var data = [UInt8](repeating: 0, count: min(Int(st.st_size), ManifestParser.maxFileSize) + 1)
        var filled = 0
        while filled < limit {
            if filled == data.count { data.append(contentsOf: repeatElement(0, count: min(data.count, limit - data.count))) }
            let n = data.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return .notRead(status(st), reason: String(cString: strerror(errno))) }
            if n == 0 { break }
            filled += n
        }
        data.removeLast(data.count - filled)
        return .read(status(st), bytes: data)
    }

    private static func status(_ st: stat) -> FileStatus {
        FileStatus(owner: st.st_uid, mode: UInt32(st.st_mode) & 0o7777, size: Int64(st.st_size))
    }
}
