import Logging
import SupervisorCore
import SupervisorKernel

/// Where the daemon's manifests come from (its extension directories, its configuration's
/// points and rules) and what loading them provisions: the extensions' own uids
/// (`IdentityStore`, a root daemon only) and the shared containers' directories. Owned by
/// the daemon's loop.
final class ManifestSources {
    let kernel: any Kernel
    let options: DaemonOptions
    let config: DaemonConfig
    /// Why the cgroup freezer cannot be used, or nil when it can.
    let freezerProblem: String?
    /// The extensions' own uids (`<state>/ids.json`); only a root daemon allocates them.
    let identities: IdentityStore?
    /// The shared containers' directories.
    let containers: SharedContainers
    let logger: Logger

    init(
        options: DaemonOptions, config: DaemonConfig, kernel: any Kernel, freezerProblem: String?, logger: Logger = Logger(label: "extensiond")
    ) throws {
        self.kernel = kernel
        self.logger = logger
        self.options = options
        self.config = config
        self.freezerProblem = freezerProblem
        containers = SharedContainers(stateDirectory: options.stateDirectory, kernel: kernel)
        if kernel.userID == 0 {
            do {
                identities = try IdentityStore(directory: options.stateDirectory, kernel: kernel)
            } catch {
                throw DaemonError(error.description)
            }
        } else {
            identities = nil
        }
    }

    /// Reads every manifest afresh: the extensions accepted, the refusals naming file, field
    /// and problem, and the apps declared (`"kind": "app"`). Three explicit steps: reading (`ManifestFiles`), validation (`ManifestValidation`,
    /// pure), then provisioning of the accepted ones (`Provisioner`: uids, shared containers,
    /// credentials).
    func load() -> (manifests: [Manifest], errors: [ManifestError], apps: [AppManifest]) {
        let rules = credentialRules()
        let validation = ManifestValidation(
            points: config.points, explicitDirectories: options.explicitDirectories, trustedUID: kernel.userID, credentialRules: rules,
            extensionUIDs: config.extensionUIDs, containerGroups: config.containerGroups,
            allowUnsandboxed: config.allowUnsandboxedExtensions, freezerProblem: freezerProblem)
        let files = ManifestFiles(kernel: kernel)
        let pending = validation.checkFiles(files.read(options.extensionDirectories))
        let outcome = validation.finish(pending, executables: files.examine(pending.executables))
        let provisioner = Provisioner(rules: rules, identities: identities, containers: containers, extensionUIDs: config.extensionUIDs)
        let (manifests, errors) = provisioner.provision(outcome)
        return (manifests, errors, outcome.apps.map { provision($0, rules: rules) })
    }

    /// Under a root daemon, the uid `app` runs as: its `user`, or a uid of its own from
    /// `extensionUIDs`, kept in the identity store as an extension's is (an app id is never an
    /// extension's). Nil when none can be allocated (logged).
    private func provision(_ app: AppManifest, rules: CredentialRules) -> AppManifest {
        guard kernel.userID == 0 else { return app }
        var app = app
        switch app.user {
        case .number(let n)?: app.uid = n
        case .name(let name)?: app.uid = rules.accounts.userNamed(name)?.uid
        case nil:
            switch identities?.uid(for: app.id, in: config.extensionUIDs) {
            case .success(let uid)?: app.uid = uid
            case .failure(let e)?: logger.error("app \(app.id): no uid could be allocated, so none of its processes is known by its uid: \(e)")
            case nil: break
            }
        }
        return app
    }

    /// The credential rules for a daemon with the kernel's credentials and this configuration.
    private func credentialRules() -> CredentialRules {
        CredentialRules(
            daemonUID: kernel.userID, daemonGID: kernel.groupID, daemonGroups: kernel.supplementaryGroups,
            allowRootExtensions: config.allowRootExtensions, accounts: kernel.accounts, reserved: config.extensionUIDs)
    }
}
