import ExtensionHost
import ExtensionProtocol
import Foundation
import Testing

/// Secret items with a real daemon, extensions and an app of another uid (docs/secrets.md): what
/// an extension adds its app reads by automatic search; an extension of another app finds
/// nothing, and its add does not collide; the secret is nowhere in clear (state files, the
/// daemon's log, extctl, a core dump of the daemon); a damaged store loses only the damaged
/// items; items survive a restart and a re-exec.
@Suite("Secrets", .serialized, .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv"))
struct SecretTests {
    static let group = "group.com.example.stocks"
    static let secret = "tok-9f2c61d8e4b7a035-SECRET"

    static func daemon() throws -> TestDaemon {
        let app: [String: Any] = ["kind": "app", "id": "com.example.stocks", "groups": [group], "dbusActivatable": true, "user": "nobody"]
        let other: [String: Any] = ["kind": "app", "id": "com.example.other", "groups": ["group.com.example.other"], "executable": "/bin/true"]
        let daemon = try TestDaemon(
            manifests: [
                "app.json": app, "other.json": other,
                "widget.json": TestDaemon.testExtension("com.example.stocks.widget", extra: ["app": "com.example.stocks"]),
                "stranger.json": TestDaemon.testExtension("com.example.other.widget", extra: ["app": "com.example.other"]),
            ], socket: "run/control.sock")
        chmod(daemon.directory, 0o711)
        return daemon
    }

    /// The app's process: the fixture as uid 65534 (the app's `user`).
    static func appCopy(_ daemon: TestDaemon, _ service: String, _ account: String) throws -> String {
        let r = try runProgram(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                try ReachableCopies.copy(RuntimeC.packageRoot + "/Tests/Fixtures/secret-app/app.py"),
                daemon.socketPath, "copy", service, account,
            ])
        return r.out + r.err
    }

    static func sha256(_ s: String) throws -> String {
        try runProgram("/bin/sh", ["-c", "printf %s \"$0\" | sha256sum | cut -d' ' -f1", s]).out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func whatAnExtensionAddsItsAppReadsAndNobodyElseFindsNorSeesInClear() throws {
        let daemon = try Self.daemon()
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        let host = try daemon.host()
        let widget = try host.begin("com.example.stocks.widget").hostChannel()
        widget.send("secret-add api.example.com alice \(Self.secret)")
        #expect(widget.readLine() == "added", "\(daemon.log())")
        widget.send("secret-add api.example.com alice again")
        #expect(widget.readLine() == "duplicate")
        widget.send("secret-add api.example.com bob x group.com.example.other")
        #expect(widget.readLine()?.hasPrefix("refused: 'group.com.example.other' is not one of the caller's groups") == true)

        // The app (uid 65534, its manifest's user) finds it by automatic search.
        let digest = try Self.sha256(Self.secret)
        #expect(try Self.appCopy(daemon, "api.example.com", "alice") == "found \(Self.secret.utf8.count) \(digest) in \(Self.group)\n")
        #expect(try Self.appCopy(daemon, "api.example.com", "nobody").hasPrefix("failure 14 "), "not found")

        // An extension of another app: not found for every operation, and its add does not collide.
        let stranger = try host.begin("com.example.other.widget").hostChannel()
        for command in ["secret-copy", "secret-update", "secret-delete"] {
            stranger.send("\(command) api.example.com alice x")
            #expect(stranger.readLine() == "not found", "\(command)")
        }
        stranger.send("secret-add api.example.com alice other-secret")
        #expect(stranger.readLine() == "added")
        widget.send("secret-copy api.example.com alice")
        #expect(widget.readLine() == "found \(Self.secret) in \(Self.group)", "still its own")
        // A process of no app (root, an administrator): nothing found either, and no data ever.
        #expect(throws: HostError.self) { try host.copySecret(SecretAttributes(itemClass: .genericPassword, service: "api.example.com")) }

        // Administrators list labels and groups, never the data.
        #expect(daemon.log().contains("the secret store's key comes from "), "\(daemon.log())")
        let list = try runProgram(BuildProducts.path("extctl"), ["secrets", "list", "--socket", daemon.socketPath])
        #expect(list.status == 0 && list.out.contains("\(Self.group)  generic-password  token of alice") && list.out.contains("2 item(s) listed."), "\(list)")
        let json = try runProgram(BuildProducts.path("extctl"), ["secrets", "list", "--json", "--socket", daemon.socketPath, Self.group])
        #expect(json.out == "{\"items\":[{\"class\":\"generic-password\",\"group\":\"\(Self.group)\",\"label\":\"token of alice\"}]}\n", "\(json.out)")
        let asStranger = try runProgram(
            "/usr/bin/setpriv",
            ["--reuid=4242", "--regid=65534", "--clear-groups", BuildProducts.path("extctl"), "secrets", "list", "--socket", daemon.socketPath])
        #expect(asStranger.status != 0 && asStranger.err.contains("secrets list needs root"), "\(asStranger)")

        // A core dump of the daemon, taken while it serves: no secret in it.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/gcore"), let pid = daemon.pid {
            widget.send("secret-copy api.example.com alice")
            #expect(widget.readLine() == "found \(Self.secret) in \(Self.group)")
            let core = daemon.directory + "/daemon.core"
            let dump = try runProgram("/usr/bin/gcore", ["-o", core, "\(pid)"])
            let file = core + ".\(pid)"
            try #require(FileManager.default.fileExists(atPath: file), "gcore: \(dump.out) \(dump.err)")
            let found = try runProgram("/bin/grep", ["-c", "-a", Self.secret, file])
            #expect(found.out == "0\n", "the secret is in the daemon's core dump \(found.out) times")
            // The dump is one the search can read: the item's label, which is not secret, is in it.
            #expect(try runProgram("/bin/grep", ["-c", "-a", "token of alice", file]).out != "0\n")
            try? FileManager.default.removeItem(atPath: file)
        }

        // Nowhere in clear: the state directory, the daemon's log, extctl's output.
        let grep = try runProgram("/bin/grep", ["-r", "-l", "-a", Self.secret, daemon.directory + "/state"])
        #expect(grep.out.isEmpty, "in clear in \(grep.out)")
        #expect(!daemon.log().contains(Self.secret))
        for arguments in [["status", "--json"], ["list", "--json"]] {
            #expect(try !daemon.extctl(arguments).out.contains(Self.secret))
        }
        #expect(!list.out.contains(Self.secret) && !json.out.contains(Self.secret))

        // A re-exec and a restart keep the items.
        #expect(try daemon.extctl(["reexec"]).status == 0)
        #expect(try Self.appCopy(daemon, "api.example.com", "alice") == "found \(Self.secret.utf8.count) \(digest) in \(Self.group)\n")
        #expect(daemon.stop() == 0)
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        #expect(try Self.appCopy(daemon, "api.example.com", "alice") == "found \(Self.secret.utf8.count) \(digest) in \(Self.group)\n", "\(daemon.log())")
        #expect(daemon.stop() == 0)
    }

    @Test func aDamagedStoreLosesOnlyTheDamagedItemsNamingThem() throws {
        let daemon = try Self.daemon()
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        let widget = try daemon.host().begin("com.example.stocks.widget").hostChannel()
        for account in ["flipped", "truncated", "moved", "kept"] {
            widget.send("secret-add api.example.com \(account) secret-of-\(account)")
            #expect(widget.readLine() == "added")
        }
        #expect(daemon.stop() == 0)
        let items = daemon.directory + "/state/secrets/items"
        var byAccount: [String: String] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: items) {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: items + "/" + name))
            for account in ["flipped", "truncated", "moved", "kept"] where bytes.range(of: Data(account.utf8)) != nil { byAccount[account] = name }
        }
        try #require(byAccount.count == 4, "\(byAccount)")
        // A flipped byte in the sealed data; a truncated file; the group rewritten in the description.
        var flipped = try Data(contentsOf: URL(fileURLWithPath: items + "/" + byAccount["flipped"]!))
        flipped[flipped.count - 3] ^= 0x40
        try flipped.write(to: URL(fileURLWithPath: items + "/" + byAccount["flipped"]!))
        let truncated = try Data(contentsOf: URL(fileURLWithPath: items + "/" + byAccount["truncated"]!))
        try truncated.prefix(20).write(to: URL(fileURLWithPath: items + "/" + byAccount["truncated"]!))
        var moved = try Data(contentsOf: URL(fileURLWithPath: items + "/" + byAccount["moved"]!))
        let from = Data("group.com.example.stocks".utf8), to = Data("group.com.example.stockz".utf8)
        let range = try #require(moved.range(of: from))
        moved.replaceSubrange(range, with: to)
        try moved.write(to: URL(fileURLWithPath: items + "/" + byAccount["moved"]!))

        try daemon.start(arguments: ["--socket-group", "nogroup"])
        let again = try daemon.host().begin("com.example.stocks.widget").hostChannel()
        again.send("secret-copy api.example.com kept")
        #expect(again.readLine() == "found secret-of-kept in \(Self.group)")
        for account in ["flipped", "truncated", "moved"] {
            again.send("secret-copy api.example.com \(account)")
            #expect(again.readLine() == "not found", "\(account)")
            #expect(daemon.log().contains("secret item \(items)/\(byAccount[account]!) refused: "), "\(account): \(daemon.log())")
        }
        #expect(daemon.log().contains("does not open with the store's key: damaged, or moved to another group or item"))
        #expect(daemon.log().contains("refused: truncated") || daemon.log().contains("description is malformed"), "\(daemon.log())")
        #expect(daemon.stop() == 0)
    }

    @Test func itemsOfAKeyThatIsGoneAreNeitherSetAsideNorSealedAgainWithANewKey() throws {
        let daemon = try Self.daemon()
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        let widget = try daemon.host().begin("com.example.stocks.widget").hostChannel()
        for account in ["a", "b"] {
            widget.send("secret-add api.example.com \(account) secret-\(account)")
            #expect(widget.readLine() == "added")
        }
        #expect(daemon.stop() == 0)
        let secrets = daemon.directory + "/state/secrets"
        for key in ["key", "key.cred"] { try? FileManager.default.removeItem(atPath: secrets + "/" + key) }
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        let again = try daemon.host().begin("com.example.stocks.widget").hostChannel()
        again.send("secret-copy api.example.com a")
        #expect(again.readLine()?.hasPrefix("refused: the secret store cannot be used: items exist but no key file does") == true, "\(daemon.log())")
        let names = try FileManager.default.contentsOfDirectory(atPath: secrets + "/items")
        #expect(names.count == 2 && !names.contains { $0.hasSuffix(".bad") }, "\(names)")
        #expect(!FileManager.default.fileExists(atPath: secrets + "/key") && !FileManager.default.fileExists(atPath: secrets + "/key.cred"), "no new key")
        #expect(daemon.stop() == 0)
    }
}
