import ExtensionProtocol
import ExtensionTransport
import Foundation
import Testing

/// `monitor` on the wire (docs/protocol.md, "Monitor"): the events of one iteration of the
/// daemon's loop arrive together, in order, in one `events` datagram.
@Suite struct MonitorEventsTests {
    static let id = "org.example.batched"

    /// The `event` of each JSON object of an `events` message.
    static func kinds(_ objects: [[UInt8]]) throws -> [String] {
        try objects.map { bytes in
            let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
            return try #require(object?["event"] as? String, "\(String(decoding: bytes, as: UTF8.self))")
        }
    }

    @Test func theEventsOfOneLoopIterationArriveInOneDatagramInOrder() throws {
        let daemon = try TestDaemon(manifests: ["b.json": TestDaemon.testExtension(Self.id, policy: ["backgroundSeconds": 0, "expiryGraceSeconds": 0])])
        try daemon.start()
        let socket = try PacketSocket.connect(path: daemon.socketPath)
        defer { socket.close() }
        // A test that goes wrong fails on a receive timeout instead of hanging.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        #expect(setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0)
        let channel = MessageChannel(socket: socket)
        try channel.send(.monitor(tag: 1))
        guard case (.ok(1), _) = try channel.receive() else { throw HarnessError("monitor was not answered ok") }

        // A request, then its dismissal: the `end` and the `stop-sent` it causes are recorded
        // while the daemon handles the one `end` message, and the `suspend` when the kernel
        // reports the stop, in a later iteration.
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        if let fd = session.channel { close(fd) }
        try host.dismiss(session)

        var datagrams: [[String]] = []
        while !datagrams.joined().contains("suspend") {
            let (message, descriptor) = try channel.receive()
            if let descriptor { close(descriptor) }
            guard case .events(let objects) = message else {
                Issue.record("a monitor got \(message.kind), not events")
                continue
            }
            datagrams.append(try Self.kinds(objects))
        }
        #expect(datagrams.contains(["end", "stop-sent"]), "\(datagrams)")
        #expect(Array(datagrams.joined()) == ["launch", "ready", "begin", "end", "stop-sent", "suspend"], "every event once, in order: \(datagrams)")
        #expect(daemon.stop() == 0)
    }
}
