import FoundationEssentials
import SupervisorCore
import SupervisorKernel

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
    let kernel: any Kernel
    var path: String { directory + "/ids.json" }
    private(set) var map = IdentityMap()

    private struct File: Codable {
        var version: Int
        var extensions: [String: UInt32]
        var containers: [String: UInt32]?
    }

    /// Reads `ids.json` if it exists. A file that cannot be read or parsed is an error: its
    /// uids must not be handed out again to other extensions.
    init(directory: String, kernel: any Kernel) throws(IdentityStoreError) {
        self.directory = directory
        self.kernel = kernel
        let data: [UInt8]
        switch kernel.read(directory + "/ids.json") {
        case .success(let bytes): data = bytes
        case .failure(let e) where e.isNoEntry: return
        case .failure(let e): throw IdentityStoreError("cannot read \(directory)/ids.json: \(e)")
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
        // Mode 0755, not narrowed by the umask: extensions reach their containers through it.
        if let e = kernel.makeDirectories(directory, mode: 0o755) { return IdentityStoreError("cannot create the state directory: \(e)") }
        let json: Data
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            json = try encoder.encode(File(version: 1, extensions: map.extensions, containers: map.containers))
        } catch {
            return IdentityStoreError("cannot encode the uid map: \(error)")
        }
        if let e = kernel.replaceFile(path, with: [UInt8](json) + [0x0A], mode: 0o644, durable: true) {
            return IdentityStoreError("cannot replace \(path): \(e)")
        }
        return nil
    }
}

/// Why the uid map cannot be read or written.
struct IdentityStoreError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
