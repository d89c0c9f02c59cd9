import ExtensionHost
import Foundation
import Testing

/// Node.js and Java as extensions, as a third party writing a widget in JavaScript or Java
/// would run them: under the widget point's default limits, under a uid of their own (a root
/// daemon), serving requests through Tests/Fixtures/runtime-bridge (neither runtime can use the
/// runtime channel's SOCK_SEQPACKET socket or receive a descriptor). scripts/dependencies.sh
/// installs `nodejs` and `openjdk-17-jre-headless`; a missing runtime fails these tests.
@Suite("Managed runtimes", .serialized, .enabled(if: getuid() == 0, "needs a root daemon (extensions under their own uids)"))
struct ManagedRuntimeTests {
    static let packageRoot = RuntimeC.packageRoot

    /// How to start one runtime's fixture, and what its `ping` answers.
    struct Runtime {
        var id: String
        var command: [String]
        var pong: (Int32) -> String
    }

    /// The runtime bridge, linked with the C runtime's sources so that it needs no library
    /// outside `ReachableCopies.directory`.
    static let bridge: Result<String, HarnessError> = Result(catching: {
        let binary = ReachableCopies.directory + "/runtime-bridge"
        let sources = ["Tests/Fixtures/runtime-bridge/main.c", "runtime-c/runtime.c", "runtime-c/wire.c", "runtime-c/defaults.c", "runtime-c/secrets.c"].map {
            packageRoot + "/" + $0
        }
        let cc = try runProgram(
            "/usr/bin/env", ["cc", "-std=gnu11", "-Wall", "-Werror", "-I", packageRoot + "/include"] + sources + ["-lpthread", "-o", binary])
        guard cc.status == 0 else { throw HarnessError("cc failed: \(cc.err)") }
        return binary
    }).mapError { ($0 as? HarnessError) ?? HarnessError("\($0)") }

    static func executable(_ name: String) throws -> String {
        for directory in ["/usr/bin", "/usr/local/bin"] where FileManager.default.isExecutableFile(atPath: directory + "/" + name) {
            return directory + "/" + name
        }
        throw HarnessError("\(name) is not installed: run scripts/dependencies.sh")
    }

    static func node() throws -> Runtime {
        let script = try ReachableCopies.copy(packageRoot + "/Tests/Fixtures/node-extension/main.js", executable: false)
        return Runtime(id: "org.example.node", command: [try executable("node"), script]) { "pong \($0) wasm 5 memory 65536" }
    }

    /// The Java fixture, compiled by the JRE's own compiler module (no JDK needed).
    static let javaClasses: Result<String, HarnessError> = Result(catching: {
        let classes = ReachableCopies.directory + "/java-extension"
        let javac = try runProgram(
            try executable("java"), ["-m", "jdk.compiler/com.sun.tools.javac.Main", "-d", classes, packageRoot + "/Tests/Fixtures/java-extension/Main.java"])
        guard javac.status == 0 else { throw HarnessError("compiling Main.java failed: \(javac.err)") }
        chmod(classes, 0o755)
        chmod(classes + "/Main.class", 0o644)
        return classes
    }).mapError { ($0 as? HarnessError) ?? HarnessError("\($0)") }

    static func java() throws -> Runtime {
        Runtime(id: "org.example.java", command: [try executable("java"), "-cp", try javaClasses.get(), "Main"]) { "pong \($0) java 17" }
    }

    static func manifest(_ runtime: Runtime, limits: [String: Any] = [:]) throws -> [String: Any] {
        var m: [String: Any] = ["id": runtime.id, "point": "widget", "executable": try bridge.get(), "arguments": runtime.command]
        if !limits.isEmpty { m["limits"] = limits }
        return m
    }

    static func statusEntry(_ daemon: TestDaemon, _ id: String) throws -> [String: Any] {
        let result = try daemon.extctl(["status", "--json", id])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
        return try #require((document["extensions"] as? [[String: Any]])?.first)
    }

    /// The state letter of every thread of `pid` (the field after the command in
    /// /proc/PID/task/TID/stat).
    static func threadStates(_ pid: Int32) -> [Character] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { tid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            return stat[stat.index(close, offsetBy: 2)...].first
        }
    }

    /// The cgroup v1 memory cgroup directory of `pid` (its `memory` line of /proc/PID/cgroup
    /// under the v1 memory mount), or nil.
    static func memoryCgroupV1(_ pid: Int32) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.split(separator: ":")[1].split(separator: ",").contains("memory") })
        else { return nil }
        return "/sys/fs/cgroup/memory" + line.split(separator: ":", maxSplits: 2)[2]
    }

    /// A field of /proc/PID/status (its first value).
    static func statusField(_ pid: Int32, _ name: String) throws -> String {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(name + ":") })
        return String(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == "\t" || $0 == " " }).first ?? "")
    }

    /// Serves a request, is suspended at dismiss with every thread of every process stopped,
    /// resumed by the next request, and ended by `extctl kill` with nothing left.
    func servesIsSuspendedResumedAndKilled(_ runtime: Runtime) throws {
        let daemon = try TestDaemon(manifests: ["r.json": try Self.manifest(runtime)], extensionsAsRoot: false)
        try daemon.start()
        let host = try daemon.host()
        let first = try host.begin(runtime.id)
        let channel = try first.hostChannel()
        channel.send("ping")
        let pong = try #require(channel.readLine(timeout: 30))
        let entry = try Self.statusEntry(daemon, runtime.id)
        let runtimePID = try #require((entry["processes"] as? [[String: Any]])?.compactMap { $0["pid"] as? Int }.first { $0 != Int(first.pid) })
        // The runtime reports its pid in the extension's pid namespace (the sandbox's).
        let reported = try CredentialTests.namespacePID(Int32(runtimePID))
        #expect(pong == runtime.pong(reported))

        let uid = try #require(UInt32(try Self.statusField(first.pid, "Uid")))
        #expect(uid >= 1_879_113_728, "a uid of its own")
        #expect(try Self.statusField(Int32(runtimePID), "Uid") == "\(uid)")
        let memory = try #require((entry["limits"] as? [String: Any])?["memoryMaxBytes"] as? [String: Any])
        #expect(memory["value"] as? Int == 2_147_483_648, "the widget point's default")
        #expect(["memory.max", "memory.limit_in_bytes", "RLIMIT_DATA"].contains(memory["enforcedWith"] as? String ?? ""), "\(memory)")
        let cgroup = try #require(entry["cgroup"] as? String)
        let members = cgroupProcesses(cgroup)
        #expect(Set(members) == [first.pid, Int32(runtimePID)], "the bridge and the runtime, in the extension's cgroup")

        var memoryCgroup: String?
        if memory["enforcedWith"] as? String == "memory.limit_in_bytes" {
            let found: String = try #require(Self.memoryCgroupV1(first.pid))
            memoryCgroup = found
            #expect(memoryCgroup?.hasSuffix("/" + runtime.id) == true, "\(memoryCgroup ?? "")")
            #expect(Self.memoryCgroupV1(Int32(runtimePID)) == memoryCgroup, "the runtime started by the bridge is in it too")
            let limit = try String(contentsOfFile: memoryCgroup! + "/memory.limit_in_bytes", encoding: .utf8)
            #expect(limit == "2147483648\n")
        }

        let mark = daemon.events.count
        try host.dismiss(first)
        try daemon.events.wait("suspend", of: runtime.id, after: mark)
        for pid in members {
            let states = Self.threadStates(pid)
            #expect(!states.isEmpty && states.allSatisfy { $0 == "T" }, "every thread of pid \(pid) is stopped: \(states)")
        }
        #expect(Self.threadStates(Int32(runtimePID)).count > 2, "the runtime has threads of its own")

        let second = try host.begin(runtime.id)
        #expect(second.pid == first.pid, "resumed, not relaunched")
        try daemon.events.wait("resume", of: runtime.id, after: mark)
        for pid in members { #expect(!Self.threadStates(pid).contains("T"), "pid \(pid) runs again") }
        let again = try second.hostChannel()
        again.send("ping")
        #expect(again.readLine(timeout: 30) == runtime.pong(reported))

        _ = try daemon.extctl(["kill", runtime.id])
        let exit = try daemon.events.wait("exit", of: runtime.id, after: mark, timeout: 30)
        #expect(exit.detail?.hasPrefix("killed-by-admin") == true, "\(exit)")
        #expect(cgroupProcesses(cgroup).isEmpty, "nothing left in \(cgroup)")
        for pid in members { #expect(processState(pid) == nil, "pid \(pid) is gone") }
        if let memoryCgroup { #expect(!FileManager.default.fileExists(atPath: memoryCgroup), "\(memoryCgroup) is removed") }
        host.close()
        #expect(daemon.stop() == 0)
    }

    /// With a small `memoryMaxBytes` the runtime still starts and serves; an allocation past
    /// the limit is stopped by it: the runtime's own out-of-memory error, or the kernel's OOM
    /// killer, recorded as `memory-limit`.
    func anAllocationPastTheLimitIsStopped(_ runtime: Runtime) throws {
        let limit = 256 << 20
        let daemon = try TestDaemon(manifests: ["r.json": try Self.manifest(runtime, limits: ["memoryMaxBytes": limit])], extensionsAsRoot: false)
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin(runtime.id)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine(timeout: 30)?.hasPrefix("pong ") == true, "it starts and serves under \(limit) bytes")
        let memory = try #require((try Self.statusEntry(daemon, runtime.id)["limits"] as? [String: Any])?["memoryMaxBytes"] as? [String: Any])
        #expect(memory["value"] as? Int == limit)
        let mark = daemon.events.count
        channel.send("allocate 1024")
        let answer = channel.readLine(timeout: 60)
        print("\(runtime.id) allocating 1024 MiB under \(limit >> 20) MiB (\(memory["enforcedWith"] ?? "?")): \(answer ?? "no answer")")
        if let answer, answer.hasPrefix("OutOfMemoryError after ") || answer.hasPrefix("out of memory after ") {
            let reached = try #require(Int(answer.split(separator: " ")[answer.hasPrefix("OutOfMemoryError") ? 2 : 3]))
            #expect(reached < limit >> 20, "\(answer)")
            channel.send("ping")
            #expect(channel.readLine(timeout: 30)?.hasPrefix("pong ") == true, "the runtime handled its error and serves on")
        } else {
            #expect(answer == nil, "no answer but an out-of-memory error: \(answer ?? "")")
            let crash = try daemon.events.wait("crash", of: runtime.id, after: mark, timeout: 60)
            #expect(crash.detail?.hasPrefix("memory-limit") == true, "\(crash)")
            let last = try #require(try Self.statusEntry(daemon, runtime.id)["lastExit"] as? [String: Any])
            #expect(last["reason"] as? String == "memory-limit")
            print("\(runtime.id): \(crash.detail ?? "")")
        }
        host.close()
        #expect(daemon.stop() == 0)
    }

    @Test func nodeInstantiatesWebAssemblyServesIsSuspendedResumedAndKilled() throws {
        try servesIsSuspendedResumedAndKilled(try Self.node())
    }

    @Test func javaServesIsSuspendedResumedAndKilled() throws {
        try servesIsSuspendedResumedAndKilled(try Self.java())
    }

    @Test func nodeAllocatingPastItsLimitIsStopped() throws {
        try anAllocationPastTheLimitIsStopped(try Self.node())
    }

    @Test func javaAllocatingPastItsLimitIsStopped() throws {
        try anAllocationPastTheLimitIsStopped(try Self.java())
    }
}
