import ExtensionHost
import ExtensionProtocol
import Foundation
import Testing

/// Discovery by extension point and content, against a real daemon: `extctl list --point
/// --content` and `ExtensionHostConnection.extensions(point:content:)`, for a host that may
/// open every extension (root) and for one the manifests' `hosts` rules restrict.
@Suite struct DiscoveryTests {
    static let stranger: UInt32 = 2000

    static func share(_ id: String, _ activation: [String: Any]?, name: String? = nil, hosts: [UInt32] = [stranger]) -> [String: Any] {
        var extra: [String: Any] = ["point": "share"]
        if let activation { extra["activation"] = activation }
        if let name { extra["displayName"] = name }
        if !hosts.isEmpty { extra["hosts"] = ["uids": hosts] }
        return TestDaemon.testExtension(id, extra: extra)
    }

    static func manifests() -> [String: [String: Any]] {
        [
            "a.json": share("com.example.a.notes", ["urls": 1, "images": 3, "text": true], name: "Notes"),
            "b.json": share("com.example.b.links", ["urls": 1]),
            "c.json": share("com.example.c.private", ["urls": 1, "images": 3], name: "Private", hosts: []),
            "d.json": share("com.example.d.byid", nil),
            "e.json": TestDaemon.testExtension("com.example.e.widget", extra: ["activation": ["urls": 5], "hosts": ["uids": [stranger]]]),
            "f.json": share("com.example.f.pdf", ["contentTypes": [["type": "application/pdf", "max": 2]]]),
        ]
    }

    /// extctl run as uid `stranger` (group root, so it can reach the 0660 socket), or as root.
    func extctl(_ daemon: TestDaemon, _ arguments: [String], asStranger: Bool) throws -> (status: Int32, out: String, err: String) {
        guard asStranger else { return try daemon.extctl(arguments) }
        return try runProgram(
            "/usr/bin/setpriv",
            ["--reuid=\(Self.stranger)", "--regid=0", "--clear-groups", BuildProducts.path("extctl"), arguments[0], "--socket", daemon.socketPath]
                + arguments.dropFirst())
    }

    func ids(_ json: String) throws -> [String] {
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "\(json)")
        return (document["extensions"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv"))
    func aQueryByContentListsExactlyTheMatchesTheCallerMayOpen() throws {
        let daemon = try TestDaemon(manifests: Self.manifests())
        try daemon.start()
        defer { _ = daemon.stop() }
        chmod(daemon.directory, 0o755)  // the stranger reaches the socket through the group

        let query = ["list", "--point", "share", "--content", "url=1,image=3", "--json"]
        #expect(try ids(try extctl(daemon, query, asStranger: false).out) == ["com.example.a.notes", "com.example.c.private"])
        let stranger = try extctl(daemon, query, asStranger: true)
        #expect(stranger.status == 0, "\(stranger.err)")
        #expect(try ids(stranger.out) == ["com.example.a.notes"], "c's hosts rule leaves the stranger out")
        let document = try JSONSerialization.jsonObject(with: Data(stranger.out.utf8)) as? [String: Any]
        let first = try #require((document?["extensions"] as? [[String: Any]])?.first)
        #expect(first["displayName"] as? String == "Notes")
        #expect(first["point"] as? String == "share")

        // One URL: b also matches; a PDF: only f; a point without content: every one it may open.
        #expect(
            try ids(try extctl(daemon, ["list", "--point", "share", "--content", "url=1", "--json"], asStranger: true).out)
                == ["com.example.a.notes", "com.example.b.links"])
        #expect(try ids(try extctl(daemon, ["list", "--content", "application/pdf=2", "--json"], asStranger: true).out) == ["com.example.f.pdf"])
        #expect(
            try ids(try extctl(daemon, ["list", "--point", "share", "--json"], asStranger: true).out)
                == ["com.example.a.notes", "com.example.b.links", "com.example.d.byid", "com.example.f.pdf"])
        #expect(try ids(try extctl(daemon, ["list", "--content", "url=2", "--json"], asStranger: true).out) == ["com.example.e.widget"])

        // The table form.
        let table = try extctl(daemon, ["list", "--point", "share", "--content", "url=1,image=3"], asStranger: true)
        #expect(table.out.contains("com.example.a.notes"))
        #expect(table.out.contains("Notes"))
        #expect(!table.out.contains("com.example.c.private"))
        #expect(table.out.hasSuffix("1 extension(s) found.\n"), "\(table.out)")

        // Bad content: one line naming what is wrong; nothing sent.
        let bad = try daemon.extctl(["list", "--point", "share", "--content", "picture=1"])
        #expect(bad.status == 2, "bad arguments")
        #expect(bad.err.contains("'picture' is not a kind of content"), "\(bad.err)")

        // The host library gives the same answer.
        let host = try daemon.host()
        defer { host.close() }
        let found = try host.extensions(point: "share", content: try ActivationContent(["url": 1, "image": 3]))
        #expect(
            found == [
                DiscoveredExtension(id: "com.example.a.notes", point: "share", displayName: "Notes"),
                DiscoveredExtension(id: "com.example.c.private", point: "share", displayName: "Private"),
            ])
        // A discovered extension opens by its id.
        let session = try host.begin(found[0].id)
        try host.dismiss(session)
    }
}
