import ExtensionProtocol

/// Who may open and write a shared defaults suite (docs/defaults.md): a suite is named by an
/// app group, and its members are the processes of every app that declares the group in its
/// `groups`, and the extensions of those apps (`"app"` in their manifests). Administrators
/// (`extctl defaults`) may too. Everybody else is refused, and learns only that.
public enum SuiteAccess {
    /// Who asks.
    public enum Asker: Equatable, Sendable {
        /// A process of the app `app` (nil: a process of no known app), or an administrator.
        case process(app: String?, administrator: Bool)
        /// A process of the extension whose manifest names the app `app` (nil: none).
        case extensionProcess(id: String, app: String?)
    }

    /// Whether `asker` may use the suite `suite`, with the apps `apps` declared: nil when it
    /// may, else the failure to answer.
    public static func problem(_ suite: String, asker: Asker, apps: [String: AppManifest]) -> (FailureCode, String)? {
        if let problem = Identifier.problem(suite) { return (.badRequest, "'\(suite)' is not an app group name: \(problem)") }
        let owners = apps.values.filter { $0.groups.contains(suite) }.map(\.id)
        guard !owners.isEmpty else { return (.unknownExtension, "no app declares the group '\(suite)'") }
        switch asker {
        case .process(let app, let administrator):
            if administrator { return nil }
            if let app, owners.contains(app) { return nil }
            return (.notPermitted, "the suite '\(suite)' is only for the apps of its group and their extensions")
        case .extensionProcess(let id, let app):
            if let app, owners.contains(app) { return nil }
            return (
                .notPermitted,
                app.map { "'\(suite)' is not a group of '\(id)''s app '\($0)'" }
                    ?? "'\(id)' names no app (\"app\" in its manifest), so it has no defaults suite"
            )
        }
    }
}
