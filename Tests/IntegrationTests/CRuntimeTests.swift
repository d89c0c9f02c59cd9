import ExtensionHost
import ExtensionProtocol
import Foundation
import Testing

/// libExtensionRuntimeC itself: what a running C extension maps and costs, what the library
/// exports, its calls without extensiond, and its wire codec against the Swift reference.
@Suite(.serialized)
struct CRuntimeTests {
    static let packageRoot = RuntimeC.packageRoot

    /// Compiles the C files `sources` (package-relative) with `arguments` into `directory`.
    func compile(_ sources: [String], _ arguments: [String], into directory: String, named name: String) throws -> String {
        let binary = directory + "/" + name
        let cc = try runProgram(
            "/usr/bin/env", ["cc", "-Wall", "-Werror"] + sources.map { Self.packageRoot + "/" + $0 } + arguments + ["-lpthread", "-o", binary])
        try #require(cc.status == 0, "cc failed: \(cc.err)")
        return binary
    }

    /// `/proc/PID/status` field `name` (its first number).
    func statusField(_ pid: Int32, _ name: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix(name + ":") })
        return try #require(Int(line.split(whereSeparator: \.isWhitespace)[1]))
    }

    /// The lean runtime: no Foundation, ICU or Swift runtime mapped; a resident set of at most
    /// 4 MB and at most two threads (the extension's main thread and the runtime's reader),
    /// once prewarmed and suspended, and again after serving a request.
    @Test func aRunningCExtensionMapsNoSwiftRuntimeAndStaysSmall() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let binary = try compile(["examples/c-extension/main.c"], try RuntimeC.flags(), into: directory, named: "c-extension")
        let daemon = try TestDaemon(manifests: ["c.json": ["id": "org.example.c", "executable": binary]])
        try daemon.start()
        let host = try daemon.host()
        try host.prewarm(["org.example.c"])
        let launch = try daemon.events.wait("launch", of: "org.example.c")
        try daemon.events.wait("suspend", of: "org.example.c")
        let pid = try #require(launch.pid.map(Int32.init))

        func check(_ moment: String) throws {
            let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
            #expect(maps.contains("libExtensionRuntimeC.so"), "\(moment): the runtime is mapped")
            for library in ["libFoundation", "libicu", "libswiftCore", "libdispatch"] {
                #expect(!maps.contains(library), "\(moment): \(library) is mapped")
            }
            let rss = try statusField(pid, "VmRSS")
            #expect(rss <= 4096, "\(moment): resident set \(rss) kB")
            print("c extension, \(moment): VmRSS \(rss) kB, threads \(try statusField(pid, "Threads"))")
        }
        try check("prewarmed")
        #expect(try statusField(pid, "Threads") <= 2, "main thread and the runtime's reader")

        let session = try host.begin("org.example.c")
        #expect(session.pid == pid)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(pid)")
        try check("serving a request")
    }

    /// The library exports exactly the functions the header declares, under one version node.
    @Test func theLibraryExportsExactlyTheHeadersFunctions() throws {
        let header = try String(contentsOfFile: Self.packageRoot + "/include/extension_runtime.h", encoding: .utf8)
        let declared = Set(
            header.split(separator: "\n").compactMap { line -> String? in
                guard !line.hasPrefix(" "), !line.hasPrefix("typedef"), let open = line.firstIndex(of: "(") else { return nil }
                let before = line[..<open].split(whereSeparator: { $0 == " " || $0 == "*" })
                guard let name = before.last, name.hasPrefix("ext_") else { return nil }
                return String(name)
            })
        #expect(
            declared.contains("ext_shared_container_path") && declared.contains("ext_container_path") && declared.contains("ext_open_url")
                && declared.contains("ext_secret_copy") && declared.contains("ext_transfer_create") && declared.count == 40, "\(declared.sorted())")
        let nm = try runProgram("/usr/bin/env", ["nm", "-D", "--defined-only", try RuntimeC.library()])
        try #require(nm.status == 0, "\(nm.err)")
        let exported = Set(
            nm.out.split(separator: "\n").compactMap { line -> String? in
                let words = line.split(separator: " ")
                guard words.count == 3, words[1] == "T" else { return nil }
                return String(words[2].split(separator: "@").first!)
            })
        #expect(exported == declared)
        let soname = try runProgram("/usr/bin/env", ["readelf", "-d", try RuntimeC.library()])
        #expect(soname.out.contains("[libExtensionRuntimeC.so.0]"))
        #expect(!soname.out.contains("swift") && !soname.out.contains("Foundation"), "\(soname.out)")
    }

    /// What the probe's `unsupervised` prints: every call without extensiond, as the header
    /// documents it (a denied activity gets `block(true)` once, then its cleanup).
    static let unsupervisedAnswers = """
        supervised 0
        start-null 1
        start 1
        activity-null-reason 1
        activity-empty-reason 1
        activity-null-block 1
        activity 0
        denied calls 1 expired 1 cleanups 1
        activity-long-reason 1
        activity-invalid-utf8-reason 1
        observe-bad-name 1
        observe 1
        on-refresh-null 1
        on-refresh 1
        refresh-complete-bad 1
        refresh-complete 1
        complete-null 1
        complete-too-large 1
        complete 1
        cancel-null 1
        cancel 1
        channel-variable unset

        """

    /// Every call without extensiond answers as `unsupervisedAnswers` says.
    @Test func withoutExtensiondEveryCallAnswersAsDocumented() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let probe = try compile(["Tests/Fixtures/c-runtime-probe/main.c"], try RuntimeC.flags(), into: directory, named: "probe")
        let r = try runProgram(probe, ["unsupervised"])
        #expect(r.status == 0)
        #expect(r.out == Self.unsupervisedAnswers)
    }

    /// $EXTENSIOND_CHANNEL_FD naming a regular file, a closed descriptor or a stream socket (a
    /// variable inherited without its channel) leaves the process unsupervised: every call
    /// answers as without extensiond, nothing is written to the descriptor, and the variable
    /// is removed.
    @Test func aVariableWithoutItsChannelLeavesTheProcessUnsupervised() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let probe = try compile(["Tests/Fixtures/c-runtime-probe/main.c"], try RuntimeC.flags(), into: directory, named: "probe")
        let file = directory + "/fd3"
        let toFile = try runProgram("/bin/sh", ["-c", "EXTENSIOND_CHANNEL_FD=3 exec \"$0\" unsupervised 3>\"$1\"", probe, file])
        #expect(toFile.out == Self.unsupervisedAnswers)
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int == 0, "nothing was written to the file")
        let closed = try runProgram("/bin/sh", ["-c", "EXTENSIOND_CHANNEL_FD=3 exec \"$0\" unsupervised 3>&-", probe])
        #expect(closed.out == Self.unsupervisedAnswers)
        let stream = try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                """
                import os, socket, subprocess, sys
                ours, theirs = socket.socketpair()
                fd = theirs.fileno()
                # The timeout bounds a probe that took the socket for its channel: its activity
                # would wait for an answer forever.
                r = subprocess.run([sys.argv[1], "unsupervised"], pass_fds=(fd,), env=dict(os.environ, EXTENSIOND_CHANNEL_FD=str(fd)),
                                   capture_output=True, text=True, timeout=30)
                theirs.close()
                sys.stdout.write(r.stdout + "received %d\\n" % len(ours.recv(100)))
                """,
                probe,
            ])
        #expect(stream.status == 0, "\(stream.err)")
        #expect(stream.out == Self.unsupervisedAnswers + "received 0\n")
    }

    /// The probe (`serve`) as extension `CRuntimeTests.probeID` under a started daemon, in the
    /// app `CRuntimeTests.appID` (group `CRuntimeTests.group`).
    func probeDaemon(in directory: String) throws -> TestDaemon {
        let probe = try compile(["Tests/Fixtures/c-runtime-probe/main.c"], try RuntimeC.flags(), into: directory, named: "probe")
        let daemon = try TestDaemon(manifests: [
            "probe.json": ["id": Self.probeID, "executable": probe, "arguments": ["serve"], "app": Self.appID],
            "app.json": ["kind": "app", "id": Self.appID, "groups": [Self.group], "dbusActivatable": true],
        ])
        try daemon.start()
        return daemon
    }

    static let probeID = "org.example.c-probe"
    static let appID = "org.example.c-app"
    static let group = "group.org.example.c-app"

    /// ext_defaults_* against the daemon: a suite of the app opens, the app's write is read and
    /// announced, the extension's write is seen by the app; a group no app declares is -ENOENT.
    /// ext_open_url answers through its callback (false here: no app declares the scheme).
    @Test func sharedDefaultsAndOpenURLWorkThroughTheDaemon() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try probeDaemon(in: directory)
        let host = try daemon.host()
        let app = try host.defaults(suiteName: Self.group)  // the tests run as root: an administrator
        let channel = try host.begin(Self.probeID).hostChannel()
        channel.send("defaults-open \(Self.group)")
        #expect(channel.readLine() == "open 0", "\(daemon.log())")
        try app.set(.string("dark"), forKey: "theme")
        #expect(channel.readLine() == "changed \(Self.group)")
        channel.send("defaults-get theme")
        #expect(channel.readLine() == "value dark")
        channel.send("defaults-get missing")
        #expect(channel.readLine() == "value ENOENT")
        channel.send("defaults-set theme light")
        #expect(channel.readLine() == "set 0")
        #expect(app["theme"] == .string("light"))
        channel.send("defaults-open group.org.example.none")
        #expect(channel.readLine() == "open ENOENT")
        channel.send("open-url nothing-declares-this://x")
        #expect(channel.readLine() == "opened false")
        channel.send("secret-add api.example.com alice c-token")
        #expect(channel.readLine() == "add 0")
        channel.send("secret-add api.example.com alice again")
        #expect(channel.readLine() == "add EEXIST")
        channel.send("secret-copy api.example.com alice")
        #expect(channel.readLine() == "found c-token in \(Self.group)")
        channel.send("secret-copy api.example.com nobody")
        #expect(channel.readLine() == "copy ENOENT")
        #expect(daemon.log().contains("did not open a nothing-declares-this: URL for \(Self.probeID): no app declares the scheme"), "\(daemon.log())")
    }

    /// The mapping reader and value decoder alone (torn reads, forged offsets, a concurrent
    /// writer), the library's round trips against a fake daemon, and the Python codec:
    /// Tests/Fixtures/c-defaults-check/run.sh.
    @Test func theDefaultsReaderHoldsAgainstTornAndForgedSuites() throws {
        let r = try runProgram("/bin/bash", [Self.packageRoot + "/Tests/Fixtures/c-defaults-check/run.sh"])
        #expect(r.status == 0, "\(r.out)\n\(r.err)")
        #expect(r.out.contains("all passed"), "\(r.out)")
    }

    /// The secrets API against a fake daemon: every message byte for byte, every answer code,
    /// the buffers cleared, and the Python module: Tests/Fixtures/c-secrets-check/run.sh.
    @Test func theSecretsAPISpeaksTheProtocolAndClearsItsBuffers() throws {
        let r = try runProgram("/bin/bash", [Self.packageRoot + "/Tests/Fixtures/c-secrets-check/run.sh"])
        #expect(r.status == 0, "\(r.out)\n\(r.err)")
    }

    /// The transfers API against a fake daemon: every message byte for byte, each answer's errno,
    /// events in order, the automatic transferHandled, duplicates skipped, and the Python module:
    /// Tests/Fixtures/c-transfers-check/run.sh.
    @Test func theTransfersAPISpeaksTheProtocolAndAcknowledgesWhatItHandled() throws {
        let r = try runProgram("/bin/bash", [Self.packageRoot + "/Tests/Fixtures/c-transfers-check/run.sh"])
        #expect(r.status == 0, "\(r.out)\n\(r.err)")
        #expect(r.out.contains("all passed"), "\(r.out)")
    }

    /// A reason of EXT_ACTIVITY_MAX_REASON bytes reaches extensiond; one byte more is refused with
    /// -EMSGSIZE, the block is not called and nothing is sent (no `deny`).
    @Test func aReasonOverTheLimitIsRefusedNotDenied() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try probeDaemon(in: directory)
        let host = try daemon.host()
        let session = try host.begin(Self.probeID)
        let channel = try session.hostChannel()
        channel.send("reason 1025")
        #expect(channel.readLine() == "refused EMSGSIZE")
        channel.send("reason 1024")
        #expect(channel.readLine() == "granted")
        let acquire = try daemon.events.wait("acquire", of: Self.probeID)
        #expect(acquire.detail == String(repeating: "r", count: 1024))
        try daemon.events.wait("release", of: Self.probeID)
        #expect(!daemon.events.all.contains { $0.kind == "deny" || ($0.kind == "acquire" && $0.assertion != acquire.assertion) })
    }

    /// ext_runtime_start runs once: a second call returns -EALREADY, and one with a NULL handler
    /// -EINVAL; nothing is sent and the first handler keeps serving requests.
    @Test func theRuntimeStartsOnce() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try probeDaemon(in: directory)
        let host = try daemon.host()
        let first = try host.begin(Self.probeID).hostChannel()
        first.send("start-again")
        #expect(first.readLine() == "again EALREADY, null EINVAL")
        let second = try host.begin(Self.probeID).hostChannel()
        second.send("ping")
        #expect(second.readLine() == "pong")
    }

    /// ext_observe refuses a new name beyond EXT_OBSERVE_MAX_NAMES with -ENOSPC (extensiond would
    /// ignore it); the names observed before are delivered, the refused one is not.
    @Test func theNameAfterTheMostObservedIsRefused() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try probeDaemon(in: directory)
        let host = try daemon.host()
        let channel = try host.begin(Self.probeID).hostChannel()
        let prefix = Self.probeID + ".hint"
        try expectTheNameAfterTheMostObservedIsRefused(
            host: host, channel: channel, prefix: prefix, refusal: "observed 256, then refused ENOSPC", sync: "reason 4", synced: ["granted"])
    }

    /// ext_shared_container_path reads EXTENSION_SHARED_CONTAINER_<NAME>: the group upper-cased,
    /// every byte other than a letter or digit as `_`; NULL when unset or empty (as
    /// ext_container_path and ExtensionContext.sharedContainerURL).
    @Test func theSharedContainerPathComesFromTheEnvironment() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let probe = try compile(["Tests/Fixtures/c-runtime-probe/main.c"], try RuntimeC.flags(), into: directory, named: "probe")
        let set = try runProgram(
            "/usr/bin/env", ["EXTENSION_SHARED_CONTAINER_GROUP_COM_EXAMPLE_NOTES_2=/srv/shared", probe, "container", "group.com.example-notes/2"])
        #expect(set.out == "/srv/shared\n")
        let unset = try runProgram("/usr/bin/env", ["-u", "EXTENSION_SHARED_CONTAINER_GROUP_COM_EXAMPLE", probe, "container", "group.com.example"])
        #expect(unset.out == "(none)\n")
        let empty = try runProgram("/usr/bin/env", ["EXTENSION_SHARED_CONTAINER_GROUP_COM_EXAMPLE=", probe, "container", "group.com.example"])
        #expect(empty.out == "(none)\n")
    }

    /// The C codec against the Swift reference: every runtime-channel message the Swift encoder
    /// makes (boundary lengths, multibyte UTF-8), the fuzzing corpus, and seeded mutations of
    /// them. The C decoder accepts exactly the runtime-channel datagrams the Swift decoder
    /// accepts, and the C encoder gives back the same bytes.
    @Test func theCCodecAgreesWithTheSwiftReference() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let filter = try compile(
            ["Tests/Fixtures/c-wire/main.c", "runtime-c/wire.c"], ["-I", Self.packageRoot + "/runtime-c"], into: directory, named: "c-wire")

        let text = "é€𝄞 ok"
        func sized(_ n: Int) -> String { String(repeating: "a", count: n) }
        var messages: [Message] = [
            .ready, .acquire(tag: 1, reason: "save"), .acquire(tag: .max, reason: sized(WireLimits.maxReason)),
            .acquire(tag: 7, reason: text), .release(assertionID: 0), .release(assertionID: .max),
            .expireReceived(assertionID: 42), .complete(requestID: 3, payload: []),
            .complete(requestID: 3, payload: Array(repeating: 0xFF, count: WireLimits.maxPayload)),
            .cancel(requestID: 9, reason: ""), .cancel(requestID: 9, reason: sized(WireLimits.maxText)), .cancel(requestID: 1, reason: text),
            .observe(name: "com.example.hint"), .observe(name: sized(WireLimits.maxIdentifier)),
            .deliver(requestID: 5), .ended(requestID: 6), .granted(tag: 2, assertionID: 1 << 40),
            .denied(tag: 3, reason: "expiring"), .denied(tag: 3, reason: text), .expire(assertionID: 8),
            .notify(name: "a"), .refresh(refreshID: 11),
            .openURL(tag: 4, url: "stocks://item/42"), .openURL(tag: 4, url: "x:" + sized(WireLimits.maxURL - 2)),
            .suiteOpen(tag: 5, suite: "group.com.example"), .suiteWrite(tag: 6, suite: "group.com.example", key: "k", value: [1, 1]),
            .suiteWrite(tag: 6, suite: "group.com.example", key: text, value: nil),
            .answer(tag: 7, failure: nil, text: ""), .answer(tag: 7, failure: .limitReached, text: text), .suiteChanged(suite: "group.com.example"),
            .transferCreate(
                tag: 8, request: TransferRequest(session: text, group: "group.com.example", method: .download, url: "https://h/" + sized(40), path: "")),
            .transferCreate(
                tag: 8,
                request: TransferRequest(
                    session: "s", group: "g", method: .uploadPost, url: "http://h/" + sized(WireLimits.maxTransferURL - 9),
                    path: sized(WireLimits.maxTransferPath), discretionary: true)),
            .transferCancel(tag: 9, task: .max), .transferClaim(tag: 10, session: "s", group: text),
            .transferHandled(tag: 11, session: "s", group: "g", through: 1 << 50), .transferCreated(tag: 8, task: 3),
            .transferEvents(
                session: "s", group: "g",
                events: [
                    TransferEvent(sequence: 0, task: 1, kind: .progress, bytes: 5, total: -1),
                    TransferEvent(sequence: 9, task: 1, kind: .completed, bytes: 5, total: 5, status: 200, path: "/c/" + text),
                    TransferEvent(sequence: 10, task: 2, kind: .failed, bytes: 0, total: .max, domain: "curl", code: -7, text: text),
                ]),
        ]
        for answer in [RefreshAnswer.newData, .noData, .failed, .unsupported] { messages.append(.refreshDone(refreshID: 4, answer: answer)) }
        var datagrams = try messages.map { try WireEncoder.encoded($0) }
        for folder in ["Fuzz/corpus", "Fuzz/crashes"] {
            let path = Self.packageRoot + "/" + folder
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                if let data = FileManager.default.contents(atPath: path + "/" + name) { datagrams.append(Array(data)) }
            }
        }
        // Seeded mutations: a byte changed, the datagram cut or extended, a length field broken.
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            seed &+= 0x9E37_79B9_7F4A_7C15
            var z = seed
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let originals = try messages.map { try WireEncoder.encoded($0) }.filter { $0.count < 2000 }
        for _ in 0..<4000 {
            var d = originals[Int(next() % UInt64(originals.count))]
            switch next() % 5 {
            case 0: d[Int(next() % UInt64(d.count))] = UInt8(truncatingIfNeeded: next())
            case 1: d.removeLast(Int(next() % UInt64(d.count)))
            case 2: d.append(UInt8(truncatingIfNeeded: next())); d[4] &+= 1
            case 3: if d.count > 10 { d[8 + Int(next() % 2)] = UInt8(truncatingIfNeeded: next()) }
            default: if d.count > 14 { d[d.count - 1 - Int(next() % 4)] = [0xC0, 0xED, 0xFF, 0x80][Int(next() % 4)] }
            }
            datagrams.append(d)
        }

        let input = datagrams.map { $0.map { String(format: "%02x", $0) }.joined() }.joined(separator: "\n") + "\n"
        try input.write(toFile: directory + "/in.txt", atomically: true, encoding: .utf8)
        let r = try runProgram("/bin/sh", ["-c", "\"$0\" < \"$1\"", filter, directory + "/in.txt"])
        try #require(r.status == 0, "\(r.err)")
        let answers = r.out.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        try #require(answers.count == datagrams.count)
        var accepted = 0, refused = 0
        for (datagram, answer) in zip(datagrams, answers) {
            let hex = datagram.map { String(format: "%02x", $0) }.joined()
            let runtimeKind = datagram.count > 1 && ((64...82).contains(datagram[1]) || (96...107).contains(datagram[1]))
            if runtimeKind, (try? WireDecoder.decode(datagram)) != nil {
                #expect(answer == hex, "C codec on \(hex)")
                accepted += 1
            } else {
                #expect(answer == "refused", "C accepts \(hex), which the Swift decoder refuses or is not a runtime message")
                refused += 1
            }
        }
        #expect(accepted >= messages.count && refused > 1000, "accepted \(accepted), refused \(refused)")
    }
}
