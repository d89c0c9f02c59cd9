import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// Background transfers as kept on disk (docs/transfers.md, "On disk"), under
/// `STATE/transfers/`: each task in `tasks/ID`, each session's queued events in
/// `sessions/KEY`, each partial download in `partial/ID`, the day's byte counts in `budget`,
/// and the next task id in `next-id`. A session's file is kept once empty: its sequence numbers go on. Every write is durable (written, synced, renamed) before
/// the daemon acts on it: what a client was told survives a crash, a re-exec and a reboot.
/// Loaded at the first use; a file that does not decode is refused by name and set aside
/// (`NAME.bad`). Owned by the daemon's loop thread.
final class TransferStore {
    let directory: String
    private let kernel: any Kernel
    private let logger: Logger
    private(set) var tasks: [UInt64: TransferTask] = [:]
    private(set) var sessions: [TransferSessionKey: TransferSession] = [:]
    var budget = TransferBudget()
    private var nextID: UInt64 = 1
    private var loadProblem: String?
    private var loaded = false
    static let magic: [UInt8] = Array("EXTXFER1".utf8)

    init(stateDirectory: String, kernel: any Kernel, logger: Logger) {
        directory = stateDirectory + "/transfers"
        self.kernel = kernel
        self.logger = logger
    }

    /// Whether anything was ever stored (the directory exists): a daemon that never used
    /// transfers does not load them at start.
    var exists: Bool {
        if case .success(let st) = kernel.status(directory, followLinks: false) { return st.kind == .directory }
        return false
    }

    /// Loads everything on first use; why the store cannot be used, or nil.
    func ready() -> String? {
        if loaded { return loadProblem }
        loaded = true
        let state = String(directory.dropLast("/transfers".count))
        if let e = kernel.makeDirectories(state, mode: 0o755) {
            loadProblem = "cannot create the state directory: \(e)"
            return loadProblem
        }
        for path in [directory, directory + "/tasks", directory + "/sessions", directory + "/partial"] {
            if let e = kernel.makeDirectory(path, mode: 0o700), !e.isAlreadyExisting {
                loadProblem = "cannot create \(path): \(e)"
                return loadProblem
            }
        }
        for name in kernel.listDirectory(directory + "/tasks") ?? [] where !name.hasSuffix(".bad") && !name.contains(".tmp") {
            if let task: TransferTask = decode(directory + "/tasks/" + name) { tasks[task.id] = task }
        }
        for name in kernel.listDirectory(directory + "/sessions") ?? [] where !name.hasSuffix(".bad") && !name.contains(".tmp") {
            if let session: TransferSession = decode(directory + "/sessions/" + name) { sessions[session.key] = session }
        }
        if case .success(let bytes) = kernel.read(directory + "/budget"),
            let b: TransferBudget = try? BinaryDecoder().decode(TransferBudget.self, from: bytes, signature: Self.magic)
        {
            budget = b
        }
        if case .success(let bytes) = kernel.read(directory + "/next-id"), let n = UInt64(String(decoding: bytes, as: UTF8.self)) { nextID = n }
        nextID = max(nextID, (tasks.keys.max() ?? 0) + 1)
        // A partial file of no task (its task ended while the daemon was down) is removed.
        for name in kernel.listDirectory(directory + "/partial") ?? [] where UInt64(name).map({ tasks[$0] == nil }) ?? true {
            _ = kernel.removeFile(directory + "/partial/" + name)
        }
        if !tasks.isEmpty || !sessions.isEmpty {
            logger.info(
                "background transfers: \(tasks.values.filter { !$0.state.isFinal }.count) task(s) to go on with, \(sessions.values.reduce(0) { $0 + $1.queued.count }) event(s) queued"
            )
        }
        return nil
    }

    private func decode<T: Decodable>(_ path: String) -> T? {
        switch kernel.read(path) {
        case .failure(let e):
            logger.error("cannot read \(path): \(e)")
            return nil
        case .success(let bytes):
            do {
                return try BinaryDecoder().decode(T.self, from: bytes, signature: Self.magic)
            } catch {
                logger.error("background transfer file \(path) refused: \(error); it is set aside as \(path).bad")
                _ = kernel.rename(path, to: path + ".bad")
                return nil
            }
        }
    }

    private func write<T: Encodable>(_ value: T, to path: String) -> SystemError? {
        let bytes: [UInt8]
        do { bytes = try BinaryEncoder().encode(value, signature: Self.magic) } catch { return SystemError("encode \(path): \(error)", errno: 0) }
        let e = kernel.replaceFile(path, withParts: [bytes], mode: 0o600, durable: true)
        if let e { logger.error("cannot write \(path): \(e)") }
        return e
    }

    /// A new task id, durably taken (never given twice, even after a crash).
    func takeID() -> Result<UInt64, SystemError> {
        let id = nextID
        if let e = kernel.replaceFile(directory + "/next-id", withParts: [Array(String(id + 1).utf8)], mode: 0o600, durable: true) {
            return .failure(e)
        }
        nextID = id + 1
        return .success(id)
    }

    /// Keeps `task` (durably); the error if it could not be written (it is kept in memory).
    @discardableResult
    func save(_ task: TransferTask) -> SystemError? {
        tasks[task.id] = task
        return write(task, to: directory + "/tasks/\(task.id)")
    }

    /// Keeps `task` in memory only (its progress: a resume trusts the partial file's size).
    func keep(_ task: TransferTask) { tasks[task.id] = task }

    /// Forgets `task` and its partial file.
    func remove(_ id: UInt64) {
        tasks[id] = nil
        for path in [directory + "/tasks/\(id)", partialPath(id)] {
            if let e = kernel.removeFile(path), !e.isNoEntry { logger.warning("cannot remove \(path): \(e)") }
        }
    }

    /// The session of `key` (a new, empty one if none is kept).
    func session(_ key: TransferSessionKey) -> TransferSession { sessions[key] ?? TransferSession(key: key) }

    /// Keeps `session` durably. Its file stays when nothing is queued: its next sequence
    /// number must never be given again (a client skips a number it has already delivered).
    @discardableResult
    func save(_ session: TransferSession) -> SystemError? {
        sessions[session.key] = session
        return write(session, to: directory + "/sessions/" + Self.fileName(session.key))
    }

    /// Keeps the day's byte counts (not synced on every progress: written when a task ends).
    func saveBudget() { _ = write(budget, to: directory + "/budget") }

    /// Where task `id`'s download is written until it is complete.
    func partialPath(_ id: UInt64) -> String { directory + "/partial/\(id)" }

    /// A session's file name: its key's bytes in hex (any identifier, no path character); a
    /// key of more than 100 bytes, its first 64 in hex and two 64-bit FNV-1a hashes of the whole
    /// (a name stays under 255 bytes; the key itself is in the file).
    static func fileName(_ key: TransferSessionKey) -> String {
        let bytes = Array(key.app.utf8) + [0] + Array(key.group.utf8) + [0] + Array(key.identifier.utf8)
        func hex(_ b: some Sequence<UInt8>) -> String {
            let digits: [Character] = Array("0123456789abcdef")
            var s = ""
            for x in b { s.append(digits[Int(x >> 4)]); s.append(digits[Int(x & 15)]) }
            return s
        }
        guard bytes.count > 100 else { return hex(bytes) }
        func fnv(_ seed: UInt64) -> UInt64 { bytes.reduce(seed) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 } }
        let h1 = fnv(0xcbf2_9ce4_8422_2325), h2 = fnv(0x84222325_cbf29ce4)
        return hex(bytes.prefix(64)) + "-" + String(h1, radix: 16) + String(h2, radix: 16)
    }
}
