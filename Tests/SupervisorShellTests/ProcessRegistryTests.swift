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

    /// An exit alone does not rewrite the file (a stale entry is harmless: its start time is
    /// checked before anything is ended); the next spawn's write, or a write that asks for the
    /// removals (a hand-over, the shutdown), drops it.
    @Test func anExitAloneWaitsForTheNextWrite() throws {
        let path = directory + "/exits.processes.json"
        let registry = ProcessRegistry(path: path, logger: logger, table: ProcessTable(kernel: kernel))
        func pids() -> [Int32] { ProcessRegistry.read(path, kernel: kernel).map(\.pid).sorted() }
        registry.add(extensionID: "a", pid: getpid(), processGroup: getpgrp())
        registry.add(extensionID: "b", pid: getppid(), processGroup: getppid(), startTicks: 17)
        #expect(registry.flush())
        #expect(pids() == [getpid(), getppid()].sorted())
        registry.remove(pid: getppid())
        #expect(registry.flush())
        #expect(pids() == [getpid(), getppid()].sorted(), "not written for an exit alone")
        #expect(registry.flush(includingRemovals: true))
        #expect(pids() == [getpid()])
        registry.remove(pid: getpid())
        registry.add(extensionID: "b", pid: getppid(), processGroup: getppid(), startTicks: 17)
        #expect(registry.flush())
        #expect(pids() == [getppid()], "a spawn's write carries the exits before it")
        #expect(ProcessRegistry.read(path, kernel: kernel).first?.startTicks == 17, "a known start time is kept as given")
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
