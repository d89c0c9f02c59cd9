import SupervisorCore
import Testing

private let directory = "/etc/extensiond"
private let program = "/usr/lib/x/run"
private let daemonUser = CredentialRules(daemonUID: 1000, daemonGID: 1000, accounts: accounts)
private let rootDaemon = CredentialRules(daemonUID: 0, daemonGID: 0, accounts: accounts)

/// A manifest with `extra` members (a JSON fragment starting with a comma).
private func json(id: String = "com.example.v", executable: String = program, _ extra: String = "") -> String {
    #"{"id": "\#(id)", "executable": "\#(executable)"\#(extra)}"#
}

/// A regular manifest file as the shell reads it: root's, mode 0644, with `contents`.
private func file(_ name: String, _ contents: String, owner: UInt32 = 0, mode: UInt32 = 0o644) -> ManifestFile {
    let bytes = Array(contents.utf8)
    return ManifestFile(
        path: directory + "/" + name, directory: directory,
        reading: .examined(FileFacts(owner: owner, mode: mode, size: Int64(bytes.count)), contents: bytes))
}

private func validation(
    _ rules: CredentialRules = daemonUser, explicit: Bool = true, containerGroups: [String: AccountReference] = [:],
    allowUnsandboxed: Bool = false, freezerProblem: String? = nil
) -> ManifestValidation {
    ManifestValidation(
        points: .builtIn, explicitDirectories: explicit, trustedUID: 1000, credentialRules: rules,
        extensionUIDs: IdentityRange(first: 5000, count: 10), containerGroups: containerGroups,
        allowUnsandboxed: allowUnsandboxed, freezerProblem: freezerProblem)
}

/// Validates `files` in one directory; each executable is examined as `executables` says, or
/// else as root's regular executable file.
private func outcome(
    _ v: ManifestValidation, _ files: [ManifestFile], executables: [String: ExecutableFacts] = [:]
) -> ManifestValidation.Outcome {
    let pending = v.checkFiles([ManifestDirectory(path: directory, listing: .files(files))])
    var facts: [String: ExecutableFacts] = [:]
    for path in pending.executables {
        facts[path] = executables[path] ?? .found(FileFacts(owner: 0, mode: 0o755, size: 100), executable: true)
    }
    return v.finish(pending, executables: facts)
}

/// The one refusal of validating `file`.
private func refusal(_ v: ManifestValidation, _ file: ManifestFile, executable: ExecutableFacts? = nil) -> ManifestError? {
    let o = outcome(v, [file], executables: executable.map { [program: $0] } ?? [:])
    #expect(o.results.count == 1)
    return o.errors.first
}

@Suite("Manifest validation")
struct ManifestValidationTests {
    @Test func manifestNamesAreJSONFilesNotHiddenInNameOrder() {
        #expect(ManifestDirectory.manifestNames(["b.json", ".a.json", "a.json", "c.txt", "json", "d.json.bak"]) == ["a.json", "b.json"])
        #expect(ManifestDirectory.path(of: "a.json", in: "/d") == "/d/a.json")
        #expect(ManifestDirectory.path(of: "a.json", in: "/d/") == "/d/a.json")
    }

    @Test func aGoodManifestIsAcceptedWithNothingToProvisionUnderADaemonThatIsNotRoot() throws {
        let o = outcome(validation(), [file("v.json", json())])
        #expect(o.errors.isEmpty)
        let a = try #require(o.accepted.first)
        #expect(a.manifest.id == "com.example.v")
        #expect(a.manifest.source == directory + "/v.json")
        #expect(a.manifest.credentials == nil, "credentials are resolved by provisioning")
        #expect(a.needsOwnUID == false)
        #expect(a.containers.isEmpty)
    }

    @Test func anUnreadableDirectoryIsRefusedOnlyWhenNamedExplicitly() {
        let listing = [ManifestDirectory(path: "/nowhere", listing: .unreadable(reason: "No such file or directory"))]
        let named = validation(explicit: true)
        #expect(
            named.finish(named.checkFiles(listing), executables: [:]).errors
                == [ManifestError(file: "/nowhere", problem: "extension directory cannot be read: No such file or directory")])
        let defaults = validation(explicit: false)
        #expect(defaults.finish(defaults.checkFiles(listing), executables: [:]).results.isEmpty)
    }

    @Test(arguments: [
        (ManifestFile.Reading.notOpened(reason: "Too many levels of symbolic links"), "cannot be opened: Too many levels of symbolic links"),
        (.notExamined(reason: "Input/output error"), "cannot be examined: Input/output error"),
        (.examined(FileFacts(isRegular: false, owner: 1001, mode: 0o666), contents: nil), "is not a regular file"),
        (.examined(FileFacts(owner: 0, mode: 0o646, size: 2), contents: Array("{}".utf8)), "is world-writable; refusing it (chmod o-w)"),
        (.examined(FileFacts(owner: 1001, mode: 0o644, size: 2), contents: Array("{}".utf8)), "is owned by uid 1001, not by root or the daemon's uid 1000"),
        (.examined(FileFacts(owner: 0, mode: 0o644, size: 1_048_577), contents: nil), "file is 1048577 bytes, over the 1048576-byte limit"),
    ])
    func aFileIsRefusedForWhatWasFoundReadingIt(reading: ManifestFile.Reading, problem: String) {
        let e = refusal(validation(), ManifestFile(path: directory + "/v.json", directory: directory, reading: reading))
        #expect(e == ManifestError(file: directory + "/v.json", problem: problem))
    }

    @Test func theFileChecksComeInOrderOwnershipBeforeSize() {
        let reading = ManifestFile.Reading.examined(FileFacts(owner: 1001, mode: 0o646, size: 1 << 30), contents: nil)
        let e = refusal(validation(), ManifestFile(path: directory + "/v.json", directory: directory, reading: reading))
        #expect(e?.problem == "is world-writable; refusing it (chmod o-w)")
    }

    @Test func theDaemonsOwnUIDMayOwnAManifest() {
        #expect(refusal(validation(), file("v.json", json(), owner: 1000)) == nil)
    }

    @Test func theParsersRefusalIsPassedOn() {
        let e = refusal(validation(), file("v.json", #"{"id": "com.example.v"}"#))
        #expect(e?.file == directory + "/v.json")
        #expect(e == ManifestParser.parse(Array(#"{"id": "com.example.v"}"#.utf8), file: directory + "/v.json", directory: directory, points: .builtIn).failure)
    }

    @Test func runningUnsandboxedNeedsTheConfiguration() {
        let f = file("v.json", json(#", "sandbox": "none""#))
        #expect(
            refusal(validation(), f)
                == ManifestError(
                    file: f.path, field: "sandbox",
                    problem:
                        "'none' is refused: only trusted extensions may run unsandboxed, and the daemon's configuration does not allow it (set \"allowUnsandboxedExtensions\": true)"
                ))
        #expect(refusal(validation(allowUnsandboxed: true), f) == nil)
    }

    @Test func freezingNeedsACgroupPerExtension() {
        let f = file("v.json", json(#", "policy": {"suspend": "freeze"}"#))
        #expect(
            refusal(validation(freezerProblem: "no cgroup v2"), f)
                == ManifestError(
                    file: f.path, field: "policy.suspend",
                    problem:
                        "'freeze' (from the manifest or its extension point 'default') needs a cgroup per extension, and this daemon has none: no cgroup v2"))
        #expect(refusal(validation(), f) == nil)
        #expect(refusal(validation(freezerProblem: "no cgroup v2"), file("w.json", json())) == nil, "'stop' needs no cgroup")
    }

    @Test func credentialsAreCheckedByTheRules() {
        let f = file("v.json", json(#", "user": "nosuchuser""#))
        #expect(refusal(validation(rootDaemon), f) == ManifestError(file: f.path, field: "user", problem: "no user named 'nosuchuser' in the account database"))
        let g = file("v.json", json(#", "user": "alice""#))
        #expect(refusal(validation(daemonUser), g) == nil, "alice is uid 1000, the daemon's")
        #expect(refusal(validation(rootDaemon), file("v.json", json(#", "group": 0"#)))?.field == "group")
    }

    @Test func aRootDaemonGivesAnExtensionWithoutUserAUIDOfItsOwn() throws {
        let own = try #require(outcome(validation(rootDaemon), [file("v.json", json())]).accepted.first)
        #expect(own.needsOwnUID)
        let named = try #require(outcome(validation(rootDaemon), [file("v.json", json(#", "user": "nobody""#))]).accepted.first)
        #expect(!named.needsOwnUID)
    }

    @Test func sharedContainersGetTheirGroupFromTheConfigurationOrTheAllocator() throws {
        let f = file("v.json", json(#", "sharedContainers": ["group.a.one", "group.a.two", "group.a.three"]"#))
        let groups: [String: AccountReference] = ["group.a.one": .number(2001), "group.a.two": .name("audio")]
        let a = try #require(outcome(validation(rootDaemon, containerGroups: groups), [f]).accepted.first)
        #expect(
            a.containers == [
                .init(name: "group.a.one", field: "sharedContainers[0]", group: .configured(2001)),
                .init(name: "group.a.two", field: "sharedContainers[1]", group: .configured(29)),
                .init(name: "group.a.three", field: "sharedContainers[2]", group: .allocated),
            ])
        let user = try #require(outcome(validation(daemonUser, containerGroups: groups), [f]).accepted.first)
        #expect(user.containers.map(\.group) == [.none, .none, .none], "a daemon that is not root gives containers no group")
    }

    @Test func aContainerGroupTheAccountDatabaseLacksIsRefused() {
        let f = file("v.json", json(#", "sharedContainers": ["group.a.one", "group.a.two"]"#))
        let e = refusal(validation(rootDaemon, containerGroups: ["group.a.two": .name("stocks")]), f)
        #expect(
            e
                == ManifestError(
                    file: f.path, field: "sharedContainers[1]",
                    problem: "the configuration gives 'group.a.two' the group 'stocks', which does not exist"))
    }

    @Test(arguments: [
        (ExecutableFacts.missing(reason: "No such file or directory"), "'/usr/lib/x/run' does not exist: No such file or directory"),
        (.found(FileFacts(isRegular: false, owner: 0, mode: 0o755), executable: true), "'/usr/lib/x/run' is not an executable file"),
        (.found(FileFacts(owner: 0, mode: 0o644), executable: false), "'/usr/lib/x/run' is not an executable file"),
        (.found(FileFacts(owner: 0, mode: 0o757), executable: true), "'/usr/lib/x/run' is world-writable; refusing it (chmod o-w)"),
        (.found(FileFacts(owner: 42, mode: 0o755), executable: true), "'/usr/lib/x/run' is owned by uid 42, not by root or the daemon's uid 1000"),
    ])
    func anExecutableIsRefusedForWhatWasFound(facts: ExecutableFacts, problem: String) {
        let f = file("v.json", json())
        #expect(refusal(validation(), f, executable: facts) == ManifestError(file: f.path, field: "executable", problem: problem))
    }

    @Test func anExecutableNotExaminedIsRefused() {
        let v = validation()
        let pending = v.checkFiles([ManifestDirectory(path: directory, listing: .files([file("v.json", json())]))])
        #expect(pending.executables == [program])
        #expect(v.finish(pending, executables: [:]).errors.map(\.problem) == ["'/usr/lib/x/run' does not exist: it was not examined"])
    }

    @Test func onlyManifestsStillInTheRunningNameExecutablesEachOnce() {
        let v = validation()
        let files = [
            file("a.json", json(id: "com.example.a", executable: "/bin/a")),
            file("b.json", json(id: "com.example.b", executable: "/bin/b", #", "sandbox": "none""#)),
            file("c.json", json(id: "com.example.c", executable: "/bin/a")),
            file("d.json", json(id: "com.example.d", executable: "/bin/d")),
        ]
        #expect(v.checkFiles([ManifestDirectory(path: directory, listing: .files(files))]).executables == ["/bin/a", "/bin/d"])
    }

    @Test func theFirstAcceptedManifestToClaimAnIdWins() {
        let files = [
            file("a.json", json(id: "com.example.same", executable: "/bin/missing")),
            file("b.json", json(id: "com.example.same")),
            file("c.json", json(id: "com.example.same")),
            file("d.json", json(id: "com.example.other")),
        ]
        let o = outcome(validation(), files, executables: ["/bin/missing": .missing(reason: "No such file or directory")])
        #expect(o.accepted.map(\.manifest.source) == [directory + "/b.json", directory + "/d.json"], "a refused manifest claims no id")
        #expect(
            o.errors == [
                ManifestError(file: directory + "/a.json", field: "executable", problem: "'/bin/missing' does not exist: No such file or directory"),
                ManifestError(file: directory + "/c.json", field: "id", problem: "duplicate id 'com.example.same' (already declared by \(directory)/b.json)"),
            ])
    }

    @Test func idsAreClaimedAcrossDirectoriesInTheirOrder() {
        let v = validation()
        let first = ManifestDirectory(
            path: "/first",
            listing: .files([
                ManifestFile(path: "/first/z.json", directory: "/first", reading: file("z.json", json()).reading)
            ]))
        let second = ManifestDirectory(
            path: "/second",
            listing: .files([
                ManifestFile(path: "/second/a.json", directory: "/second", reading: file("a.json", json()).reading)
            ]))
        let pending = v.checkFiles([first, second])
        let o = v.finish(pending, executables: [program: .found(FileFacts(owner: 0, mode: 0o755), executable: true)])
        #expect(o.accepted.map(\.manifest.source) == ["/first/z.json"])
        #expect(o.errors.map(\.field) == ["id"])
    }

    @Test func resultsKeepTheOrderOfTheFiles() {
        let files = [
            file("a.json", "not json"),
            file("b.json", json(id: "com.example.b")),
            file("c.json", json(id: "com.example.c"), mode: 0o666),
            file("d.json", json(id: "com.example.d")),
        ]
        let o = outcome(validation(), files)
        let order = o.results.map { result -> String in
            switch result {
            case .success(let a): return a.manifest.source
            case .failure(let e): return e.file
            }
        }
        #expect(order == files.map(\.path))
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
