import SupervisorCore

/// Gives each manifest `ManifestValidation` accepted what it needs on this system, as an
/// explicit step after validation: its own uid (allocated from `extensionUIDs` and kept in
/// `ids.json` by `IdentityStore`), its shared containers' directories and groups
/// (`SharedContainers`), then its credentials (`CredentialRules` with that uid and those
/// groups). A manifest whose provisioning fails is refused, naming its field; the others are
/// unaffected.
///
/// Provisioning what already exists changes nothing on disk: `ids.json` is written only when
/// a uid or gid is allocated, and a container directory with the right owner, group and mode
/// is left alone. Runs on the daemon's loop thread (it uses the stores it is given).
struct Provisioner {
    var rules: CredentialRules
    /// Where extensions' own uids and containers' gids are kept; nil: nowhere (a daemon that
    /// is not root, which allocates none).
    var identities: IdentityStore?
    var containers: SharedContainers
    /// The range uids and gids are allocated from.
    var extensionUIDs: IdentityRange

    /// Provisions every accepted manifest of `outcome`; the manifests and refusals come out
    /// in the order of `outcome.results`.
    func provision(_ outcome: ManifestValidation.Outcome) -> (manifests: [Manifest], errors: [ManifestError]) {
        var manifests: [Manifest] = []
        var errors: [ManifestError] = []
        for result in outcome.results {
            switch result.flatMap(provision) {
            case .success(let m): manifests.append(m)
            case .failure(let e): errors.append(e)
            }
        }
        return (manifests, errors)
    }

    /// Provisions one accepted manifest: the manifest with its credentials and container paths.
    func provision(_ accepted: ManifestValidation.Accepted) -> Result<Manifest, ManifestError> {
        var manifest = accepted.manifest
        func fail(_ field: String, _ problem: String) -> Result<Manifest, ManifestError> {
            .failure(ManifestError(file: manifest.source, field: field, problem: problem))
        }
        var own: UInt32?
        if accepted.needsOwnUID {
            guard let identities else { return fail("user", "no state directory to keep extension uids in") }
            switch identities.uid(for: manifest.id, in: extensionUIDs) {
            case .success(let uid): own = uid
            case .failure(let e): return fail("user", "no uid could be allocated for this extension: \(e)")
            }
        }
        var groups: [UInt32] = []
        for need in accepted.containers {
            var gid: UInt32?
            switch need.group {
            case .none: gid = nil
            case .configured(let g): gid = g
            case .allocated:
                guard let identities else { return fail(need.field, "no state directory to keep container groups in") }
                switch identities.gid(forContainer: need.name, in: extensionUIDs) {
                case .success(let g): gid = g
                case .failure(let e): return fail(need.field, "no group could be allocated for '\(need.name)': \(e)")
                }
            }
            switch containers.prepare(need.name, gid: gid) {
            case .success(let c):
                manifest.containerPaths[need.name] = c.path
                if let gid = c.gid { groups.append(gid) }
            case .failure(let e): return fail(need.field, "\(e)")
            }
        }
        switch rules.resolve(manifest.credentialRequest, file: manifest.source, ownUID: own, extraGroups: groups) {
        case .success(let c): manifest.credentials = c
        case .failure(let e): return .failure(e)
        }
        return .success(manifest)
    }
}
