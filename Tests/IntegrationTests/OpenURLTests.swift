import ExtensionHost
import Foundation
import Testing

/// `ExtensionContext.open` with a real daemon, a private D-Bus bus, a D-Bus-activatable app and
/// a stand-in for logind (docs/extension-model.md, "Opening a URL"): the app's scheme activates
/// the app with the URL (true), an unknown scheme answers false, a locked session false, an
/// extension no host shows false, and the point's rate holds.
@Suite("Opening a URL", .serialized, .enabled(if: PrivateBus.unavailability == nil && getuid() == 0, "needs root and a dbus-daemon"))
struct OpenURLTests {
    static let appID = "com.example.Stocks"
    static let widgetID = "com.example.Stocks.widget"

    static func manifests(executable: String? = nil) -> [String: [String: Any]] {
        var widget = TestDaemon.testExtension(widgetID, extra: ["app": appID, "point": "widget", "policy": ["suspend": "never"]])
        if let executable { widget["executable"] = executable }
        return [
            "app.json": ["kind": "app", "id": appID, "groups": ["group.com.example.stocks"], "urlSchemes": ["stocks"], "dbusActivatable": true],
            "widget.json": widget,
        ]
    }

    /// Opens `url` from the extension on `channel` and returns its answer.
    static func open(_ url: String, on channel: HostChannel) -> String? {
        channel.send("open-url \(url)")
        #expect(channel.readLine() == "opening")
        return channel.readLine(timeout: 30)
    }

    @Test func underARootDaemonTheAppsSchemeActivatesItOnTheSystemBusUnlessTheSessionIsLocked() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let bus = try PrivateBus(directory: directory + "/bus")
        defer { bus.close() }
        let record = directory + "/opened.txt"
        try bus.addService(name: Self.appID, executable: try DBusFixtures.dbusApp(), arguments: [Self.appID, record])
        let daemon = try TestDaemon(manifests: Self.manifests(), config: ["points": ["widget": ["openURLsPerMinute": 3]]])
        try daemon.start(environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address])
        let host = try daemon.host()
        let session = try host.begin(Self.widgetID)
        let channel = try session.hostChannel()

        // No logind on the bus: no session to be locked. The app is activated with the URL.
        #expect(Self.open("stocks://item/42", on: channel) == "opened true", "\(daemon.log())")
        #expect(DBusFixtures.records(record).contains("open stocks://item/42"), "\(DBusFixtures.records(record))")
        #expect(
            daemon.log().contains("opened a stocks: URL for \(Self.widgetID): handed to org.freedesktop.Application.Open on \(Self.appID)"), "\(daemon.log())")

        // A scheme no app declares: the system daemon has no session handler to ask.
        #expect(Self.open("nothing-declares-this://x", on: channel) == "opened false")
        #expect(daemon.log().contains("no app declares the scheme 'nothing-declares-this'"))

        // The host's session, locked (logind's LockedHint): not opened; unlocked: opened again.
        _ = try bus.startFakeLogind()
        try bus.setLocked(true)
        #expect(Self.open("stocks://item/43", on: channel) == "opened false")
        #expect(daemon.log().contains("the host's session is locked (logind's LockedHint)"), "\(daemon.log())")
        #expect(!DBusFixtures.records(record).contains("open stocks://item/43"))
        try bus.setLocked(false)
        // Three a minute (the scheme nobody declares and the locked session counted): the fourth is refused.
        #expect(Self.open("stocks://item/44", on: channel) == "opened false")
        #expect(daemon.log().contains("over its point's 3 URLs a minute"), "\(daemon.log())")
        #expect(Self.open("/no/scheme", on: channel) == "opened false")
        #expect(daemon.log().contains("did not open a malformed URL for \(Self.widgetID): the URL has no scheme"), "\(daemon.log())")

        // No host shows it any more (it keeps running: suspend "never"): nothing is opened.
        try host.dismiss(session)
        try eventually("the request is over") { (try? CredentialTests.statusEntry(daemon, Self.widgetID)["openRequests"] as? [Any])?.isEmpty == true }
        #expect(Self.open("stocks://item/45", on: channel) == "opened false")
        #expect(daemon.log().contains("no host has it open"), "\(daemon.log())")
        #expect(daemon.stop() == 0)
    }

    @Test func underTheUserDaemonOtherSchemesGoToTheSessionsHandlerOnTheSessionBus() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        chmod(directory, 0o755)
        let bus = try PrivateBus(directory: directory + "/bus")
        defer { bus.close() }
        let record = directory + "/opened.txt"
        FileManager.default.createFile(atPath: record, contents: nil)
        chmod(record, 0o666)
        try bus.addService(name: Self.appID, executable: try DBusFixtures.dbusApp(), arguments: [Self.appID, record])
        try bus.addService(name: "org.example.Browser", executable: try DBusFixtures.dbusApp(), arguments: ["org.example.Browser", record])
        // The session's handler for x-scheme-handler/web+news: a D-Bus-activatable desktop entry,
        // found through mimeapps.list as xdg-open finds it.
        let data = directory + "/data", config = directory + "/config"
        try FileManager.default.createDirectory(atPath: data + "/applications", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try "[Desktop Entry]\nType=Application\nName=Browser\nExec=/bin/false %u\nDBusActivatable=true\nMimeType=x-scheme-handler/web+news;\n"
            .write(toFile: data + "/applications/org.example.Browser.desktop", atomically: true, encoding: .utf8)
        try "[Default Applications]\nx-scheme-handler/web+news=org.example.Browser.desktop\n"
            .write(toFile: config + "/mimeapps.list", atomically: true, encoding: .utf8)

        let daemon = try TestDaemon(
            manifests: Self.manifests(executable: try ReachableCopies.copy(BuildProducts.path("test-extension"))), extensionsAsRoot: false)
        try daemon.startAsNobody(environment: [
            "DBUS_SESSION_BUS_ADDRESS": bus.address, "DBUS_SYSTEM_BUS_ADDRESS": bus.address, "XDG_DATA_HOME": data, "XDG_DATA_DIRS": data,
            "XDG_CONFIG_HOME": config, "XDG_CONFIG_DIRS": config,
        ])
        let host = try daemon.host()
        let channel = try host.begin(Self.widgetID).hostChannel()
        #expect(Self.open("stocks://item/7", on: channel) == "opened true", "\(daemon.log())")
        #expect(Self.open("web+news://today", on: channel) == "opened true", "\(daemon.log())")
        let opened = DBusFixtures.records(record)
        #expect(opened.contains("open stocks://item/7") && opened.contains("open web+news://today"), "\(opened)")
        #expect(daemon.log().contains("handed to org.freedesktop.Application.Open on org.example.Browser (\(data)/applications/org.example.Browser.desktop)"))
        #expect(Self.open("nothing-handles-this://x", on: channel) == "opened false")
        #expect(daemon.log().contains("no handler for x-scheme-handler/nothing-handles-this"), "\(daemon.log())")
        #expect(daemon.stop() == 0)
    }
}
