import ExtensionHost
import Foundation
import Testing

/// bindings/node: Node.js as a first-class runtime on libExtensionRuntimeC (docs/node.md), with
/// no bridge: scripts/build-node-runtime.sh builds the package (a Node-API addon compiled with
/// the system C compiler and Debian's /usr/include/node), and `/usr/bin/node` runs
/// Tests/Fixtures/node-extension/widget.js as the extension process itself, as a third party
/// writing a widget in JavaScript would: under a root daemon, the widget point's default sandbox
/// and limits, and a uid of its own. scripts/dependencies.sh installs `nodejs`; without it
/// these tests fail.
@Suite("Node.js runtime", .serialized)
struct NodeRuntimeTests {
    static let packageRoot = RuntimeC.packageRoot
    static let id = "org.example.node-widget"
    /// backgroundSeconds 1.0, expiryGraceSeconds 0.5: expire 0.5 s after dismiss, stop at 1.0 s
    /// (AssertionTests' policy).
    static var policy: [String: Any] { ["backgroundSeconds": 1.0, "expiryGraceSeconds": 0.5, "assertionMaxSeconds": 30] }
    static let tolerance = 0.3
    /// The suite's extension uids, away from the default range's first uids: RLIMIT_NPROC
    /// (tasksMax, 64) counts every thread of a uid on the machine, and the first extension of
    /// every other test daemon (a Java runtime has some 60 threads) gets the default's first uid.
    static let uids = (first: 1_879_113_728 + 40_960, count: 64)

    static func node() throws -> String {
        for directory in ["/usr/bin", "/usr/local/bin"] where FileManager.default.isExecutableFile(atPath: directory + "/node") {
            return directory + "/node"
        }
        throw HarnessError("node is not installed: run scripts/dependencies.sh")
    }

    /// The package, built once by scripts/build-node-runtime.sh as `node_modules/extension-runtime`
    /// in a directory every uid can read (`ReachableCopies`: the checkout may sit under a 0700
    /// directory), with the widget fixture and the example beside it: the sandbox shows an
    /// extension its script's directory, and Node finds the package from there. Its path.
    static let directory: Result<String, HarnessError> = Result(catching: {
        _ = try RuntimeC.library()
        let directory = ReachableCopies.directory + "/node-widget"
        mkdir(directory, 0o755)
        let build = try runProgram(
            "/bin/bash", [packageRoot + "/scripts/build-node-runtime.sh", "--out", directory + "/node_modules", "--runtime-c", RuntimeC.directory])
        guard build.status == 0 else { throw HarnessError("scripts/build-node-runtime.sh failed: \(build.out)\(build.err)") }
        for made in [directory, directory + "/node_modules", directory + "/node_modules/extension-runtime"] { chmod(made, 0o755) }
        for (source, name) in [("Tests/Fixtures/node-extension/widget.js", "widget.js"), ("examples/node-extension/widget.js", "example.js")] {
            let contents = try Data(contentsOf: URL(fileURLWithPath: packageRoot + "/" + source))
            try Executables.write(Array(contents), to: directory + "/" + name, mode: 0o644)
        }
        return directory
    }).mapError { ($0 as? HarnessError) ?? HarnessError("\($0)") }

    /// A root daemon running `script` (in `directory`) with node as extension `id`: the widget
    /// point's defaults, a uid of its own, the default sandbox.
    static func daemon(script: String = "widget.js", id: String = id, policy: [String: Any] = policy) throws -> TestDaemon {
        let manifest: [String: Any] = [
            "id": id, "point": "widget", "executable": try node(), "arguments": [try directory.get() + "/" + script], "policy": policy,
        ]
        let daemon = try TestDaemon(
            manifests: ["node.json": manifest], config: ["extensionUIDs": ["first": uids.first, "count": uids.count]], extensionsAsRoot: false)
        try daemon.start()
        return daemon
    }

    static func statusEntry(_ daemon: TestDaemon, _ id: String = id) throws -> [String: Any] {
        let result = try daemon.extctl(["status", "--json", id])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
        return try #require((document["extensions"] as? [[String: Any]])?.first)
    }

    /// (1) A request is answered by node itself (the extension's only process, no bridge), under
    /// its own uid, the default limits and the full sandbox.
    @Test(.enabled(if: getuid() == 0, "needs a root daemon (extensions under their own uids)"))
    func nodeAnswersARequestUnderItsOwnUidAndSandbox() throws {
        let daemon = try Self.daemon()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine(timeout: 30) == "pong \(try CredentialTests.namespacePID(session.pid))", "\(daemon.log())")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(session.pid)/exe") == (try Self.node()))

        let entry = try Self.statusEntry(daemon)
        #expect((entry["processes"] as? [[String: Any]])?.compactMap { $0["pid"] as? Int } == [Int(session.pid)], "node alone")
        let uid = try #require(Int(try CredentialTests.statusField(session.pid, "Uid")))
        #expect(uid >= Self.uids.first && uid < Self.uids.first + Self.uids.count, "a uid of its own: \(uid)")
        let memory = try #require((entry["limits"] as? [String: Any])?["memoryMaxBytes"] as? [String: Any])
        #expect(memory["value"] as? Int == 2_147_483_648, "the widget point's default")
        let sandbox = try #require(entry["sandbox"] as? [String: Any])
        #expect(sandbox["enabled"] as? Bool == true)
        #expect((sandbox["enforced"] as? [String])?.contains("filesystem") == true, "\(sandbox)")

        let container = try #require(entry["container"] as? String)
        channel.send("container")
        #expect(channel.readLine() == "container \(container)")
        channel.send("observe bad..name")
        #expect(channel.readLine()?.hasPrefix("refused: TypeError: bad hint name \"bad..name\"") == true)
        host.close()
        #expect(daemon.stop() == 0)
    }

    /// (2) An assertion taken with performExpiringActivity keeps the process running past the
    /// dismiss; at backgroundSeconds − expiryGraceSeconds the block is called again with
    /// `expired` (the widget answers "expired" and settles its first call's promise, which
    /// releases the assertion); it is then suspended at once.
    @Test(.enabled(if: getuid() == 0, "needs a root daemon (extensions under their own uids)"))
    func anAssertionOutlivesTheDismissExpiresOnTimeThenTheProcessIsSuspended() throws {
        let daemon = try Self.daemon()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("assert 30 node-save")
        #expect(channel.readLine(timeout: 30) == "granted", "\(daemon.log())")
        let acquire = try daemon.events.wait("acquire", of: Self.id)
        #expect(acquire.detail == "node-save")
        try host.dismiss(session)
        let end = try daemon.events.wait("end", of: Self.id)
        #expect(end.state == "active" || end.state == "background")
        #expect(processState(session.pid) != "T", "stopped while holding an assertion")
        // The expired call arrives while the first call's promise is pending.
        #expect(channel.readLine() == "expired")
        #expect(channel.readLine() == "released")
        let expire = try daemon.events.wait("expire", of: Self.id)
        #expect(expire.assertion == acquire.assertion)
        #expect(expire.state == "background")
        let delay = expire.monotonic - end.monotonic
        #expect(abs(delay - 0.5) < Self.tolerance, "expire sent \(delay)s after dismiss, policy says 0.5s")
        let release = try daemon.events.wait("release", of: Self.id)
        #expect(release.assertion == acquire.assertion)
        let stop = try daemon.events.wait("stop-sent", of: Self.id)
        #expect(stop.monotonic >= release.monotonic)
        #expect(stop.monotonic - end.monotonic < 1.0 + Self.tolerance)
        #expect(!daemon.events.all.contains { $0.kind == "assertion-overrun" || $0.kind == "expiry-unacknowledged" })
        try daemon.events.wait("suspend", of: Self.id)
        #expect(processState(session.pid) == "T")
        host.close()
        #expect(daemon.stop() == 0)
    }

    /// (3) Suspended at dismiss with every thread stopped (node's and the runtime's), then
    /// resumed, not relaunched, by the next request: the same pid serves it.
    @Test(.enabled(if: getuid() == 0, "needs a root daemon (extensions under their own uids)"))
    func theNextRequestResumesTheSameProcess() throws {
        let daemon = try Self.daemon()
        let host = try daemon.host()
        let first = try host.begin(Self.id)
        let channel = try first.hostChannel()
        channel.send("ping")
        let pong = try #require(channel.readLine(timeout: 30), "\(daemon.log())")
        #expect(pong == "pong \(try CredentialTests.namespacePID(first.pid))")
        let mark = daemon.events.count
        try host.dismiss(first)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        let states = ManagedRuntimeTests.threadStates(first.pid)
        #expect(states.count > 2 && states.allSatisfy { $0 == "T" }, "every thread is stopped: \(states)")

        let second = try host.begin(Self.id)
        #expect(second.pid == first.pid, "resumed, not relaunched")
        try daemon.events.wait("resume", of: Self.id, after: mark)
        #expect(!ManagedRuntimeTests.threadStates(first.pid).contains("T"), "it runs again")
        let again = try second.hostChannel()
        again.send("ping")
        #expect(again.readLine(timeout: 30) == pong)
        #expect(daemon.events.all.filter { $0.kind == "launch" }.count == 1)
        host.close()
        #expect(daemon.stop() == 0)
    }

    /// Request.complete returns its payload (a string, as UTF-8) to the host.
    @Test(.enabled(if: getuid() == 0, "needs a root daemon (extensions under their own uids)"))
    func completeReturnsThePayloadToTheHost() throws {
        let daemon = try Self.daemon()
        let host = try daemon.host()
        let results = RequestCompletionTests.Results()
        host.onResult { id, result in results.add(id, result) }
        let session = try host.begin(Self.id)
        try session.hostChannel().send("complete la page traduite")
        let (requestID, result) = try #require(results.next(timeout: 30))
        #expect(requestID == session.requestID)
        #expect(result == .completed(Array("la page traduite".utf8)))
        host.close()
        #expect(daemon.stop() == 0)
    }

    /// The example (examples/node-extension) on the built package: it saves into its container
    /// under an assertion.
    @Test(.enabled(if: getuid() == 0, "needs a root daemon (extensions under their own uids)"))
    func theExampleSavesUnderAnAssertion() throws {
        let id = "org.example.node"
        let daemon = try Self.daemon(script: "example.js", id: id)
        let host = try daemon.host()
        let session = try host.begin(id)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine(timeout: 30) == "pong \(try CredentialTests.namespacePID(session.pid))", "\(daemon.log())")
        channel.send("save hello from node")
        #expect(channel.readLine() == "saved")
        let acquire = try daemon.events.wait("acquire", of: id)
        #expect(acquire.detail == "save notes")
        let release = try daemon.events.wait("release", of: id)
        #expect(release.assertion == acquire.assertion)
        let container = try #require(try Self.statusEntry(daemon, id)["container"] as? String)
        #expect(try String(contentsOfFile: container + "/notes.txt", encoding: .utf8) == "hello from node\n")
        host.close()
        #expect(daemon.stop() == 0)
    }

    /// Without extensiond: not supervised, start() throws NotSupervisedError, an activity is
    /// denied (`block(true)` only), bad arguments throw, and the process ends by itself once
    /// nothing is pending; while an activity's block has not settled, the runtime keeps it alive.
    @Test func withoutExtensiondActivitiesAreDeniedAndNothingKeepsTheProcessAlive() throws {
        let modules = try Self.directory.get() + "/node_modules"
        let script = """
            const rt = require('extension-runtime');
            console.log(rt.isSupervised(), 'EXTENSIOND_CHANNEL_FD' in process.env);
            try { rt.start({ onRequest() {} }); } catch (e) { console.log(e.name, e.code); }
            for (const reason of ['', 'x\\0y', 'é'.repeat(512) + 'x']) {
              try { rt.performExpiringActivity(reason, () => {}); } catch (e) { console.log(e.name, e.message); }
            }
            rt.performExpiringActivity('x', (expired) => console.log('block', expired));
            """
        let r = try runProgram(
            "/bin/sh", ["-c", "EXTENSIOND_CHANNEL_FD=3 NODE_PATH=\"$1\" exec timeout 20 \"$0\" -e \"$2\" 3>/dev/null", try Self.node(), modules, script])
        #expect(r.status == 0, "\(r.err)")
        #expect(
            r.out == """
                false false
                NotSupervisedError ENOTCONN
                TypeError performExpiringActivity: the reason must not be empty
                TypeError performExpiringActivity: the reason must not contain NUL
                RangeError performExpiringActivity: the reason is 1025 bytes, over the limit of 1024
                block true

                """)
        // A block whose promise never settles holds its activity open: the process stays.
        let held = try runProgram(
            "/usr/bin/env",
            [
                "NODE_PATH=" + modules, "timeout", "2", try Self.node(), "-e",
                "require('extension-runtime').performExpiringActivity('x', () => new Promise(() => {}))",
            ])
        #expect(held.status == 124, "kept alive until timeout(1) ended it: \(held.err)")
    }

    /// The example says so and exits 1 when not launched by extensiond.
    @Test func withoutExtensiondTheExampleSaysSo() throws {
        let r = try runProgram(
            "/usr/bin/env",
            ["NODE_PATH=" + (try Self.directory.get()) + "/node_modules", try Self.node(), Self.packageRoot + "/examples/node-extension/widget.js"])
        #expect(r.status == 1)
        #expect(r.err == "node-extension: not launched by extensiond\n")
    }
}
