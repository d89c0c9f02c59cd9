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

    @Test func aWalkThatEndsUnderALaterProcessCountsForIt() {
        let k = RecordingKernel()
        k.treeSizes = [.success(500)]
        let sink = Sink()
        let quota = ContainerQuota(kernel: k, logger: Logger(label: "test"), interval: 60)
        quota.sink = sink
        quota.started(Self.id, generation: 1, path: Self.path, limit: 100)
        quota.suspended(Self.id)
        quota.ended(Self.id)
        quota.started(Self.id, generation: 2, path: Self.path, limit: 100)
        k.finishBackgroundWork()
        #expect(sink.events == [.diskLimitExceeded(extensionID: Self.id, generation: 2, bytes: 500)], "the container is over its limit now")
    }

    @Test func aWalkThatEndsWithNoProcessIsDropped() {
        let k = RecordingKernel()
        k.treeSizes = [.success(500)]
        let sink = Sink()
        let quota = ContainerQuota(kernel: k, logger: Logger(label: "test"), interval: 60)
        quota.sink = sink
        quota.started(Self.id, generation: 1, path: Self.path, limit: 100)
        quota.suspended(Self.id)
        quota.ended(Self.id)
        k.finishBackgroundWork()
        #expect(sink.events.isEmpty)
    }
}
