import SupervisorCore

/// The apps the manifests declare (`"kind": "app"`, docs/manifest.md, "Apps"), as last
/// loaded: replaced whole at each load and reload, handed over at a re-exec. Which extension
/// is in which app is each extension's own manifest's (`Manifest.app`), checked against these
/// when it was loaded. Owned by the daemon's loop thread.
final class AppCatalog {
    private(set) var apps: [String: AppManifest] = [:]

    /// The apps, sorted by id.
    var sorted: [AppManifest] { apps.values.sorted { $0.id < $1.id } }

    /// Replaces every app with `apps`.
    func replace(_ apps: [AppManifest]) {
        self.apps = Dictionary(apps.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The app `id`, if it is declared.
    func app(_ id: String) -> AppManifest? { apps[id] }

    /// The app whose processes run as `uid` (apps have uids of their own under a root daemon
    /// only), or nil.
    func app(ofUID uid: UInt32) -> String? { apps.values.first { $0.uid == uid }?.id }
}
