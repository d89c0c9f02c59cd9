import ExtensionProtocol
import SupervisorCore
import Testing

@Suite("Sandbox decisions")
struct SandboxDecisionTests {
    let all = Set(SandboxPart.allCases)

    @Test func everyPartIsEnforcedWhereTheKernelAllowsIt() throws {
        var m = manifest()
        let d = try SandboxDecision.decide(m, support: .complete, requiredByDefault: all).get()
        #expect(d.enforced == [.filesystem, .proc, .network, .syscalls], "the network is allowed, through a namespace of its own")
        #expect(d.notEnforced.isEmpty)
        #expect(d.summary == "filesystem, proc, network (a namespace of its own), syscalls; network allowed")
        let noStack = SandboxSupport(noNetworkStack: "slirp4netns is not installed")
        let hostNetwork = try SandboxDecision.decide(m, support: noStack, requiredByDefault: []).get()
        #expect(hostNetwork.summary == "filesystem, proc, syscalls; network allowed; not enforced: network (slirp4netns is not installed)")
        #expect(throws: SandboxRefusal(part: .network, reason: "slirp4netns is not installed")) {
            try SandboxDecision.decide(m, support: noStack, requiredByDefault: all).get()
        }
        #expect(!hostNetwork.scoped)
        // Where Landlock scopes abstract sockets, an extension on the host's network namespace
        // gets that scope instead (and one with a namespace of its own needs none).
        let landlock = SandboxSupport(noNetworkStack: "slirp4netns is not installed", abstractSocketScope: true)
        let scoped = try SandboxDecision.decide(m, support: landlock, requiredByDefault: []).get()
        #expect(scoped.scoped)
        #expect(scoped.summary.hasSuffix("; the host's abstract unix sockets out of reach (Landlock)"))
        #expect(!(try SandboxDecision.decide(m, support: SandboxSupport(abstractSocketScope: true), requiredByDefault: all).get().scoped))
        m.policy.network = false
        let closed = try SandboxDecision.decide(m, support: .complete, requiredByDefault: all).get()
        #expect(closed.enforced == [.filesystem, .proc, .network, .syscalls])
        #expect(closed.summary == "filesystem, proc, network (loopback only), syscalls")
    }

    @Test func aMissingPartFailsTheLaunchOnlyWhereThePointRequiresIt() throws {
        let support = SandboxSupport(missing: [.proc: "no privilege"], userNamespace: true)
        let refused = SandboxDecision.decide(manifest(), support: support, requiredByDefault: all)
        #expect(refused == .failure(SandboxRefusal(part: .proc, reason: "no privilege")))
        #expect((try? refused.get()) == nil)
        let allowed = try SandboxDecision.decide(manifest(), support: support, requiredByDefault: []).get()
        #expect(allowed.enforced == [.filesystem, .network, .syscalls])
        #expect(allowed.notEnforced.map(\.part) == [.proc])
        #expect(allowed.summary == "filesystem, network (a namespace of its own), syscalls; network allowed; not enforced: proc (no privilege)")
        // A point naming its own requirements overrides the daemon's default.
        var m = manifest()
        m.policy.sandboxRequires = [.filesystem]
        #expect((try? SandboxDecision.decide(m, support: support, requiredByDefault: all).get())?.notEnforced.map(\.part) == [.proc])
        m.policy.sandboxRequires = [.proc]
        #expect(throws: SandboxRefusal.self) { try SandboxDecision.decide(m, support: support, requiredByDefault: []).get() }
    }

    @Test func anUnsandboxedManifestGetsNothing() throws {
        var m = manifest()
        m.sandboxed = false
        let d = try SandboxDecision.decide(m, support: SandboxSupport(missing: [.proc: "x"]), requiredByDefault: all).get()
        #expect(d.enforced.isEmpty)
        #expect(!d.enabled)
    }
}

@Suite("Sandbox file system view")
struct SandboxViewTests {
    typealias M = SandboxView.Mount

    @Test func keptDirectoriesAreBoundBackOnlyWhereHidden() {
        let view = SandboxView(
            scratch: ["/tmp", "/var/tmp"], masks: ["/home", "/root", "/var/lib/extensiond"],
            readOnly: ["/opt/widget/bin", "/tmp/ext"], writable: ["/var/lib/extensiond/extensions/a", "/var/lib/extensiond/containers/g"])
        #expect(
            view.mounts == [
                M("/home", .mask), M("/root", .mask), M("/tmp", .scratch),
                M("/tmp/ext", .keepReadOnly), M("/var/tmp", .scratch), M("/var/lib/extensiond", .mask),
                M("/var/lib/extensiond/containers/g", .keepWritable), M("/var/lib/extensiond/extensions/a", .keepWritable),
            ], "/opt/widget/bin is visible (read-only) as it is")
    }

    @Test func aMaskBelowAHiddenDirectoryIsDroppedButNotBelowAKeptOne() {
        // Tests: the state directory under /tmp, the executable's directory above it.
        let below = SandboxView(scratch: ["/tmp"], masks: ["/tmp/t/state"], readOnly: [], writable: ["/tmp/t/state/extensions/a"])
        #expect(below.mounts == [M("/tmp", .scratch), M("/tmp/t/state/extensions/a", .keepWritable)])
        let kept = SandboxView(scratch: ["/tmp"], masks: ["/tmp/t/state"], readOnly: ["/tmp/t"], writable: ["/tmp/t/state/extensions/a"])
        #expect(
            kept.mounts == [
                M("/tmp", .scratch), M("/tmp/t", .keepReadOnly), M("/tmp/t/state", .mask), M("/tmp/t/state/extensions/a", .keepWritable),
            ])
    }

    @Test func aPathAskedTwiceKeepsItsMostOpenKindAndSlashesAreIgnored() {
        let view = SandboxView(scratch: [], masks: ["/srv/"], readOnly: ["/srv/x", "/srv/x/"], writable: ["/srv/x"])
        #expect(view.mounts == [M("/srv", .mask), M("/srv/x", .keepWritable)])
        #expect(SandboxView.isBelow("/srv/x", "/srv"))
        #expect(!SandboxView.isBelow("/srvx", "/srv"))
        #expect(SandboxView.isBelow("/a", "/"))
        #expect(!SandboxView.isBelow("/", "/"))
        #expect(!SandboxView.isBelow("/srv", "/srv"))
    }

    /// Depth counts components whatever the slashes; parents come before what lies below them,
    /// and equal depths are ordered by path.
    @Test func depthCountsComponentsAndMountsComeParentsFirst() {
        #expect(SandboxView.depth("/") == 0)
        #expect(SandboxView.depth("/a//b/") == 2)
        #expect(SandboxView.depth("/a/b/c") == 3)
        let view = SandboxView(scratch: ["/tmp"], masks: ["/srv", "/home"], readOnly: ["/srv/b/c", "/srv/a"], writable: [])
        #expect(view.mounts.map(\.path) == ["/home", "/srv", "/tmp", "/srv/a", "/srv/b/c"])
    }
}

@Suite("Sandbox keys of manifests and points")
struct SandboxManifestTests {
    @Test func networkAndSandboxAreParsed() throws {
        let m = try parseManifest(minimal(", \"network\": false, \"sandbox\": \"default\"")).get()
        #expect(m.policy.network == false)
        #expect(m.sandboxed)
        #expect(try parseManifest(minimal(", \"sandbox\": \"none\"")).get().sandboxed == false)
        #expect(try parseManifest(minimal()).get().policy.network == true)
    }

    @Test func aManifestMayNotWidenItsPointsNetwork() throws {
        var points = ExtensionPoints.builtIn
        var offline = points.policies["default"]!
        offline.network = false
        points.policies["offline"] = offline
        let wide = parseManifest(minimal(", \"point\": \"offline\", \"network\": true"), points: points)
        #expect(
            wide
                == .failure(
                    ManifestError(
                        file: manifestFile, field: "network",
                        problem: "its extension point 'offline' gives no network, and a manifest may only restrict what its point allows")))
        let bad = parseManifest(minimal(", \"sandbox\": \"off\""))
        #expect(bad == .failure(ManifestError(file: manifestFile, field: "sandbox", problem: "unknown value 'off'")))
    }

    @Test func aPointNamesItsNetworkAndRequiredParts() throws {
        let config = try DaemonConfig.parse(
            Array(#"{"points": {"kiosk": {"network": false, "sandboxRequires": ["filesystem", "syscalls"]}}, "allowUnsandboxedExtensions": true}"#.utf8),
            file: "c.json"
        ).get()
        #expect(config.points.policies["kiosk"]?.network == false)
        #expect(config.points.policies["kiosk"]?.sandboxRequires == [.filesystem, .syscalls])
        #expect(config.allowUnsandboxedExtensions)
        let bad = DaemonConfig.parse(Array(#"{"points": {"kiosk": {"sandboxRequires": ["everything"]}}}"#.utf8), file: "c.json")
        #expect(
            bad
                == .failure(
                    ManifestError(
                        file: "c.json", field: "points.kiosk.sandboxRequires[0]",
                        problem: "unknown sandbox part 'everything' (known: filesystem, proc, network, syscalls)")))
    }
}

@Suite("Reset")
struct ResetTests {
    @Test func aRunningExtensionIsKilledAndItsContainerEmptiedOnceItExits() {
        var h = Harness()
        h.activate(at: 0)
        let e = h.step(.reset(host: 2, tag: 7, extensionID: extID), at: 1)
        #expect(e.signals.map(\.signal) == [SignalNumber.kill])
        #expect(!e.contains { if case .emptyContainer = $0 { true } else { false } }, "not before it is gone")
        let gone = h.exited(.signaled(9), at: 1.01)
        #expect(gone.contains(.emptyContainer(extensionID: extID, host: 2, tag: 7)))
        #expect(h.record.lastExit?.reason == .killedByAdmin)
    }

    @Test func aStoppedOrAbsentExtensionIsHandledAtOnce() {
        var h = Harness()
        let e = h.step(.reset(host: 2, tag: 8, extensionID: "com.example.removed"), at: 0)
        #expect(e.contains(.emptyContainer(extensionID: "com.example.removed", host: 2, tag: 8)))
        let idle = h.step(.reset(host: 2, tag: 9, extensionID: extID), at: 1)
        #expect(idle.contains(.emptyContainer(extensionID: extID, host: 2, tag: 9)), "not running: emptied at once")
        let request = h.activate(at: 2)
        h.suspendIdle(request: request, at: 3)
        #expect(h.state == .suspended)
        let suspended = h.step(.reset(host: 2, tag: 10, extensionID: extID), at: 4)
        #expect(suspended.signals.map(\.thenContinue) == [true], "a stopped group is continued for SIGKILL to act")
    }
}
