import ExtensionProtocol
import SupervisorCore
import Testing

/// Requests the extension ends itself: the host is told, the request closes as a dismissed one
/// does, and a later dismiss by the host is answered `ok`.
@Suite("Requests the extension completes")
struct RequestCompletionCoreTests {
    func finish(_ h: inout Harness, _ request: UInt64, _ outcome: RequestOutcome, at t: Double) -> [Effect] {
        h.step(.requestFinished(extensionID: h.id, generation: h.gen, requestID: request, outcome: outcome), at: t)
    }

    @Test func aCompletionRepliesToTheHostAndSuspendsAtOnce() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let e = finish(&h, rid, .completed(Array("result".utf8)), at: 2)
        #expect(e.replies.map(\.message) == [.completed(requestID: rid, payload: Array("result".utf8))])
        #expect(e.replies.map(\.host) == [1])
        #expect(e.endedRequests.isEmpty, "the runtime hears that the request is over once stopped, as after a dismiss")
        #expect(e.stops == [extID], "no request and no assertion left: stopped at once")
        #expect(e.events.map(\.kind) == [.end, .stopSent])
        #expect(e.events.first?.detail == "completed by the extension (6 bytes returned)")
        #expect(h.record.requests.isEmpty)

        // The host's dismiss crossed the completion: answered ok, once.
        let late = h.end(tag: 9, request: rid, at: 2.1)
        #expect(late.oks.map(\.tag) == [9])
        #expect(late.failures.isEmpty)
        let again = h.end(tag: 10, request: rid, at: 2.2)
        #expect(again.failures.map(\.code) == [.unknownRequest], "remembered for one dismiss only")
        #expect(h.stopConfirmed(at: 2.3).endedRequests == [rid])
    }

    @Test func aCancellationTellsTheReasonAndAnotherRequestKeepsItActive() {
        var h = Harness()
        let first = h.activate(at: 0)
        h.begin(host: 2, tag: 4, at: 1)
        let e = finish(&h, first, .cancelled("nothing to share"), at: 2)
        #expect(e.replies.map(\.message) == [.cancelled(requestID: first, reason: "nothing to share")])
        #expect(e.stops.isEmpty, "host 2 still holds a request")
        #expect(h.state == .active)
        #expect(e.events.first?.detail == "cancelled by the extension: nothing to share")
    }

    @Test func aRequestItsHostAlreadyEndedOrAnUnknownOneIsIgnored() {
        var h = Harness()
        let rid = h.activate(at: 0)
        h.end(request: rid, at: 1)
        #expect(finish(&h, rid, .completed([1]), at: 1.5).isEmpty)
        #expect(finish(&h, 999, .cancelled("x"), at: 1.6).isEmpty)
        // A dismissed request is not remembered as finished: a second end is an error.
        #expect(h.end(tag: 5, request: rid, at: 2).failures.map(\.code) == [.unknownRequest])
    }

    @Test func aCompletionFromAPreviousGenerationIsIgnored() {
        var h = Harness()
        let rid = h.activate(at: 0)
        let old = h.gen
        h.exited(.signaled(9), at: 1)
        let e = h.step(.requestFinished(extensionID: h.id, generation: old, requestID: rid, outcome: .completed([])), at: 2)
        #expect(e.replies.isEmpty)
    }

    @Test func theHostsMemoryOfFinishedRequestsIsBoundedAndDroppedWithTheHost() {
        var h = Harness()
        h.activate(host: 2, at: 0)  // keeps the extension active throughout
        var finished: [UInt64] = []
        for i in 0..<(Supervisor.finishedRemembered + 1) {
            let opened = h.begin(host: 1, tag: UInt32(100 + i), at: Double(i)).openRequests
            guard let rid = opened.first?.requestID else {
                Issue.record("no request opened: \(opened)")
                return
            }
            #expect(finish(&h, rid, .completed([]), at: Double(i) + 0.5).replies.count == 1)
            finished.append(rid)
        }
        #expect(h.end(tag: 1, request: finished[0], at: 200).failures.count == 1, "the oldest is forgotten")
        #expect(h.end(tag: 2, request: finished[1], at: 200).oks.count == 1)
        h.step(.hostGone(host: 1), at: 201)
        #expect(h.end(tag: 3, request: finished[2], at: 202).failures.count == 1, "forgotten with the host")
    }
}
