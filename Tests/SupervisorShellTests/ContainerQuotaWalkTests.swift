import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// When `ContainerQuota` walks a container, through the recording kernel: one walk per
/// container at a time, whichever process asked, and a walk's result applies to the process
/// running when it ends.
struct ContainerQuotaWalkTests {
    static let id = "org.example.big"
    static let path = "/var/lib/extensiond/extensions/org.example.big"

    final class Sink: EventSink {
        var events: [Event] = []
        func post(_ event: Event) { events.append(event) }
        func batch(_ body: () -> Void) { body() }
    }

    func walks(_ k: RecordingKernel) -> Int { k.calls.filter { $0 == .measureTree(Self.path) }.count }

    @Test func aRelaunchDuringAWalkStartsNoOther() {
        let k = RecordingKernel()
        k.treeSizes = [.success(10), .success(10)]
        let quota = ContainerQuota(kernel: k, logger: Logger(label: "test"), interval: 60)
        for generation in 1...5 {
            // A crash loop: launched, suspended at once (a walk), ended, relaunched.
            quota.started(Self.id, generation: UInt64(generation), path: Self.path, limit: 100)
            quota.suspended(Self.id)
            quota.ended(Self.id)
        }
        #expect(walks(k) == 1, "the first walk is still going")
        k.finishBackgroundWork()
        quota.started(Self.id, generation: 6, path: Self.path, limit: 100)
        quota.suspended(Self.id)
        #expect(walks(k) == 2, "once it ended, the next check walks again")
    }

    /// A quota whose container is 500 bytes (over its 100), with generation 1 suspended (a
    /// walk begun) and ended: its kernel, its posts and itself.
    func walkedThenEnded() -> (RecordingKernel, Sink, ContainerQuota) {
        let k = RecordingKernel()
        k.treeSizes = [.success(500)]
        let sink = Sink()
        let quota = ContainerQuota(kernel: k, logger: Logger(label: "test"), interval: 60)
        quota.sink = sink
        quota.started(Self.id, generation: 1, path: Self.path, limit: 100)
        quota.suspended(Self.id)
        quota.ended(Self.id)
        return (k, sink, quota)
    }

    @Test func aWalkThatEndsUnderALaterProcessCountsForIt() {
        let (k, sink, quota) = walkedThenEnded()
        quota.started(Self.id, generation: 2, path: Self.path, limit: 100)
        k.finishBackgroundWork()
        #expect(sink.events == [.diskLimitExceeded(extensionID: Self.id, generation: 2, bytes: 500)], "the container is over its limit now")
    }

    @Test func aWalkThatEndsWithNoProcessIsDropped() {
        let (k, sink, quota) = walkedThenEnded()
        withExtendedLifetime(quota) { k.finishBackgroundWork() }
        #expect(sink.events.isEmpty, "nothing runs to end")
    }

    /// `extctl reset` replaced the container during a walk: the walk goes on in the old tree,
    /// set aside, and its result does not end the process that runs in the empty one.
    @Test func aWalkOfAContainerReplacedMeanwhileCountsForNothing() {
        let (k, sink, quota) = walkedThenEnded()
        k.treeSizes = [.success(10)]
        quota.containerReplaced(Self.path)
        quota.started(Self.id, generation: 2, path: Self.path, limit: 100)
        quota.suspended(Self.id)
        #expect(walks(k) == 2, "the new container is walked at once")
        k.finishBackgroundWork()
        #expect(sink.events.isEmpty, "the old tree's 500 bytes are not the new container's")
    }
}
