import ExtensionHost
import Foundation
import Testing

/// Java as a first-class runtime (bindings/java, docs/java.md): the JVM is the extension, on the
/// JNI library over libExtensionRuntimeC, with no bridge process (ManagedRuntimeTests runs Java
/// through Tests/Fixtures/runtime-bridge instead). As a third party would ship a widget: under
/// the widget point's default limits, sandbox and policy, under a uid of its own (a root
/// daemon). The fixture is Tests/Fixtures/java-extension/Widget.java. Needs a JDK 17
/// (openjdk-17-jdk-headless: jni.h, javac, jar) and a C compiler; a missing one fails these tests.
@Suite("Java runtime", .serialized, .enabled(if: getuid() == 0, "needs a root daemon (extensions under their own uids)"))
struct JavaRuntimeTests {
    static let packageRoot = RuntimeC.packageRoot
    static let id = "org.example.java-widget"
    static let jdk = "/usr/lib/jvm/java-17-openjdk-amd64"

    /// The widget point's defaults (docs/policies.md): expire 3 s after the dismiss, stop at 5 s.
    static let backgroundSeconds = 5.0
    static let expiryGraceSeconds = 2.0
    static let tolerance = 0.5

    /// JVM flags that fit the widget's limits (docs/policies.md): `tasksMax` 64 (RLIMIT_NPROC of
    /// its uid where there are no pids controllers) against the JVM's GC and compiler threads,
    /// which grow with the machine's CPUs; `memoryMaxBytes` 2 GiB, enforced as RLIMIT_DATA
    /// where there is no memory cgroup, against a heap sized from the machine's memory. Measured
    /// here: 16 threads and 38 MB resident once suspended.
    static let jvmFlags = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx64m", "-Xshare:auto", "-XX:-UsePerfData"]

    /// The runtime built by scripts/build-java-runtime.sh into a directory every uid can read
    /// (the checkout may lie below a 0700 directory): the jar, the JNI library and the C runtime
    /// beside it, and widget.jar (the fixture, with `Class-Path: extension-runtime.jar`). One
    /// absolute argument naming widget.jar is what makes the sandbox show the extension that
    /// directory (its /tmp is private otherwise). Built once per test process.
    static let built: Result<String, HarnessError> = Result(catching: {
        let directory = ReachableCopies.directory + "/java-runtime"
        let build = try runProgram("/bin/bash", [packageRoot + "/scripts/build-java-runtime.sh", "--out", directory])
        guard build.status == 0 else { throw HarnessError("scripts/build-java-runtime.sh failed: \(build.err)") }
        chmod(directory, 0o755)
        let java = jdk + "/bin/java"
        let javac =
            FileManager.default.isExecutableFile(atPath: jdk + "/bin/javac") ? [jdk + "/bin/javac"] : [java, "-m", "jdk.compiler/com.sun.tools.javac.Main"]
        let jar = FileManager.default.isExecutableFile(atPath: jdk + "/bin/jar") ? [jdk + "/bin/jar"] : [java, "-m", "jdk.jartool/sun.tools.jar.Main"]
        let classes = directory + "/widget-classes"
        let compile = try runProgram(
            javac[0],
            Array(javac.dropFirst()) + [
                "--release", "17", "-cp", directory + "/extension-runtime.jar", "-d", classes,
                packageRoot + "/Tests/Fixtures/java-extension/Widget.java",
            ])
        guard compile.status == 0 else { throw HarnessError("compiling Widget.java failed: \(compile.err)") }
        let manifest = directory + "/widget-manifest.txt"
        try Data("Class-Path: extension-runtime.jar\n".utf8).write(to: URL(fileURLWithPath: manifest))
        let archive = try runProgram(
            jar[0], Array(jar.dropFirst()) + ["--create", "--file", directory + "/widget.jar", "--manifest", manifest, "-C", classes, "."])
        guard archive.status == 0 else { throw HarnessError("jar failed: \(archive.err)") }
        chmod(directory + "/widget.jar", 0o644)
        return directory
    }).mapError { ($0 as? HarnessError) ?? HarnessError("\($0)") }

    static func manifest() throws -> [String: Any] {
        let directory = try built.get()
        return [
            "id": id, "point": "widget", "executable": try ManagedRuntimeTests.executable("java"),
            "arguments": jvmFlags + ["-Djava.library.path=" + directory, "-cp", directory + "/widget.jar", "Widget"],
        ]
    }

    func startDaemon() throws -> TestDaemon {
        let daemon = try TestDaemon(manifests: ["java.json": try Self.manifest()], extensionsAsRoot: false)
        try daemon.start()
        return daemon
    }

    /// A request reaches the JVM itself (the only process of the extension, under its own uid,
    /// with the JNI library mapped), its channel is read and written from Java, and
    /// `Request.complete` returns bytes to the host.
    @Test func aRequestIsAnsweredByTheJVMItself() throws {
        let daemon = try startDaemon()
        let host = try daemon.host()
        let results = RequestCompletionTests.Results()
        host.onResult { id, result in results.add(id, result) }
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("ping")
        // The JVM reports its pid in the extension's pid namespace (the sandbox's).
        let reported = try CredentialTests.namespacePID(session.pid)
        #expect(channel.readLine(timeout: 30) == "pong \(reported)", "\(daemon.log())")

        let entry = try ManagedRuntimeTests.statusEntry(daemon, Self.id)
        let pids = (entry["processes"] as? [[String: Any]])?.compactMap { $0["pid"] as? Int }
        #expect(pids == [Int(session.pid)], "the JVM alone, no bridge")
        let uid = try #require(UInt32(try ManagedRuntimeTests.statusField(session.pid, "Uid")))
        #expect(uid >= 1_879_113_728, "a uid of its own")
        // Read with cat: Foundation reads a /proc file (size 0) only in part, and a JVM's maps are long.
        let maps = try runProgram("/bin/cat", ["/proc/\(session.pid)/maps"]).out
        #expect(maps.contains("/libextension_runtime_jni.so") && maps.contains("/libExtensionRuntimeC.so.0"))

        let mark = daemon.events.count
        channel.send("complete hello from java")
        let (requestID, result) = try #require(results.next())
        #expect(requestID == session.requestID)
        #expect(result == .completed(Array("hello from java".utf8)))
        let end = try daemon.events.wait("end", of: Self.id, after: mark)
        #expect(end.detail == "completed by the extension (15 bytes returned)")
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        host.close()
        #expect(daemon.stop() == 0)
    }

    /// `performExpiringActivity` from Java: the assertion keeps the JVM running past the dismiss;
    /// *expire* comes on time (backgroundSeconds − expiryGraceSeconds after it) as the second,
    /// concurrent call, which the fixture reports on the channel; the granted call then returns,
    /// the assertion is released, and only then is the extension stopped, within
    /// backgroundSeconds.
    @Test func anAssertionOutlivesTheDismissAndExpiresOnTime() throws {
        let daemon = try startDaemon()
        let host = try daemon.host()
        let session = try host.begin(Self.id)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine(timeout: 30)?.hasPrefix("pong ") == true, "\(daemon.log())")
        channel.send("hold")
        #expect(channel.readLine() == "holding")
        let acquire = try daemon.events.wait("acquire", of: Self.id)
        #expect(acquire.detail == "java hold")

        let mark = daemon.events.count
        try host.dismiss(session)
        let end = try daemon.events.wait("end", of: Self.id, after: mark)
        #expect(processState(session.pid) != "T", "stopped while holding an assertion")
        #expect(channel.readLine() == "expired")
        let expire = try daemon.events.wait("expire", of: Self.id, after: mark)
        #expect(expire.assertion == acquire.assertion)
        let delay = expire.monotonic - end.monotonic
        #expect(abs(delay - (Self.backgroundSeconds - Self.expiryGraceSeconds)) < Self.tolerance, "expire sent \(delay)s after dismiss")
        let release = try daemon.events.wait("release", of: Self.id, after: mark)
        #expect(release.assertion == acquire.assertion)
        #expect(release.monotonic >= expire.monotonic)
        let stop = try daemon.events.wait("stop-sent", of: Self.id, after: mark)
        #expect(stop.monotonic >= release.monotonic)
        #expect(stop.monotonic - end.monotonic < Self.backgroundSeconds + Self.tolerance)
        #expect(!daemon.events.all.contains { $0.kind == "assertion-overrun" || $0.kind == "expiry-unacknowledged" })
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        let states = ManagedRuntimeTests.threadStates(session.pid)
        #expect(!states.isEmpty && states.allSatisfy { $0 == "T" }, "every thread of the JVM is stopped: \(states)")
        host.close()
        #expect(daemon.stop() == 0)
    }

    /// Suspended at dismiss with every thread stopped, the JVM is resumed by the next request:
    /// the same process, serving again.
    @Test func aSuspendedJVMIsResumedWithTheSamePID() throws {
        let daemon = try startDaemon()
        let host = try daemon.host()
        let first = try host.begin(Self.id)
        let channel = try first.hostChannel()
        channel.send("ping")
        let pong = try #require(channel.readLine(timeout: 30), "\(daemon.log())")
        let reported = try CredentialTests.namespacePID(first.pid)
        #expect(pong == "pong \(reported)")

        let mark = daemon.events.count
        try host.dismiss(first)
        try daemon.events.wait("suspend", of: Self.id, after: mark)
        let states = ManagedRuntimeTests.threadStates(first.pid)
        #expect(!states.isEmpty && states.allSatisfy { $0 == "T" }, "every thread of the JVM is stopped: \(states)")

        let second = try host.begin(Self.id)
        #expect(second.pid == first.pid, "resumed, not relaunched")
        try daemon.events.wait("resume", of: Self.id, after: mark)
        #expect(!ManagedRuntimeTests.threadStates(first.pid).contains("T"), "the JVM runs again")
        let again = try second.hostChannel()
        again.send("ping")
        #expect(again.readLine() == pong)
        #expect(!daemon.events.all.dropFirst(mark).contains { $0.kind == "launch" }, "no second launch")
        host.close()
        #expect(daemon.stop() == 0)
    }
}
