import SupervisorCore
import Testing

let accounts = AccountDirectory.table(
    users: ["root": (0, 0), "nobody": (65534, 65534), "alice": (1000, 1000), "stocks": (990, 991)],
    groups: ["root": 0, "nogroup": 65534, "alice": 1000, "audio": 29, "video": 44])

func request(_ json: String) throws -> CredentialRequest {
    try parseManifest(#"{"id": "com.example.c", "executable": "/bin/true", "# + json + "}").get().credentialRequest
}

@Suite("Credentials")
struct CredentialTests {
    let root = CredentialRules(daemonUID: 0, daemonGID: 0, accounts: accounts)
    let rootAllowing = CredentialRules(daemonUID: 0, daemonGID: 0, allowRootExtensions: true, accounts: accounts)
    let session = CredentialRules(daemonUID: 1000, daemonGID: 1000, daemonGroups: [29], accounts: accounts)

    func refusal(_ rules: CredentialRules, _ json: String, ownUID: UInt32? = nil) throws -> ManifestError? {
        guard case .failure(let e) = rules.resolve(try request(json), file: manifestFile, ownUID: ownUID) else { return nil }
        return e
    }

    @Test func theKeysParseAsNamesOrNumbers() throws {
        let r = try request(#""user": "nobody", "group": 44, "supplementaryGroups": ["audio", 27]"#)
        #expect(r == CredentialRequest(user: .name("nobody"), group: .number(44), supplementaryGroups: [.name("audio"), .number(27)]))
        #expect(try request("") == CredentialRequest())
    }

    @Test(arguments: [
        (#""user": true"#, "user", "expected a name or a number"),
        (#""user": -1"#, "user", "must be an integer between 0 and 4294967295, got -1.0"),
        (#""user": "a:b""#, "user", "'a:b' is not a valid user or group name"),
        (#""group": "123""#, "group", "'123' is not a valid user or group name"),
        (#""supplementaryGroups": [true]"#, "supplementaryGroups[0]", "expected a group name or number"),
        (#""supplementaryGroups": "audio""#, "supplementaryGroups", "expected an array"),
    ])
    func malformedKeysAreRefusedNamingTheKey(json: String, field: String, problem: String) {
        guard case .failure(let e) = parseManifest(#"{"id": "com.example.c", "executable": "/bin/true", "# + json + "}") else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(e.file == manifestFile)
        #expect(e.field == field)
        #expect(e.problem.contains(problem), "\(e.problem)")
    }

    @Test func aRootDaemonRunsAnExtensionWithoutUserUnderItsOwnUID() throws {
        let c = try root.resolve(CredentialRequest(), file: manifestFile, ownUID: 1_879_113_728).get()
        #expect(c == Credentials(uid: 1_879_113_728, gid: 1_879_113_728, groups: [], ownUID: true))
        #expect(root.needsOwnUID(CredentialRequest()))
        #expect(!root.needsOwnUID(CredentialRequest(user: .name("nobody"))))
        #expect(!session.needsOwnUID(CredentialRequest()))
    }

    /// The ids a root daemon allocates to extensions and shared containers cannot be named by
    /// a manifest: one could otherwise run as another extension and stop it, read its
    /// container, or join a shared container it was not given.
    @Test func aManifestCannotNameAnAllocatedID() throws {
        let reserved = IdentityRange(first: 1_879_113_728, count: 65_536)
        let rules = CredentialRules(daemonUID: 0, daemonGID: 0, accounts: accounts, reserved: reserved)
        for (json, field) in [
            (#""user": 1879113728"#, "user"), (#""user": 1879179263"#, "user"), (#""user": "nobody", "group": 1879113800"#, "group"),
            (#""user": "nobody", "supplementaryGroups": [29, 1879113729]"#, "supplementaryGroups[1]"),
        ] {
            let e = try #require(try refusal(rules, json), "\(json) was accepted")
            #expect(e.field == field)
            #expect(e.problem.contains("in the range extensiond allocates") && e.problem.contains("it would be another extension's"), "\(e.problem)")
        }
        #expect(try refusal(rules, #""user": 1879179264, "group": 44"#) == nil, "past the range")
        #expect(try refusal(rules, #""user": "nobody", "group": 44"#) == nil)
        // The extension's own allocated uid, and a shared container's gid the daemon adds.
        let own = try rules.resolve(CredentialRequest(), file: manifestFile, ownUID: 1_879_113_728, extraGroups: [1_879_113_900]).get()
        #expect(own == Credentials(uid: 1_879_113_728, gid: 1_879_113_728, groups: [1_879_113_900], ownUID: true))
    }

    @Test func withoutAnAllocatedUIDTheExtensionIsRefused() throws {
        let e = try #require(try refusal(root, ""))
        #expect(e.description == "\(manifestFile): field 'user': no uid could be allocated for this extension")
    }

    @Test func aNamedUserGetsItsPrimaryGroup() throws {
        let c = try root.resolve(try request(#""user": "nobody""#), file: manifestFile).get()
        #expect(c == Credentials(uid: 65534, gid: 65534, groups: [], ownUID: false))
        let stocks = try root.resolve(try request(#""user": 990, "supplementaryGroups": ["audio", 44, "audio"]"#), file: manifestFile).get()
        #expect(stocks == Credentials(uid: 990, gid: 991, groups: [29, 44]))
    }

    @Test func groupOverridesThePrimaryGroup() throws {
        let c = try root.resolve(try request(#""user": "nobody", "group": "video""#), file: manifestFile).get()
        #expect(c.gid == 44)
    }

    @Test func sharedContainerGroupsAreAdded() throws {
        let c = try root.resolve(try request(#""user": "nobody", "supplementaryGroups": [29]"#), file: manifestFile, extraGroups: [29, 5000]).get()
        #expect(c.groups == [29, 5000])
    }

    @Test func unknownNamesAreRefused() throws {
        #expect(try refusal(root, #""user": "mallory""#)?.description == "\(manifestFile): field 'user': no user named 'mallory' in the account database")
        #expect(
            try refusal(root, #""user": "nobody", "group": "wheel""#)?.description
                == "\(manifestFile): field 'group': no group named 'wheel' in the account database")
        #expect(
            try refusal(root, #""user": "nobody", "supplementaryGroups": ["audio", "wheel"]"#)?.description
                == "\(manifestFile): field 'supplementaryGroups[1]': no group named 'wheel' in the account database")
    }

    @Test func aNumericUserWithoutAnAccountNeedsAGroup() throws {
        #expect(
            try refusal(root, #""user": 4321"#)?.description
                == "\(manifestFile): field 'group': user 4321 has no account entry, so it has no primary group: name one with \"group\"")
        #expect(try root.resolve(try request(#""user": 4321, "group": 4321"#), file: manifestFile).get() == Credentials(uid: 4321, gid: 4321))
    }

    @Test func rootIsRefusedUnlessTheConfigurationAllowsIt() throws {
        #expect(
            try refusal(root, #""user": "root""#)?.description
                == "\(manifestFile): field 'user': runs as root, which the configuration does not allow (set \"allowRootExtensions\": true in the daemon's configuration file)"
        )
        #expect(try rootAllowing.resolve(try request(#""user": "root""#), file: manifestFile).get() == Credentials(uid: 0, gid: 0))
    }

    @Test func uid0ByNumberIsRefusedEvenWhenRootIsAllowed() throws {
        for rules in [root, rootAllowing] {
            #expect(
                try refusal(rules, #""user": 0, "group": 0"#)?.description
                    == "\(manifestFile): field 'user': uid 0 is root: write \"user\": \"root\" (and allow it in the configuration) to run an extension as root")
        }
    }

    @Test func rootsGroupIsRefusedForOthers() throws {
        #expect(
            try refusal(root, #""user": "nobody", "group": 0"#)?.description
                == "\(manifestFile): field 'group': gid 0 (root's group) is refused for an extension not running as an allowed root (\"user\": \"root\" with allowRootExtensions)"
        )
        #expect(try refusal(rootAllowing, #""user": "nobody", "supplementaryGroups": [29, "root"]"#)?.field == "supplementaryGroups[1]")
        #expect(try refusal(root, #"  "supplementaryGroups": [0]"#, ownUID: 1_879_113_728)?.field == "supplementaryGroups[0]")
    }

    @Test func aSessionDaemonRunsExtensionsAsItself() throws {
        #expect(try session.resolve(CredentialRequest(), file: manifestFile).get() == Credentials(uid: 1000, gid: 1000, groups: [29]))
        #expect(
            try session.resolve(try request(#""user": "alice", "group": 1000, "supplementaryGroups": ["audio"]"#), file: manifestFile).get()
                == Credentials(uid: 1000, gid: 1000, groups: [29]), "what it has anyway")
    }

    @Test func aSessionDaemonRefusesAnotherUserOrGroup() throws {
        #expect(
            try refusal(session, #""user": "nobody""#)?.description
                == "\(manifestFile): field 'user': asks for user 'nobody' (uid 65534), but this daemon runs as uid 1000 and is not root: it runs extensions as itself only"
        )
        #expect(
            try refusal(session, #""group": "video""#)?.description
                == "\(manifestFile): field 'group': asks for group 'video' (gid 44), but this daemon (uid 1000, not root) runs extensions with its own group 1000 only"
        )
        #expect(try refusal(session, #""group": "audio""#)?.field == "group", "a supplementary group of the daemon is not its primary group")
        #expect(
            try refusal(session, #""supplementaryGroups": [29, 44]"#)?.description
                == "\(manifestFile): field 'supplementaryGroups[1]': asks for group 44 (gid 44), which this daemon (uid 1000, not root) does not have")
        #expect(try refusal(session, #""user": "root""#)?.field == "user")
    }
}

@Suite("Extension uids")
struct IdentityMapTests {
    @Test func anIDKeepsItsUIDAndNoTwoShareOne() {
        var map = IdentityMap()
        let range = IdentityRange(first: 5000, count: 3)
        #expect(map.uid(for: "a", in: range)! == (5000, true))
        #expect(map.uid(for: "b", in: range)! == (5001, true))
        #expect(map.uid(for: "a", in: range)! == (5000, false))
        map.extensions["a"] = nil
        #expect(map.uid(for: "c", in: range)! == (5000, true), "a freed uid is reused lowest first")
        #expect(map.uid(for: "d", in: range)! == (5002, true))
        #expect(map.uid(for: "e", in: range) == nil, "the range is exhausted")
    }

    @Test func aRecordedUIDOutsideTheRangeIsKept() {
        var map = IdentityMap(extensions: ["a": 42])
        #expect(map.uid(for: "a", in: IdentityRange(first: 5000, count: 3))! == (42, false))
    }

    @Test func theConfigurationSetsTheRangeAndAllowsRoot() throws {
        let c = try parseConfig(#"{"extensionUIDs": {"first": 200000, "count": 10}, "allowRootExtensions": true}"#).get()
        #expect(c.extensionUIDs == IdentityRange(first: 200_000, count: 10))
        #expect(c.allowRootExtensions)
        #expect(DaemonConfig().extensionUIDs == .defaultRange)
        #expect(!DaemonConfig().allowRootExtensions)
    }

    @Test(arguments: [
        (#"{"extensionUIDs": {"first": 10, "count": 10}}"#, "extensionUIDs.first"),
        (#"{"extensionUIDs": {"first": 200000}}"#, "extensionUIDs.count"),
        (#"{"extensionUIDs": {"first": 4294967000, "count": 1000}}"#, "extensionUIDs.count"),
        (#"{"extensionUIDs": {"first": 200000, "count": 1, "step": 2}}"#, "extensionUIDs.step"),
        (#"{"allowRootExtensions": "yes"}"#, "allowRootExtensions"),
    ])
    func aBadRangeIsRefusedNamingTheKey(json: String, field: String) {
        guard case .failure(let e) = parseConfig(json) else {
            Issue.record("accepted \(json)")
            return
        }
        #expect(e.file == configFile)
        #expect(e.field == field, "\(e)")
    }
}
