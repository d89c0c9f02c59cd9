import CBenchShims
import ExtensionHost
import ExtensionProtocol
import ExtensionTransport
import Foundation
import Synchronization

/// One lifecycle event streamed by `monitor`: only the fields the bench needs.
struct DaemonEvent: Sendable {
    var kind: String
    var id: String
    /// The daemon's CLOCK_MONOTONIC timestamp, in seconds.
    var monotonic: Double
    var assertion: Int?
    var pid: Int?
    /// When the bench received it (its CLOCK_MONOTONIC): an upper bound for the daemon's own time.
    var received: Double
}

/// Extracts `"key":value` from the daemon's compact, key-sorted event JSON without a JSON
/// parser (the bench shares two cores with the daemon: it must stay cheap).
func jsonField(_ bytes: [UInt8], _ key: String) -> String? {
    let pattern = Array("\"\(key)\":".utf8)
    guard bytes.count > pattern.count else { return nil }
    var i = 0
    outer: while i + pattern.count <= bytes.count {
        for j in 0..<pattern.count where bytes[i + j] != pattern[j] {
            i += 1
            continue outer
        }
        var k = i + pattern.count
        if k < bytes.count && bytes[k] == UInt8(ascii: "\"") {
            k += 1
            var end = k
            while end < bytes.count && bytes[end] != UInt8(ascii: "\"") {
                if bytes[end] == UInt8(ascii: "\\") { end += 1 }
                end += 1
            }
            return String(decoding: bytes[k..<min(end, bytes.count)], as: UTF8.self)
        }
        var end = k
        while end < bytes.count && bytes[end] != UInt8(ascii: ",") && bytes[end] != UInt8(ascii: "}") { end += 1 }
        return String(decoding: bytes[k..<end], as: UTF8.self)
    }
    return nil
}

/// Every event a monitor connection received, with waiting by condition (no polling). The
/// reader thread wakes a waiter only for an event of the kind it waits for, and a waiter scans
/// the events under the lock without copying them: the bench shares two cores with the daemon
/// and the extensions it measures, so a burst of 3,000 events must not cost it a wake-up and a
/// copy of the whole list each.
final class EventStore: Sendable {
    private struct State {
        var events: [DaemonEvent] = []
        /// A waiter is blocked on `arrived`, for events of this kind (nil: any kind).
        var waiting = false
        var wanted: String?
    }
    private let state = Mutex<State>(State())
    private let arrived = DispatchSemaphore(value: 0)

    func append(_ bytes: [UInt8]) {
        let received = now()
        guard let kind = jsonField(bytes, "event"), let id = jsonField(bytes, "id"),
              let mono = jsonField(bytes, "monotonic").flatMap(Double.init) else { return }
        let e = DaemonEvent(
            kind: kind, id: id, monotonic: mono, assertion: jsonField(bytes, "assertion").flatMap(Int.init),
            pid: jsonField(bytes, "pid").flatMap(Int.init), received: received)
        let wake = state.withLock { s -> Bool in
            s.events.append(e)
            guard s.waiting, s.wanted == nil || s.wanted == kind else { return false }
            s.waiting = false
            return true
        }
        if wake { arrived.signal() }
    }

    var count: Int { state.withLock { $0.events.count } }

    func since(_ mark: Int) -> [DaemonEvent] { state.withLock { Array($0.events.dropFirst(mark)) } }

    /// Waits until `enough` holds for the events after `mark`; returns them. `enough` runs
    /// under the lock, after each arrival of an event of `kind` (of any kind when nil).
    @discardableResult
    func wait(_ what: String, kind: String? = nil, after mark: Int, timeout: Double, _ enough: (ArraySlice<DaemonEvent>) -> Bool) throws -> [DaemonEvent] {
        let deadline = now() + timeout
        func check(arming: Bool) -> [DaemonEvent]? {
            state.withLock { s in
                let seen = s.events[min(mark, s.events.count)...]
                if enough(seen) { return Array(seen) }
                if arming {
                    s.waiting = true
                    s.wanted = kind
                }
                return nil
            }
        }
        while true {
            if let seen = check(arming: true) { return seen }
            let left = deadline - now()
            if left <= 0 || arrived.wait(timeout: .now() + left) == .timedOut {
                if let seen = check(arming: false) { return seen }
                let tail = since(mark).suffix(20).map { "\($0.monotonic) \($0.id) \($0.kind)" }.joined(separator: "\n  ")
                throw BenchError("timed out after \(timeout)s waiting for \(what); last events:\n  \(tail)")
            }
        }
    }

    /// Waits for `count` events of `kind` among `ids` after `mark`.
    @discardableResult
    func wait(for kind: String, of ids: Set<String>, count: Int? = nil, after mark: Int, timeout: Double) throws -> [DaemonEvent] {
        let need = count ?? ids.count
        var scanned = 0
        var matched: [DaemonEvent] = []
        _ = try wait("\(need) '\(kind)' events", kind: kind, after: mark, timeout: timeout) { seen in
            for e in seen.dropFirst(scanned) where e.kind == kind && ids.contains(e.id) { matched.append(e) }
            scanned = seen.count
            return matched.count >= need
        }
        return matched
    }
}

/// A control connection that pipelines: messages are sent without waiting, and a reader thread
/// collects the replies by tag. For operations "at once" (1,000 begins, 1,000 dismisses).
final class PipelinedControl: @unchecked Sendable {
    // @unchecked: `socket` is immutable; replies are behind a Mutex.
    enum Reply { case begun(requestID: UInt64, pid: Int32, channel: Int32?), ok, failure(String) }

    let socket: PacketSocket
    private let replies = Mutex<[UInt32: Reply]>([:])
    private let arrived = DispatchSemaphore(value: 0)
    private var encoder = WireEncoder()

    init(socketPath: String) throws {
        socket = try PacketSocket.connect(path: socketPath)
        let channel = MessageChannel(socket: socket)
        Thread.detachNewThread { [self] in
            while true {
                guard let (message, fd) = try? channel.receive() else { return }
                switch message {
                case let .begun(tag, requestID, pid, hasChannel):
                    replies.withLock { $0[tag] = .begun(requestID: requestID, pid: pid, channel: hasChannel ? fd : nil) }
                case let .ok(tag):
                    replies.withLock { $0[tag] = .ok }
                case let .failure(tag, code, text):
                    replies.withLock { $0[tag] = .failure("\(code): \(text)") }
                default:
                    if let fd { Glibc.close(fd) }
                    continue
                }
                arrived.signal()
            }
        }
    }

    /// Encodes a message (outside any timed section).
    func encode(_ message: Message) throws -> [UInt8] {
        try encoder.encode(message)
        return encoder.bytes
    }

    func send(_ bytes: [UInt8]) throws {
        _ = try socket.send(bytes)
    }

    /// Waits until every tag has a reply; returns them.
    func wait(tags: [UInt32], timeout: Double) throws -> [UInt32: Reply] {
        let deadline = now() + timeout
        while true {
            let got = replies.withLock { r in tags.allSatisfy { r[$0] != nil } }
            if got { return replies.withLock { r in r.filter { tags.contains($0.key) } } }
            let left = deadline - now()
            if left <= 0 || arrived.wait(timeout: .now() + left) == .timedOut {
                let have = replies.withLock { r in tags.filter { r[$0] != nil }.count }
                throw BenchError("timed out after \(timeout)s: \(have) of \(tags.count) replies")
            }
        }
    }

    func forget(tags: [UInt32]) {
        replies.withLock { r in for t in tags { r[t] = nil } }
    }

    func close() { socket.close() }
}

/// The real extensiond binary, started on generated manifests in a private directory, with
/// readiness learned from its own sd_notify READY=1.
final class DaemonUnderTest {
    let directory: String
    let socketPath: String
    let process: Process
    let logPath: String
    private(set) var monitor: ControlClient?
    let events = EventStore()

    /// Manifests: id → (executable, point).
    /// `arguments` and `environment` are added to the daemon's.
    init(
        daemonPath: String, directory: String, manifests: [(id: String, executable: String, point: String)], config: [String: Any],
        arguments: [String] = [], environment: [String: String] = [:]
    ) throws {
        self.directory = directory
        socketPath = directory + "/control.sock"
        logPath = directory + "/extensiond.log"
        let extensions = directory + "/extensions"
        try FileManager.default.createDirectory(atPath: extensions, withIntermediateDirectories: true)
        // Under a root run the extensions keep running as root, as the bench's baselines were
        // measured: they read the bench's private 0700 directory, which uids of their own could not.
        // Only those of the point `bench-sandboxed` run in the sandbox (the sandboxed cold launch
        // against the same launch with "sandbox": "none").
        let asRoot = getuid() == 0
        for m in manifests {
            var object: [String: Any] = ["id": m.id, "point": m.point, "executable": m.executable]
            if asRoot { object["user"] = "root" }
            if m.point != "bench-sandboxed" { object["sandbox"] = "none" }
            // The extension of the secrets figure is in the bench's app, whose group it uses.
            // It names the group too, which gives the group its shared container (where the
            // transfers phase's downloads, made by this extension, go).
            if m.id.hasSuffix(".secrets") {
                object["app"] = "org.example.bench"
                object["sharedContainers"] = ["group.org.example.bench"]
            }
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: "\(extensions)/\(m.id).json"))
        }
        // An app with the group of the defaults figures (docs/defaults.md).
        let app: [String: Any] = ["kind": "app", "id": "org.example.bench", "groups": ["group.org.example.bench"], "dbusActivatable": true]
        try JSONSerialization.data(withJSONObject: app).write(to: URL(fileURLWithPath: "\(extensions)/org.example.bench.app.json"))
        var config = config
        if asRoot { config["allowRootExtensions"] = true }
        config["allowUnsandboxedExtensions"] = true
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: directory + "/config.json"))

        // NOTIFY_SOCKET, as systemd would give it.
        let notifyPath = directory + "/notify.sock"
        let notify = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in for (i, b) in notifyPath.utf8.enumerated() { raw[i] = b } }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(notify, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard notify >= 0, bound == 0 else { throw BenchError("cannot bind \(notifyPath)") }
        defer { close(notify) }

        process = Process()
        process.executableURL = URL(fileURLWithPath: daemonPath)
        process.arguments = [
            "--socket", socketPath, "--extensions", extensions, "--config", directory + "/config.json", "--state-directory", directory + "/state",
        ] + arguments
        var env = ProcessInfo.processInfo.environment
        env["NOTIFY_SOCKET"] = notifyPath
        // The transfers phase's server is on loopback, which the worker refuses unless told.
        env["EXTENSIOND_TRANSFER_ALLOW_LOOPBACK"] = "1"
        for k in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID"] { env.removeValue(forKey: k) }
        env.merge(environment) { _, new in new }
        process.environment = env
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let logHandle = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = logHandle
        process.standardError = logHandle
        try process.run()

        // Wait for READY=1 (the daemon loads every manifest first).
        let deadline = now() + 60
        var buffer = [UInt8](repeating: 0, count: 4096)
        var ready = false
        while !ready && now() < deadline {
            var pfd = pollfd(fd: notify, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(max(1, (deadline - now()) * 1000))) > 0 else { continue }
            let n = recv(notify, &buffer, buffer.count, 0)
            if n > 0 && String(decoding: buffer[0..<n], as: UTF8.self).split(separator: "\n").contains("READY=1") { ready = true }
        }
        guard ready else { throw BenchError("extensiond did not send READY=1 within 60s; see \(logPath)") }
    }

    var pid: Int32 { process.processIdentifier }

    /// Subscribes to lifecycle events (the source of the supervisor-side timestamps).
    func attachMonitor() throws {
        let client = try ControlClient(socketPath: socketPath)
        let events = self.events
        client.setEventHandler { bytes in events.append(bytes) }
        _ = try client.call { .monitor(tag: $0) }
        monitor = client
    }

    /// Closes the monitor connection: the daemon then encodes no JSON for events. The daemon
    /// drops the connection when it reads the hang-up; a control round trip on another
    /// connection afterwards is ordered after it in practice (same loop, earlier readiness).
    func detachMonitor(barrier: ExtensionHostConnection) throws {
        monitor?.close()
        monitor = nil
        try barrier.prewarm([])
    }

    /// Polls `list` (between measurements only, never inside a timed interval) until every id
    /// is in `state`.
    func waitStates(_ ids: [String], _ state: String, via host: ExtensionHostConnection, timeout: Double = 30) throws {
        let deadline = now() + timeout
        while true {
            let reply = try host.client.call { .query(tag: $0, kind: .list, extensionIDs: ids) }
            guard case .json(let bytes) = reply,
                  let doc = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
                  let list = doc["extensions"] as? [[String: Any]] else { throw BenchError("bad list reply") }
            if list.allSatisfy({ $0["state"] as? String == state }) { return }
            if now() > deadline {
                let states = list.map { "\($0["id"] ?? "?")=\($0["state"] ?? "?")" }.prefix(10).joined(separator: " ")
                throw BenchError("timed out waiting for \(ids.count) extension(s) to be \(state): \(states)")
            }
            usleep(500)
        }
    }

    /// SIGTERM, then waits for the daemon to end every extension and exit. Returns a problem
    /// when it did not exit cleanly (status 0 after SIGTERM).
    @discardableResult
    func stop(timeout: Double = 60) -> String? {
        monitor?.close()
        if process.isRunning { process.terminate() }
        let deadline = now() + timeout
        while process.isRunning && now() < deadline { usleep(10_000) }
        var problem: String?
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            problem = "extensiond did not exit within \(Int(timeout))s of SIGTERM"
        }
        process.waitUntilExit()
        if problem == nil && (process.terminationReason == .uncaughtSignal || process.terminationStatus != 0) {
            let how = process.terminationReason == .uncaughtSignal ? "signal" : "status"
            problem = "extensiond ended with \(how) \(process.terminationStatus)"
        }
        if let problem { log("\(problem); log: \(logPath)") }
        return problem
    }
}

extension ExtensionHostConnection {
    /// Admin kill (the bench runs as the daemon's uid) of a running extension.
    func kill(_ id: String, signal: Int32 = SIGKILL) throws {
        _ = try client.call { .kill(tag: $0, extensionID: id, signal: signal) }
    }
}
