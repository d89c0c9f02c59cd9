import ExtensionTransport
import Glibc
import Logging
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// When the template of the sandboxed file system view is made, used and let go
/// (`SandboxTemplate`), through the recording kernel: it is made on another thread, a launch
/// never waits for it, and one made before a change of the mount table is never used.
struct SandboxTemplateTests {
    static let masks = ["/var/lib/extensiond", "/etc/extensiond/extensions"]

    func template(_ k: RecordingKernel) -> SandboxTemplate { SandboxTemplate(kernel: k, logger: Logger(label: "test")) }

    func builds(_ k: RecordingKernel) -> Int { k.calls.filter { $0 == .inBackground }.count }

    /// A change of the daemon's mount table, as the loop dispatches it.
    func mountTableChanges(_ k: RecordingKernel) throws {
        let watch = try #require(k.watches.first { $0.events == Poll.priority })
        watch.handler(Poll.priority)
    }

    @Test func theFirstLaunchStartsOneBuildAndTheLaunchesAfterItUseIt() {
        let k = RecordingKernel()
        k.sandboxTemplates = [.success(90)]
        let t = template(k)
        #expect(t.reference(masks: Self.masks) == nil, "not ready: this launch builds its whole view")
        #expect(t.reference(masks: Self.masks) == nil)
        #expect(builds(k) == 1, "one build at a time")
        k.finishBackgroundWork()
        #expect(t.reference(masks: Self.masks) == SandboxTemplateRef(fd: 90, masks: Self.masks))
        #expect(builds(k) == 1)
    }

    @Test func oneMadeBeforeAChangeOfTheMountTableIsLetGo() throws {
        let k = RecordingKernel()
        k.sandboxTemplates = [.success(90), .success(91)]
        let t = template(k)
        #expect(t.reference(masks: Self.masks) == nil)
        try mountTableChanges(k)
        k.finishBackgroundWork()
        #expect(k.calls.contains(.close(90)), "it holds the mounts there were")
        #expect(t.reference(masks: Self.masks) == nil, "a new one is started")
        #expect(builds(k) == 2)
        k.finishBackgroundWork()
        #expect(t.reference(masks: Self.masks)?.fd == 91)
        try mountTableChanges(k)
        #expect(k.calls.contains(.close(91)), "dropped at the change")
    }

    @Test func otherMasksMakeAnotherOne() {
        let k = RecordingKernel()
        k.sandboxTemplates = [.success(90), .success(91)]
        let t = template(k)
        _ = t.reference(masks: Self.masks)
        k.finishBackgroundWork()
        #expect(t.reference(masks: ["/srv/other"]) == nil, "a reload changed the masks")
        #expect(k.calls.contains(.close(90)))
        k.finishBackgroundWork()
        #expect(t.reference(masks: ["/srv/other"])?.fd == 91)
    }

    @Test func aFailureIsTriedAgainOnlyAfterTheMountTableChanges() throws {
        let k = RecordingKernel()
        k.sandboxTemplates = [.failure(SystemError("sandbox template", errno: EIO)), .success(91)]
        let t = template(k)
        _ = t.reference(masks: Self.masks)
        k.finishBackgroundWork()
        #expect(t.reference(masks: Self.masks) == nil)
        #expect(builds(k) == 1, "not retried at each launch")
        try mountTableChanges(k)
        #expect(t.reference(masks: Self.masks) == nil)
        #expect(builds(k) == 2)
        k.finishBackgroundWork()
        #expect(t.reference(masks: Self.masks)?.fd == 91)
    }

    @Test func aRefusalTurnsTemplatesOffForGood() throws {
        let k = RecordingKernel()
        k.sandboxTemplates = [.failure(SystemError("sandbox template", errno: EPERM))]
        let t = template(k)
        _ = t.reference(masks: Self.masks)
        k.finishBackgroundWork()
        try mountTableChanges(k)
        #expect(t.reference(masks: Self.masks) == nil)
        #expect(builds(k) == 1)
    }

    @Test func oneArrivingAfterTemplatesWereTurnedOffIsLetGo() {
        let k = RecordingKernel()
        k.sandboxTemplates = [.success(90)]
        let t = template(k)
        _ = t.reference(masks: Self.masks)
        t.disable("a launch could not enter one")
        k.finishBackgroundWork()
        #expect(k.calls.contains(.close(90)))
        #expect(t.reference(masks: Self.masks) == nil)
    }
}
