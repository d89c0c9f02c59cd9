import ExtensionHost
import Foundation
import Testing

/// Apps declared beside their extensions (`"kind": "app"`, docs/manifest.md, "Apps"): which
/// extension is in which app, and the groups an extension may use, as `extctl` shows them.
@Suite("Apps", .serialized)
struct AppTests {
    static var app: [String: Any] {
        [
            "kind": "app", "id": "com.example.stocks", "displayName": "Stocks", "groups": ["group.com.example.stocks"],
            "urlSchemes": ["stocks"], "dbusActivatable": true,
        ]
    }

    static func widget(_ id: String, containers: [String]) -> [String: Any] {
        TestDaemon.testExtension(id, extra: ["app": "com.example.stocks", "sharedContainers": containers, "point": "widget"])
    }

    @Test func listAndStatusShowAppsAndTheirExtensionsAndAnAppsGroupsBoundItsExtensions() throws {
        let daemon = try TestDaemon(manifests: [
            "app.json": Self.app,
            "widget.json": Self.widget("com.example.stocks.widget", containers: ["group.com.example.stocks"]),
            "loose.json": TestDaemon.testExtension("com.example.loose"),
        ])
        try daemon.start()

        let list = try daemon.extctl(["list"])
        #expect(list.status == 0)
        #expect(list.out.contains("2 extension(s) listed."), "\(list.out) \(daemon.log())")
        let appRow = try #require(list.out.split(separator: "\n").first { $0.hasPrefix("com.example.stocks ") }, "\(list.out)")
        #expect(appRow.contains("com.example.stocks.widget") && appRow.contains("group.com.example.stocks") && appRow.contains("stocks"), "\(appRow)")
        #expect(list.out.hasSuffix("1 app(s) listed.\n"), "\(list.out)")

        let json = try daemon.extctl(["list", "--json"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        let apps = try #require(document["apps"] as? [[String: Any]])
        #expect(apps.count == 1)
        #expect(apps.first?["id"] as? String == "com.example.stocks")
        #expect(apps.first?["displayName"] as? String == "Stocks")
        #expect(apps.first?["extensions"] as? [String] == ["com.example.stocks.widget"])
        #expect(apps.first?["groups"] as? [String] == ["group.com.example.stocks"])
        #expect(apps.first?["urlSchemes"] as? [String] == ["stocks"])
        #expect(apps.first?["launch"] as? String == "dbus-activation")
        let extensions = try #require(document["extensions"] as? [[String: Any]])
        #expect(extensions.first { $0["id"] as? String == "com.example.stocks.widget" }?["app"] as? String == "com.example.stocks")
        #expect(extensions.first { $0["id"] as? String == "com.example.loose" }?["app"] == nil, "left out for an extension of no app")

        let status = try daemon.extctl(["status", "com.example.stocks.widget"])
        #expect(status.out.contains("         App: com.example.stocks\n"), "\(status.out)")
        let statusJSON = try CredentialTests.statusEntry(daemon, "com.example.loose")
        #expect(statusJSON["app"] is NSNull, "always written, null for none")

        // An extension that names a group its app lacks is refused at a reload, naming the field.
        try daemon.writeManifest("share.json", Self.widget("com.example.stocks.share", containers: ["group.com.example.other"]))
        let reload = try daemon.extctl(["reload"])
        #expect(reload.out.contains("1 manifest error(s)"), "\(reload.out)")
        #expect(
            daemon.log().contains("share.json: field 'sharedContainers[0]': 'group.com.example.other' is not a group of its app 'com.example.stocks'"),
            "\(daemon.log())")
        #expect(try daemon.extctl(["status", "com.example.stocks.share"]).status != 0, "not loaded")

        // The apps cross a re-exec with the rest.
        #expect(try daemon.extctl(["reexec"]).status == 0)
        #expect(try daemon.extctl(["list"]).out.hasSuffix("1 app(s) listed.\n"))
        #expect(daemon.stop() == 0)
    }
}

/// Under a root daemon (an embedded platform), an app runs under a uid of its own: its
/// manifest's `user`, or one the daemon allocates; a connecting process of that uid is the app's.
@Suite("Apps under a root daemon", .serialized, .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
struct AppUIDTests {
    @Test func aProcessOfTheAppsUIDIsTheAppsAndAnAppWithoutAUserGetsOneOfItsOwn() throws {
        let kiosk: [String: Any] = ["kind": "app", "id": "com.example.kiosk", "dbusActivatable": true, "user": "nobody"]
        let other: [String: Any] = ["kind": "app", "id": "com.example.other", "executable": "/bin/true"]
        let widget = TestDaemon.testExtension("com.example.kiosk.widget", extra: ["app": "com.example.kiosk", "hosts": ["uids": [65534]]])
        let daemon = try TestDaemon(
            manifests: ["kiosk.json": kiosk, "other.json": other, "widget.json": widget], extensionsAsRoot: true, socket: "run/control.sock")
        chmod(daemon.directory, 0o711)
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        defer { _ = daemon.stop() }

        let json = try daemon.extctl(["list", "--json"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        let apps = try #require(document["apps"] as? [[String: Any]], "\(json.out) \(daemon.log())")
        #expect(apps.first { $0["id"] as? String == "com.example.kiosk" }?["uid"] as? Int == 65534)
        let allocated = try #require(apps.first { $0["id"] as? String == "com.example.other" }?["uid"] as? Int)
        #expect(allocated >= 1_879_048_192, "a uid of its own, from extensionUIDs: \(allocated)")

        // A host running as the app's uid.
        let host = Process()
        host.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        host.arguments = [
            "--reuid=65534", "--regid=65534", "--clear-groups", BuildProducts.path("extctl"), "open", "--socket", daemon.socketPath, "com.example.kiosk.widget",
        ]
        let input = Pipe(), output = Pipe()
        host.standardInput = input
        host.standardOutput = output
        try host.run()
        let channel = HostChannel(fd: output.fileHandleForReading.fileDescriptor)
        #expect(channel.readLine(timeout: 30).flatMap { Int32($0) } != nil, "\(daemon.log())")
        let entry = try CredentialTests.statusEntry(daemon, "com.example.kiosk.widget")
        let requests = try #require(entry["openRequests"] as? [[String: Any]])
        #expect(requests.map { $0["hostApp"] as? String } == ["com.example.kiosk"], "\(requests)")
        try input.fileHandleForWriting.close()
        host.waitUntilExit()
    }
}
