import Dispatch
import ExtensionHost
import ExtensionProtocol
import Foundation
import Synchronization
import Testing

/// Background refresh with a real daemon and extension processes: a suspended widget resumed
/// for a refresh, answering, suspended again, with a subscribed host told of new data; and
/// `extctl refresh` for every answer and every failure.
@Suite(.serialized)
struct BackgroundRefreshTests {
    static let id = "com.example.stocks.widget"

    static func widget(answer: String?, refresh: Bool = true, id: String = id) -> [String: Any] {
        var extra: [String: Any] = ["policy": ["refreshSeconds": 3, "expiryGraceSeconds": 1]]
        if refresh { extra["refresh"] = ["minimumIntervalSeconds": 900, "dailyBudget": 48] }
        return TestDaemon.testExtension(id, arguments: answer.map { ["--refresh", $0] } ?? [], extra: extra)
    }

    @Test func aSuspendedWidgetIsResumedAnsweredAndSuspendedAgainAndSubscribersAreTold() throws {
        let daemon = try TestDaemon(manifests: ["w.json": Self.widget(answer: "new-data")])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        var mark = daemon.events.count
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id, after: mark)

        let told = DispatchSemaphore(value: 0)
        let newData = Mutex<[String]>([])
        let panel = try daemon.host()
        try panel.subscribeToNewData([Self.id]) { id in
            newData.withLock { $0.append(id) }
            told.signal()
        }

        mark = daemon.events.count
        #expect(try host.refresh(Self.id) == .newData)
        let resume = try daemon.events.wait("resume", of: Self.id, after: mark)
        #expect(resume.pid == Int(session.pid), "resumed, not relaunched")
        let refreshed = try daemon.events.wait("refreshed", of: Self.id, after: mark)
        #expect(refreshed.detail == "new-data")
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        #expect(processState(session.pid) == "T", "back to suspended")
        #expect(told.wait(timeout: .now() + 10) == .success)
        #expect(newData.withLock { $0 } == [Self.id])

        let status = try daemon.extctl(["status", "--json", Self.id])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(status.out.utf8)) as? [String: Any])
        let e = try #require((document["extensions"] as? [[String: Any]])?.first)
        let refresh = try #require(e["refresh"] as? [String: Any], "\(e)")
        #expect(refresh["lastResult"] as? String == "new-data")
        #expect(refresh["lastAt"] is String)
        #expect(refresh["nextAt"] is String)
        #expect(refresh["budgetLeft"] as? Int == 48, "a forced refresh spends no budget")
        let words = try daemon.extctl(["status", Self.id])
        #expect(words.out.contains("Refresh: last new-data at "), "\(words.out)")
    }

    @Test(arguments: ["new-data", "no-data", "failed"])
    func extctlRefreshPrintsTheAnswer(answer: String) throws {
        let daemon = try TestDaemon(manifests: ["w.json": Self.widget(answer: answer)])
        try daemon.start()
        let result = try daemon.extctl(["refresh", Self.id])
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out == answer + "\n")
        // Launched for it, then suspended: a refresh never leaves it running.
        try daemon.events.wait("suspend", of: Self.id)
    }

    @Test func extctlRefreshFailsInOneLineWithoutSupportOrWithoutAnAnswer() throws {
        let daemon = try TestDaemon(manifests: [
            "none.json": Self.widget(answer: nil, refresh: false, id: "com.example.none"),
            "nohandler.json": Self.widget(answer: nil, id: "com.example.nohandler"),
            "never.json": Self.widget(answer: "never", id: "com.example.never"),
        ])
        try daemon.start()
        let none = try daemon.extctl(["refresh", "com.example.none"])
        #expect(none.status == 1)
        #expect(none.out.isEmpty)
        #expect(none.err == "extctl: 'com.example.none' does not support refresh (its manifest has no 'refresh')\n")

        let noHandler = try daemon.extctl(["refresh", "com.example.nohandler"])
        #expect(noHandler.status == 1)
        #expect(noHandler.err == "extctl: 'com.example.nohandler' does not support refresh (it registered no refresh handler)\n")

        let mark = daemon.events.count
        let never = try daemon.extctl(["refresh", "com.example.never"])
        #expect(never.status == 1)
        #expect(never.err == "extctl: 'com.example.never' did not answer its refresh: no answer within 3s (refreshSeconds)\n", "\(never.err)")
        // Treated as an assertion overrun: expire first, then the stop.
        try daemon.events.wait("expire", of: "com.example.never", after: mark)
        try daemon.events.wait("assertion-overrun", of: "com.example.never", after: mark)
        try daemon.events.wait("suspend", of: "com.example.never", after: mark)
    }
}
