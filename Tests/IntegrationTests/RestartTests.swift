import ExtensionHost
import Foundation
import Testing

/// A daemon killed without a shutdown (SIGKILL, abort, watchdog) leaves its extensions
/// behind, stopped or running; its successor on the same socket ends them, from the process
/// registry (control.processes.json), and never touches a process that merely reused a pid.
@Suite(.serialized)
struct RestartTests {
    static let id = "com.example.restart"

    /// The pids recorded in the daemon's registry file.
    func registered(_ daemon: TestDaemon) throws -> [Int32] {
        let data = try Data(contentsOf: URL(fileURLWithPath: daemon.registryPath))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let processes = try #require(document["processes"] as? [[String: Any]])
        return processes.compactMap { ($0["pid"] as? Int).map(Int32.init) }
    }

    @Test func theSuccessorEndsTheSuspendedExtensionsOfAKilledDaemon() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("spawn 2")
        #expect(channel.readLine()?.hasPrefix("spawned ") == true)
        let members = groupMembers(session.pid)
        #expect(members.count == 4, "leader, two children, a grandchild: \(members)")
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: Self.id)
        #expect(try registered(daemon) == [session.pid])

        try daemon.crash()
        // Left behind: stopped, in their group, with nobody to resume or reclaim them.
        for pid in members { #expect(processState(pid) == "T", "pid \(pid)") }

        try daemon.start()
        try eventually("every process of the killed daemon's extension is gone") { members.allSatisfy { processState($0) == nil } }
        #expect(daemon.log().contains("reaped leftover pid \(session.pid) of \(Self.id) from a previous run"), "\(daemon.log())")
        #expect(try registered(daemon).isEmpty, "the successor truncated the registry")
        // The successor supervises as usual: a new request launches a new process.
        let again = try daemon.host().begin(Self.id)
        #expect(again.pid != session.pid)
        #expect(try registered(daemon) == [again.pid], "written when the spawn was handled, before the reply")
    }

    @Test func membersLeftInTheGroupOfAnExitedLeaderAreEnded() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("spawn 2")
        #expect(channel.readLine()?.hasPrefix("spawned ") == true)
        let children = groupMembers(session.pid).filter { $0 != session.pid }
        #expect(children.count == 3)

        try daemon.crash()
        // The leader dies after its supervisor: its children live on in its group, orphaned.
        kill(session.pid, SIGKILL)
        try eventually("the leader is gone") { processState(session.pid) == nil }
        for pid in children { #expect(processState(pid) != nil, "pid \(pid)") }

        try daemon.start()
        try eventually("the orphaned children are gone") { children.allSatisfy { processState($0) == nil } }
        #expect(daemon.log().contains("(left in the group of its exited leader)"), "\(daemon.log())")
    }

    @Test func aProcessThatReusedARecordedPidIsLeftAlone() throws {
        let daemon = try TestDaemon(manifests: [:])
        // A live process leading its own session, which the registry claims with another start time.
        let bystander = try RawProcess("/usr/bin/setsid", ["/bin/sleep", "1000"], log: "/dev/null")
        defer { bystander.stop(SIGKILL) }
        let pid = bystander.pid
        try eventually("the bystander leads its own group") { groupMembers(pid) == [pid] && processState(pid) == "S" }
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        let start = try #require(Int(fields[19]))
        let registry: [String: Any] = [
            "version": 1, "daemonPID": 1,
            "processes": [["id": "com.example.gone", "pid": Int(pid), "processGroup": Int(pid), "startTicks": start - 1]],
        ]
        try JSONSerialization.data(withJSONObject: registry).write(to: URL(fileURLWithPath: daemon.registryPath))

        try daemon.start()
        // Leftovers are reaped before READY=1, so this is after the decision was made.
        #expect(!daemon.log().contains("reaped leftover"), "\(daemon.log())")
        #expect(processState(pid) == "S")
        #expect(try registered(daemon).isEmpty)
    }

    @Test func aRegistryOthersCouldWriteIsIgnored() throws {
        let daemon = try TestDaemon(manifests: [:])
        // A live group leader, recorded exactly, but in a file anyone could have written.
        let bystander = try RawProcess("/usr/bin/setsid", ["/bin/sleep", "1000"], log: "/dev/null")
        defer { bystander.stop(SIGKILL) }
        let pid = bystander.pid
        try eventually("the bystander leads its own group") { groupMembers(pid) == [pid] && processState(pid) == "S" }
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let start = try #require(Int(stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")[19]))
        let registry: [String: Any] = [
            "version": 1, "daemonPID": 1,
            "processes": [["id": "com.example.planted", "pid": Int(pid), "processGroup": Int(pid), "startTicks": start]],
        ]
        try JSONSerialization.data(withJSONObject: registry).write(to: URL(fileURLWithPath: daemon.registryPath))
        chmod(daemon.registryPath, 0o666)

        try daemon.start()
        #expect(daemon.log().contains("ignoring the process registry \(daemon.registryPath)"), "\(daemon.log())")
        #expect(!daemon.log().contains("reaped leftover"))
        #expect(processState(pid) == "S")
    }

    @Test func aCleanShutdownLeavesNoRegistry() throws {
        let daemon = try TestDaemon(manifests: ["test.json": TestDaemon.testExtension(Self.id)])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        try daemon.events.wait("ready", of: Self.id)
        #expect(try registered(daemon) == [session.pid])
        #expect(daemon.stop() == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.registryPath))
        #expect(processState(session.pid) == nil)
    }
}
