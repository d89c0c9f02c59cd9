import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The shared defaults suites (docs/defaults.md): each app group's settings, written only here
/// (so no member holds a lock that its suspension could strand) and read by members from a
/// read-only mapping with no round trip (`SuiteMemory`). Each suite is also kept in the state
/// directory (`defaults/SUITE`), rewritten atomically and durably off the loop after changes,
/// and its memory crosses a re-exec. Owned by the daemon's loop thread.
final class DefaultsSuites {
    /// One open suite.
    private struct Suite {
        /// A key's UTF-8 bytes → its value's encoding: what the memory holds, and what is kept
        /// on disk. By bytes: a reader finds a key by its bytes, so two canonically equivalent
        /// spellings are two keys here too.
        var entries: [[UInt8]: [UInt8]]
        let memory: SuiteMemory
        /// A write of the file is under way.
        var persisting = false
        /// Changed since the file write under way (or the last one) began.
        var dirty = false
        /// The control connections that opened it (told of changes with `defaultsChanged`).
        var openers: Set<HostID> = []
    }

    /// Why a write or an open was refused.
    struct Refusal: Error {
        var code: FailureCode
        var text: String
    }

    private var suites: [String: Suite] = [:]
    /// Where the suites are kept: `STATE/defaults`.
    let directory: String
    private let kernel: any Kernel
    private let logger: Logger

    init(stateDirectory: String, kernel: any Kernel, logger: Logger) {
        directory = stateDirectory + "/defaults"
        self.kernel = kernel
        self.logger = logger
    }

    /// A new read-only descriptor of the suite's memory for a member, opening the suite (from
    /// its file, or empty) if nobody has yet.
    func descriptor(_ name: String) -> Result<Int32, Refusal> {
        guard let suite = loaded(name) else { return .failure(Refusal(code: .internalError, text: "the suite '\(name)' cannot be opened (see the journal)")) }
        return suite.memory.readOnlyDescriptor().mapError { Refusal(code: .internalError, text: "cannot hand over the suite '\(name)': \($0)") }
    }

    /// Sets (`value`: a value's encoding) or removes (nil) `key` of the suite: published to every
    /// reader before it returns, and kept on disk soon after. Returns whether anything changed.
    func write(_ name: String, key: String, value: [UInt8]?) -> Result<Bool, Refusal> {
        if let problem = DefaultsValue.keyProblem(key) { return .failure(Refusal(code: .badRequest, text: "key '\(key)' \(problem)")) }
        if let value, let problem = DefaultsValue.problem(value) {
            return .failure(Refusal(code: .badRequest, text: "the value of '\(key)' is not a defaults value: \(problem)"))
        }
        guard var suite = loaded(name) else { return .failure(Refusal(code: .internalError, text: "the suite '\(name)' cannot be opened (see the journal)")) }
        let keyBytes = Array(key.utf8)
        if suite.entries[keyBytes] == value { return .success(false) }
        var entries = suite.entries
        entries[keyBytes] = value
        let area = SuiteLayout.area(bytes: entries)
        if area.count > SuiteLayout.capacity {
            return .failure(
                Refusal(code: .limitReached, text: "the suite '\(name)' would take \(area.count) bytes with '\(key)' set, over its \(SuiteLayout.capacity)"))
        }
        suite.entries = entries
        suite.memory.publish(area: area, count: entries.count)
        suite.dirty = true
        suites[name] = suite
        persist(name)
        return .success(true)
    }

    /// The control connection `host` opened the suite: it is told of later changes.
    func opened(_ name: String, by host: HostID) { suites[name]?.openers.insert(host) }

    /// The control connections that opened the suite.
    func openers(of name: String) -> [HostID] { suites[name].map { Array($0.openers) } ?? [] }

    /// The control connection `host` is gone.
    func hostGone(_ host: HostID) {
        for name in suites.keys where suites[name]!.openers.contains(host) { suites[name]!.openers.remove(host) }
    }

    /// The suite open, loading it from its file (or empty) on first use; nil when its memory
    /// cannot be made (logged).
    private func loaded(_ name: String) -> Suite? {
        if let suite = suites[name] { return suite }
        var entries: [[UInt8]: [UInt8]] = [:]
        let path = directory + "/" + name
        switch kernel.read(path) {
        case .success(let bytes):
            do {
                entries = Dictionary(try SuiteLayout.entries(ofFile: bytes).map { (Array($0.key.utf8), $0.value) }, uniquingKeysWith: { a, _ in a })
            } catch {
                logger.error("the defaults suite \(path) is not readable (\(error)); it starts empty, and the file is kept as \(path).bad")
                _ = kernel.rename(path, to: path + ".bad")
            }
        case .failure(let e) where e.isNoEntry: break
        case .failure(let e):
            logger.error("cannot read the defaults suite \(path): \(e)")
            return nil
        }
        let memory: SuiteMemory
        switch kernel.makeSuiteMemory() {
        case .success(let m): memory = m
        case .failure(let e):
            logger.error("cannot make the memory of the defaults suite \(name): \(e)")
            return nil
        }
        memory.publish(area: SuiteLayout.area(bytes: entries), count: entries.count)
        let suite = Suite(entries: entries, memory: memory)
        suites[name] = suite
        return suite
    }

    /// Writes the suite's file off the loop unless a write is under way (it then writes again
    /// once done): a change is on disk within one file write after the one under way.
    private func persist(_ name: String) {
        guard var suite = suites[name], suite.dirty, !suite.persisting else { return }
        if let e = makeDirectory() {
            logger.error("cannot create \(directory) to keep the defaults suite \(name): \(e)")
            return
        }
        suite.dirty = false
        suite.persisting = true
        suites[name] = suite
        let path = directory + "/" + name
        let started = kernel.replaceFileInBackground(path, with: SuiteLayout.file(bytes: suite.entries), mode: 0o600) { [weak self] e in
            guard let self else { return }
            if let e { self.logger.error("cannot keep the defaults suite \(name) in \(path): \(e)") }
            self.suites[name]?.persisting = false
            self.persist(name)
        }
        if let e = started {
            suites[name]?.persisting = false
            suites[name]?.dirty = true
            logger.error("cannot start keeping the defaults suite \(name): \(e)")
        }
    }

    /// Creates the suites' directory (`0700`), and the state directory above it if missing.
    private func makeDirectory() -> SystemError? {
        if let e = kernel.makeDirectories(String(directory.dropLast("/defaults".count)), mode: 0o755) { return e }
        if let e = kernel.makeDirectory(directory, mode: 0o700), !e.isAlreadyExisting { return e }
        return nil
    }

    /// Writes every suite changed since its last write, on this thread (at a stop, or before a
    /// re-exec).
    func flush() {
        for (name, suite) in suites where suite.dirty || suite.persisting {
            if let e = makeDirectory() { logger.error("cannot create \(directory): \(e)") }
            if let e = kernel.replaceFile(directory + "/" + name, withParts: [SuiteLayout.file(bytes: suite.entries)], mode: 0o600, durable: true) {
                logger.error("cannot keep the defaults suite \(name): \(e)")
            }
            suites[name]?.dirty = false
        }
    }

    /// What crosses a re-exec: each open suite's memory descriptor (its contents are read back
    /// from it) and its openers.
    struct Handover: Codable, Equatable {
        var suites: [String: Int32]
        var openers: [String: [HostID]]
    }

    /// The suites to hand over.
    var handover: Handover {
        Handover(
            suites: suites.mapValues(\.memory.fd),
            openers: suites.mapValues { $0.openers.sorted() })
    }

    /// Takes over the suites a replaced daemon handed over: each memory mapped again, its
    /// entries read back from it, and its file written again (a write may have been cut short
    /// by the exec).
    func restore(_ handover: Handover) {
        for (name, fd) in handover.suites {
            switch kernel.adoptSuiteMemory(fd: fd) {
            case .success(let memory):
                // Checked as a file would be (a member of the daemon's own uid could have written
                // into it): a suite that is not sound is read again from its file instead.
                let (area, count) = memory.published()
                var header = SuiteLayout.file([:])
                header.replaceSubrange(
                    SuiteLayout.usedOffset..<SuiteLayout.usedOffset + 4, with: withUnsafeBytes(of: UInt32(area.count).littleEndian) { Array($0) })
                header.replaceSubrange(
                    SuiteLayout.countOffset..<SuiteLayout.countOffset + 4, with: withUnsafeBytes(of: UInt32(count).littleEndian) { Array($0) })
                guard let checked = try? SuiteLayout.entries(ofFile: header + area) else {
                    logger.error("the defaults suite \(name) handed over is not sound; it is read again from its file")
                    memory.close()
                    continue
                }
                let entries = Dictionary(checked.map { (Array($0.key.utf8), $0.value) }, uniquingKeysWith: { a, _ in a })
                memory.publish(area: SuiteLayout.area(bytes: entries), count: entries.count)
                suites[name] = Suite(entries: entries, memory: memory, dirty: true, openers: Set(handover.openers[name] ?? []))
                persist(name)
            case .failure(let e):
                logger.error("cannot take over the defaults suite \(name): \(e); it is read again from its file")
                kernel.close(fd)
            }
        }
    }
}
