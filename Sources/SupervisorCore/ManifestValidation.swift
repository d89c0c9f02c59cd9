/// Decides which manifests are accepted, from what the shell read (`ManifestDirectory`,
/// `ExecutableFacts`) and the daemon's configuration. Pure: it makes no system call and
/// changes nothing; it names what each accepted manifest still needs provisioned (a uid of
/// its own, shared containers and their groups), which the shell provides afterwards.
///
/// It runs in two steps, because the executable to examine is known only once the manifest
/// is parsed: `checkFiles` judges every file and parses it, and names the executables to
/// examine; `finish` judges those executables and applies the rule that the first manifest
/// to claim an id wins.
///
/// Each manifest is checked in this order, and refused at its first problem (its file and
/// field named): the file (opened, examined, a regular file, ownership and permissions,
/// size), its contents (`ManifestParser`), `"sandbox": "none"`, the groups the
/// configuration gives its shared containers, its credentials (`CredentialRules`), `freeze`
/// without a cgroup per extension, its executable (exists, a regular executable file,
/// ownership and permissions), and its id (not claimed by an earlier accepted manifest).
public struct ManifestValidation: Sendable {
    /// The extension points the daemon knows.
    public var points: ExtensionPoints
    /// Whether the directories were named explicitly: an unreadable one is then refused
    /// rather than skipped.
    public var explicitDirectories: Bool
    /// The owner allowed besides root (the daemon's uid), for manifests and executables.
    public var trustedUID: UInt32
    /// The rules turning a manifest's credential request into credentials.
    public var credentialRules: CredentialRules
    /// The range extensions' own uids come from (`extensionUIDs`).
    public var extensionUIDs: IdentityRange
    /// The groups the configuration gives some shared containers (`sharedContainers.NAME.group`).
    public var containerGroups: [String: AccountReference]
    /// Whether `"sandbox": "none"` is allowed (`allowUnsandboxedExtensions`).
    public var allowUnsandboxed: Bool
    /// Why the cgroup freezer cannot be used (no cgroup per extension), or nil when it can.
    public var freezerProblem: String?

    /// Validation with the points, the rules and the settings that decide which manifests are accepted.
    public init(
        points: ExtensionPoints, explicitDirectories: Bool, trustedUID: UInt32, credentialRules: CredentialRules,
        extensionUIDs: IdentityRange = .defaultRange, containerGroups: [String: AccountReference] = [:],
        allowUnsandboxed: Bool = false, freezerProblem: String? = nil
    ) {
        self.points = points
        self.explicitDirectories = explicitDirectories
        self.trustedUID = trustedUID
        self.credentialRules = credentialRules
        self.extensionUIDs = extensionUIDs
        self.containerGroups = containerGroups
        self.allowUnsandboxed = allowUnsandboxed
        self.freezerProblem = freezerProblem
    }

    /// A manifest that passed every check, and what provisioning must still give it.
    public struct Accepted: Equatable, Sendable {
        /// The manifest; `credentials` is nil and `containerPaths` empty until provisioned.
        public var manifest: Manifest
        /// Whether it needs a uid of its own (a root daemon, no `user`), allocated from
        /// `extensionUIDs` and kept across restarts.
        public var needsOwnUID: Bool
        /// Its shared containers, in the order its manifest names them.
        public var containers: [ContainerNeed]

        /// An accepted manifest and what provisioning must give it.
        public init(manifest: Manifest, needsOwnUID: Bool = false, containers: [ContainerNeed] = []) {
            self.manifest = manifest
            self.needsOwnUID = needsOwnUID
            self.containers = containers
        }
    }

    /// A shared container an accepted manifest names.
    public struct ContainerNeed: Equatable, Sendable {
        /// The container's name.
        public var name: String
        /// The manifest key naming it (`sharedContainers[i]`), for a refusal when it cannot be
        /// prepared.
        public var field: String
        /// The group its directory gets.
        public var group: ContainerGroup

        /// A shared container a manifest names: its name, the field that names it, and its group.
        public init(name: String, field: String, group: ContainerGroup) {
            self.name = name
            self.field = field
            self.group = group
        }
    }

    /// The group a shared container's directory gets.
    public enum ContainerGroup: Equatable, Sendable {
        /// None: the daemon is not root, so the directory is its user's (mode 0700).
        case none
        /// The gid the configuration gives it.
        case configured(UInt32)
        /// A gid allocated from `extensionUIDs` and kept across restarts.
        case allocated
    }

    /// The files judged by `checkFiles`, waiting for their executables to be examined.
    public struct Pending: Equatable, Sendable {
        /// The executables of the manifests still in the running, each once, in the order met:
        /// the shell examines these and passes the facts to `finish`.
        public let executables: [String]
        fileprivate let results: [Result<Accepted, ManifestError>]
        /// The app manifests accepted so far (their refusals are among `results`).
        fileprivate let apps: [AppManifest]
    }

    /// Every manifest file's verdict, in the order the files were read (an unreadable
    /// explicit directory at its place).
    public struct Outcome: Equatable, Sendable {
        /// One result per extension manifest file (and a refusal per refused app manifest): the
        /// accepted manifest, or the error naming file, field and problem.
        public var results: [Result<Accepted, ManifestError>]
        /// The app manifests accepted (`"kind": "app"`), in file order.
        public var apps: [AppManifest]

        /// The verdicts, in file order.
        public init(results: [Result<Accepted, ManifestError>], apps: [AppManifest] = []) {
            self.results = results
            self.apps = apps
        }

        /// The accepted manifests, in order.
        public var accepted: [Accepted] {
            results.compactMap { if case .success(let a) = $0 { return a } else { return nil } }
        }
        /// The refusals, in order.
        public var errors: [ManifestError] {
            results.compactMap { if case .failure(let e) = $0 { return e } else { return nil } }
        }
    }

    /// Judges every directory and file, and every manifest up to (not including) its executable.
    public func checkFiles(_ directories: [ManifestDirectory]) -> Pending {
        var results: [Result<Accepted, ManifestError>] = []
        var apps: [AppManifest] = []
        var executables: [String] = []
        var seen: Set<String> = []
        for directory in directories {
            switch directory.listing {
            case .unreadable(let reason):
                if explicitDirectories {
                    results.append(.failure(ManifestError(file: directory.path, problem: "extension directory cannot be read: \(reason)")))
                }
            case .files(let files):
                for file in files {
                    if case .success(let bytes) = contents(file), AppManifestParser.isApp(bytes) {
                        switch AppManifestParser.parse(bytes, file: file.path, directory: file.directory) {
                        case .success(let app):
                            apps.append(app)
                            if case .executable(let path, _) = app.launch, seen.insert(path).inserted { executables.append(path) }
                        case .failure(let e): results.append(.failure(e))
                        }
                        continue
                    }
                    let result = check(file)
                    if case .success(let a) = result, seen.insert(a.manifest.executable).inserted {
                        executables.append(a.manifest.executable)
                    }
                    results.append(result)
                }
            }
        }
        return Pending(executables: executables, results: results, apps: apps)
    }

    /// Judges the executables of `pending` by `executables` (keyed by path; one absent is
    /// refused as not examined), then refuses a manifest whose id an earlier accepted one
    /// already claimed.
    public func finish(_ pending: Pending, executables: [String: ExecutableFacts]) -> Outcome {
        // The apps first: an extension is judged against the apps that stand.
        var apps: [String: AppManifest] = [:]
        var acceptedApps: [AppManifest] = []
        var appUIDs: [UInt32: String] = [:]
        var results: [Result<Accepted, ManifestError>] = []
        results.reserveCapacity(pending.results.count)
        for app in pending.apps {
            if case .executable(let path, _) = app.launch,
                let problem = executableProblem(path, executables[path] ?? .missing(reason: "it was not examined"))
            {
                results.append(.failure(ManifestError(file: app.source, field: "executable", problem: problem)))
            } else if let problem = appUserProblem(app) {
                results.append(.failure(ManifestError(file: app.source, field: "user", problem: problem)))
            } else if let uid = appUserUID(app), let other = appUIDs[uid] {
                // A process of that uid would be taken for either.
                results.append(.failure(ManifestError(file: app.source, field: "user", problem: "uid \(uid) is already app '\(other)''s user")))
            } else if let first = apps[app.id] {
                results.append(
                    .failure(ManifestError(file: app.source, field: "id", problem: "duplicate app id '\(app.id)' (already declared by \(first.source))")))
            } else {
                apps[app.id] = app
                acceptedApps.append(app)
                if let uid = appUserUID(app) { appUIDs[uid] = app.id }
            }
        }
        var claimed: [String: String] = [:]
        for result in pending.results {
            guard case .success(let accepted) = result else {
                results.append(result)
                continue
            }
            let m = accepted.manifest
            if let problem = executableProblem(m.executable, executables[m.executable] ?? .missing(reason: "it was not examined")) {
                results.append(.failure(ManifestError(file: m.source, field: "executable", problem: problem)))
            } else if let first = claimed[m.id] {
                results.append(.failure(ManifestError(file: m.source, field: "id", problem: "duplicate id '\(m.id)' (already declared by \(first))")))
            } else if let app = apps[m.id] {
                results.append(
                    .failure(ManifestError(file: m.source, field: "id", problem: "'\(m.id)' is the id of an app (\(app.source)), not an extension's")))
            } else if let refusal = Self.appProblem(m, apps: apps) {
                results.append(.failure(refusal))
            } else {
                claimed[m.id] = m.source
                results.append(result)
            }
        }
        return Outcome(results: results, apps: acceptedApps)
    }

    /// Why an app's `user` cannot be its uid: under a root daemon it must name an existing
    /// user, and neither root nor the daemon's own (a connecting process of that uid is taken
    /// for the app). Under a daemon that is not root, `user` is refused: its apps are the user's.
    public func appUserProblem(_ app: AppManifest) -> String? {
        guard let user = app.user else { return nil }
        guard credentialRules.daemonUID == 0 else { return "only a root daemon gives apps a user of their own; this daemon's apps are its user's" }
        let uid: UInt32
        switch user {
        case .number(let n): uid = n
        case .name(let name):
            guard let found = credentialRules.accounts.userNamed(name) else { return "no user named '\(name)' in the account database" }
            uid = found.uid
        }
        if uid == 0 || uid == credentialRules.daemonUID { return "\(user) is root or the daemon's user: an app's uid must be its own" }
        return nil
    }

    /// The uid an app's `user` names (a number, or a name the account database knows), or nil.
    func appUserUID(_ app: AppManifest) -> UInt32? {
        switch app.user {
        case .number(let n)?: n
        case .name(let name)?: credentialRules.accounts.userNamed(name)?.uid
        case nil: nil
        }
    }

    /// Why extension `m` cannot be in the app it names: the app is not declared, or `m` names
    /// a shared container that is not one of the app's groups. Nil for an extension of no app.
    static func appProblem(_ m: Manifest, apps: [String: AppManifest]) -> ManifestError? {
        guard let id = m.app else { return nil }
        guard let app = apps[id] else {
            let known = apps.keys.sorted()
            return ManifestError(
                file: m.source, field: "app",
                problem: "no app '\(id)' is declared (\(known.isEmpty ? "no app manifest is loaded" : "apps: " + known.joined(separator: ", ")))")
        }
        for (i, name) in m.sharedContainers.enumerated() where !app.groups.contains(name) {
            let groups = app.groups.isEmpty ? "it has none" : "its groups: " + app.groups.joined(separator: ", ")
            return ManifestError(file: m.source, field: "sharedContainers[\(i)]", problem: "'\(name)' is not a group of its app '\(id)' (\(groups))")
        }
        return nil
    }

    /// A manifest file's bytes, once the file checks pass (a regular file, owned by root or
    /// the daemon's uid, not world-writable, within the size limit).
    private func contents(_ file: ManifestFile) -> Result<[UInt8], ManifestError> {
        func fail(_ problem: String) -> Result<[UInt8], ManifestError> { .failure(ManifestError(file: file.path, field: nil, problem: problem)) }
        let status: FileFacts
        let contents: [UInt8]?
        switch file.reading {
        case .notOpened(let reason): return fail("cannot be opened: \(reason)")
        case .notExamined(let reason): return fail("cannot be examined: \(reason)")
        case .examined(let s, let c): (status, contents) = (s, c)
        }
        guard status.isRegular else { return fail("is not a regular file") }
        if let problem = ownershipProblem(status) { return fail(problem) }
        guard status.size <= ManifestParser.maxFileSize, let bytes = contents else {
            return fail("file is \(status.size) bytes, over the \(ManifestParser.maxFileSize)-byte limit")
        }
        return .success(bytes)
    }

    /// One file, up to its executable.
    private func check(_ file: ManifestFile) -> Result<Accepted, ManifestError> {
        func fail(_ field: String?, _ problem: String) -> Result<Accepted, ManifestError> {
            .failure(ManifestError(file: file.path, field: field, problem: problem))
        }
        let bytes: [UInt8]
        switch contents(file) {
        case .success(let b): bytes = b
        case .failure(let e): return .failure(e)
        }

        let manifest: Manifest
        switch ManifestParser.parse(bytes, file: file.path, directory: file.directory, points: points) {
        case .success(let m): manifest = m
        case .failure(let e): return .failure(e)
        }
        if !manifest.sandboxed && !allowUnsandboxed {
            return fail(
                "sandbox",
                "'none' is refused: only trusted extensions may run unsandboxed, and the daemon's configuration does not allow it (set \"allowUnsandboxedExtensions\": true)"
            )
        }
        let rules = credentialRules
        let needsOwnUID = rules.needsOwnUID(manifest.credentialRequest)
        var containers: [ContainerNeed] = []
        for (i, name) in manifest.sharedContainers.enumerated() {
            let field = "sharedContainers[\(i)]"
            var group = ContainerGroup.none
            if rules.daemonUID == 0 {
                switch containerGroups[name] {
                case .number(let n)?: group = .configured(n)
                case .name(let g)?:
                    guard let found = rules.accounts.groupNamed(g) else {
                        return fail(field, "the configuration gives '\(name)' the group '\(g)', which does not exist")
                    }
                    group = .configured(found)
                case nil: group = .allocated
                }
            }
            containers.append(ContainerNeed(name: name, field: field, group: group))
        }
        // The uid provisioning will allocate is not known yet; the first of the range stands in
        // for it. The refusals of `resolve` do not depend on which uid of the range it is (none
        // is 0: `extensionUIDs` starts at 1000 or above), and provisioning resolves again with
        // the real one.
        if case .failure(let e) = rules.resolve(manifest.credentialRequest, file: file.path, ownUID: needsOwnUID ? extensionUIDs.first : nil) {
            return .failure(e)
        }
        if manifest.policy.suspend == .freeze, let problem = freezerProblem {
            return fail(
                "policy.suspend",
                "'freeze' (from the manifest or its extension point '\(manifest.point)') needs a cgroup per extension, and this daemon has none: \(problem)")
        }
        return .success(Accepted(manifest: manifest, needsOwnUID: needsOwnUID, containers: containers))
    }

    /// Why `path`, with these facts, cannot be an extension's executable, or nil.
    private func executableProblem(_ path: String, _ facts: ExecutableFacts) -> String? {
        switch facts {
        case .missing(let reason): return "'\(path)' does not exist: \(reason)"
        case .found(let status, let executable):
            guard status.isRegular, executable else { return "'\(path)' is not an executable file" }
            return ownershipProblem(status).map { "'\(path)' \($0)" }
        }
    }

    /// Refuses files others could have written: world-writable, or owned by someone other
    /// than root or the daemon's uid.
    private func ownershipProblem(_ status: FileFacts) -> String? {
        if status.mode & 0o002 != 0 { return "is world-writable; refusing it (chmod o-w)" }
        if status.owner != 0 && status.owner != trustedUID {
            return "is owned by uid \(status.owner), not by root or the daemon's uid \(trustedUID)"
        }
        return nil
    }
}
