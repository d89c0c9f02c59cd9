import Foundation
import Testing

@testable import SupervisorCore

/// The types that write and read their binary form directly (`BinaryDirectCodable`) agree with
/// their `Codable` conformance through the same encoder and decoder: the same bytes, the same
/// values, and the same error for every damaged copy of the bytes. And the manifest's nested
/// values, read from a hand-over document, refuse unknown keys as a manifest file does.
struct BinaryDirectCodingTests {
    /// Every kind of event, with each optional field present and absent.
    static let events: [LifecycleEvent] = LifecycleEvent.Kind.allCases.enumerated().map { i, kind in
        LifecycleEvent(
            at: Instant(nanoseconds: UInt64(i) * 1_234_567_891), kind: kind, extensionID: "com.example.widget-\(i)",
            pid: i % 2 == 0 ? Int32(1000 + i) : nil, state: LifecycleState.allCases[i % LifecycleState.allCases.count],
            assertionID: i % 3 == 0 ? UInt64(i) : nil, requestID: i % 4 == 1 ? UInt64.max - UInt64(i) : nil,
            detail: i % 2 == 1 ? "détail \(i) \u{1B}[31m" : nil,
            lock: kind == .lockHeldAtSuspend ? LockReport(path: "/var/lib/x.db", kind: .posix, decision: .resume) : nil)
    }

    private func encoded<T: Encodable>(_ value: T, direct: Bool) throws -> [UInt8] {
        var encoder = BinaryEncoder()
        encoder.directCoding = direct
        return try encoder.encode(value)
    }

    /// A value read, or the error that refused the bytes.
    enum Outcome<T: Equatable>: Equatable {
        case read(T)
        case refused(String)

        func get() throws -> T {
            guard case .read(let value) = self else { throw BinaryDecodingError(problem: "\(self)") }
            return value
        }
    }

    private func decoded<T: Decodable & Equatable>(_ type: T.Type, _ bytes: [UInt8], direct: Bool) -> Outcome<T> {
        var decoder = BinaryDecoder()
        decoder.directCoding = direct
        do {
            return .read(try decoder.decode(type, from: bytes))
        } catch {
            return .refused("\(error)")
        }
    }

    @Test func eventsAreWrittenAsTheirCodableConformanceWritesThem() throws {
        // Alone, in a list, and nested in a record as the hand-over holds them.
        #expect(try encoded(Self.events, direct: true) == encoded(Self.events, direct: false))
        for event in Self.events {
            #expect(try encoded(event, direct: true) == encoded(event, direct: false), "\(event.kind)")
        }
        struct Holder: Codable, Equatable {
            var before = "x"
            var events: [LifecycleEvent]
            var after = [1, 2]
        }
        let holder = Holder(events: Self.events)
        let bytes = try encoded(holder, direct: true)
        #expect(try bytes == encoded(holder, direct: false))
        #expect(try decoded(Holder.self, bytes, direct: true).get() == holder)
        #expect(try decoded(Holder.self, bytes, direct: false).get() == holder)
    }

    @Test func eventsReadBackAsWrittenAndByJSONAlike() throws {
        let bytes = try encoded(Self.events, direct: true)
        #expect(try decoded([LifecycleEvent].self, bytes, direct: true).get() == Self.events)
        #expect(try decoded([LifecycleEvent].self, bytes, direct: false).get() == Self.events)
        // The conformance itself still serves other coders.
        let json = try JSONEncoder().encode(Self.events)
        #expect(try JSONDecoder().decode([LifecycleEvent].self, from: json) == Self.events)
    }

    /// Every truncation and a change of every byte: both paths accept the same copies, read the
    /// same values from them, and refuse the others with the same error.
    @Test func damagedEventsAreRefusedAlikeByBothPaths() throws {
        let events = Array(Self.events.prefix(6)) + Self.events.filter { $0.lock != nil }
        let bytes = try encoded(events, direct: true)
        var damaged: [[UInt8]] = (0..<bytes.count).map { Array(bytes.prefix($0)) }
        for i in bytes.indices {
            for change: UInt8 in [1, 0x80, 0xFF] {
                var copy = bytes
                copy[i] ^= change
                damaged.append(copy)
            }
        }
        var refused = 0
        for copy in damaged {
            let direct = decoded([LifecycleEvent].self, copy, direct: true)
            let generic = decoded([LifecycleEvent].self, copy, direct: false)
            #expect(direct == generic)
            if case .refused = direct { refused += 1 }
        }
        // An event alone, at the top level: the same error there too.
        let one = try encoded(Self.events.first { $0.lock != nil }!, direct: true)
        for i in one.indices {
            var copy = one
            copy[i] ^= 0x01
            #expect(decoded(LifecycleEvent.self, copy, direct: true) == decoded(LifecycleEvent.self, copy, direct: false))
        }
        // Most damage is caught; what is not reads back the same either way (a changed digit).
        #expect(refused > damaged.count / 2)
    }

    @Test func anUnknownEventKindOrStateIsNamed() throws {
        var bytes = try encoded([Self.events[0]], direct: true)
        let launch = Array("launch".utf8)
        let at = try #require(bytes.firstRange(of: launch))
        bytes.replaceSubrange(at, with: Array("lunchh".utf8))
        #expect(decoded([LifecycleEvent].self, bytes, direct: true) == .refused("[0]: unknown event kind 'lunchh'"))
        #expect(decoded([LifecycleEvent].self, bytes, direct: false) == .refused("[0]: unknown event kind 'lunchh'"))
    }

    /// The manifest's nested values refuse a key they do not know when read from the binary form,
    /// with the error a manifest file gets.
    @Test func unknownKeysInAManifestsNestedValuesAreRefusedAsInAFile() throws {
        func both<T: Decodable & Equatable>(_ type: T.Type, _ object: [String: Double]) throws -> (binary: Outcome<T>, json: Outcome<T>) {
            let json: Outcome<T>
            do {
                json = .read(try JSONDecoder().decode(type, from: try JSONEncoder().encode(object)))
            } catch {
                json = .refused("\(error)")
            }
            return (decoded(type, try encoded(object, direct: true), direct: true), json)
        }
        let limits = try both(ResourceLimits.self, ["memoryMaxBytes": 1_048_576, "bogus": 1])
        #expect(limits.binary == limits.json)
        #expect(String(describing: limits.binary).contains("bogus"))
        let refresh = try both(RefreshSchedule.self, ["dailyBudget": 4, "minimumIntervalSeconds": 60, "zzz": 0])
        #expect(refresh.binary == refresh.json)
        #expect(String(describing: refresh.binary).contains("zzz"))
        // Known keys only: read alike.
        let known = try both(RefreshSchedule.self, ["dailyBudget": 4, "minimumIntervalSeconds": 60])
        #expect(known.binary == known.json)
        #expect((try? known.binary.get())?.dailyBudget == 4)
    }

    /// The records of the hand-over suite's supervisor (every lifecycle state, requests,
    /// assertions, crashes, refreshes, hints, reset waiters), one of them with every optional
    /// member of its manifest given.
    static func records() throws -> [ExtensionRecord] {
        let (world, active, finished) = HandoverTests.scene()
        var records = try world.sup.snapshot().get().records
        // Refreshes that ran and ended, with their outcome, time and budget window.
        let later = HandoverTests.future(of: world.sup, from: world.now, activeRequest: active, finishedRequest: finished)
        records += ["h.widget", "h.refreshing"].compactMap { later.sup.records[$0] }
        var full = records[0].manifest
        full.arguments = ["--flag", "ünïcode"]
        full.environment = ["A": "1", "B": "two"]
        full.hosts = HostRestriction(uids: [1000], gids: [27, 100])
        full.hostAccess = true
        full.displayName = "Weather"
        full.activation = ActivationRule(text: true, urls: 2, contentTypes: [.init(type: "image/*", max: 3)])
        full.credentialRequest = CredentialRequest(user: .name("widget"), group: .number(100), supplementaryGroups: [.name("audio")])
        full.credentials = Credentials(uid: 61_234, gid: 61_234, groups: [29], ownUID: true)
        full.sharedContainers = ["group.weather"]
        full.containerPaths = ["group.weather": "/var/lib/extensiond/shared/group.weather"]
        full.sandboxed = false
        full.policy.limits = ResourceLimits(memoryMaxBytes: 64 << 20, tasksMax: 32, openFilesMax: 128, cpuWeight: 50)
        full.policy.sandboxRequires = [.network, .proc]
        full.policy.network = false
        full.policy.suspend = .freeze
        records[0].manifest = full
        return records
    }

    @Test func recordsAreWrittenAsTheirCodableConformanceWritesThem() throws {
        let records = try Self.records()
        #expect(records.contains { $0.refresh != nil } && records.contains { $0.lastExit != nil } && records.contains { !$0.requests.isEmpty })
        #expect(records.contains { $0.refresh?.lastOutcome != nil && $0.refresh?.lastAt != nil })
        var generic = BinaryEncoder()
        generic.directCoding = false
        let bytes = try BinaryEncoder().encode(records: records)
        #expect(try bytes == generic.encode(records))
        // Read back alike, whole, by both paths.
        #expect(try BinaryDecoder().decode(records: bytes[...]) == records)
        #expect(try BinaryDecoder().decode([ExtensionRecord].self, from: bytes[...]) == records)
        var genericDecoder = BinaryDecoder()
        genericDecoder.directCoding = false
        #expect(try genericDecoder.decode(records: bytes[...]) == records)
    }

    /// A change of every byte of each record that holds something the others do not (the first
    /// of each lifecycle state, every optional member of the manifest, a crash with its backoff,
    /// a reprieve, held hints, a
    /// pending begin, a reset waiter, a refresh in flight with its waiters, refreshes ended):
    /// both paths read the same record from each changed copy, or refuse it with the same
    /// error. (A copy cut short is refused alike too, but by the lengths around the record.)
    @Test func damagedRecordsAreRefusedAlikeByBothPaths() throws {
        let records = try Self.records()
        var states: Set<String> = []
        let chosen = records.enumerated().filter { i, r in
            // The first of each lifecycle state, for its phase.
            let firstOfItsState = states.insert("\(r.state)").inserted
            return firstOfItsState || i == 0 || i >= records.count - 2 || r.throttledUntil != nil || r.reprieveUntil != nil
                || !r.hints.held.isEmpty || !r.pending.isEmpty || !r.resetWaiters.isEmpty || r.refresh?.waiters.isEmpty == false
        }.map(\.element)
        #expect(chosen.count >= 8)
        var generic = BinaryDecoder()
        generic.directCoding = false
        var copies = 0
        var refused = 0
        for record in chosen {
            let bytes = try BinaryEncoder().encode(records: [record])
            #expect(try BinaryDecoder().decode(records: bytes[...]) == [record])
            var damaged: [[UInt8]] = (0..<bytes.count).map { Array(bytes.prefix($0)) }
            for i in bytes.indices {
                for change: UInt8 in [1, 0x80] {
                    var copy = bytes
                    copy[i] ^= change
                    damaged.append(copy)
                }
            }
            for copy in damaged {
                let direct: Outcome<[ExtensionRecord]>
                let slow: Outcome<[ExtensionRecord]>
                do { direct = .read(try BinaryDecoder().decode(records: copy[...])) } catch { direct = .refused("\(error)") }
                do { slow = .read(try generic.decode(records: copy[...])) } catch { slow = .refused("\(error)") }
                #expect(direct == slow)
                if case .refused = direct { refused += 1 }
            }
            copies += damaged.count
        }
        #expect(refused > copies / 2)
    }

    /// Reads `value`'s bytes as `T` both by `T.read` (the canonical reading first) and by
    /// `init(from:)`, expecting the same value or error, and the canonical reading to be taken
    /// when `expected`.
    static func both<T: BinaryCanonicalReadable & Equatable>(_ type: T.Type, _ value: some Encodable, fast expected: Bool) throws {
        let bytes = try BinaryEncoder().encode(value)
        func outcome(_ read: () throws -> T) -> Outcome<T> {
            do { return .read(try read()) } catch { return .refused("\(error)") }
        }
        try BinaryInput.reading(bytes[...], directCoding: true) { input in
            let quick = outcome { try T.read(input, at: 0, within: bytes.count) }
            let slow = outcome { try T(from: BinaryDecoding(input: input, offset: 0, end: bytes.count)) }
            #expect(quick == slow, "\(value)")
            #expect((T.canonical(input, at: 0, within: bytes.count) != nil) == expected, "\(value)")
        }
    }

    /// The limits, refresh schedules and host lists read without the generic containers give
    /// what the manifest file's decoders give, value or error, in range and out of it, and
    /// the fast reading is taken for the bytes their encoders write.
    @Test func canonicalReadingsAgreeWithTheManifestDecoders() throws {
        struct Limits: Encodable {
            var memoryMaxBytes: UInt64?
            var tasksMax: UInt64?
            var openFilesMax: UInt64?
            var cpuWeight: UInt64?
        }
        try Self.both(ResourceLimits.self, ResourceLimits(memoryMaxBytes: 1 << 20, tasksMax: 1, openFilesMax: 16, cpuWeight: 10_000), fast: true)
        try Self.both(ResourceLimits.self, ResourceLimits(), fast: true)
        for limits in [Limits(tasksMax: 0), Limits(tasksMax: 4_194_305), Limits(memoryMaxBytes: 1 << 51), Limits(openFilesMax: 15), Limits(cpuWeight: 10_001)] {
            try Self.both(ResourceLimits.self, limits, fast: false)
        }
        struct Schedule: Encodable {
            var minimumIntervalSeconds: Double
            var dailyBudget: Int
        }
        struct Reversed: Encodable {
            var dailyBudget = 4
            var minimumIntervalSeconds = 60.0
        }
        try Self.both(RefreshSchedule.self, RefreshSchedule(minimumIntervalSeconds: 90, dailyBudget: 3), fast: true)
        try Self.both(RefreshSchedule.self, Reversed(), fast: false)
        for schedule in [
            Schedule(minimumIntervalSeconds: 0.5, dailyBudget: 1), Schedule(minimumIntervalSeconds: .infinity, dailyBudget: 1),
            Schedule(minimumIntervalSeconds: 60, dailyBudget: 1_441), Schedule(minimumIntervalSeconds: 60, dailyBudget: -1),
            Schedule(minimumIntervalSeconds: Policy.maximumSeconds + 1, dailyBudget: 1),
        ] {
            try Self.both(RefreshSchedule.self, schedule, fast: false)
        }
        struct Hosts: Encodable {
            var uids: [Int64]
            var gids: [Int64]
        }
        try Self.both(HostRestriction.self, HostRestriction(uids: [0, 1000, UInt32.max], gids: []), fast: true)
        try Self.both(HostRestriction.self, Hosts(uids: [Int64(UInt32.max) + 1], gids: []), fast: false)
        try Self.both(HostRestriction.self, Hosts(uids: [], gids: [-1]), fast: false)
    }

    /// The names, accounts, exit statuses, string lists and dictionaries read without the
    /// generic containers give what their `init(from:)` gives, value or error, and the fast
    /// reading is taken for the bytes their encoders write.
    @Test func canonicalReadingsOfNamesAccountsStatusesListsAndDictionariesAgree() throws {
        for reason in [ExitReason.crashed, .killedByAdmin, .lockHeldAtSuspend] { try Self.both(ExitReason.self, reason, fast: true) }
        try Self.both(ExitReason.self, "bogus", fast: false)
        try Self.both(ExitReason.self, 3, fast: false)
        try Self.both(SandboxPart.self, SandboxPart.network, fast: true)
        try Self.both(RefreshOutcome.self, "later", fast: false)
        for grace in [LockGrace.none, .resuming, .spent] { try Self.both(LockGrace.self, grace, fast: true) }
        try Self.both(LockGrace.self, "later", fast: false)
        try Self.both(LockGrace.self, true, fast: false)

        try Self.both(AccountReference.self, AccountReference.name("audio"), fast: true)
        try Self.both(AccountReference.self, AccountReference.number(100), fast: true)
        try Self.both(AccountReference.self, AccountReference.name("100"), fast: true)
        for number in [Int64(-1), Int64(UInt32.max) + 1] { try Self.both(AccountReference.self, number, fast: false) }
        try Self.both(AccountReference.self, 1.5, fast: false)

        struct Status: Encodable {
            var exited: Int64?
            var signaled: Int64?
            var other: Int64?
            enum Key: CodingKey { case exited, signaled, other }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: Key.self)
                if let exited { try c.encode(exited, forKey: .exited) }
                if let signaled { try c.encode(signaled, forKey: .signaled) }
                if let other { try c.encode(other, forKey: .other) }
            }
        }
        try Self.both(ExitStatus.self, ExitStatus.exited(0), fast: true)
        try Self.both(ExitStatus.self, ExitStatus.signaled(9), fast: true)
        for status in [Status(exited: 1, signaled: 2), Status(signaled: 1 << 40), Status(other: 1), Status(exited: -(1 << 40)), Status()] {
            try Self.both(ExitStatus.self, status, fast: false)
        }

        try Self.both([String: String].self, ["A": "1", "B": "two", "ü": ""], fast: true)
        try Self.both([String: String].self, [String: String](), fast: true)
        try Self.both([String: String].self, ["A": 1], fast: false)
        try Self.both([String: String].self, ["A", "B"], fast: false)
        try Self.both([String].self, ["--flag", "ünïcode", ""], fast: true)
        try Self.both([String].self, [String](), fast: true)
        try Self.both([String].self, ["a": "b"], fast: false)
        try Self.both([String].self, [1, 2], fast: false)
    }
}
