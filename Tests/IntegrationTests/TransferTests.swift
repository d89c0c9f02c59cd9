import ExtensionHost
import ExtensionProtocol
import Foundation
import Testing

/// Background transfers with a real daemon, its worker, extensions, an app brought up over
/// D-Bus and real HTTP(S) servers on loopback (docs/transfers.md): a download outlives the
/// widget that started it, survives a SIGKILL of the daemon and a re-exec with `Range`, backs
/// off through dropped connections, starts again from zero where `Range` is refused; an upload
/// outlives a dismissal; a suspended widget is never woken for progress; another app's
/// extension sees nothing of the session.
@Suite(
    "Background transfers", .serialized,
    .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv"))
struct TransferTests {
    static let group = "group.com.example.stocks"
    static let appID = "com.example.stocks"
    static let widgetID = "com.example.stocks.widget"
    static let strangerID = "com.example.other.widget"

    /// A daemon run from copies every uid can reach (its worker runs under a uid of its own),
    /// with the app (D-Bus activatable, uid 65534), its widget, and another app's widget.
    static func daemon(bus: PrivateBus, server: TransferServer) throws -> TestDaemon {
        let app: [String: Any] = ["kind": "app", "id": appID, "groups": [group], "dbusActivatable": true, "user": "nobody"]
        let other: [String: Any] = ["kind": "app", "id": "com.example.other", "groups": ["group.com.example.other"], "executable": "/bin/true"]
        let daemon = try TestDaemon(
            manifests: [
                "app.json": app, "other.json": other,
                "widget.json": TestDaemon.testExtension(widgetID, extra: ["app": appID, "sharedContainers": [group]]),
                // The other app's widget runs as extensions do: its own user, in the sandbox.
                "stranger.json": TestDaemon.testExtension(
                    strangerID,
                    extra: [
                        "app": "com.example.other", "sharedContainers": ["group.com.example.other"], "user": "nobody",
                        "executable": try ReachableCopies.copy(BuildProducts.path("test-extension")),
                    ]),
            ], socket: "run/control.sock")
        chmod(daemon.directory, 0o711)
        daemon.daemonExecutable = try ReachableCopies.copy(BuildProducts.path("extensiond"))
        _ = try ReachableCopies.copy(BuildProducts.path("extensiond-transfer"))
        try start(daemon, bus: bus, server: server)
        return daemon
    }

    /// Starts (or starts again) `daemon` with the bus as its system bus, the server's CA trusted,
    /// its worker allowed to reach loopback, and its socket open to the app's uid (group nogroup).
    static func start(_ daemon: TestDaemon, bus: PrivateBus, server: TransferServer) throws {
        // The servers are on loopback, which the worker refuses unless told.
        try daemon.start(
            environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus.address, "SSL_CERT_FILE": server.caFile, "EXTENSIOND_TRANSFER_ALLOW_LOOPBACK": "1"],
            arguments: ["--socket-group", "nogroup"])
    }

    /// A private bus where the app is D-Bus activatable (dbus-app records each activation).
    static func bus(_ directory: String) throws -> (PrivateBus, String) {
        let bus = try PrivateBus(directory: directory + "/bus")
        let record = directory + "/activations.txt"
        try bus.addService(name: appID, executable: try DBusFixtures.dbusApp(), arguments: [appID, record])
        return (bus, record)
    }

    /// The app's process (uid 65534, its manifest's user): Tests/Fixtures/transfer-app/transfer-app.py.
    static func app(_ daemon: TestDaemon, _ arguments: [String]) throws -> String {
        let r = try runProgram(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3",
                try ReachableCopies.copy(RuntimeC.packageRoot + "/Tests/Fixtures/transfer-app/transfer-app.py"), daemon.socketPath,
            ]
                + arguments)
        return r.out + r.err
    }

    /// What each test runs against: a server (HTTPS with `tls`), a private bus where the app is
    /// activatable (its activations in `record`), and a daemon; `close()` ends them.
    struct Setup {
        let directory: String
        let server: TransferServer
        let bus: PrivateBus
        let record: String
        let daemon: TestDaemon

        func close() {
            bus.close()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    static func setUp(tls: Bool) throws -> Setup {
        let directory = try TestDaemon.makeTemporaryDirectory()
        let server = try TransferServer(directory: serverDirectory(), tls: tls)
        let (bus, record) = try Self.bus(directory)
        return Setup(directory: directory, server: server, bus: bus, record: record, daemon: try daemon(bus: bus, server: server))
    }

    static func containerPath(_ daemon: TestDaemon) -> String { daemon.directory + "/state/containers/" + group }

    static func tasks(_ daemon: TestDaemon) throws -> [[String: Any]] {
        let r = try daemon.extctl(["transfers", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        return object?["tasks"] as? [[String: Any]] ?? []
    }

    static func serverDirectory() -> String { ReachableCopies.directory + "/server-\(UUID().uuidString)" }

    @Test func aDownloadOutlivesItsDismissedWidgetWhichIsNeverWokenAndTheAppGetsTheCompletion() throws {
        let setup = try Self.setUp(tls: true)
        defer { setup.close() }
        let (server, daemon) = (setup.server, setup.daemon)
        let record = setup.record
        let size = 20 << 20
        let host = try daemon.host()
        let session = try host.begin(Self.widgetID)
        let widget = try session.hostChannel()
        // The widget starts the download; the server holds it at 30%.
        widget.send("transfer-download s1 \(Self.group) \(server.url("/file/big?size=\(size)&hold_at=\(size * 3 / 10)")) downloads/big.bin")
        let created = widget.readLine()
        #expect(created?.hasPrefix("created ") == true, "\(created ?? "nil") \(daemon.log())")
        try server.waitHold("big")
        // Progress reached the running widget.
        widget.send("transfer-events")
        #expect(widget.readLine()?.contains("progress ") == true, "\(daemon.log())")
        // Dismissed: it is suspended at once, and stays stopped while the download goes on.
        try host.dismiss(session)
        try eventually("the widget is stopped") { processState(session.pid) == "T" }
        try server.release("big")
        var states = Set<Character>()
        try eventually("the app is brought up for the session's events", timeout: 60) {
            states.insert(processState(session.pid) ?? "?")
            return DBusFixtures.records(record).contains("parameter \(Self.group)/s1")
        }
        #expect(states == ["T"], "the suspended widget was never woken for progress: \(states)")
        #expect(DBusFixtures.records(record).contains("action background-transfers"), "\(DBusFixtures.records(record))")
        // The file is in the shared container, whole, readable by the group.
        let file = Self.containerPath(daemon) + "/downloads/big.bin"
        #expect(try fileSHA256(file) == (try server.sha256("big", size: size)), "\(daemon.log())")
        #expect(try Self.tasks(daemon).first?["state"] as? String == "completed")
        // The app claims the session, receives the completion, and says it handled it.
        let out = try Self.app(daemon, ["claim", Self.group, "s1", "1", "handle"])
        #expect(out.contains("completed ") && out.contains(" 200 \(file)") && out.contains("handled 1"), "\(out)\n\(daemon.log())")
        // Handled: never delivered again, and the task is forgotten.
        #expect(try Self.tasks(daemon).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: daemon.directory + "/state/transfers/partial/1"))
        #expect(processState(session.pid) == "T")
    }

    @Test func aDaemonKilledAndReexecutedMidDownloadResumesWithRangeSendingAtMostOneChunkTwice() throws {
        let setup = try Self.setUp(tls: true)
        defer { setup.close() }
        let (server, bus, daemon) = (setup.server, setup.bus, setup.daemon)
        let size = 16 << 20, chunk = 65_536
        let widget = try daemon.host().begin(Self.widgetID).hostChannel()
        widget.send("transfer-download s2 \(Self.group) \(server.url("/file/resumed?size=\(size)&chunk=\(chunk)&hold_at=\(size / 2),\(size * 7 / 10)"))")
        #expect(widget.readLine()?.hasPrefix("created ") == true, "\(daemon.log())")
        // SIGKILL at 50%, once the worker has written every byte the server sent (what the kernel
        // still buffers between them would be lost with the worker, and sent again), and a new daemon.
        try server.waitHold("resumed")
        try eventually("the worker has written half the file", timeout: 30) { (try? Self.tasks(daemon).first?["bytes"] as? Int) == size / 2 }
        try daemon.crash()
        try server.release("resumed")
        try Self.start(daemon, bus: bus, server: server)
        // It resumes by itself; a re-exec at 70%.
        try server.waitHold("resumed")
        try eventually("the worker has written 70% of the file", timeout: 30) { (try? Self.tasks(daemon).first?["bytes"] as? Int) == size * 7 / 10 }
        #expect(try daemon.extctl(["reexec"]).status == 0, "\(daemon.log())")
        try server.release("resumed")
        try eventually("the download completes", timeout: 60) { (try? Self.tasks(daemon).first?["state"] as? String) == "completed" }
        let file = Self.containerPath(daemon) + "/transfers/s2/1"
        #expect(try fileSHA256(file) == (try server.sha256("resumed", size: size)), "\(daemon.log())")
        let stats = try server.stats("resumed")
        let ranged = stats.requests.filter { $0.range != nil }
        #expect(stats.requests.count == 3 && ranged.count == 2 && ranged.allSatisfy { $0.status == 206 && $0.if_range != nil }, "\(stats.requests)")
        #expect(stats.sent_total <= size + chunk, "sent \(stats.sent_total) bytes for \(size): more than one chunk twice")
        print("transfers: a SIGKILL and a re-exec mid-download: \(stats.requests.count) requests, \(stats.sent_total - size) byte(s) sent twice")
    }

    @Test func aServerThatDropsTheConnectionThreeTimesIsRetriedAfterItsBackoffs() throws {
        let setup = try Self.setUp(tls: false)
        defer { setup.close() }
        let (server, daemon) = (setup.server, setup.daemon)
        let size = 4 << 20
        let widget = try daemon.host().begin(Self.widgetID).hostChannel()
        let started = Date()
        widget.send("transfer-download s3 \(Self.group) \(server.url("/file/flaky?size=\(size)&drop=3&drop_at=\(size / 4)"))")
        #expect(widget.readLine()?.hasPrefix("created ") == true, "\(daemon.log())")
        try eventually("the download completes", timeout: 60) {
            widget.send("transfer-events")
            return widget.readLine()?.contains("completed 1 206") == true
        }
        // Three failures: backoffs of 1, 2 and 4 seconds.
        #expect(Date().timeIntervalSince(started) >= 7, "the retries waited their backoffs")
        #expect(try fileSHA256(Self.containerPath(daemon) + "/transfers/s3/1") == (try server.sha256("flaky", size: size)))
        let stats = try server.stats("flaky")
        #expect(stats.requests.count == 4, "\(stats.requests)")
        #expect(daemon.log().contains("attempt 4 in 4s"), "\(daemon.log())")
    }

    @Test func aServerThatAnswers503BehindARedirectIsRetriedAndTheRedirectFollowed() throws {
        let setup = try Self.setUp(tls: true)
        defer { setup.close() }
        let (server, daemon) = (setup.server, setup.daemon)
        let size = 1 << 20
        let widget = try daemon.host().begin(Self.widgetID).hostChannel()
        widget.send("transfer-download s8 \(Self.group) \(server.url("/file/busy?size=\(size)&fail=2&redirect=1"))")
        #expect(widget.readLine()?.hasPrefix("created ") == true, "\(daemon.log())")
        try eventually("the download completes", timeout: 60) {
            widget.send("transfer-events")
            return widget.readLine()?.contains("completed 1 200") == true
        }
        #expect(try fileSHA256(Self.containerPath(daemon) + "/transfers/s8/1") == (try server.sha256("busy", size: size)))
        let statuses = try server.stats("busy").requests.map(\.status)
        #expect(statuses == [302, 503, 302, 503, 302, 200], "\(statuses)")
        #expect(daemon.log().contains("transfer 1: HTTP 503; attempt 3 in 2s"), "\(daemon.log())")
    }

    @Test func aQueuedCompletionSurvivesACrashAndReachesTheAppOnce() throws {
        let setup = try Self.setUp(tls: false)
        defer { setup.close() }
        let (server, bus, daemon, record) = (setup.server, setup.bus, setup.daemon, setup.record)
        let host = try daemon.host()
        let session = try host.begin(Self.widgetID)
        let widget = try session.hostChannel()
        widget.send("transfer-download s9 \(Self.group) \(server.url("/file/queued?size=4096&hold_at=1024"))")
        #expect(widget.readLine() == "created 1", "\(daemon.log())")
        try server.waitHold("queued")
        try host.dismiss(session)
        try eventually("the widget is stopped") { processState(session.pid) == "T" }
        try server.release("queued")
        try eventually("the app is brought up", timeout: 30) { DBusFixtures.records(record).contains("parameter \(Self.group)/s9") }
        // The daemon dies with the completion queued, unclaimed; the next one brings the app up again.
        try daemon.crash()
        try Self.start(daemon, bus: bus, server: server)
        try eventually("the app is brought up again", timeout: 30) {
            DBusFixtures.records(record).filter { $0 == "parameter \(Self.group)/s9" }.count == 2
        }
        let first = try Self.app(daemon, ["claim", Self.group, "s9", "1", "handle"])
        #expect(first.contains("completed 1 200 ") && first.contains("handled 1"), "\(first)\n\(daemon.log())")
        // Handled: a second claim gets nothing, and the task is forgotten.
        let second = try Self.app(daemon, ["claim", Self.group, "s9", "0"])
        #expect(second.isEmpty, "\(second)")
        #expect(try Self.tasks(daemon).isEmpty)
    }

    @Test func aServerThatRefusesRangeStartsTheDownloadAgainFromZero() throws {
        let setup = try Self.setUp(tls: false)
        defer { setup.close() }
        let (server, daemon) = (setup.server, setup.daemon)
        let size = 4 << 20
        let widget = try daemon.host().begin(Self.widgetID).hostChannel()
        widget.send("transfer-download s4 \(Self.group) \(server.url("/file/norange?size=\(size)&range=0&drop=1&drop_at=\(size / 2)"))")
        #expect(widget.readLine()?.hasPrefix("created ") == true, "\(daemon.log())")
        try eventually("the download completes", timeout: 60) {
            widget.send("transfer-events")
            return widget.readLine()?.contains("completed 1 200") == true
        }
        #expect(try fileSHA256(Self.containerPath(daemon) + "/transfers/s4/1") == (try server.sha256("norange", size: size)), "\(daemon.log())")
        let stats = try server.stats("norange")
        #expect(stats.requests.count == 2 && stats.requests[1].range != nil && stats.requests[1].status == 200, "\(stats.requests)")
        #expect(daemon.log().contains("starts again from zero: the server sent the whole resource"), "\(daemon.log())")
    }

    @Test func anUploadOfFiftyMegabytesCompletesAcrossADismissal() throws {
        let setup = try Self.setUp(tls: true)
        defer { setup.close() }
        let (server, daemon) = (setup.server, setup.daemon)
        let record = setup.record
        let host = try daemon.host()
        let session = try host.begin(Self.widgetID)
        let widget = try session.hostChannel()
        // 50 MB of random bytes in the group's container.
        let source = Self.containerPath(daemon) + "/outbox/photo.raw"
        try FileManager.default.createDirectory(atPath: Self.containerPath(daemon) + "/outbox", withIntermediateDirectories: true)
        _ = try runProgram("/bin/sh", ["-c", "head -c 52428800 /dev/urandom > \"$0\"", source])
        let digest = try fileSHA256(source)
        widget.send("transfer-upload s5 \(Self.group) outbox/photo.raw \(server.url("/upload/photo?hold_at=\(10 << 20)"))")
        #expect(widget.readLine()?.hasPrefix("created ") == true, "\(daemon.log())")
        try server.waitHold("photo")
        try host.dismiss(session)
        try eventually("the widget is stopped") { processState(session.pid) == "T" }
        try server.release("photo")
        try eventually("the app is brought up", timeout: 60) { DBusFixtures.records(record).contains("parameter \(Self.group)/s5") }
        let uploads = try server.stats("photo").uploads
        #expect(uploads.count == 1 && uploads.first?.size == 52_428_800 && uploads.first?.sha256 == digest, "\(uploads)")
        let out = try Self.app(daemon, ["claim", Self.group, "s5", "1", "handle"])
        #expect(out.contains("completed 1 201 -") && out.contains("handled 1"), "\(out)")
    }

    @Test func anotherAppsExtensionCannotUseTheSessionNorReadItsFiles() throws {
        let setup = try Self.setUp(tls: false)
        defer { setup.close() }
        let (server, daemon) = (setup.server, setup.daemon)
        let host = try daemon.host()
        let widget = try host.begin(Self.widgetID).hostChannel()
        widget.send("transfer-download s6 \(Self.group) \(server.url("/file/private?size=1000")) secret/file.bin")
        #expect(widget.readLine() == "created 1", "\(daemon.log())")
        try eventually("the download completes", timeout: 30) {
            widget.send("transfer-events")
            return widget.readLine()?.contains("completed 1 200") == true
        }
        let stranger = try host.begin(Self.strangerID).hostChannel()
        stranger.send("transfer-download s6 \(Self.group) \(server.url("/file/x?size=1"))")
        #expect(stranger.readLine() == "refused: '\(Self.group)' is not a group of the app 'com.example.other'")
        stranger.send("transfer-claim s6 \(Self.group)")
        #expect(stranger.readLine() == "refused: '\(Self.group)' is not a group of the app 'com.example.other'")
        stranger.send("transfer-cancel s6 group.com.example.other 1")
        #expect(stranger.readLine() == "refused: no transfer task 1 of the caller's app")
        stranger.send("list-dir \(Self.containerPath(daemon))/secret")
        #expect(stranger.readLine()?.hasPrefix("refused: ") == true, "the other group's container is not in its view")
        // Its own group, with a path out of the container: refused before anything is made.
        stranger.send("transfer-upload s7 group.com.example.other ../\(Self.group)/secret/file.bin \(server.url("/upload/x"))")
        #expect(stranger.readLine()?.contains("has an empty, '.' or '..' component") == true)
        // A link planted in its own container is not followed out of it.
        let own = daemon.directory + "/state/containers/group.com.example.other"
        symlink(Self.containerPath(daemon) + "/secret", own + "/link")
        stranger.send("transfer-upload s7 group.com.example.other link/file.bin \(server.url("/upload/x"))")
        #expect(stranger.readLine()?.hasPrefix("refused: the upload's file 'link/file.bin' cannot be read") == true)
        // The other app's uid sees none of the app's tasks.
        let list = try runProgram(
            "/usr/bin/setpriv", ["--reuid=4242", "--regid=4242", "--clear-groups", BuildProducts.path("extctl"), "transfers", "--socket", daemon.socketPath])
        #expect(list.status != 0 || list.out.contains("0 task(s) listed."), "\(list)")
    }
}

/// The worker alone, against `python3 -m http.server` and servers of the driver's own: every
/// message of its protocol, resume, restart, redirects, uploads, cancel, stalls, refusals,
/// TLS with SSL_CERT_FILE, 64 tasks at once, no idle wakeup, exit when the daemon's socket
/// closes, and a resident set that does not grow with the size
/// (Tests/Fixtures/transfer-worker-check/drive.py).
@Suite struct TransferWorkerTests {
    @Test func theWorkerSpeaksItsProtocolAndHoldsItsLimits() throws {
        let r = try runProgram(
            "/usr/bin/python3",
            [RuntimeC.packageRoot + "/Tests/Fixtures/transfer-worker-check/drive.py", BuildProducts.path("extensiond-transfer"), "check", "--big-mb", "64"])
        #expect(r.status == 0, "\(r.out)\n\(r.err)")
        #expect(r.out.contains("\n0 failure(s)"), "\(r.out)")
    }
}
