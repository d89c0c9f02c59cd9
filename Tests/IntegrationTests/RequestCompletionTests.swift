import Dispatch
import ExtensionHost
import ExtensionProtocol
import Foundation
import Synchronization
import Testing

/// Requests the extension ends itself (`complete(returning:)`, `cancel(reason:)`), with a real
/// daemon, a real extension process and a host on the control socket.
@Suite(.serialized)
struct RequestCompletionTests {
    static let id = "com.example.share"

    /// The results a host receives, and a way to wait for one.
    final class Results: Sendable {
        private let received = Mutex<[(UInt64, RequestResult)]>([])
        private let signal = DispatchSemaphore(value: 0)
        func add(_ requestID: UInt64, _ result: RequestResult) {
            received.withLock { $0.append((requestID, result)) }
            signal.signal()
        }
        func next(timeout: Double = 10) -> (UInt64, RequestResult)? {
            guard signal.wait(timeout: .now() + timeout) == .success else { return nil }
            return received.withLock { $0.first }
        }
    }

    @Test func theHostGetsTheReturnedBytesAndTheExtensionIsSuspendedRightAfter() throws {
        let daemon = try TestDaemon(manifests: ["share.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let results = Results()
        host.onResult { id, result in results.add(id, result) }
        let session = try host.begin(Self.id)
        let mark = daemon.events.count
        try session.hostChannel().send("complete la page traduite")
        let (requestID, result) = try #require(results.next())
        #expect(requestID == session.requestID)
        #expect(result == .completed(Array("la page traduite".utf8)))
        // No other request and no assertion: suspended at once, without a dismiss.
        let end = try daemon.events.wait("end", of: Self.id, after: mark)
        #expect(end.detail == "completed by the extension (16 bytes returned)")
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        #expect(processState(session.pid) == "T")
        // A later dismiss is harmless.
        try host.dismiss(session)
        #expect(host.client.unmatchedReplies == 0)
    }

    @Test func aCancelledRequestTellsTheHostWhy() throws {
        let daemon = try TestDaemon(manifests: ["share.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let results = Results()
        host.onResult { id, result in results.add(id, result) }
        let session = try host.begin(Self.id)
        let mark = daemon.events.count
        try session.hostChannel().send("cancel the user closed the sheet")
        let (_, result) = try #require(results.next())
        #expect(result == .cancelled("the user closed the sheet"))
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        #expect(processState(session.pid) == "T")
    }

    @Test func anotherOpenRequestKeepsTheExtensionActive() throws {
        let daemon = try TestDaemon(manifests: ["share.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let results = Results()
        host.onResult { id, result in results.add(id, result) }
        let first = try host.begin(Self.id)
        let second = try host.begin(Self.id)
        let mark = daemon.events.count
        try first.hostChannel().send("complete one")
        #expect(try #require(results.next()).0 == first.requestID)
        try daemon.events.wait("end", of: Self.id, after: mark)
        let channel = try second.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(second.pid)", "still active for the other request")
        #expect(!daemon.events.all.dropFirst(mark).contains { $0.kind == "suspend" })
        try host.dismiss(second)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
    }

    @Test func aResultOverTheLimitIsRefusedAndTheRequestStaysOpen() throws {
        let daemon = try TestDaemon(manifests: ["share.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("complete-bytes \(WireLimits.maxPayload + 1)")
        #expect(channel.readLine() == "refused: the result is 60001 bytes, over the limit of 60000")
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)")
        let status = try daemon.extctl(["status", "--json", Self.id])
        #expect(status.out.contains("\"state\":\"active\""), "\(status.out)")
    }

    /// `extctl open ID` with `line` on its stdin, which stays open: only the extension's result
    /// ends it. Waits for it to exit.
    func open(_ daemon: TestDaemon, sending line: String) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: BuildProducts.path("extctl"))
        p.arguments = ["open", "--socket", daemon.socketPath, Self.id]
        let input = Pipe(), output = Pipe(), errors = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = errors
        let exited = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in exited.signal() }
        try p.run()
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
        let finished = exited.wait(timeout: .now() + 20) == .success
        if !finished { p.terminate() }
        try input.fileHandleForWriting.close()
        #expect(finished, "extctl open ended when the extension ended the request, with its stdin still open")
        p.waitUntilExit()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (p.terminationStatus, out, err)
    }

    @Test func extctlOpenPrintsTheResultOrTheReason() throws {
        let daemon = try TestDaemon(manifests: ["share.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let completed = try open(daemon, sending: "complete hello from the extension")
        #expect(completed.status == 0, "\(completed.err)")
        let lines = completed.out.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first.flatMap { Int32($0) } != nil, "the pid first: \(completed.out)")
        #expect(completed.out.hasSuffix("\nhello from the extension"), "\(completed.out)")

        let cancelled = try open(daemon, sending: "cancel nothing to share")
        #expect(cancelled.status == 1)
        #expect(cancelled.err == "extctl: request cancelled by the extension: nothing to share\n")
    }
}
