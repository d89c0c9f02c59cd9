import Foundation  // the tests only: writes a registry as JSONSerialization would
import Logging
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// The registry file keeps its format (`{"daemonPID":…,"processes":[…],"version":1}`) and is read
/// back entry by entry, without Foundation in the daemon.
struct ProcessRegistryTests {
    let directory: String
    let logger = Logger(label: "test")
    let kernel = try! LinuxKernel(withLoop: false)

    init() throws {
        directory = NSTemporaryDirectory() + "/registry-tests-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    @Test func writesTheDocumentedFormatAndReadsItBack() throws {
        let path = directory + "/control.processes.json"
        let registry = ProcessRegistry(path: path, logger: logger, table: ProcessTable(kernel: kernel))
        registry.add(extensionID: "org.example.\"quoted\"/x", pid: getpid(), processGroup: getpgrp())
        #expect(registry.flush())
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let start = try #require(registry.entries[getpid()]?.startTicks)
        #expect(
            text
                == #"{"daemonPID":\#(getpid()),"processes":[{"id":"org.example.\"quoted\"\/x","pid":\#(getpid()),"processGroup":\#(getpgrp()),"startTicks":\#(start)}],"version":1}"#
                + "\n")
        #expect(
            ProcessRegistry.read(path, kernel: kernel) == [
                ProcessRegistry.Entry(extensionID: "org.example.\"quoted\"/x", pid: getpid(), processGroup: getpgrp(), startTicks: start)
            ])
        registry.removeFile()
        #expect(ProcessRegistry.read(path, kernel: kernel).isEmpty)
    }

    /// Exits are written together, within `removalDelaySeconds` of the first (a timer), not
    /// once each; a spawn's write, or one that asks for the removals (a hand-over, the
    /// shutdown), carries them at once.
    @Test func exitsAreWrittenTogetherWithinTheirDelay() throws {
        let k = RecordingKernel()
        let path = "/run/test/control.processes.json"
        let registry = ProcessRegistry(path: path, logger: logger, table: ProcessTable(kernel: k))
        func pids() -> [Int32] {
            let written = k.files[path] ?? ""
            return [100, 101, 102].filter { written.contains("\"pid\":\($0),") }
        }
        for pid: Int32 in [100, 101, 102] { registry.add(extensionID: "e\(pid)", pid: pid, processGroup: pid, startTicks: 17) }
        #expect(registry.flush())
        #expect(pids() == [100, 101, 102])
        k.clearCalls()
        registry.remove(pid: 100)
        registry.remove(pid: 101)
        #expect(registry.flush())
        #expect(pids() == [100, 101, 102], "not written at the end of the dispatch")
        #expect(k.timers.filter { !$0.cancelled }.map(\.at) == [k.clock.adding(seconds: ProcessRegistry.removalDelaySeconds)], "one timer for both")
        k.advance(to: k.clock.adding(seconds: ProcessRegistry.removalDelaySeconds))
        #expect(pids() == [102], "both exits written by the timer")
        #expect(k.calls.filter { $0 == .replaceFile(path) }.count == 1)
        registry.remove(pid: 102)
        #expect(registry.flush(includingRemovals: true))
        #expect(pids() == [], "a write that asks for the removals carries them at once")
        #expect(k.timers.allSatisfy { $0.cancelled }, "and its timer is cancelled")
    }

    /// Without a loop (no timer), an exit is written at the end of its dispatch.
    @Test func withoutATimerAnExitIsWrittenAtOnce() throws {
        let path = directory + "/exits.processes.json"
        let registry = ProcessRegistry(path: path, logger: logger, table: ProcessTable(kernel: kernel))
        func pids() -> [Int32] { ProcessRegistry.read(path, kernel: kernel).map(\.pid).sorted() }
        registry.add(extensionID: "a", pid: getpid(), processGroup: getpgrp())
        registry.add(extensionID: "b", pid: getppid(), processGroup: getppid(), startTicks: 17)
        #expect(registry.flush())
        #expect(pids() == [getpid(), getppid()].sorted())
        registry.remove(pid: getppid())
        #expect(registry.flush())
        #expect(pids() == [getpid()])
        #expect(ProcessRegistry.read(path, kernel: kernel).first?.startTicks == registry.startTicks(of: getpid()))
        registry.removeFile()
    }

    @Test func skipsMalformedEntriesOneByOne() throws {
        let path = directory + "/skips.processes.json"
        let document: [String: Any] = [
            "version": 1, "daemonPID": 1,
            "processes": [
                ["id": "good", "pid": 4242, "processGroup": 4242, "startTicks": 99],
                ["id": "pid-one", "pid": 1, "processGroup": 4242, "startTicks": 99],
                ["id": "negative-start", "pid": 4243, "processGroup": 4243, "startTicks": -1],
                ["id": "string-pid", "pid": "4244", "processGroup": 4244, "startTicks": 1],
                ["pid": 4245, "processGroup": 4245, "startTicks": 1],
                "not an object",
                ["id": "also-good", "pid": 4246, "processGroup": 4246, "startTicks": 0, "extra": true],
            ],
        ]
        try JSONSerialization.data(withJSONObject: document).write(to: URL(fileURLWithPath: path))
        #expect(
            ProcessRegistry.read(path, kernel: kernel) == [
                .init(extensionID: "good", pid: 4242, processGroup: 4242, startTicks: 99),
                .init(extensionID: "also-good", pid: 4246, processGroup: 4246, startTicks: 0),
            ])
    }

    @Test func unreadableFilesGiveNothing() throws {
        for (name, content) in [("empty", ""), ("garbage", "{"), ("array", "[]"), ("no-processes", #"{"version":1}"#)] {
            let path = directory + "/\(name).json"
            try Data(content.utf8).write(to: URL(fileURLWithPath: path))
            #expect(ProcessRegistry.read(path, kernel: kernel).isEmpty, "\(name)")
        }
        #expect(ProcessRegistry.read(directory + "/absent.json", kernel: kernel).isEmpty)
    }
}
