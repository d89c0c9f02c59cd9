import ExtensionProtocol
import SupervisorCore
import Testing

/// Notification hints in the core: routing by phase, coalescing for suspended observers,
/// per-generation observation, and who may post.
@Suite("Notification hints")
struct NotificationHintCoreTests {
    static let hint = "\(extID).quotes"

    func observe(_ h: inout Harness, _ name: String = hint, at t: Double) {
        h.step(.observe(extensionID: h.id, generation: h.gen, name: name), at: t)
    }

    func post(_ h: inout Harness, _ name: String = hint, peer: PeerIdentity = ownPeer, tag: UInt32 = 50, at t: Double) -> [Effect] {
        h.step(.post(host: 9, peer: peer, tag: tag, name: name), at: t)
    }

    func notified(_ e: [Effect]) -> [String] { e.sent.compactMap { if case let .notify(n) = $0 { n } else { nil } } }

    @Test func anAwakeObserverIsToldOfEachPostAndTheHostGetsOk() {
        var h = Harness()
        h.activate(at: 0)
        observe(&h, at: 1)
        let e = post(&h, at: 2)
        #expect(notified(e) == [Self.hint])
        #expect(e.oks.map(\.tag) == [50])
        #expect(notified(post(&h, at: 3)) == [Self.hint])
        #expect(notified(post(&h, "\(extID).other", at: 4)).isEmpty, "not observed")
    }

    @Test func aSuspendedObserverGetsOneHintPerNameOnResumeAndIsNotResumedForIt() {
        var h = Harness()
        let rid = h.activate(at: 0)
        observe(&h, at: 1)
        observe(&h, "\(extID).news", at: 1)
        h.suspendIdle(request: rid, at: 2)
        #expect(h.state == .suspended)
        for t in [3.0, 3.1, 3.2] {
            let e = post(&h, at: t)
            #expect(notified(e).isEmpty)
            #expect(e.resumes.isEmpty, "a hint never resumes")
            #expect(e.oks.count == 1)
        }
        _ = post(&h, "\(extID).news", at: 3.3)
        #expect(h.record.hints.held == [Self.hint, "\(extID).news"])
        h.begin(host: 1, tag: 7, at: 4)
        let resumed = h.continueConfirmed(at: 4.01)
        #expect(notified(resumed) == [Self.hint, "\(extID).news"], "once per name, in the order of the first post")
        #expect(h.record.hints.held.isEmpty)
        #expect(notified(post(&h, at: 5)) == [Self.hint], "awake again: delivered at once")
    }

    @Test func aPostDuringTheStopIsHeldAndANotRunningExtensionGetsNothing() {
        var h = Harness()
        let rid = h.activate(at: 0)
        observe(&h, at: 1)
        h.end(request: rid, at: 2)
        #expect(h.phase == .stopping(wasExpiring: false))
        #expect(notified(post(&h, at: 2.001)).isEmpty)
        #expect(h.record.hints.held == [Self.hint])
        h.exited(.signaled(9), at: 3)
        #expect(h.record.hints.observed.isEmpty, "observations end with the process")
        #expect(h.record.hints.held.isEmpty)
        let e = post(&h, at: 4)
        #expect(notified(e).isEmpty)
        #expect(e.spawns.isEmpty, "a hint never launches")
    }

    @Test func aNewProcessObservesNothingUntilItAsks() {
        var h = Harness()
        h.activate(at: 0)
        observe(&h, at: 1)
        h.exited(.exited(0), at: 2)
        h.activate(tag: 3, at: 3)
        #expect(notified(post(&h, at: 4)).isEmpty)
        observe(&h, at: 5)
        #expect(notified(post(&h, at: 6)) == [Self.hint])
    }

    @Test func anObservationFromAnOldGenerationOrWithABadNameIsIgnored() {
        var h = Harness()
        h.activate(at: 0)
        let old = h.gen
        h.exited(.exited(0), at: 1)
        h.activate(tag: 3, at: 2)
        h.step(.observe(extensionID: h.id, generation: old, name: Self.hint), at: 3)
        observe(&h, "bad name", at: 3)
        #expect(h.record.hints.observed.isEmpty)
    }

    @Test func whoMayPost() {
        let stranger = PeerIdentity(pid: 5, uid: 3000, gid: 3000)
        var h = Harness([manifest(hosts: HostRestriction(uids: [3000])), manifest("com.example.private")])
        #expect(post(&h, peer: stranger, at: 1).oks.count == 1, "under an extension it may open")
        #expect(post(&h, extID, peer: stranger, at: 1).oks.count == 1, "the id itself")
        let underPrivate = post(&h, "com.example.private.x", peer: stranger, at: 1)
        #expect(underPrivate.failures.map(\.code) == [.notPermitted])
        let text = underPrivate.replies.compactMap { if case let .failure(_, _, text) = $0.message { text } else { nil } }
        #expect(text == ["uid 3000 may not post 'com.example.private.x': it is under 'com.example.private', which it may not open"])
        #expect(
            post(&h, "com.example.privateer", peer: stranger, at: 1).failures.map(\.code) == [.notPermitted],
            "a longer name that is not under the id (no dot) is a system name")
        #expect(post(&h, "org.example.system", peer: stranger, at: 1).failures.map(\.code) == [.notPermitted])
        #expect(post(&h, "org.example.system", peer: ownPeer, at: 1).oks.count == 1, "the daemon's uid may post system names")
        #expect(post(&h, "bad name", at: 1).failures.map(\.code) == [.badRequest])
    }
}
