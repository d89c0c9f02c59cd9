import SupervisorCore
import Testing

@testable import SupervisorShell

/// A channel that holds more than one read takes at every wake-up for a whole second is a
/// flood, whatever rate the daemon manages; one read that is not full starts the count anew.
struct ChannelSaturationTests {
    func process() -> SupervisedProcess {
        SupervisedProcess(extensionID: "x", generation: 1, pid: 100, pidfd: 7, cgroup: nil, mechanism: .stop, channel: nil, queueLimit: 1024)
    }

    @Test func fullReadsForASecondAreAFlood() {
        let p = process()
        #expect(!p.noteRead(64, budget: 64, at: .seconds(10), seconds: 1))
        #expect(!p.noteRead(64, budget: 64, at: .seconds(10.5), seconds: 1))
        #expect(p.noteRead(64, budget: 64, at: .seconds(11), seconds: 1))
    }

    @Test func aReadThatIsNotFullStartsAgain() {
        let p = process()
        #expect(!p.noteRead(64, budget: 64, at: .seconds(10), seconds: 1))
        #expect(!p.noteRead(12, budget: 64, at: .seconds(10.9), seconds: 1))
        #expect(!p.noteRead(64, budget: 64, at: .seconds(11.2), seconds: 1))
        #expect(!p.noteRead(64, budget: 64, at: .seconds(12.1), seconds: 1))
        #expect(p.noteRead(64, budget: 64, at: .seconds(12.2), seconds: 1))
    }
}
