import ExtensionHost
import ExtensionProtocol
import Foundation
import Testing

/// Notification hints with a real daemon and extension: a running observer is told of each
/// post; a suspended one is not resumed, and is told once on its next resume; who may post
/// which names is enforced.
@Suite(.serialized)
struct NotificationHintTests {
    static let id = "com.example.stocks.widget"
    static let hint = "com.example.stocks.widget.quotes"

    @Test func aRunningObserverIsToldOfEachPost() throws {
        let daemon = try TestDaemon(manifests: ["w.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("observe \(Self.hint)")
        #expect(channel.readLine() == "observing")
        try host.post(Self.hint)
        #expect(channel.readLine() == "notified \(Self.hint)")
        try host.post(Self.hint)
        #expect(channel.readLine() == "notified \(Self.hint)")
        try host.post("com.example.stocks.widget.other")  // not observed: nothing
        channel.send("hints")
        #expect(channel.readLine() == "hints 2")
    }

    @Test func aSuspendedObserverIsNotResumedAndGetsOneCoalescedHintOnResume() throws {
        let daemon = try TestDaemon(manifests: ["w.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let first = try host.begin(Self.id)
        let observing = try first.hostChannel()  // kept open after the dismiss: hints are reported on it
        observing.send("observe \(Self.hint)")
        #expect(observing.readLine() == "observing")
        var mark = daemon.events.count
        try host.dismiss(first)
        try daemon.events.wait("suspend", of: Self.id, after: mark)

        mark = daemon.events.count
        for _ in 0..<5 { try host.post(Self.hint) }
        // The posts were answered (ok) after they were routed: still stopped, never resumed.
        #expect(processState(first.pid) == "T")
        #expect(!daemon.events.all.dropFirst(mark).contains { $0.kind == "resume" })

        let second = try host.begin(Self.id)
        #expect(second.pid == first.pid)
        #expect(observing.readLine() == "notified \(Self.hint)", "the held hint arrives on resume")
        let channel = try second.hostChannel()
        channel.send("hints")
        #expect(channel.readLine() == "hints 1", "five posts while suspended: one hint")
    }

    @Test func aNotRunningObserverGetsNothingAndAHintDoesNotLaunch() throws {
        let daemon = try TestDaemon(manifests: ["w.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let mark = daemon.events.count
        try host.post(Self.hint)
        let status = try daemon.extctl(["status", "--json", Self.id])
        #expect(status.out.contains("\"state\":\"not-running\""))
        #expect(!daemon.events.all.dropFirst(mark).contains { $0.kind == "launch" })
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv"))
    func whoMayPostWhichNamesIsEnforced() throws {
        let daemon = try TestDaemon(manifests: [
            "w.json": TestDaemon.testExtension(Self.id, extra: ["hosts": ["uids": [2000]]]),
            "p.json": TestDaemon.testExtension("com.example.private"),
        ])
        try daemon.start()
        chmod(daemon.directory, 0o755)
        func post(_ name: String, uid: UInt32) throws -> (status: Int32, out: String, err: String) {
            try runProgram(
                "/usr/bin/setpriv",
                ["--reuid=\(uid)", "--regid=0", "--clear-groups", BuildProducts.path("extctl"), "post", "--socket", daemon.socketPath, name])
        }
        #expect(try post(Self.hint, uid: 2000).status == 0, "uid 2000 may open the widget: it may post under its id")
        #expect(try post(Self.id, uid: 2000).status == 0, "the id itself is under it")
        let underPrivate = try post("com.example.private.x", uid: 2000)
        #expect(underPrivate.status == 1)
        #expect(underPrivate.err == "extctl: uid 2000 may not post 'com.example.private.x': it is under 'com.example.private', which it may not open\n")
        let system = try post("org.example.system-wide", uid: 2000)
        #expect(system.status == 1)
        #expect(system.err.contains("names under no extension id are for root and the daemon's uid"), "\(system.err)")
        #expect(try daemon.extctl(["post", "org.example.system-wide"]).status == 0, "root may")
        let bad = try daemon.extctl(["post", "no spaces"])
        #expect(bad.status == 2)
        #expect(bad.err.contains("hint name 'no spaces' may contain only letters"), "\(bad.err)")
    }

    @Test func aBurstOfPostsIsBoundedPerConnection() throws {
        let daemon = try TestDaemon(manifests: ["w.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        var refused = 0
        for _ in 0..<2_000 {
            do { try host.post(Self.hint) } catch {
                #expect(error.code == .limitReached, "\(error)")
                refused += 1
            }
        }
        #expect(refused > 0, "2,000 posts at once exceed the burst of 400")
        // The connection and the daemon still serve.
        let session = try host.begin(Self.id)
        try host.dismiss(session)
    }

    /// `observe` of a new name beyond `WireLimits.maxObservedHints` throws `.tooManyNames` (the
    /// daemon would ignore it); the names observed before are delivered, the refused one is not.
    @Test func theNameAfterTheMostObservedIsRefused() throws {
        let daemon = try TestDaemon(manifests: ["w.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let channel = try host.begin(Self.id).hostChannel()
        let prefix = Self.id + ".hint"
        try expectTheNameAfterTheMostObservedIsRefused(
            host: host, channel: channel, prefix: prefix, refusal: "observed 256, then refused: already observing 256 names, the most one process may",
            sync: "assert 0 sync", synced: ["granted", "released"])
    }
}
