import ExtensionHost
import Foundation
import Testing

/// `performExpiringActivity` and the supervisor's assertion semantics, with real processes.
/// Timings come from the daemon's own event timestamps (monotonic clock), with tolerances.
@Suite(.serialized)
struct AssertionTests {
    static let id = "com.example.assert"
    /// backgroundSeconds 1.0, expiryGraceSeconds 0.5: expire 0.5 s after dismiss, stop at 1.0 s.
    static var policy: [String: Any] { ["backgroundSeconds": 1.0, "expiryGraceSeconds": 0.5, "assertionMaxSeconds": 30] }
    static let tolerance = 0.3

    func start(arguments: [String] = [], policy: [String: Any] = AssertionTests.policy) throws -> TestDaemon {
        let daemon = try TestDaemon(manifests: ["a.json": TestDaemon.testExtension(Self.id, arguments: arguments, policy: policy)])
        try daemon.start()
        return daemon
    }

    @Test func grantedRunsWithFalseAndReleasesOnReturn() throws {
        let daemon = try start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("assert 0.2 saving")
        #expect(channel.readLine() == "granted")
        let acquire = try daemon.events.wait("acquire", of: Self.id)
        #expect(acquire.detail == "saving")
        #expect(channel.readLine() == "released")
        let release = try daemon.events.wait("release", of: Self.id)
        #expect(release.assertion == acquire.assertion)
        #expect(release.monotonic - acquire.monotonic >= 0.2)
        let status = try daemon.extctl(["status", "--json", Self.id])
        #expect(status.out.contains("\"assertions\":[]"))
    }

    @Test func dismissWithALiveAssertionWaitsForTheRelease() throws {
        let daemon = try start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("assert 0.3 short")
        #expect(channel.readLine() == "granted")
        try host.dismiss(session)
        let end = try daemon.events.wait("end", of: Self.id)
        #expect(end.state == "active" || end.state == "background")
        #expect(processState(session.pid) != "T", "stopped while holding an assertion")
        #expect(channel.readLine() == "released")
        let release = try daemon.events.wait("release", of: Self.id)
        let stop = try daemon.events.wait("stop-sent", of: Self.id)
        #expect(stop.monotonic - release.monotonic < 0.05, "suspended at once after the last release")
        #expect(!daemon.events.all.contains { $0.kind == "expire" })
        try daemon.events.wait("suspend", of: Self.id)
        #expect(processState(session.pid) == "T")
    }

    @Test func expiryCallsTheBlockAgainConcurrentlyThenStops() throws {
        let daemon = try start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("assert 30 long-save")
        #expect(channel.readLine() == "granted")
        try host.dismiss(session)
        let end = try daemon.events.wait("end", of: Self.id)
        // The second call, with true, arrives while the first is still running: "expired"
        // comes before the first invocation's "released".
        #expect(channel.readLine() == "expired")
        #expect(channel.readLine() == "released")
        let expire = try daemon.events.wait("expire", of: Self.id)
        #expect(expire.state == "background", "an expire shows the state it ends, as docs/json.md says")
        let delay = expire.monotonic - end.monotonic
        #expect(abs(delay - 0.5) < Self.tolerance, "expire sent \(delay)s after dismiss, policy says 0.5s")
        let release = try daemon.events.wait("release", of: Self.id)
        let stop = try daemon.events.wait("stop-sent", of: Self.id)
        #expect(stop.monotonic >= release.monotonic)
        #expect(stop.monotonic - end.monotonic < 1.0 + Self.tolerance)
        #expect(!daemon.events.all.contains { $0.kind == "assertion-overrun" || $0.kind == "expiry-unacknowledged" })
        try daemon.events.wait("suspend", of: Self.id)
    }

    @Test func anExtensionThatIgnoresExpiryIsStoppedAtTheDeadline() throws {
        let daemon = try start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("ignore-expiry")
        #expect(channel.readLine() == "ok")
        channel.send("assert 30 stubborn")
        #expect(channel.readLine() == "granted")
        try host.dismiss(session)
        let end = try daemon.events.wait("end", of: Self.id)
        #expect(channel.readLine() == "expired")
        let expire = try daemon.events.wait("expire", of: Self.id)
        // While expiring, a new assertion is denied at once.
        channel.send("assert 1 late")
        #expect(channel.readLine() == "denied")
        let deny = try daemon.events.wait("deny", of: Self.id)
        #expect(deny.detail?.contains("expiring") == true)
        let overrun = try daemon.events.wait("assertion-overrun", of: Self.id)
        let stop = try daemon.events.wait("stop-sent", of: Self.id)
        #expect(stop.monotonic - expire.monotonic >= 0.5 - 0.01, "stopped less than expiryGraceSeconds after expire")
        #expect(abs(stop.monotonic - end.monotonic - 1.0) < Self.tolerance)
        #expect(overrun.assertion == expire.assertion)
        #expect(!daemon.events.all.contains { $0.kind == "expiry-unacknowledged" }, "the runtime read the expire")
        try daemon.events.wait("suspend", of: Self.id)
        #expect(processState(session.pid) == "T")
        let status = try daemon.extctl(["status", "--json", Self.id])
        #expect(status.out.contains("\"assertionOverruns\":1"))
    }

    @Test func anExpireNobodyReadIsRecordedAsUnacknowledged() throws {
        let daemon = try start(arguments: ["--deaf"])
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        try daemon.events.wait("acquire", of: Self.id)
        try host.dismiss(session)
        let expire = try daemon.events.wait("expire", of: Self.id)
        let unacknowledged = try daemon.events.wait("expiry-unacknowledged", of: Self.id)
        let stop = try daemon.events.wait("stop-sent", of: Self.id)
        #expect(unacknowledged.assertion == expire.assertion)
        #expect(stop.monotonic - expire.monotonic >= 0.5 - 0.01)
        try daemon.events.wait("suspend", of: Self.id)
    }

    @Test func aNewRequestCancelsThePendingSuspension() throws {
        let daemon = try start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("assert 2 work")
        #expect(channel.readLine() == "granted")
        try host.dismiss(session)
        try daemon.events.wait("end", of: Self.id)
        let again = try host.begin(Self.id)
        #expect(again.pid == session.pid)
        #expect(channel.readLine(timeout: 5) == "released")
        try daemon.events.wait("release", of: Self.id)
        #expect(!daemon.events.all.contains { $0.kind == "stop-sent" || $0.kind == "expire" })
        #expect(processState(session.pid) != "T")
    }

    @Test func leakGuardExpiresAnAssertionHeldTooLongDuringARequest() throws {
        let daemon = try start(policy: ["backgroundSeconds": 1.0, "expiryGraceSeconds": 0.3, "assertionMaxSeconds": 0.8])
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("ignore-expiry")
        _ = channel.readLine()
        channel.send("assert 30 leaky")
        #expect(channel.readLine() == "granted")
        let acquire = try daemon.events.wait("acquire", of: Self.id)
        #expect(channel.readLine() == "expired")
        let expire = try daemon.events.wait("expire", of: Self.id)
        let overrun = try daemon.events.wait("assertion-overrun", of: Self.id)
        #expect(abs(expire.monotonic - acquire.monotonic - 0.5) < Self.tolerance)
        #expect(abs(overrun.monotonic - acquire.monotonic - 0.8) < Self.tolerance)
        #expect(expire.state == "active", "an open request keeps the extension active")
        #expect(processState(session.pid) != "T")
    }

    @Test func structuredConcurrencyVariantIsCancelledOnExpiry() throws {
        let daemon = try start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("async-assert 0.1")
        #expect(channel.readLine() == "completed")
        try daemon.events.wait("release", of: Self.id)
        channel.send("async-assert 30")
        let acquire = try daemon.events.wait(timeout: 10, "second acquire") { $0.kind == "acquire" && $0.assertion != nil && $0.assertion! > 1 }
        try host.dismiss(session)
        #expect(channel.readLine() == "expired")
        let release = try daemon.events.wait(timeout: 10, "second release") { $0.kind == "release" && $0.assertion == acquire.assertion }
        let stop = try daemon.events.wait("stop-sent", of: Self.id)
        #expect(stop.monotonic >= release.monotonic)
    }

    @Test func withoutASupervisorTheBlockGetsTrueAtOnce() throws {
        let result = try runProgram(BuildProducts.path("test-extension"), ["--standalone-assert"])
        #expect(result.status == 0)
        #expect(result.out == "expired=true\n")
    }

    /// EXTENSIOND_CHANNEL_FD naming a regular file or a closed descriptor (a variable inherited
    /// without its channel) leaves the process unsupervised, and the variable is removed.
    @Test func aVariableWithoutItsChannelLeavesTheProcessUnsupervised() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let program = BuildProducts.path("test-extension")
        let toFile = try runProgram("/bin/sh", ["-c", "EXTENSIOND_CHANNEL_FD=3 exec \"$0\" --is-supervised 3>\"$1\"", program, directory + "/fd3"])
        #expect(toFile.out == "supervised=false variable=unset\n")
        let closed = try runProgram("/bin/sh", ["-c", "EXTENSIOND_CHANNEL_FD=3 exec \"$0\" --is-supervised 3>&-", program])
        #expect(closed.out == "supervised=false variable=unset\n")
    }

    @Test func anEmptyReasonIsAProgrammingError() throws {
        let result = try runProgram(BuildProducts.path("test-extension"), ["--empty-reason"])
        #expect(result.status != 0)
        #expect(result.err.contains("the reason must not be empty"))
    }

    /// A reason over `WireLimits.maxReason` bytes could never be sent: a programming error too,
    /// not an activity silently denied.
    @Test func aReasonOverTheLimitIsAProgrammingError() throws {
        let result = try runProgram(BuildProducts.path("test-extension"), ["--long-reason"])
        #expect(result.status != 0)
        #expect(result.out == "")
        #expect(result.err.contains("performExpiringActivity(withReason:using:): the reason is 1025 bytes, over the limit of 1024"), "\(result.err)")
    }
}
