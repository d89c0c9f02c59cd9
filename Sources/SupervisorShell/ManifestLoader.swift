import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// Reads manifest files from the extension directories: `*.json` only, in name order, each
/// checked for type, size, ownership and permissions before it is parsed. A bad manifest is
/// reported and skipped; the others still load. The first manifest to claim an id wins.
struct ManifestLoader {
    let kernel: any Kernel
    var directories: [String]
    /// Directories named explicitly (an absent one is reported, not skipped silently).
    var explicit: Bool
    var points: ExtensionPoints
    /// Owners allowed besides root.
    var trustedUID: UInt32
    /// Why the cgroup freezer cannot be used (no cgroup per extension), or nil when it can.
    var freezerProblem: String?
    /// The credential rules; nil leaves `Manifest.credentials` unresolved (the daemon's own).
    var credentialRules: CredentialRules?
    /// Where extensions' own uids are kept, and the range they come from.
    var identities: IdentityStore?
    var extensionUIDs = IdentityRange.defaultRange
    /// The shared containers' directories, and the groups the configuration gives some.
    var containers: SharedContainers?
    var containerGroups: [String: AccountReference] = [:]
    /// Whether `"sandbox": "none"` is allowed (`allowUnsandboxedExtensions`).
    var allowUnsandboxed = false

    func load() -> (manifests: [Manifest], errors: [ManifestError]) {
        var manifests: [Manifest] = []
        var errors: [ManifestError] = []
        var claimed: [String: String] = [:]
        for directory in directories {
            guard let names = listJSON(directory) else {
                if explicit {
                    let why = kernel.status(directory, followLinks: true).failure.map { "\($0)" } ?? "it is not a readable directory"
                    errors.append(ManifestError(file: directory, problem: "extension directory cannot be read: \(why)"))
                }
                continue
            }
            for name in names {
                let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
                switch loadOne(path, directory: directory) {
                case .success(let m):
                    if let first = claimed[m.id] {
                        errors.append(ManifestError(file: path, field: "id", problem: "duplicate id '\(m.id)' (already declared by \(first))"))
                    } else {
                        claimed[m.id] = path
                        manifests.append(m)
                    }
                case .failure(let e):
                    errors.append(e)
                }
            }
        }
        return (manifests, errors)
    }

    private func listJSON(_ directory: String) -> [String]? {
        kernel.listDirectory(directory)?.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.sorted()
    }

    private func loadOne(_ path: String, directory: String) -> Result<Manifest, ManifestError> {
        func fail(_ field: String?, _ problem: String) -> Result<Manifest, ManifestError> {
            .failure(ManifestError(file: path, field: field, problem: problem))
        }
        let st: FileStatus, contents: [UInt8]?
        switch kernel.inspectFile(path, limit: Int64(ManifestParser.maxFileSize)) {
        case .success(let found): (st, contents) = found
        case .failure(let e) where e.operation == "open": return fail(nil, "cannot be opened: \(e.reason)")
        case .failure(let e): return fail(nil, "cannot be examined: \(e.reason)")
        }
        guard st.kind == .regular else { return fail(nil, "is not a regular file") }
        if let problem = ownershipProblem(st) { return fail(nil, problem) }
        guard st.size <= ManifestParser.maxFileSize, let data = contents else {
            return fail(nil, "file is \(st.size) bytes, over the \(ManifestParser.maxFileSize)-byte limit")
        }
        let parsed = ManifestParser.parse(data, file: path, directory: directory, points: points)
        guard case .success(var manifest) = parsed else { return parsed }
        if !manifest.sandboxed && !allowUnsandboxed {
            return fail("sandbox", "'none' is refused: only trusted extensions may run unsandboxed, and the daemon's configuration does not allow it (set \"allowUnsandboxedExtensions\": true)")
        }
        if let rules = credentialRules {
            var own: UInt32?
            if rules.needsOwnUID(manifest.credentialRequest) {
                guard let identities else { return fail("user", "no state directory to keep extension uids in") }
                switch identities.uid(for: manifest.id, in: extensionUIDs) {
                case .success(let uid): own = uid
                case .failure(let e): return fail("user", "no uid could be allocated for this extension: \(e)")
                }
            }
            var groups: [UInt32] = []
            for (i, name) in manifest.sharedContainers.enumerated() {
                guard let containers else { return fail("sharedContainers[\(i)]", "no state directory to keep shared containers in") }
                var gid: UInt32?
                if rules.daemonUID == 0 {
                    switch containerGroups[name] {
                    case .number(let n)?: gid = n
                    case .name(let group)?:
                        guard let found = rules.accounts.groupNamed(group) else {
                            return fail("sharedContainers[\(i)]", "the configuration gives '\(name)' the group '\(group)', which does not exist")
                        }
                        gid = found
                    case nil:
                        guard let identities else { return fail("sharedContainers[\(i)]", "no state directory to keep container groups in") }
                        switch identities.gid(forContainer: name, in: extensionUIDs) {
                        case .success(let g): gid = g
                        case .failure(let e): return fail("sharedContainers[\(i)]", "no group could be allocated for '\(name)': \(e)")
                        }
                    }
                }
                switch containers.prepare(name, gid: gid) {
                case .success(let c):
                    manifest.containerPaths[name] = c.path
                    if let gid = c.gid { groups.append(gid) }
                case .failure(let e): return fail("sharedContainers[\(i)]", "\(e)")
                }
            }
            switch rules.resolve(manifest.credentialRequest, file: path, ownUID: own, extraGroups: groups) {
            case .success(let c): manifest.credentials = c
            case .failure(let e): return .failure(e)
            }
        }
        if manifest.policy.suspend == .freeze, let problem = freezerProblem {
            return fail("policy.suspend", "'freeze' (from the manifest or its extension point '\(manifest.point)') needs a cgroup per extension, and this daemon has none: \(problem)")
        }
        let exe: FileStatus
        switch kernel.status(manifest.executable, followLinks: true) {
        case .success(let found): exe = found
        case .failure(let e): return fail("executable", "'\(manifest.executable)' does not exist: \(e)")
        }
        guard exe.kind == .regular, kernel.isExecutable(manifest.executable) else {
            return fail("executable", "'\(manifest.executable)' is not an executable file")
        }
        if let problem = ownershipProblem(exe) { return fail("executable", "'\(manifest.executable)' \(problem)") }
        return .success(manifest)
    }

    /// Refuses files others could have written: world-writable, or owned by someone other
    /// than root or the daemon's uid.
    private func ownershipProblem(_ st: FileStatus) -> String? {
        if st.isWorldWritable { return "is world-writable; refusing it (chmod o-w)" }
        if st.owner != 0 && st.owner != trustedUID { return "is owned by uid \(st.owner), not by root or the daemon's uid \(trustedUID)" }
        return nil
    }
}
