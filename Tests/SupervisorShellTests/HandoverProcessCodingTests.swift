import Testing

@testable import SupervisorCore
@testable import SupervisorShell

/// The processes of the hand-over document written and read directly: the bytes their
/// synthesized `Codable` conformance writes, read back alike, and a damaged copy read or
/// refused alike by both paths.
struct HandoverProcessCodingTests {
    /// Processes with every optional member absent and present, in each group state, one with
    /// the locks of a suspended group.
    static func processes() -> [HandoverDocument.Process] {
        let lock = HeldLock(kind: .flock, exclusive: true, path: "/var/lib/w/db", pid: 4_101, openElsewhere: true, sharedContainer: "group.w")
        let bare = HandoverDocument.Process(
            extensionID: "org.example.bare", generation: 1, pid: 4_000, pidfd: 7, startTicks: nil, channel: nil, channelGraceUntil: nil,
            cgroup: nil, cgroupEvents: nil, cgroupProcs: nil, cgroupFreeze: nil, freezer: false, memoryCgroupV1: nil, memoryOOMKillsAtStart: nil,
            mechanism: .stop, group: GroupControl.Snapshot(state: .running, aloneAtLastStop: false), locks: nil)
        var full = bare
        full.extensionID = "org.example.fülł"
        full.generation = UInt64(UInt32.max) + 5
        full.pid = 4_100
        full.pidfd = 1_999
        full.startTicks = 123_456_789
        full.channel = 2_001
        full.channelGraceUntil = Instant(nanoseconds: 987_654_321_000)
        full.cgroup = "/sys/fs/cgroup/extensiond/org.example.full"
        full.cgroupEvents = 2_002
        full.cgroupProcs = 2_003
        full.cgroupFreeze = 2_004
        full.freezer = true
        full.memoryCgroupV1 = "/sys/fs/cgroup/memory/extensiond/org.example.full"
        full.memoryOOMKillsAtStart = 2
        full.mechanism = .freeze
        full.group = GroupControl.Snapshot(state: .frozen, aloneAtLastStop: true)
        full.locks = HandoverDocument.Locks(holders: [4_101], files: [.init(watch: 1, locks: [lock])], openWatch: 2_005, checking: true)
        var stopped = bare
        stopped.extensionID = "org.example.stopped"
        stopped.group = GroupControl.Snapshot(state: .stopped, aloneAtLastStop: true)
        stopped.channel = 3_000
        return [bare, full, stopped]
    }

    @Test func processesAreWrittenAsTheirCodableConformanceWritesThem() throws {
        // The processes have a direct path: this compiles only while they conform.
        let _: any BinaryDirectCodable.Type = HandoverDocument.Process.self
        let processes = Self.processes()
        var generic = BinaryEncoder()
        generic.directCoding = false
        let bytes = try BinaryEncoder().encode(processes)
        #expect(try bytes == generic.encode(processes))
        #expect(try BinaryDecoder().decode([HandoverDocument.Process].self, from: bytes[...]) == processes)
        var genericDecoder = BinaryDecoder()
        genericDecoder.directCoding = false
        #expect(try genericDecoder.decode([HandoverDocument.Process].self, from: bytes[...]) == processes)
    }

    /// Each byte of each process changed two ways, and each copy cut short: both paths read
    /// the same processes from it, or refuse it with the same error.
    @Test func damagedProcessesAreReadOrRefusedAlikeByBothPaths() throws {
        var generic = BinaryDecoder()
        generic.directCoding = false
        var refused = 0
        var copies = 0
        for process in Self.processes() {
            let bytes = try BinaryEncoder().encode([process])
            var damaged: [[UInt8]] = (1..<bytes.count).map { Array(bytes.prefix($0)) }
            for i in bytes.indices {
                for change: UInt8 in [1, 0x80] {
                    var copy = bytes
                    copy[i] ^= change
                    damaged.append(copy)
                }
            }
            for copy in damaged {
                func outcome(_ decoder: BinaryDecoder) -> String {
                    do { return "read \(try decoder.decode([HandoverDocument.Process].self, from: copy[...]))" } catch { return "refused: \(error)" }
                }
                let direct = outcome(BinaryDecoder())
                #expect(direct == outcome(generic))
                if direct.hasPrefix("refused") { refused += 1 }
            }
            copies += damaged.count
        }
        #expect(refused > copies / 2)
    }
}
