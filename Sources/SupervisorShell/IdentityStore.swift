import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The uid of each extension, kept in `<state directory>/ids.json` so that it is the same
/// across launches and daemon restarts:
///
/// ```json
/// {"version": 1, "extensions": {"com.example.stocks.widget": 1879113728},
///  "containers": {"group.com.example.stocks": 1879113729}}
/// ```
///
/// Written atomically (a temporary file, fsync, rename, fsync of the directory) whenever an
/// id gets a uid. Owned by the daemon's loop thread.
final class IdentityStore {
    let directory: String
    var path: String { directory + "/ids.json" }
    private(set) var map = IdentityMap()

    private struct File: Codable {
        var version: Int
        var extensions: [String: UInt32]
        var containers: [String: UInt32]?
    }

    /// Reads `ids.json` if it exists. A file that cannot be read or parsed is an error: its
    /// uids must not be handed out again to other extensions.
    init(directory: String) throws(IdentityStoreError) {
        self.directory = directory
        let fd = open(directory + "/ids.json", O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return }
            throw IdentityStoreError("cannot read \(directory)/ids.json: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw IdentityStoreError("cannot read \(directory)/ids.json: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            data.append(contentsOf: chunk[0..<n])
        }
        do {
            let file = try JSONDecoder().decode(File.self, from: Data(data))
            map = IdentityMap(extensions: file.extensions, containers: file.containers ?? [:])
        } catch {
            throw IdentityStoreError("\(directory)/ids.json is not a valid uid map (fix or remove it): \(error)")
        }
    }

    /// The uid of `id`, allocated from `range` and saved if it had none.
    func uid(for id: String, in range: IdentityRange) -> Result<UInt32, IdentityStoreError> {
        guard let (uid, changed) = map.uid(for: id, in: range) else {
            return .failure(IdentityStoreError("every uid of extensionUIDs (\(range.first), \(range.count) uids) is taken"))
        }
        if changed, let e = save() {
            map.extensions[id] = nil
            return .failure(e)
        }
        return .success(uid)
    }

    /// The gid of shared container `name`, allocated from `range` and saved if it had none.
    func gid(forContainer name: String, in range: IdentityRange) -> Result<UInt32, IdentityStoreError> {
        guard let (gid, changed) = map.gid(forContainer: name, in: range) else {
            return .failure(IdentityStoreError("every number of extensionUIDs (\(range.first), \(range.count)) is taken"))
        }
        if changed, let e = save() {
            map.containers[name] = nil
            return .failure(e)
        }
        return .success(gid)
    }

    /// Writes the map: temporary file, fsync, rename over `ids.json`, fsync of the directory.
    private func save() -> IdentityStoreError? {
        if let e = makeDirectories(directory) { return e }
        let json: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            json = try encoder.encode(File(version: 1, extensions: map.extensions, containers: map.containers))
        } catch {
            return IdentityStoreError("cannot encode the uid map: \(error)")
        }
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return IdentityStoreError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        var bytes = [UInt8](json) + [0x0A]
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let e = errno
                close(fd)
                unlink(temporary)
                return IdentityStoreError("cannot write \(temporary): \(String(cString: strerror(e)))")
            }
            written += n
        }
        let synced = fsync(fd) == 0
        close(fd)
        guard synced, rename(temporary, path) == 0 else {
            let e = errno
            unlink(temporary)
            return IdentityStoreError("cannot replace \(path): \(String(cString: strerror(e)))")
        }
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
        return nil
    }

    /// `mkdir -p` with mode 0755.
    private func makeDirectories(_ path: String) -> IdentityStoreError? {
        var prefix = ""
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if mkdir(prefix, 0o755) == 0 {
                chmod(prefix, 0o755)  // not narrowed by the umask: extensions reach their containers through it
            } else if errno != EEXIST {
                return IdentityStoreError("cannot create the state directory \(prefix): \(String(cString: strerror(errno)))")
            }
        }
        return nil
    }
}

/// Why the uid map cannot be read or written.
struct IdentityStoreError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
