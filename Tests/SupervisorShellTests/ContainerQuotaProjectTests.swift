import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// How `ContainerQuota` puts containers under project quotas, through the recording kernel:
/// once per container (again after a reset), never on a file system found to enforce none,
/// only for an extension's own uid, and with the measurement going on beside it.
struct ContainerQuotaProjectTests {
    static let a = "/var/lib/extensiond/extensions/org.example.a"
    static let b = "/var/lib/extensiond/extensions/org.example.b"
    static let elsewhere = "/srv/quota/org.example.c"

    /// A kernel whose containers a and b are on device 1, c on device 2.
    func kernel() -> RecordingKernel {
        let k = RecordingKernel()
        for (path, device) in [(Self.a, UInt64(1)), (Self.b, 1), (Self.elsewhere, 2)] {
            k.statuses[path] = FileStatus(
                kind: .directory, permissions: 0o700, owner: 70000, group: 70000, size: 0, identity: FileIdentity(device: device, inode: 2))
        }
        return k
    }

    static let owner = FileOwner(uid: 70000, gid: 70000)

    /// A kernel whose next project quotas come to `outcomes`, and a quota on it.
    func quota(_ outcomes: [Result<ProjectQuotaOutcome, SystemError>]) -> (RecordingKernel, ContainerQuota) {
        let k = kernel()
        k.projectQuotas = outcomes
        return (k, ContainerQuota(kernel: k, logger: Logger(label: "test"), interval: 60))
    }

    func limits(_ k: RecordingKernel) -> [RecordingKernel.Call] {
        k.calls.filter { if case .limitTree = $0 { true } else { false } }
    }

    @Test func aContainerIsPutUnderItsQuotaOnceUntilItIsReplaced() {
        let (k, quota) = quota([.success(.limited), .success(.limited)])
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        quota.started("org.example.a", generation: 2, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        #expect(limits(k) == [.limitTree(Self.a, project: 70000, limit: 1 << 20)], "one while the first is under way")
        k.finishBackgroundWork()
        quota.started("org.example.a", generation: 3, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        #expect(limits(k).count == 1, "limited already")
        quota.started("org.example.a", generation: 4, path: Self.a, limit: 2 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        #expect(limits(k).last == .limitTree(Self.a, project: 70000, limit: 2 << 20), "a new limit is set")
        k.finishBackgroundWork()
        quota.containerReplaced(Self.a)
        k.projectQuotas = [.success(.limited)]
        quota.started("org.example.a", generation: 5, path: Self.a, limit: 2 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        #expect(limits(k).count == 3, "the empty container that replaced it is put under it again")
    }

    @Test func aContainerReplacedWhileItIsTaggedIsTaggedAgain() {
        let (k, quota) = quota([.success(.limited), .success(.limited)])
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        quota.containerReplaced(Self.a)
        k.finishBackgroundWork()  // the old tree's, set aside
        quota.started("org.example.a", generation: 2, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        #expect(limits(k).count == 2)
    }

    @Test func aFileSystemWithoutProjectQuotasIsNotTriedAgain() {
        let (k, quota) = quota([.success(.unavailable(SystemError("quotactl_fd", errno: ESRCH))), .success(.limited)])
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        k.finishBackgroundWork()
        quota.started("org.example.b", generation: 1, path: Self.b, limit: 1 << 20, owner: FileOwner(uid: 70001, gid: 70001))
        quota.started("org.example.a", generation: 2, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        #expect(limits(k).count == 1, "a and b share its file system")
        quota.started("org.example.c", generation: 1, path: Self.elsewhere, limit: 1 << 20, owner: FileOwner(uid: 70002, gid: 70002))
        #expect(limits(k).last == .limitTree(Self.elsewhere, project: 70002, limit: 1 << 20), "another file system is tried")
    }

    @Test func aFailureIsNotTriedAgainUntilTheLimitChanges() {
        let (k, quota) = quota([.failure(SystemError("set project", errno: EIO)), .success(.limited)])
        let owner = Self.owner
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: owner)
        k.finishBackgroundWork()
        quota.started("org.example.a", generation: 2, path: Self.a, limit: 1 << 20, owner: owner)
        #expect(limits(k).count == 1, "not a walk and a warning at every launch")
        quota.started("org.example.a", generation: 3, path: Self.a, limit: 2 << 20, owner: owner)
        #expect(limits(k).count == 2, "a new limit is tried")
    }

    @Test func withoutTheFilterItsLimitIsLifted() {
        let (k, quota) = quota([.success(.limited)])
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000), filtered: false)
        #expect(limits(k) == [.limitTree(Self.a, project: 70000, limit: 0)], "it could take its files out: measured only")
    }

    @Test func aLiftAskedForDuringAWalkIsMadeWhenItEnds() {
        let (k, quota) = quota([.success(.limited), .success(.limited)])
        let owner = Self.owner
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: owner)
        quota.started("org.example.a", generation: 2, path: Self.a, limit: nil, owner: owner)
        #expect(limits(k).count == 1)
        k.finishBackgroundWork()
        #expect(limits(k).last == .limitTree(Self.a, project: 70000, limit: 0))
    }

    @Test func theMeasurementGoesOnBesideIt() {
        let k = kernel()
        k.projectQuotas = [.success(.limited)]
        k.treeSizes = [.success(10)]
        let quota = ContainerQuota(kernel: k, logger: Logger(label: "test"), interval: 60)
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: FileOwner(uid: 70000, gid: 70000))
        k.finishBackgroundWork()
        quota.suspended("org.example.a")
        #expect(k.calls.contains(.measureTree(Self.a)))
    }

    @Test func onlyAnExtensionsOwnUidIsAProject() {
        #expect(ContainerQuota.owner(of: Credentials(uid: 70000, gid: 70001, ownUID: true)) == FileOwner(uid: 70000, gid: 70001))
        #expect(ContainerQuota.owner(of: Credentials(uid: 1000, gid: 1000, ownUID: false)) == nil, "a uid others may share")
        #expect(ContainerQuota.owner(of: Credentials(uid: 0, gid: 0, ownUID: true)) == nil, "project 0 is none")
        #expect(ContainerQuota.owner(of: nil) == nil)
        let (k, quota) = quota([.success(.limited)])
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: nil)
        #expect(limits(k).isEmpty, "no project")
    }

    @Test func aLaunchWithoutALimitLiftsTheOneSetBefore() {
        let (k, quota) = quota([.success(.limited), .success(.limited)])
        let owner = Self.owner
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: owner)
        k.finishBackgroundWork()
        quota.started("org.example.a", generation: 2, path: Self.a, limit: nil, owner: owner)
        #expect(limits(k).last == .limitTree(Self.a, project: 70000, limit: 0), "the manifest dropped its limit")
        k.finishBackgroundWork()
        quota.started("org.example.a", generation: 3, path: Self.a, limit: nil, owner: owner)
        #expect(limits(k).count == 2, "lifted already")
    }

    @Test func aContainerReplacedDuringAWalkIsTaggedAtOnce() {
        let (k, quota) = quota([.success(.limited), .success(.limited)])
        let owner = Self.owner
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: owner)
        quota.containerReplaced(Self.a)
        quota.started("org.example.a", generation: 2, path: Self.a, limit: 1 << 20, owner: owner)
        #expect(limits(k).count == 2, "the old tree's walk does not hold up the new container's")
    }

    @Test func aLimitChangedDuringAWalkIsSetWhenItEnds() {
        let (k, quota) = quota([.success(.limited), .success(.limited)])
        let owner = Self.owner
        quota.started("org.example.a", generation: 1, path: Self.a, limit: 1 << 20, owner: owner)
        quota.started("org.example.a", generation: 2, path: Self.a, limit: 2 << 20, owner: owner)
        #expect(limits(k).count == 1, "one walk of the tree at a time")
        k.finishBackgroundWork()
        #expect(limits(k).last == .limitTree(Self.a, project: 70000, limit: 2 << 20), "the running process's limit")
        k.finishBackgroundWork()
        #expect(limits(k).count == 2)
    }
}
