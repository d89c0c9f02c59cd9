import ExtensionTransport
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// Loading through the recording kernel: what `ManifestFiles` reads, and what `Provisioner`
/// changes on disk (only what is missing or wrong) or refuses.
@Suite(.serialized)
struct ManifestLoadingTests {
    static let directory = "/etc/extensiond"
    static let state = "/var/lib/extensiond"
    static let program = "/usr/lib/x/run"
    static let container = "group.com.example.stocks"
    static let containerPath = state + "/containers/" + container
    static let ids = state + "/ids.json"

    /// A root daemon's kernel with one manifest naming one shared container, and its program.
    func kernel(_ manifest: String = #"{"id": "com.example.x", "executable": "/usr/lib/x/run", "sharedContainers": ["group.com.example.stocks"]}"#)
        -> RecordingKernel
    {
        let k = RecordingKernel()
        k.directories[Self.directory] = ["x.json", "notes.txt"]
        k.files[Self.directory + "/x.json"] = manifest
        k.statuses[Self.program] = FileStatus(kind: .regular, permissions: 0o755, owner: 0, group: 0, size: 100, identity: FileIdentity(device: 1, inode: 9))
        return k
    }

    /// The daemon's manifest sources on `k`, the state directory `state`.
    func sources(_ k: RecordingKernel, config: DaemonConfig = DaemonConfig()) throws -> ManifestSources {
        var options = DaemonOptions(kernel: k, socketPath: "/run/x.sock", extensionDirectories: [Self.directory])
        options.stateDirectory = Self.state
        return try ManifestSources(options: options, config: config, kernel: k, freezerProblem: nil)
    }

    /// Provisions `accepted` with no state directory (no `IdentityStore`).
    func provisionWithoutState(_ k: RecordingKernel, _ accepted: ManifestValidation.Accepted) -> Result<Manifest, ManifestError> {
        let rules = CredentialRules(daemonUID: 0, daemonGID: 0, accounts: k.accounts)
        let provisioner = Provisioner(
            rules: rules, identities: nil, containers: SharedContainers(stateDirectory: Self.state, kernel: k), extensionUIDs: .defaultRange)
        return provisioner.provision(accepted)
    }

    /// The calls that change something on disk.
    func changes(_ k: RecordingKernel) -> [RecordingKernel.Call] {
        k.calls.filter {
            switch $0 {
            case .replaceFile, .makeDirectory, .changeOwner, .changeMode, .setGroupDefaultACL, .removeFile, .write: return true
            default: return false
            }
        }
    }

    @Test func aSecondLoadChangesNothingThatIsAlreadyProvisioned() throws {
        let k = kernel()
        let sources = try sources(k)
        let first = sources.load()
        #expect(first.errors.isEmpty)
        let m = try #require(first.manifests.first)
        let uid = IdentityRange.defaultRange.first
        #expect(m.credentials == Credentials(uid: uid, gid: uid, groups: [uid + 1], ownUID: true))
        #expect(m.containerPaths == [Self.container: Self.containerPath])
        let made = changes(k)
        #expect(
            made.filter { if case .replaceFile = $0 { return true } else { return false } } == [.replaceFile(Self.ids), .replaceFile(Self.ids)],
            "ids.json is written once for the uid, once for the container's gid")
        // The mode while root owns the directory (no CAP_FOWNER, no setgid bit), then the
        // group, then the group's default ACL.
        #expect(
            made.suffix(3) == [
                .changeMode(Self.containerPath, 0o770), .changeOwner(Self.containerPath, 0, uid + 1), .setGroupDefaultACL(Self.containerPath, uid + 1),
            ])

        // What the chown and chmod made of the directory (the fake does not apply them).
        k.statuses[Self.containerPath]?.group = uid + 1
        k.statuses[Self.containerPath]?.permissions = 0o770
        k.clearCalls()
        let second = sources.load()
        #expect(second.errors.isEmpty)
        #expect(second.manifests == first.manifests)
        #expect(changes(k) == [], "no uid or gid is new and the container is as it should be")
    }

    @Test func aContainerWhoseModeWasChangedIsPreparedAgain() throws {
        let k = kernel()
        let sources = try sources(k)
        _ = sources.load()
        let gid = IdentityRange.defaultRange.first + 1
        k.statuses[Self.containerPath]?.group = gid
        k.statuses[Self.containerPath]?.permissions = 0o2777
        k.clearCalls()
        #expect(sources.load().errors.isEmpty)
        let made = changes(k)
        #expect(
            made.suffix(3) == [
                .changeMode(Self.containerPath, 0o770), .changeOwner(Self.containerPath, 0, gid), .setGroupDefaultACL(Self.containerPath, gid),
            ], "a setgid directory of an earlier version loses the bit and gets the ACL")
        #expect(!made.contains(.replaceFile(Self.ids)))
    }

    @Test func aRefusedManifestProvisionsNothing() throws {
        let k = kernel(#"{"id": "com.example.x", "executable": "/usr/lib/x/missing", "sharedContainers": ["group.com.example.stocks"]}"#)
        let sources = try sources(k)
        let result = sources.load()
        #expect(result.manifests.isEmpty)
        #expect(
            result.errors.map(\.description) == [
                "\(Self.directory)/x.json: field 'executable': '/usr/lib/x/missing' does not exist: No such file or directory"
            ])
        #expect(changes(k) == [], "no uid, gid or directory for a manifest that is refused")
        #expect(sources.identities?.map == IdentityMap())
    }

    @Test func withoutAStateDirectoryAnOwnUIDIsRefused() throws {
        let k = kernel()
        let m = try #require(
            try? ManifestParser.parse(
                Array(#"{"id": "com.example.x", "executable": "/usr/lib/x/run"}"#.utf8), file: Self.directory + "/x.json", directory: Self.directory,
                points: .builtIn
            ).get())
        #expect(
            provisionWithoutState(k, .init(manifest: m, needsOwnUID: true))
                == .failure(
                    ManifestError(
                        file: Self.directory + "/x.json", field: "user", problem: "no state directory to keep extension uids in")))
    }

    @Test func withoutAStateDirectoryAContainersGroupIsRefused() throws {
        let k = kernel()
        let m = try #require(
            try? ManifestParser.parse(
                Array(#"{"id": "com.example.x", "executable": "/usr/lib/x/run", "user": 65534}"#.utf8), file: Self.directory + "/x.json",
                directory: Self.directory, points: .builtIn
            ).get())
        let need = ManifestValidation.ContainerNeed(name: Self.container, field: "sharedContainers[0]", group: .allocated)
        #expect(
            provisionWithoutState(k, .init(manifest: m, containers: [need]))
                == .failure(
                    ManifestError(
                        file: Self.directory + "/x.json", field: "sharedContainers[0]", problem: "no state directory to keep container groups in")))
        #expect(changes(k) == [])
    }

    @Test func anExhaustedRangeRefusesTheExtensionNamingItsField() throws {
        let k = kernel(#"{"id": "com.example.x", "executable": "/usr/lib/x/run"}"#)
        var config = DaemonConfig()
        config.extensionUIDs = IdentityRange(first: 5000, count: 0)
        let result = try sources(k, config: config).load()
        #expect(
            result.errors == [
                ManifestError(
                    file: Self.directory + "/x.json", field: "user",
                    problem: "no uid could be allocated for this extension: every uid of extensionUIDs (5000, 0 uids) is taken")
            ])
    }

    @Test func aContainerThatCannotBePreparedRefusesTheExtensionNamingItsField() throws {
        let k = kernel()
        k.statuses[Self.containerPath] = FileStatus(
            kind: .regular, permissions: 0o644, owner: 0, group: 0, size: 0, identity: FileIdentity(device: 1, inode: 3))
        let result = try sources(k).load()
        #expect(result.manifests.isEmpty)
        #expect(
            result.errors == [
                ManifestError(
                    file: Self.directory + "/x.json", field: "sharedContainers[0]", problem: "\(Self.containerPath) is not a directory")
            ])
    }

    @Test func theFilesAreReadThroughTheKernel() {
        let k = RecordingKernel()
        k.directories["/d"] = ["b.json", "a.json", ".hidden.json", "c.conf"]
        k.files["/d/b.json"] = "{}"
        k.statuses["/d/b.json"] = FileStatus(kind: .regular, permissions: 0o600, owner: 7, group: 0, size: 2, identity: FileIdentity(device: 1, inode: 4))
        let read = ManifestFiles(kernel: k).read(["/d", "/absent"])
        #expect(
            read == [
                ManifestDirectory(
                    path: "/d",
                    listing: .files([
                        ManifestFile(path: "/d/a.json", directory: "/d", reading: .notOpened(reason: String(cString: strerror(ENOENT)))),
                        ManifestFile(
                            path: "/d/b.json", directory: "/d", reading: .examined(FileFacts(owner: 7, mode: 0o600, size: 2), contents: Array("{}".utf8))),
                    ])),
                ManifestDirectory(path: "/absent", listing: .unreadable(reason: String(cString: strerror(ENOENT)))),
            ])
        k.statuses["/bin/dir"] = FileStatus(kind: .directory, permissions: 0o755, owner: 0, group: 0, size: 0, identity: FileIdentity(device: 1, inode: 5))
        k.statuses["/bin/plain"] = FileStatus(kind: .regular, permissions: 0o644, owner: 0, group: 0, size: 1, identity: FileIdentity(device: 1, inode: 6))
        #expect(
            ManifestFiles(kernel: k).examine(["/bin/dir", "/bin/plain", "/bin/none"]) == [
                "/bin/dir": .found(FileFacts(isRegular: false, owner: 0, mode: 0o755), executable: false),
                "/bin/plain": .found(FileFacts(owner: 0, mode: 0o644, size: 1), executable: false),
                "/bin/none": .missing(reason: String(cString: strerror(ENOENT))),
            ])
    }
}
