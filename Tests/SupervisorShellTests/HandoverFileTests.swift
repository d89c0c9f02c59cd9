import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// The hand-over file: the document with the core's records in parts after it, written and
/// read one part per CPU, and what a damaged file is refused with.
struct HandoverFileTests {
    /// A document whose core has `count` records, with an event in each one's history.
    static func document(records count: Int) throws -> HandoverDocument {
        let policy = Policy(backgroundSeconds: 10, expiryGraceSeconds: 3, assertionMaxSeconds: 60, launchTimeoutSeconds: 10, suspendedLifetimeSeconds: 600)
        let manifests = (0..<count).map { Manifest(id: "com.example.w\($0)", executable: "/usr/libexec/w\($0)", policy: policy) }
        var core = Supervisor(manifests: manifests, limits: SupervisorLimits(), now: .seconds(1))
        for m in manifests.prefix(count / 2) {
            _ = core.handle(.begin(host: 1, peer: PeerIdentity(pid: 7, uid: 0, gid: 0), tag: 1, extensionID: m.id), at: .seconds(2))
            _ = core.handle(.spawnFailed(extensionID: m.id, generation: 1, error: "no such file"), at: .seconds(2))
        }
        let snapshot = try core.snapshot().get()
        let probe = SandboxProbe(errors: SandboxPart.allCases.map { _ in nil }, userNamespace: true)
        return HandoverDocument(
            version: HandoverDocument.currentVersion, daemonVersion: "0.1.0", core: snapshot, recordParts: 0, listener: 3,
            socketPath: "/run/extensiond/control.sock", ownedSocketPath: nil, nextHostID: 9, connections: [], processes: [], requester: nil,
            sandbox: HandoverDocument.Sandbox(probe), sharedContainers: [:], containersRoot: "/var/lib/extensiond/containers")
    }

    @Test func theRecordsAreWrittenAndReadInOnePartPerCPU() throws {
        let kernel = RecordingKernel()
        kernel.processorCount = 3
        let document = try Self.document(records: 600)
        #expect(document.core.records.contains { !$0.recentEvents.isEmpty }, "the records carry history")
        let parts = try HandoverFile.encode(document, kernel: kernel)
        let bytes = Array(parts.joined())
        // 600 records: two parts of at least 256, though there are three CPUs, written beside
        // the rest of the document (the file's first part).
        #expect(kernel.concurrentJobs == [3])
        #expect(parts.count == 3)
        let read = try HandoverFile.decode(bytes, kernel: kernel)
        // Read: the two parts and, at the same time, the rest of the document.
        #expect(kernel.concurrentJobs == [3, 3])
        #expect(read.recordParts == 2)
        #expect(read.core == document.core)
        #expect(read.socketPath == document.socketPath && read.nextHostID == 9 && read.sandbox == document.sandbox)

        // Few records: one part, written and read beside the rest.
        let small = Array(try HandoverFile.encode(try Self.document(records: 10), kernel: kernel).joined())
        #expect(try HandoverFile.decode(small, kernel: kernel).core == (try Self.document(records: 10)).core)
        #expect(kernel.concurrentJobs.suffix(2) == [2, 2])
    }

    @Test func aDamagedFileIsRefusedNamingWhere() throws {
        let kernel = RecordingKernel()
        kernel.processorCount = 2
        let document = try Self.document(records: 600)
        let bytes = Array(try HandoverFile.encode(document, kernel: kernel).joined())
        func refusal(_ bytes: [UInt8]) -> String {
            do {
                _ = try HandoverFile.decode(bytes, kernel: kernel)
                return "accepted"
            } catch {
                switch error {
                case .notADocument(let why): return "not a document: \(why)"
                case .version(let found, let writer): return "version \(found) from \(writer ?? "?")"
                case .corrupt(let why): return "corrupt: \(why)"
                }
            }
        }
        // A record of the second part (its first is record 300 of the core) is named by its
        // place among all the records.
        let index = try #require(document.core.records.firstIndex { $0.manifest.id == "com.example.w450" })
        #expect(index >= 300)
        let id = Array("com.example.w450".utf8)
        let at = try #require((0...(bytes.count - id.count)).first { bytes[$0..<($0 + id.count)].elementsEqual(id) })
        var wrongID = bytes
        wrongID[at - 1] = 0x7F  // the string's length: past its container's end
        #expect(refusal(wrongID).hasPrefix("corrupt: the hand-over document is corrupt: core.records[\(index)]"), "\(refusal(wrongID))")
        // The last part cut short, or bytes after it.
        #expect(refusal(Array(bytes.dropLast(10))).contains("record part 1: truncated"), "\(refusal(Array(bytes.dropLast(10))))")
        #expect(refusal(bytes + [0]).contains("1 byte(s) after the last record part"), "\(refusal(bytes + [0]))")
        // More parts than any writer makes: refused before a thread is started.
        var many = document
        many.core.records = []
        many.recordParts = 100_000
        let head = try BinaryEncoder().encode(many, signature: HandoverDocument.signature)
        let empty = try BinaryEncoder().encode([ExtensionRecord]())
        let manyParts = head + Array((0..<100_000).map { _ in empty }.joined())
        // Records in the head, though it counts its parts right.
        var crowded = try Self.document(records: 10)
        crowded.recordParts = 1
        let crowdedFile = try BinaryEncoder().encode(crowded, signature: HandoverDocument.signature) + BinaryEncoder().encode([ExtensionRecord]())
        #expect(refusal(crowdedFile).hasSuffix("recordParts: 1 part(s) and 10 record(s) in the head"), "\(refusal(crowdedFile))")
        // A fault of the head is named before one of the parts' layout.
        var doubled = try Self.document(records: 10)
        doubled.connections = [.init(host: 1, fd: 3, pid: 7, uid: 0, gid: 0, groups: [], isMonitor: false)]
        let both = Array(try HandoverFile.encode(doubled, kernel: kernel).joined()) + [0]
        #expect(refusal(both).contains("descriptors: one named twice"), "\(refusal(both))")
        let jobs = kernel.concurrentJobs
        #expect(refusal(manyParts).hasPrefix("corrupt: the hand-over document is corrupt: recordParts: 100000 part(s)"), "\(refusal(manyParts))")
        #expect(kernel.concurrentJobs == jobs)
        #expect(kernel.concurrentJobs.allSatisfy { $0 <= 3 })
        // A descriptor named twice (the listener's, by a connection), or stdin.
        for fd: Int32 in [3, 0] {
            var twice = try Self.document(records: 10)
            twice.connections = [.init(host: 1, fd: fd, pid: 7, uid: 0, gid: 0, groups: [], isMonitor: false)]
            let refused = refusal(Array(try HandoverFile.encode(twice, kernel: kernel).joined()))
            #expect(refused.contains("descriptors: one named twice, or one of 0, 1 and 2"), "\(refused)")
        }
        // Not a document at all, and one of another version.
        #expect(refusal(Array("{}".utf8)).hasPrefix("not a document: the top level: not in the expected form"))
        var older = document
        older.version = 1
        #expect(refusal(try BinaryEncoder().encode(older, signature: HandoverDocument.signature)) == "version 1 from 0.1.0")
    }

    /// A handed-over lock watch loses the locks of a holder that died meanwhile (its locks went
    /// with it), and is nothing once no holder is left.
    @Test func aLockWatchLosesTheLocksOfHoldersGoneMeanwhile() {
        func lock(_ pid: Int32, _ path: String) -> HeldLock { HeldLock(kind: .flock, exclusive: true, path: path, pid: pid, openElsewhere: false) }
        let handed = HandoverDocument.Locks(
            holders: [10, 11], files: [.init(watch: 1, locks: [lock(10, "/a")]), .init(watch: 2, locks: [lock(10, "/b"), lock(11, "/b")])], openWatch: 40,
            checking: false)
        #expect(handed.without([]) == handed)
        let left = handed.without([10])
        #expect(left?.holders == [11])
        #expect(left?.files == [.init(watch: 2, locks: [lock(11, "/b")])])
        #expect(left?.openWatch == 40)
        #expect(handed.without([10, 11]) == nil)
    }
}
