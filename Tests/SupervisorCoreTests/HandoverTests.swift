import ExtensionProtocol
import SupervisorCore
import Testing

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The hand-over document (`SupervisorSnapshot`): a supervisor in every lifecycle state, with
/// open and pending requests, assertions (one already expired), refreshes due and in flight,
/// held hints, crash counters, reset waiters, a retired record, subscribers and finished
/// requests, survives `restore(decode(encode(snapshot())))` whole and then behaves exactly as
/// the original; documents that are corrupt, of another version or inconsistent are refused
/// naming what is wrong, and so is a snapshot while shutting down or while a spawn, stop or
/// resume is in flight.
@Suite("Hand-over document")
struct HandoverTests {
    // MARK: - A supervisor in every state

    static let hint = "h.suspended.news"

    static func policy(background: Double = 10, grace: Double = 3, lock: LockContentionPolicy = .terminate) -> Policy {
        var p = Policy(
            backgroundSeconds: background, expiryGraceSeconds: grace, assertionMaxSeconds: 60,
            launchTimeoutSeconds: 10, suspendedLifetimeSeconds: 600)
        p.lockedWhileSuspended = lock
        return p
    }

    /// Refreshed every 90 s at most: the first refresh is due at 120 s (a whole minute).
    static func widget(_ id: String) -> Manifest {
        var p = policy()
        p.refreshSeconds = 30
        p.refresh = RefreshSchedule(minimumIntervalSeconds: 90, dailyBudget: 3)
        return manifest(id, policy: p)
    }

    static let manifests: [Manifest] = [
        manifest("h.idle", policy: policy()),
        manifest("h.crashy", policy: policy()),
        manifest("h.launching", policy: policy()),
        manifest("h.active", policy: policy()),
        manifest("h.background", policy: policy()),
        // Grace equal to the background time: *expire* goes out at the dismissal.
        manifest("h.expiring", policy: policy(background: 8, grace: 8)),
        manifest("h.suspended", policy: policy()),
        manifest("h.terminating", policy: policy()),
        manifest("h.prewarmed", policy: policy()),
        manifest("h.locky", policy: policy(lock: .resume)),
        manifest("h.retired", policy: policy()),
        widget("h.widget"),
        widget("h.refreshing"),
    ]

    /// A small shell: delivers events in time order and keeps every effect.
    struct World {
        var sup: Supervisor
        var now: Instant
        var log: [Effect] = []
        /// The effects of each event, in order.
        var steps: [[Effect]] = []
        var nextPid: Int32 = 100

        init(_ sup: Supervisor, now: Instant) {
            self.sup = sup
            self.now = now
        }

        func gen(_ id: String) -> UInt64 { sup.records[id]!.generation }

        @discardableResult
        mutating func at(_ t: Double, _ event: Event) -> [Effect] { at(.seconds(t), event) }

        @discardableResult
        mutating func at(_ t: Instant, _ event: Event) -> [Effect] {
            now = max(now, t)
            let effects = sup.handle(event, at: now)
            log += effects
            steps.append(effects)
            return effects
        }

        mutating func spawned(_ id: String, at t: Double) {
            nextPid += 1
            at(t, .spawned(extensionID: id, generation: gen(id), pid: nextPid))
        }

        mutating func ready(_ id: String, at t: Double) { at(t, .ready(extensionID: id, generation: gen(id))) }

        /// begin (then spawned and ready, when it launches): active with one more request of
        /// `host`; returns the request's id.
        mutating func activate(_ id: String, host: HostID, at t: Double) -> UInt64 {
            if !at(t, .begin(host: host, peer: ownPeer, tag: 1, extensionID: id)).spawns.isEmpty {
                spawned(id, at: t)
                ready(id, at: t)
            }
            return sup.records[id]!.requests.last!.id
        }

        mutating func grant(_ id: String, at t: Double) -> UInt64 {
            let e = at(t, .acquire(extensionID: id, generation: gen(id), tag: 7, reason: "work"))
            return e.granted[0].assertionID
        }
    }

    /// Builds the supervisor of the suite at 100 s, with the request ids a test needs.
    static func scene() -> (world: World, activeRequest: UInt64, finishedRequest: UInt64) {
        var w = World(Supervisor(manifests: manifests, limits: testLimits(), now: .seconds(0)), now: .seconds(0))
        // h.suspended: observes a hint, dismissed, stopped; the hint posted while it is suspended is held.
        let s = w.activate("h.suspended", host: 1, at: 1)
        w.at(1, .observe(extensionID: "h.suspended", generation: w.gen("h.suspended"), name: hint))
        w.at(2, .end(host: 1, tag: 2, requestID: s))
        w.at(2, .stopConfirmed(extensionID: "h.suspended", generation: w.gen("h.suspended")))
        // h.crashy: two crashes in a row: throttled.
        for t in [3.0, 4.0] {
            _ = w.activate("h.crashy", host: 1, at: t)
            w.at(t, .exited(extensionID: "h.crashy", generation: w.gen("h.crashy"), status: .signaled(11)))
        }
        // h.active: two assertions, one expired (and acknowledged) at 58 s; a second request
        // completed by the extension (remembered for the host's `end`).
        let active = w.activate("h.active", host: 1, at: 5)
        let first = w.grant("h.active", at: 6)
        let completed = w.activate("h.active", host: 1, at: 40)
        w.at(41, .requestFinished(extensionID: "h.active", generation: w.gen("h.active"), requestID: completed, outcome: .completed([1, 2, 3])))
        _ = w.grant("h.active", at: 50)
        let tick = w.at(63, .tick)
        #expect(tick.expires == [first], "the first assertion is told to expire")
        w.at(63.5, .expireReceived(extensionID: "h.active", generation: w.gen("h.active"), assertionID: first))
        // h.retired: its manifest removed by a reload while a request is open.
        _ = w.activate("h.retired", host: 5, at: 72)
        // h.widget: not running, its first refresh due at 120 s.
        // h.refreshing: a forced refresh in flight, with a subscriber.
        w.at(90, .subscribe(host: 4, peer: ownPeer, tag: 3, extensionIDs: ["h.refreshing"]))
        w.at(90, .forceRefresh(host: 4, peer: ownPeer, tag: 4, extensionID: "h.refreshing"))
        w.spawned("h.refreshing", at: 90)
        w.ready("h.refreshing", at: 90)
        // h.prewarmed: launched by a prewarm hint, ready, suspended unused.
        w.at(91, .prewarm(host: 3, peer: ownPeer, tag: 5, extensionIDs: ["h.prewarmed"]))
        w.spawned("h.prewarmed", at: 91)
        w.ready("h.prewarmed", at: 91)
        w.at(91, .stopConfirmed(extensionID: "h.prewarmed", generation: w.gen("h.prewarmed")))
        // h.locky: suspended, then resumed to release a contended lock (a reprieve).
        let l = w.activate("h.locky", host: 1, at: 92)
        w.at(92, .end(host: 1, tag: 2, requestID: l))
        w.at(92, .stopConfirmed(extensionID: "h.locky", generation: w.gen("h.locky")))
        w.at(95, .lockContention(extensionID: "h.locky", generation: w.gen("h.locky"), detail: "posix lock on /data/db"))
        w.at(95, .continueConfirmed(extensionID: "h.locky", generation: w.gen("h.locky")))
        // h.background: an assertion outlives its dismissal.
        let b = w.activate("h.background", host: 1, at: 96)
        _ = w.grant("h.background", at: 96)
        w.at(97, .end(host: 1, tag: 2, requestID: b))
        // h.terminating: its channel closed, then an administrator's reset waits for its end.
        _ = w.activate("h.terminating", host: 1, at: 97)
        w.at(97, .channelClosed(extensionID: "h.terminating", generation: w.gen("h.terminating"), reason: "EOF"))
        w.at(98, .reset(host: 9, tag: 6, extensionID: "h.terminating"))
        // h.expiring: dismissed with an assertion and a grace as long as its background time.
        let x = w.activate("h.expiring", host: 1, at: 98)
        _ = w.grant("h.expiring", at: 98)
        w.at(98, .end(host: 1, tag: 2, requestID: x))
        // h.launching: spawned, not ready, a begin pending.
        w.at(99, .begin(host: 2, peer: ownPeer, tag: 9, extensionID: "h.launching"))
        w.spawned("h.launching", at: 99)
        // The reload that retires h.retired; a hint posted while h.suspended is stopped.
        w.at(99.5, .reload(manifests: manifests.filter { $0.id != "h.retired" }, errors: [], host: nil, tag: 0))
        w.at(100, .post(host: 9, peer: ownPeer, tag: 10, name: hint))
        return (w, active, completed)
    }

    static func handOver(_ sup: Supervisor, at now: Instant) throws -> Supervisor {
        let bytes = try sup.snapshot().get().encode()
        return try Supervisor(restoring: SupervisorSnapshot.decode(bytes), limits: sup.limits, now: now)
    }

    /// Everything observable of two supervisors is equal.
    static func expectSame(_ a: Supervisor, _ b: Supervisor, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(a.records == b.records, sourceLocation: sourceLocation)
        #expect(a.stateCounts.filter { $0.value != 0 } == b.stateCounts.filter { $0.value != 0 }, sourceLocation: sourceLocation)
        #expect(a.nextDeadline() == b.nextDeadline(), sourceLocation: sourceLocation)
        #expect(a.stateVersion == b.stateVersion, sourceLocation: sourceLocation)
        #expect(b.indexDiscrepancies().isEmpty, "restored index: \(b.indexDiscrepancies())", sourceLocation: sourceLocation)
        #expect(try a.snapshot().get() == b.snapshot().get(), "every kept field, private ones included", sourceLocation: sourceLocation)
    }

    // MARK: - Round trip

    @Test func theSceneHasEveryStateAndTheBookkeepingTheDocumentMustKeep() throws {
        let (w, _, _) = Self.scene()
        let sup = w.sup
        let states = Set(sup.records.values.map(\.state))
        #expect(states == Set(LifecycleState.allCases), "every public state: \(sup.stateCounts)")
        #expect(sup.records["h.launching"]!.pid != nil && !sup.records["h.launching"]!.pending.isEmpty)
        let active = sup.records["h.active"]!.assertions.assertions
        #expect(active.count == 2 && active[0].expireSentAt != nil && active[0].expireAcknowledged && active[1].expireSentAt == nil)
        #expect(sup.records["h.crashy"]!.consecutiveCrashes == 2 && sup.records["h.crashy"]!.throttledUntil != nil)
        #expect(sup.records["h.suspended"]!.hints.held == [Self.hint])
        #expect(sup.records["h.widget"]!.refresh!.nextAt == .seconds(120), "a refresh due")
        #expect(sup.records["h.refreshing"]!.refresh!.inFlight != nil && !sup.records["h.refreshing"]!.refresh!.waiters.isEmpty)
        #expect(sup.records["h.prewarmed"]!.prewarmed && sup.records["h.prewarmed"]!.state == .suspended)
        #expect(sup.records["h.locky"]!.reprieveUntil != nil)
        #expect(!sup.records["h.terminating"]!.resetWaiters.isEmpty)
        #expect(sup.records["h.retired"]!.retired && sup.records["h.retired"]!.state == .active)
        #expect(sup.nextDeadline() != nil)
    }

    @Test func aRestoredSupervisorEqualsTheOriginal() throws {
        let (w, _, _) = Self.scene()
        let restored = try Self.handOver(w.sup, at: w.now)
        try Self.expectSame(w.sup, restored)
        // A hand-over of the restored one changes nothing either.
        try Self.expectSame(w.sup, try Self.handOver(restored, at: w.now))
        // Restored later, it is the same but for the instant of its last event.
        var later = try Self.handOver(w.sup, at: w.now.adding(seconds: 5)).snapshot().get()
        #expect(later.takenAt == w.now.adding(seconds: 5))
        later.takenAt = w.now
        #expect(try later == w.sup.snapshot().get())
    }

    /// A small shell that answers every effect at once and fires the timer at each deadline,
    /// with a script of host and extension events; the same run on the original and on the
    /// restored supervisor must produce the same effects, one for one.
    static func future(of sup: Supervisor, from start: Instant, activeRequest: UInt64, finishedRequest: UInt64) -> World {
        var w = World(sup, now: start)
        w.nextPid = 5000
        var queue: [Event] = []
        func answer(_ effects: [Effect]) {
            for e in effects {
                switch e {
                case let .spawn(id, g, _):
                    w.nextPid += 1
                    queue += [.spawned(extensionID: id, generation: g, pid: w.nextPid), .ready(extensionID: id, generation: g)]
                case let .stop(id, g): queue.append(.stopConfirmed(extensionID: id, generation: g))
                case let .resume(id, g): queue.append(.continueConfirmed(extensionID: id, generation: g))
                case let .signal(id, g, sig, _): queue.append(.exited(extensionID: id, generation: g, status: .signaled(sig)))
                default: break
                }
            }
        }
        func send(_ e: Event, at t: Instant) {
            queue.append(e)
            while !queue.isEmpty { answer(w.at(t, queue.removeFirst())) }
        }
        func run(until t: Instant) {
            while let d = w.sup.nextDeadline(), d <= t { send(.tick, at: max(d, w.now)) }
            w.now = max(w.now, t)
        }
        // What was asked before the hand-over is answered first, as the new shell would.
        for (id, r) in w.sup.records.sorted(by: { $0.key < $1.key }) {
            switch r.phase {
            case .stopping: send(.stopConfirmed(extensionID: id, generation: r.generation), at: start)
            case .resuming: send(.continueConfirmed(extensionID: id, generation: r.generation), at: start)
            case .launching: send(.ready(extensionID: id, generation: r.generation), at: start)
            case .terminating: send(.exited(extensionID: id, generation: r.generation, status: .signaled(9)), at: start)
            default: break
            }
        }
        let t = start.adding(seconds: 1)
        send(.end(host: 1, tag: 900, requestID: activeRequest), at: t)
        send(.end(host: 1, tag: 901, requestID: finishedRequest), at: t)  // finished earlier: answered ok
        send(.post(host: 9, peer: ownPeer, tag: 902, name: hint), at: t)
        send(.begin(host: 7, peer: ownPeer, tag: 905, extensionID: "h.suspended"), at: t)  // resumed: told of the held hint
        if let refresh = w.sup.records["h.refreshing"]?.refresh?.inFlight {
            send(.refreshDone(extensionID: "h.refreshing", generation: w.gen("h.refreshing"), refreshID: refresh, answer: .newData), at: t)
        }
        send(.hostGone(host: 5), at: t.adding(seconds: 1))
        send(.begin(host: 6, peer: ownPeer, tag: 903, extensionID: "h.crashy"), at: t.adding(seconds: 1))
        send(.forceRefresh(host: 4, peer: ownPeer, tag: 904, extensionID: "h.widget"), at: t.adding(seconds: 2))
        run(until: start.adding(seconds: 3_000))
        send(.shutdown, at: w.now)
        run(until: w.now.adding(seconds: 100))
        return w
    }

    @Test func aRestoredSupervisorBehavesExactlyAsTheOriginal() throws {
        let (w, active, finished) = Self.scene()
        let restored = try Self.handOver(w.sup, at: w.now)
        // The new shell arms its timer where the old one had it.
        #expect(restored.armedDeadline == w.log.timers.last!)
        #expect(restored.armedDeadline == w.sup.nextDeadline())
        let original = Self.future(of: w.sup, from: w.now, activeRequest: active, finishedRequest: finished)
        let handedOver = Self.future(of: restored, from: w.now, activeRequest: active, finishedRequest: finished)
        #expect(original.steps.count == handedOver.steps.count)
        for (i, (a, b)) in zip(original.steps, handedOver.steps).enumerated() where a != b {
            Issue.record("the effects of event \(i) differ: \(a) != \(b)")
            break
        }
        #expect(original.sup.records == handedOver.sup.records)
        // The script reached what the document kept.
        let replies = original.log.replies
        #expect(replies.contains { $0.host == 1 && $0.message == .ok(tag: 901) }, "the finished request's end is answered ok")
        #expect(replies.contains { $0.host == 4 && $0.message == .newData(extensionID: "h.refreshing") }, "the subscriber is told")
        #expect(original.log.sent.contains(.notify(name: Self.hint)), "the held hint is delivered at the resume")
        #expect(original.log.contains(.emptyContainer(extensionID: "h.terminating", host: 9, tag: 6)), "the reset waiter is answered")
        #expect(original.log.exits == 1)
    }

    @Test func theDocumentIsBinaryWithItsSignatureAndItsVersionAtTheTop() throws {
        let (w, _, _) = Self.scene()
        let bytes = try w.sup.snapshot().get().encode()
        #expect(bytes.starts(with: SupervisorSnapshot.signature))
        struct Top: Decodable {
            var version: Int
            var records: [Record]
            struct Record: Decodable { var phase: [String: Value] }
            enum Value: Decodable {
                case number(UInt64), text(String), flag(Bool)
                init(from decoder: any Decoder) throws {
                    let c = try decoder.singleValueContainer()
                    if let n = try? c.decode(UInt64.self) {
                        self = .number(n)
                    } else if let b = try? c.decode(Bool.self) {
                        self = .flag(b)
                    } else {
                        self = .text(try c.decode(String.self))
                    }
                }
            }
        }
        // Read by a type of its own, by key: the members are named as in the types.
        let top = try BinaryDecoder().decode(Top.self, from: bytes, signature: SupervisorSnapshot.signature)
        #expect(top.version == 1)
        #expect(SupervisorSnapshot.version == 1)
        // A phase is a keyed container naming its case, its instants in nanoseconds
        // (h.suspended was suspended at 2 s, to be reclaimed 600 s later).
        let suspended = top.records.filter { if case .text("suspended")? = $0.phase["name"] { true } else { false } }
        let reclaims = suspended.compactMap { if case .number(let ns)? = $0.phase["reclaimAt"] { ns } else { nil } }
        #expect(reclaims.contains(Instant.seconds(602).nanoseconds), "\(suspended.map(\.phase))")
    }

    // MARK: - Refusals

    /// `bytes` with the one occurrence of `old` replaced by `new`, of the same length (the
    /// lengths of the containers around it stay right).
    static func replacing(_ bytes: [UInt8], _ old: String, _ new: String) -> [UInt8] {
        let (o, n) = (Array(old.utf8), Array(new.utf8))
        precondition(o.count == n.count)
        let at = (0...(bytes.count - o.count)).filter { bytes[$0..<($0 + o.count)].elementsEqual(o) }
        #expect(at.count == 1, "the document contains \(old) once")
        guard let i = at.first else { return bytes }
        var copy = bytes
        copy.replaceSubrange(i..<(i + n.count), with: n)
        return copy
    }

    static func refusal(_ body: () throws -> Void) -> HandoverError? {
        do {
            try body()
            return nil
        } catch let error as HandoverError {
            return error
        } catch {
            Issue.record("not a HandoverError: \(error)")
            return nil
        }
    }

    @Test func aNewerOrOlderVersionIsRefusedNamingBothVersions() throws {
        let (w, _, _) = Self.scene()
        var snapshot = try w.sup.snapshot().get()
        snapshot.version = 2
        let newer = Self.refusal { _ = try SupervisorSnapshot.decode(try snapshot.encode()) }
        #expect(newer == .unsupportedVersion(found: 2, readable: 1...1))
        #expect(newer?.description == "the hand-over document has version 2, newer than this daemon reads (version 1)")
        snapshot.version = 0
        let older = Self.refusal { _ = try SupervisorSnapshot.decode(try snapshot.encode()) }
        #expect(older?.description == "the hand-over document has version 0, older than this daemon reads (version 1)")
        snapshot.version = 7
        let restored = Self.refusal { _ = try Supervisor(restoring: snapshot, limits: testLimits(), now: w.now) }
        #expect(restored == .unsupportedVersion(found: 7, readable: 1...1))
    }

    @Test func aCorruptDocumentIsRefusedNamingWhatIsWrong() throws {
        let (w, _, _) = Self.scene()
        let bytes = try w.sup.snapshot().get().encode()
        let truncated = Self.refusal { _ = try SupervisorSnapshot.decode(Array(bytes.prefix(bytes.count / 2))) }
        #expect(truncated?.description.hasPrefix("the hand-over document is corrupt: the top level: truncated") == true, "\(String(describing: truncated))")

        let noCounter = Self.refusal { _ = try SupervisorSnapshot.decode(Self.replacing(bytes, "nextRequestID", "nextRequestXD")) }
        #expect(noCounter == .corrupt("nextRequestID: missing"))

        let badPhase = Self.refusal { _ = try SupervisorSnapshot.decode(Self.replacing(bytes, "name\u{6}\u{9}launching", "name\u{6}\u{9}hibernate")) }
        let launchingIndex = try w.sup.snapshot().get().records.firstIndex { $0.manifest.id == "h.launching" }!
        #expect(badPhase == .corrupt("records[\(launchingIndex)].phase.name: unknown phase 'hibernate'"), "\(String(describing: badPhase))")

        // An event's kind and state are names looked up when read: an unknown one is named.
        let event = LifecycleEvent(at: .seconds(1), kind: .launch, extensionID: "a.b", pid: 7, state: .launching)
        let eventBytes = try BinaryEncoder().encode(event)
        #expect(try BinaryDecoder().decode(LifecycleEvent.self, from: eventBytes) == event)
        for (old, new, problem) in [
            ("\u{6}\u{6}launch", "\u{6}\u{6}lunchy", "unknown event kind 'lunchy'"), ("\u{9}launching", "\u{9}lunchtime", "unknown state 'lunchtime'"),
        ] {
            let error = #expect(throws: DecodingError.self) {
                _ = try BinaryDecoder().decode(LifecycleEvent.self, from: Self.replacing(eventBytes, old, new))
            }
            guard case .dataCorrupted(let context)? = error else {
                Issue.record("not dataCorrupted: \(String(describing: error))")
                continue
            }
            #expect(context.debugDescription == problem)
        }

        struct Impostor: Encodable { var version = 1; var takenAt = "soon" }
        let impostor = try BinaryEncoder().encode(Impostor(), signature: SupervisorSnapshot.signature)
        let notAnInstant = Self.refusal { _ = try SupervisorSnapshot.decode(impostor) }
        #expect(notAnInstant == .corrupt("takenAt: expected an integer, found a string"), "\(String(describing: notAnInstant))")

        let notADocument = Self.refusal { _ = try SupervisorSnapshot.decode(Array("[1, 2]".utf8)) }
        #expect(
            notADocument?.description == "the hand-over document is corrupt: the top level: not in the expected form: it does not start with its signature",
            "\(String(describing: notADocument))")
        let list = try BinaryEncoder().encode([1, 2], signature: SupervisorSnapshot.signature)
        let notAKeyedDocument = Self.refusal { _ = try SupervisorSnapshot.decode(list) }
        #expect(notAKeyedDocument == .corrupt("the top level: expected a keyed container, found an unkeyed container"))
    }

    @Test func anInconsistentDocumentIsRefusedNamingTheContradiction() throws {
        let (w, _, _) = Self.scene()
        let snapshot = try w.sup.snapshot().get()
        func restore(_ s: SupervisorSnapshot) -> HandoverError? {
            Self.refusal { _ = try Supervisor(restoring: s, limits: testLimits(), now: w.now) }
        }

        // A running record whose pid is gone (every "pid" of that process nulled in the JSON).
        let pid = snapshot.records.first { $0.manifest.id == "h.active" }!.pid!
        // The record's "pid" member renamed (same length): it reads as absent. (Its events are
        // lists, with no member names.)
        var leb: [UInt8] = []
        var n = UInt64(pid)
        while n >= 0x80 {
            leb.append(UInt8(n & 0x7F) | 0x80)
            n >>= 7
        }
        leb.append(UInt8(n))
        let (old, new) = (Array("pid".utf8) + [3] + leb, Array("pix".utf8) + [3] + leb)
        var bytes = try snapshot.encode()
        var renamed = 0
        for i in 0...(bytes.count - old.count) where bytes[i..<(i + old.count)].elementsEqual(old) {
            bytes.replaceSubrange(i..<(i + new.count), with: new)
            renamed += 1
        }
        #expect(renamed == 1)
        let noPid = try SupervisorSnapshot.decode(bytes)
        #expect(restore(noPid) == .inconsistent("'h.active' is active but has no pid"))

        var twice = snapshot
        twice.records.append(snapshot.records[0])
        #expect(restore(twice) == .inconsistent("two records have the id '\(snapshot.records[0].manifest.id)'"))

        var behind = snapshot
        behind.nextRequestID = 1
        #expect(restore(behind)?.description.contains("is not below the next request id 1") == true, "\(String(describing: restore(behind)))")

        var assertionsBehind = snapshot
        assertionsBehind.nextAssertionID = 1
        #expect(restore(assertionsBehind)?.description.contains("is not below the next assertion id 1") == true)

        var hosts = snapshot
        hosts.finishedRequests += hosts.finishedRequests
        #expect(restore(hosts) == .inconsistent("the finished requests of host 1 are listed twice"))

        let earlier = Self.refusal { _ = try Supervisor(restoring: snapshot, limits: testLimits(), now: .seconds(10)) }
        #expect(earlier == .clockBehind(takenAt: snapshot.takenAt, now: .seconds(10)))
        #expect(earlier?.description.contains("later than now (10.000s)") == true)
    }

    static func refusal(of result: Result<SupervisorSnapshot, HandoverError>) -> HandoverError? {
        if case .failure(let error) = result { error } else { nil }
    }

    @Test func noSnapshotDuringShutdownOrWhileASpawnStopOrResumeIsInFlight() throws {
        var w = World(Supervisor(manifests: [manifest("h.a", policy: Self.policy())], limits: testLimits(), now: .seconds(0)), now: .seconds(0))
        w.at(1, .begin(host: 1, peer: ownPeer, tag: 1, extensionID: "h.a"))
        let spawning = Self.refusal(of: w.sup.snapshot())
        #expect(spawning == .spawnInFlight(extensionID: "h.a"))
        #expect(spawning?.description == "'h.a' is being spawned and its process is not known yet: hand over once the spawn is answered")
        w.spawned("h.a", at: 1)
        #expect(Self.refusal(of: w.sup.snapshot()) == nil, "answered: it crosses, even before it is ready")
        w.ready("h.a", at: 1)
        let request = w.sup.records["h.a"]!.requests[0].id
        #expect(!w.at(2, .end(host: 1, tag: 2, requestID: request)).stops.isEmpty)
        let stopping = Self.refusal(of: w.sup.snapshot())
        #expect(stopping == .stopInFlight(extensionID: "h.a"))
        #expect(stopping?.description == "the stop or resume of 'h.a' is not confirmed yet: hand over once it is")
        w.at(2, .stopConfirmed(extensionID: "h.a", generation: w.gen("h.a")))
        #expect(Self.refusal(of: w.sup.snapshot()) == nil, "suspended: it crosses")
        #expect(!w.at(3, .begin(host: 1, peer: ownPeer, tag: 3, extensionID: "h.a")).resumes.isEmpty)
        #expect(Self.refusal(of: w.sup.snapshot()) == .stopInFlight(extensionID: "h.a"))
        w.at(3, .continueConfirmed(extensionID: "h.a", generation: w.gen("h.a")))
        #expect(Self.refusal(of: w.sup.snapshot()) == nil)
        w.at(4, .shutdown)
        #expect(Self.refusal(of: w.sup.snapshot()) == .shuttingDown)
    }

    // MARK: - Scale

    /// A thousand extensions, half of them suspended, a quarter active with a request and a
    /// quarter in the background with an assertion, hand over whole.
    @Test func aThousandExtensionsHandOverWhole() throws {
        let ms = (0..<1_000).map { manifest("scale.\($0)", policy: Self.policy()) }
        var w = World(Supervisor(manifests: ms, limits: testLimits(), now: .seconds(0)), now: .seconds(0))
        for (i, m) in ms.enumerated() {
            let t = Double(i) * 0.01
            let r = w.activate(m.id, host: HostID(1 + i % 7), at: t)
            switch i % 4 {
            case 0, 2:
                w.at(t, .end(host: HostID(1 + i % 7), tag: 2, requestID: r))
                w.at(t, .stopConfirmed(extensionID: m.id, generation: w.gen(m.id)))
            case 3:
                _ = w.grant(m.id, at: t)
                w.at(t, .end(host: HostID(1 + i % 7), tag: 2, requestID: r))
            default: break
            }
        }
        #expect(w.sup.stateCounts[.suspended] == 500)
        let restored = try Self.handOver(w.sup, at: w.now)
        try Self.expectSame(w.sup, restored)
    }
}
