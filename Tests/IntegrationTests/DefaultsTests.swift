import ExtensionHost
import ExtensionProtocol
import Foundation
import Testing

/// Shared defaults (docs/defaults.md) with a real daemon, extensions and apps: writes are seen
/// at once by running members, once after resume by suspended ones (never woken for them), no
/// write waits for a reader stopped in the middle of a read, and nobody outside the group can
/// read a suite, by the API or by the file.
@Suite("Shared defaults", .serialized)
struct DefaultsTests {
    static let suite = "group.com.example.stocks"
    static var app: [String: Any] { ["kind": "app", "id": "com.example.stocks", "groups": [suite, "group.com.example.more"], "dbusActivatable": true] }
    static let widgetID = "com.example.stocks.widget"

    static func widget(_ id: String = widgetID, app: String? = "com.example.stocks") -> [String: Any] {
        TestDaemon.testExtension(id, extra: app.map { ["app": $0] } ?? [:])
    }

    @Test func aRunningMemberSeesAWriteAtOnceAndASuspendedOneOnceAfterItsResumeNeverWoken() throws {
        let daemon = try TestDaemon(manifests: ["app.json": Self.app, "widget.json": Self.widget()])
        try daemon.start()
        let host = try daemon.host()
        let appDefaults = try host.defaults(suiteName: Self.suite)  // the test runs as root: an administrator
        try appDefaults.set(.string("dark"), forKey: "theme")

        let first = try host.begin(Self.widgetID)
        let watching = try first.hostChannel()  // kept open after the dismiss: changes are reported on it
        watching.send("defaults-open \(Self.suite)")
        #expect(watching.readLine() == "opened", "\(daemon.log())")
        watching.send("defaults-get \(Self.suite) theme")
        #expect(watching.readLine() == "value string(\"dark\")")

        // Running: the write is in the mapping when it is answered, and the change announced.
        try appDefaults.set(.integer(42), forKey: "count")
        watching.send("defaults-get \(Self.suite) count")
        var lines = [watching.readLine(), watching.readLine()]
        #expect(Set(lines.compactMap { $0 }) == ["changed \(Self.suite)", "value integer(42)"], "\(lines)")

        // The extension writes; the app's connection is told.
        let appChanged = DispatchSemaphore(value: 0)
        appDefaults.onChange { _ in appChanged.signal() }
        watching.send("defaults-set \(Self.suite) theme light")
        #expect(watching.readLine() == "set")
        #expect(appDefaults["theme"] == .string("light"))
        #expect(appChanged.wait(timeout: .now() + 10) == .success)

        // Suspended: five writes, no resume, one change after the next resume.
        var mark = daemon.events.count
        try host.dismiss(first)
        try daemon.events.wait("suspend", of: Self.widgetID, after: mark)
        mark = daemon.events.count
        for i in 0..<5 { try appDefaults.set(.integer(Int64(i)), forKey: "count") }
        #expect(processState(first.pid) == "T")
        #expect(!daemon.events.all.dropFirst(mark).contains { $0.kind == "resume" }, "never woken for a change")

        let second = try host.begin(Self.widgetID)
        #expect(second.pid == first.pid)
        #expect(watching.readLine() == "changed \(Self.suite)", "the held change arrives on resume")
        let channel = try second.hostChannel()
        channel.send("defaults-changes")
        #expect(channel.readLine() == "changes 2", "one while running, one for the five made while suspended")
        channel.send("defaults-get \(Self.suite) count")
        #expect(channel.readLine() == "value integer(4)")
        #expect(daemon.stop() == 0)
    }

    @Test func noWriteWaitsForAReaderStoppedInTheMiddleOfAReadAndTheSuiteOutlivesTheDaemon() throws {
        let daemon = try TestDaemon(manifests: ["app.json": Self.app, "widget.json": Self.widget()])
        try daemon.start()
        let host = try daemon.host()
        let appDefaults = try host.defaults(suiteName: Self.suite)
        try appDefaults.set(.string(String(repeating: "v", count: 2000)), forKey: "big")
        let session = try host.begin(Self.widgetID)
        let channel = try session.hostChannel()
        channel.send("defaults-open \(Self.suite)")
        #expect(channel.readLine() == "opened")
        channel.send("defaults-read-loop \(Self.suite) big")
        #expect(channel.readLine() == "reading")
        try eventually("the loop has read") {
            channel.send("defaults-reads")
            return channel.readLine().map { $0.hasPrefix("reads ") && !$0.hasPrefix("reads 0 ") } ?? false
        }
        // Stopped by the kernel wherever its reading thread is: in the middle of a read, as
        // often as not (it does nothing else).
        let mark = daemon.events.count
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.widgetID, after: mark)
        var slowest = 0.0
        for i in 0..<1000 {
            let start = Date()
            try appDefaults.set(.integer(Int64(i)), forKey: "n")
            slowest = max(slowest, Date().timeIntervalSince(start))
        }
        #expect(processState(session.pid) == "T")
        #expect(slowest < 2, "a write waited \(slowest) s for a stopped reader")
        #expect(appDefaults["n"] == .integer(999))

        // Kept on disk: a new daemon reads it back.
        #expect(daemon.stop() == 0)
        try daemon.start()
        let again = try daemon.host().defaults(suiteName: Self.suite)
        #expect(again["n"] == .integer(999))
        #expect(again["big"] == .string(String(repeating: "v", count: 2000)))
        #expect(daemon.stop() == 0)
    }

    @Test func limitsAndBadInputAreRefusedNamingWhatIsWrong() throws {
        let daemon = try TestDaemon(manifests: ["app.json": Self.app, "widget.json": Self.widget()])
        try daemon.start()
        let defaults = try daemon.host().defaults(suiteName: Self.suite)
        #expect(throws: HostError.self) { try defaults.set(.bool(true), forKey: "") }
        do {
            try defaults.set(encoded: [9, 9], forKey: "k")
            Issue.record("a malformed value was accepted")
        } catch {
            #expect(error.code == .badRequest && error.message.contains("unknown type 9"), "\(error)")
        }
        // 262,144 bytes at most: five values of 59,000 bytes do not fit.
        var refusal: HostError?
        for i in 0..<5 {
            do { try defaults.set(.bytes([UInt8](repeating: 1, count: 59_000)), forKey: "blob\(i)") } catch {
                refusal = error
                break
            }
        }
        #expect(refusal?.code == .limitReached && refusal?.message.contains("over its 262144") == true, "\(String(describing: refusal))")
        let cli = try daemon.extctl(["defaults", Self.suite, "flag", "true"])
        #expect(cli.status == 0, "\(cli.err)")
        let shown = try daemon.extctl(["defaults", "--json", Self.suite, "flag"])
        #expect(shown.out == "{\"entries\":[{\"key\":\"flag\",\"type\":\"bool\",\"value\":true}],\"suite\":\"\(Self.suite)\"}\n", "\(shown.out)")
        let unknown = try daemon.extctl(["defaults", "group.com.example.nobody"])
        #expect(unknown.status != 0 && unknown.err.contains("no app declares the group 'group.com.example.nobody'"), "\(unknown.err)")
        #expect(daemon.stop() == 0)
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv"))
    func nobodyOutsideTheGroupCanReadTheSuiteByTheAPIOrByTheFile() throws {
        var app = Self.app
        app["user"] = "nobody"
        let other: [String: Any] = ["kind": "app", "id": "com.example.other", "groups": ["group.com.example.other"], "executable": "/bin/true"]
        let daemon = try TestDaemon(
            manifests: [
                "app.json": app, "other.json": other, "widget.json": Self.widget(),
                "stranger.json": Self.widget("com.example.other.widget", app: "com.example.other"),
                "loose.json": Self.widget("com.example.loose", app: nil),
            ], socket: "run/control.sock")
        chmod(daemon.directory, 0o711)
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        try daemon.host().defaults(suiteName: Self.suite).set(.string("s3cret"), forKey: "token")

        func extctl(as uid: UInt32, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            try runProgram(
                "/usr/bin/setpriv",
                ["--reuid=\(uid)", "--regid=65534", "--clear-groups", BuildProducts.path("extctl"), arguments[0], "--socket", daemon.socketPath]
                    + arguments.dropFirst())
        }
        // The app's own uid reads and writes it.
        let asApp = try extctl(as: 65534, ["defaults", Self.suite, "token"])
        #expect(asApp.status == 0 && asApp.out == "\"s3cret\"\n", "\(asApp) \(daemon.log())")
        // Another uid, in no app: refused.
        let stranger = try extctl(as: 4242, ["defaults", Self.suite, "token"])
        #expect(stranger.status != 0 && stranger.err.contains("only for the apps of its group"), "\(stranger)")
        #expect(!stranger.out.contains("s3cret"))
        // The file: the state directory is the daemon's alone.
        let files = try FileManager.default.contentsOfDirectory(atPath: daemon.directory + "/state/defaults")
        #expect(files == [Self.suite])
        let read = try runProgram(
            "/usr/bin/setpriv", ["--reuid=4242", "--regid=65534", "--clear-groups", "/bin/cat", daemon.directory + "/state/defaults/" + Self.suite])
        #expect(read.status != 0 && read.err.contains("Permission denied"), "\(read)")
        // An extension of another app, and one of no app: refused.
        let host = try daemon.host()
        for (id, expected) in [
            ("com.example.other.widget", "is not a group of 'com.example.other.widget''s app 'com.example.other'"),
            ("com.example.loose", "names no app"),
        ] {
            let session = try host.begin(id)
            let channel = try session.hostChannel()
            channel.send("defaults-open \(Self.suite)")
            let line = channel.readLine() ?? ""
            #expect(line.hasPrefix("refused: ") && line.contains(expected), "\(line)")
        }
        // A member extension reads it.
        let member = try host.begin(Self.widgetID).hostChannel()
        member.send("defaults-open \(Self.suite)")
        #expect(member.readLine() == "opened")
        member.send("defaults-get \(Self.suite) token")
        #expect(member.readLine() == "value string(\"s3cret\")")
        #expect(daemon.stop() == 0)
    }
}
