import SupervisorCore
import Testing

private let directory = "/etc/extensiond"

/// A manifest file as the shell reads it: root's, mode 0644, with `contents`.
private func file(_ name: String, _ contents: String) -> ManifestFile {
    let bytes = Array(contents.utf8)
    return ManifestFile(
        path: directory + "/" + name, directory: directory, reading: .examined(FileFacts(owner: 0, mode: 0o644, size: Int64(bytes.count)), contents: bytes))
}

private func validate(_ files: [ManifestFile]) -> ManifestValidation.Outcome {
    let v = ManifestValidation(
        points: .builtIn, explicitDirectories: true, trustedUID: 1000,
        credentialRules: CredentialRules(daemonUID: 1000, daemonGID: 1000, accounts: accounts),
        extensionUIDs: IdentityRange(first: 5000, count: 10), containerGroups: [:], allowUnsandboxed: false, freezerProblem: nil)
    let pending = v.checkFiles([ManifestDirectory(path: directory, listing: .files(files))])
    var facts: [String: ExecutableFacts] = [:]
    for path in pending.executables { facts[path] = .found(FileFacts(owner: 0, mode: 0o755, size: 100), executable: true) }
    return v.finish(pending, executables: facts)
}

private let stocks =
    #"{"kind": "app", "id": "com.example.stocks", "displayName": "Stocks", "groups": ["group.com.example.stocks"], "urlSchemes": ["Stocks"], "dbusActivatable": true}"#

private func parse(_ text: String) -> Result<AppManifest, ManifestError> {
    AppManifestParser.parse(Array(text.utf8), file: "/etc/extensiond/a.json", directory: directory)
}

private func problem(_ text: String) -> (field: String?, problem: String)? {
    guard case .failure(let e) = parse(text) else { return nil }
    return (e.field, e.problem)
}

@Suite("App manifests")
struct AppManifestTests {
    @Test func anAppIsToldFromAnExtensionByItsKind() {
        #expect(AppManifestParser.isApp(Array(stocks.utf8)))
        #expect(!AppManifestParser.isApp(Array(#"{"id": "a.b", "executable": "/x"}"#.utf8)))
        #expect(!AppManifestParser.isApp(Array(#"{"kind": "extension", "id": "a.b", "executable": "/x"}"#.utf8)))
        #expect(!AppManifestParser.isApp(Array("not json".utf8)))
    }

    @Test func aDBusActivatableAppAndOneStartedByItsExecutableAreRead() throws {
        let app = try parse(stocks).get()
        #expect(
            app
                == AppManifest(
                    id: "com.example.stocks", displayName: "Stocks", groups: ["group.com.example.stocks"], urlSchemes: ["stocks"], launch: .dbusActivatable,
                    source: "/etc/extensiond/a.json"))
        let started = try parse(#"{"kind": "app", "id": "com.example.notes", "groups": [], "executable": "bin/notes", "arguments": ["--open"]}"#).get()
        #expect(started.launch == .executable(path: "/etc/extensiond/bin/notes", arguments: ["--open"]))
        #expect(started.urlSchemes.isEmpty)
    }

    @Test func whatIsWrongIsNamedByItsField() {
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "groups": []}"#)?.problem.contains("neither how to bring the app up") == true)
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "dbusActivatable": true, "executable": "/x"}"#)?.field == "executable")
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "dbusActivatable": true, "arguments": ["a"]}"#)?.field == "arguments")
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "dbusActivatable": true, "urlSchemes": ["https"]}"#)?.field == "urlSchemes[0]")
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "dbusActivatable": true, "urlSchemes": ["1x"]}"#)?.field == "urlSchemes[0]")
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "dbusActivatable": true, "urlSchemes": ["a", "A"]}"#)?.field == "urlSchemes[1]")
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "dbusActivatable": true, "groups": ["nodots"]}"#)?.field == "groups[0]")
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "dbusActivatable": true, "groups": ["g.a", "g.a"]}"#)?.field == "groups[1]")
        #expect(problem(#"{"kind": "app", "id": "com.example.x", "dbusActivatable": true, "point": "widget"}"#)?.field == "point")
        #expect(problem(#"{"kind": "app", "id": "../x", "dbusActivatable": true}"#)?.field == "id")
    }

    @Test func anExtensionsKindIsExtensionOrAbsent() {
        let wrong = validate([file("e.json", #"{"kind": "widget", "id": "com.example.e", "executable": "/usr/lib/e"}"#)])
        #expect(wrong.errors.first?.field == "kind")
    }

    @Test func anExtensionMayUseOnlyGroupsOfItsApp() {
        let outcome = validate([
            file("app.json", stocks),
            file(
                "ok.json",
                #"{"id": "com.example.stocks.widget", "executable": "/usr/lib/w", "app": "com.example.stocks", "sharedContainers": ["group.com.example.stocks"]}"#
            ),
            file(
                "other.json",
                #"{"id": "com.example.stocks.share", "executable": "/usr/lib/s", "app": "com.example.stocks", "sharedContainers": ["group.com.example.other"]}"#
            ),
            file("lost.json", #"{"id": "com.example.lost", "executable": "/usr/lib/l", "app": "com.example.nowhere"}"#),
            file("free.json", #"{"id": "com.example.free", "executable": "/usr/lib/f", "sharedContainers": ["group.com.example.other"]}"#),
        ])
        #expect(outcome.apps.map(\.id) == ["com.example.stocks"])
        #expect(outcome.accepted.map(\.manifest.id) == ["com.example.stocks.widget", "com.example.free"])
        #expect(outcome.accepted.first?.manifest.app == "com.example.stocks")
        let errors = outcome.errors
        #expect(errors.count == 2)
        #expect(errors.first { $0.file.hasSuffix("other.json") }?.field == "sharedContainers[0]")
        #expect(errors.first { $0.file.hasSuffix("other.json") }?.problem.contains("is not a group of its app 'com.example.stocks'") == true)
        #expect(errors.first { $0.file.hasSuffix("lost.json") }?.field == "app")
    }

    @Test func anAppIdIsDeclaredOnceAndIsNoExtensionsId() {
        let outcome = validate([
            file("a.json", stocks), file("b.json", stocks),
            file("e.json", #"{"id": "com.example.stocks", "executable": "/usr/lib/e"}"#),
        ])
        #expect(outcome.apps.count == 1)
        #expect(outcome.errors.map(\.field) == ["id", "id"])
        #expect(outcome.errors.map(\.problem).contains { $0.contains("is the id of an app") })
    }
}

@Suite("App users")
struct AppUserTests {
    func validation(daemonUID: UInt32) -> ManifestValidation {
        ManifestValidation(
            points: .builtIn, explicitDirectories: true, trustedUID: daemonUID,
            credentialRules: CredentialRules(daemonUID: daemonUID, daemonGID: daemonUID, accounts: accounts),
            extensionUIDs: IdentityRange(first: 5000, count: 10), containerGroups: [:], allowUnsandboxed: false, freezerProblem: nil)
    }

    func app(_ user: String) -> AppManifest {
        let text = #"{"kind": "app", "id": "com.example.kiosk", "dbusActivatable": true, "user": \#(user)}"#
        return try! AppManifestParser.parse(Array(text.utf8), file: "/etc/extensiond/k.json", directory: "/etc/extensiond").get()
    }

    @Test func anAppsUserMustBeAnExistingUserOfItsOwnUnderARootDaemon() {
        let root = validation(daemonUID: 0)
        #expect(root.appUserProblem(app("4242")) == nil)
        #expect(root.appUserProblem(app(#""nosuchuser""#))?.contains("no user named 'nosuchuser'") == true)
        #expect(root.appUserProblem(app("0"))?.contains("must be its own") == true)
        #expect(validation(daemonUID: 1000).appUserProblem(app("4242"))?.contains("only a root daemon") == true)
        #expect(validation(daemonUID: 1000).appUserProblem(app("4242").with(user: nil)) == nil)
    }

    @Test func twoAppsCannotShareAUser() {
        let v = validation(daemonUID: 0)
        func file(_ name: String, _ id: String) -> ManifestFile {
            let bytes = Array(#"{"kind": "app", "id": "\#(id)", "dbusActivatable": true, "user": 4242}"#.utf8)
            return ManifestFile(
                path: "/etc/extensiond/" + name, directory: "/etc/extensiond",
                reading: .examined(FileFacts(owner: 0, mode: 0o644, size: Int64(bytes.count)), contents: bytes))
        }
        let pending = v.checkFiles([
            ManifestDirectory(path: "/etc/extensiond", listing: .files([file("a.json", "com.example.a"), file("b.json", "com.example.b")]))
        ])
        let outcome = v.finish(pending, executables: [:])
        #expect(outcome.apps.map(\.id) == ["com.example.a"])
        #expect(outcome.errors.map(\.field) == ["user"])
        #expect(outcome.errors.first?.problem == "uid 4242 is already app 'com.example.a''s user")
    }
}

extension AppManifest {
    fileprivate func with(user: AccountReference?) -> AppManifest {
        var copy = self
        copy.user = user
        return copy
    }
}
