import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Prewarm hints")
struct PrewarmTests {
    static func prewarm(_ ids: [String], tag: UInt32 = 1) -> Event {
        .prewarm(host: 1, peer: ownPeer, tag: tag, extensionIDs: ids)
    }

    @Test func prewarmLaunchesANotRunningExtensionAndSuspendsItWhenReady() {
        var h = Harness()
        let e = h.step(Self.prewarm([extID], tag: 5), at: 0)
        #expect(e.spawns.map(\.id) == [extID])
        #expect(e.events(.prewarm).count == 1)
        #expect(e.oks.map(\.tag) == [5])
        #expect(h.record.prewarmed)
        #expect(h.state == .launching)
        h.spawned(at: 0.5)
        let r = h.ready(at: 1)
        #expect(r.openRequests.isEmpty)
        #expect(r.stops == [extID], "nobody asked for it yet: stop it at once")
        h.stopConfirmed(at: 1)
        #expect(h.state == .suspended)
        // The next begin only resumes it.
        let b = h.begin(at: 5)
        #expect(b.resumes == [extID])
        #expect(b.spawns.isEmpty)
    }

    @Test func aBeginDuringThePrewarmLaunchIsServedOnReady() {
        var h = Harness()
        h.step(Self.prewarm([extID]), at: 0)
        let b = h.begin(tag: 9, at: 0.1)
        #expect(b.spawns.isEmpty, "the prewarm launch serves it")
        h.spawned(at: 0.2)
        let r = h.ready(at: 0.3)
        #expect(r.openRequests.map(\.tag) == [9])
        #expect(r.stops.isEmpty)
        #expect(h.state == .active)
    }

    @Test func prewarmOfARunningExtensionDoesNothingButAnswers() {
        var h = Harness()
        h.activate(at: 0)
        let e = h.step(Self.prewarm([extID], tag: 2), at: 1)
        #expect(e.spawns.isEmpty)
        #expect(e.oks.map(\.tag) == [2])
        #expect(h.state == .active)
    }

    @Test func prewarmWithAnUnknownIdLaunchesNothing() {
        var h = Harness([manifest("a.one")])
        let e = h.step(Self.prewarm(["a.one", "zz.unknown"], tag: 3), at: 0)
        #expect(e.failures.map(\.code) == [.unknownExtension])
        #expect(e.failures.first?.tag == 3)
        #expect(e.spawns.isEmpty)
        #expect(e.oks.isEmpty)
        #expect(h.record("a.one")?.state == .notRunning)
    }

    @Test func maxPrewarmedIsRespectedAcrossHints() {
        let ids = ["p.a", "p.b", "p.c", "p.d"]
        var h = Harness(ids.map { manifest($0) }, limits: testLimits { $0.maxPrewarmed = 2 })
        let first = h.step(Self.prewarm(["p.a", "p.b", "p.c"]), at: 0)
        #expect(first.spawns.map(\.id) == ["p.a", "p.b"])
        #expect(first.oks.count == 1)
        let second = h.step(Self.prewarm(["p.d"]), at: 1)
        #expect(second.spawns.isEmpty, "two prewarmed extensions already wait")
        #expect(second.oks.count == 1)
        #expect(h.record("p.c")?.state == .notRunning)
        #expect(h.record("p.d")?.state == .notRunning)
    }

    @Test func aPrewarmedExtensionThatExitedFreesItsSlot() {
        var h = Harness([manifest("p.a"), manifest("p.b")], limits: testLimits { $0.maxPrewarmed = 1 }, focus: "p.a")
        h.step(Self.prewarm(["p.a"]), at: 0)
        #expect(h.step(Self.prewarm(["p.b"]), at: 0).spawns.isEmpty)
        h.spawned(at: 0)
        h.ready(at: 0)
        h.stopConfirmed(at: 0)
        h.tick(at: 600)  // reclaimed
        h.exited(.signaled(9), at: 600)
        #expect(h.step(Self.prewarm(["p.b"]), at: 601).spawns.map(\.id) == ["p.b"])
    }

    @Test func aThrottledExtensionIsNotPrewarmed() {
        var h = Harness([manifest()], limits: testLimits { $0.crashBackoffBaseSeconds = 10 })
        h.activate(at: 0)
        h.exited(.exited(1), at: 1)
        h.activate(at: 1)
        h.exited(.exited(1), at: 2)  // throttled until 12
        let e = h.step(Self.prewarm([extID]), at: 3)
        #expect(e.spawns.isEmpty)
        #expect(e.oks.count == 1)
        #expect(h.step(Self.prewarm([extID]), at: 12).spawns.count == 1)
    }
}

@Suite("Host authorization and limits")
struct HostAuthorizationTests {
    static func peer(uid: UInt32, gid: UInt32 = 5000) -> PeerIdentity {
        PeerIdentity(pid: 77, uid: uid, gid: gid)
    }

    @Test func aForeignUidIsNotPermitted() {
        var h = Harness()
        let e = h.begin(tag: 6, peer: Self.peer(uid: 2000), at: 0)
        #expect(e.failures.map(\.code) == [.notPermitted])
        #expect(e.failures.first?.tag == 6)
        #expect(e.spawns.isEmpty)
        #expect(e.events(.refuse).count == 1)
        #expect(h.state == .notRunning)
    }

    @Test(arguments: [UInt32(0), daemonUID])
    func rootAndTheDaemonUidMayOpenAnything(uid: UInt32) {
        var h = Harness([manifest(hosts: HostRestriction(uids: [3000]))])
        let e = h.begin(peer: Self.peer(uid: uid), at: 0)
        #expect(e.failures.isEmpty)
        #expect(e.spawns.count == 1)
    }

    @Test func uidsListedInTheManifestMayOpenIt() {
        var h = Harness([manifest(hosts: HostRestriction(uids: [3000, 3001]))])
        #expect(h.begin(peer: Self.peer(uid: 3001), at: 0).spawns.count == 1)
        #expect(h.begin(host: 2, peer: Self.peer(uid: 3002), at: 0).failures.map(\.code) == [.notPermitted])
    }

    @Test func gidsListedInTheManifestMayOpenIt() {
        var h = Harness([manifest(hosts: HostRestriction(gids: [44]))])
        #expect(h.begin(peer: Self.peer(uid: 3000, gid: 44), at: 0).spawns.count == 1)
        #expect(h.begin(host: 2, peer: Self.peer(uid: 3000, gid: 45), at: 0).failures.map(\.code) == [.notPermitted])
    }

    @Test func authorizationIsPerExtension() {
        var h = Harness([manifest("a.open", hosts: HostRestriction(uids: [3000])), manifest("b.closed")])
        #expect(h.begin(peer: Self.peer(uid: 3000), id: "a.open", at: 0).spawns.count == 1)
        #expect(h.begin(peer: Self.peer(uid: 3000), id: "b.closed", at: 0).failures.map(\.code) == [.notPermitted])
    }

    @Test func thePerHostRequestLimitCountsOpenAndPendingRequests() {
        var h = Harness([manifest("a.one"), manifest("b.two")], limits: testLimits { $0.maxRequestsPerHost = 2 }, focus: "a.one")
        let rid = h.activate(host: 1, at: 0)  // open
        h.begin(host: 1, id: "b.two", at: 1)  // pending (launching)
        let third = h.begin(host: 1, tag: 3, at: 1)
        #expect(third.failures.map(\.code) == [.limitReached])
        #expect(third.failures.first?.tag == 3)
        #expect(third.openRequests.isEmpty)
        #expect(h.begin(host: 2, at: 1).openRequests.count == 1, "the limit is per host connection")
        h.end(host: 1, request: rid, at: 2)
        #expect(h.begin(host: 1, tag: 4, at: 3).failures.isEmpty, "a slot was freed")
    }
}

@Suite("Authorization by group")
struct GroupAuthorizationTests {
    func manifest(gids: [UInt32]) -> Manifest {
        Manifest(
            id: "g.ext", executable: "/bin/true", policy: ExtensionPoints.builtIn.policies["widget"]!,
            hosts: HostRestriction(uids: [], gids: gids))
    }

    @Test func aSupplementaryGroupListedInHostsMayOpen() {
        var s = Supervisor(
            manifests: [manifest(gids: [500])],
            limits: {
                var l = SupervisorLimits(); l.daemonUID = 1000; return l
            }(), now: .seconds(0))
        let stranger = PeerIdentity(pid: 9, uid: 2000, gid: 2000, groups: [500])
        let effects = s.handle(.begin(host: 1, peer: stranger, tag: 1, extensionID: "g.ext"), at: .seconds(0))
        #expect(effects.contains { if case .spawn = $0 { true } else { false } })
    }

    @Test func prewarmIsRefusedToHostsThatMayNotOpen() {
        var s = Supervisor(
            manifests: [manifest(gids: [500])],
            limits: {
                var l = SupervisorLimits(); l.daemonUID = 1000; return l
            }(), now: .seconds(0))
        let stranger = PeerIdentity(pid: 9, uid: 2000, gid: 2000, groups: [600])
        let effects = s.handle(.prewarm(host: 1, peer: stranger, tag: 4, extensionIDs: ["g.ext"]), at: .seconds(0))
        #expect(
            effects.contains(
                .reply(host: 1, message: .failure(tag: 4, code: .notPermitted, text: "uid 2000 may not open 'g.ext' (see the manifest's 'hosts')"))))
        #expect(!effects.contains { if case .spawn = $0 { true } else { false } })
    }
}
