import SupervisorCore
import Testing

/// Whose question goes to polkit next (PolkitTurns: pure): the caps across callers and per uid,
/// and the order of turns.
@Suite struct PolkitTurnsTests {
    /// Takes every turn `next` gives now.
    static func drain(_ turns: inout PolkitTurns<String>) -> [String] {
        var asked: [String] = []
        while let c = turns.next() { asked.append(c) }
        return asked
    }

    @Test func oneUsersManyCallersHoldAtMostItsShareAndAnotherUserStillGetsATurn() {
        var turns = PolkitTurns<String>(limit: 32, perUser: 4)
        for i in 0..<128 { turns.wait("a\(i)", uid: 1000) }
        #expect(Self.drain(&turns) == ["a0", "a1", "a2", "a3"], "one uid: at most perUser in flight, in the order they waited")
        turns.wait("b", uid: 1001)
        #expect(Self.drain(&turns) == ["b"], "another uid is asked at once")
        turns.answered("a2")
        #expect(Self.drain(&turns) == ["a4"], "a freed slot goes to the same uid's oldest waiting caller")
        #expect(turns.inFlight == 5)
        #expect(turns.waitingCount == 123)
    }

    @Test func atMostLimitQuestionsAreInFlightAcrossUsers() {
        var turns = PolkitTurns<String>(limit: 3, perUser: 2)
        for uid in UInt32(1)...4 { turns.wait("c\(uid)", uid: uid) }
        #expect(Self.drain(&turns) == ["c1", "c2", "c3"])
        turns.answered("c2")
        #expect(Self.drain(&turns) == ["c4"], "the oldest waiting caller gets the freed slot")
        #expect(turns.next() == nil)
    }

    @Test func aCallerAsksOnceAtATimeAndWaitsOnce() {
        var turns = PolkitTurns<String>(limit: 8, perUser: 8)
        turns.wait("x", uid: 5)
        turns.wait("x", uid: 5)
        #expect(turns.waitingCount == 1)
        #expect(turns.next() == "x")
        turns.wait("x", uid: 5)
        #expect(turns.waitingCount == 0, "a caller asking does not wait as well")
        #expect(turns.isAsking("x"))
        turns.answered("x")
        #expect(!turns.isAsking("x"))
        turns.answered("x")
        #expect(turns.inFlight == 0, "an answer counted twice frees nothing more")
    }

    @Test func aCallerThatLeavesFreesItsSlotAndItsPlace() {
        var turns = PolkitTurns<String>(limit: 1, perUser: 1)
        turns.wait("p", uid: 1)
        turns.wait("q", uid: 2)
        turns.wait("r", uid: 3)
        #expect(turns.next() == "p")
        turns.leave("q")
        turns.leave("p")
        #expect(turns.next() == "r", "q left while waiting, p while asking")
        #expect(turns.next() == nil)
    }

    @Test func capsBelowOneAreOne() {
        let turns = PolkitTurns<String>(limit: 0, perUser: 9)
        #expect(turns.limit == 1 && turns.perUser == 1)
    }

    /// Random waits, answers and leaves: the caps always hold, and once every question is
    /// answered every waiting caller has had its turn (no one starves).
    @Test(arguments: 0..<20) func randomTurnsKeepTheCapsAndStarveNoOne(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var turns = PolkitTurns<String>(limit: 5, perUser: 2)
        var uidOf: [String: UInt32] = [:]
        var asking: Set<String> = []
        var waiting: Set<String> = []
        for _ in 0..<2_000 {
            switch random.next() % 4 {
            case 0:
                let caller = "c\(random.next() % 40)"
                let uid = uidOf[caller] ?? UInt32(random.next() % 6)
                uidOf[caller] = uid
                turns.wait(caller, uid: uid)
                if !asking.contains(caller) { waiting.insert(caller) }
            case 1:
                if let c = asking.randomElement(using: &random) {
                    turns.answered(c)
                    asking.remove(c)
                }
            case 2:
                if random.next() % 8 == 0, let c = (asking.union(waiting)).randomElement(using: &random) {
                    turns.leave(c)
                    asking.remove(c)
                    waiting.remove(c)
                }
            default:
                while let c = turns.next() {
                    #expect(waiting.remove(c) != nil, "only a waiting caller is asked")
                    asking.insert(c)
                }
            }
            #expect(turns.inFlight == asking.count && turns.inFlight <= 5)
            var perUser: [UInt32: Int] = [:]
            for c in asking { perUser[uidOf[c]!, default: 0] += 1 }
            #expect(perUser.values.allSatisfy { $0 <= 2 })
            #expect(turns.waitingCount == waiting.count)
        }
        while !waiting.isEmpty || !asking.isEmpty {
            while let c = turns.next() {
                waiting.remove(c)
                asking.insert(c)
            }
            guard let c = asking.first else { break }
            turns.answered(c)
            asking.remove(c)
        }
        #expect(waiting.isEmpty, "every waiting caller had its turn")
    }
}
