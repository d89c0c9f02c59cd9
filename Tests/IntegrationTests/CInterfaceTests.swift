import ExtensionHost
import Foundation
import Testing

/// The C ABI: an extension written in C (examples/c-extension) built against
/// include/extension_runtime.h and libExtensionRuntimeC.so takes assertions like a Swift one.
@Suite(.serialized)
struct CInterfaceTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Compiles examples/c-extension/main.c into `directory`, as strict ISO C11 with every
    /// warning an error, and returns the binary's path.
    func buildCExtension(in directory: String) throws -> String {
        let binary = directory + "/c-extension"
        let cc = try runProgram(
            "/usr/bin/env",
            [
                "cc", "-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", Self.packageRoot + "/examples/c-extension/main.c",
            ] + (try RuntimeC.flags()) + ["-lpthread", "-o", binary])
        try #require(cc.status == 0, "cc failed: \(cc.err)")
        return binary
    }

    @Test func anExtensionInCTakesAssertions() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let binary = try buildCExtension(in: directory)
        let state = directory + "/state.txt"
        let daemon = try TestDaemon(manifests: [
            "c.json": ["id": "org.example.c", "executable": binary, "environment": ["C_EXTENSION_STATE": state]]
        ])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin("org.example.c")
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)")
        channel.send("save hello from C")
        #expect(channel.readLine() == "saved")
        let acquire = try daemon.events.wait("acquire", of: "org.example.c")
        #expect(acquire.detail == "save state")
        let release = try daemon.events.wait("release", of: "org.example.c")
        #expect(release.assertion == acquire.assertion)
        #expect(try String(contentsOfFile: state, encoding: .utf8) == "hello from C\n")
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: "org.example.c")
    }

    /// A host that closes its channel before the answer does not end the extension: the example
    /// answers with MSG_NOSIGNAL (the runtime leaves SIGPIPE's default, which would end it). The
    /// state's temporary file is a FIFO, so the save (and its answer) waits until the test has
    /// closed the channel and reads the FIFO; the assertion is released once the answer was
    /// written.
    @Test func aHostGoneBeforeTheAnswerDoesNotEndTheExtension() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let binary = try buildCExtension(in: directory)
        let state = directory + "/state.txt"
        try #require(mkfifo(state + ".tmp", 0o600) == 0)
        let daemon = try TestDaemon(manifests: [
            "c.json": ["id": "org.example.c", "executable": binary, "environment": ["C_EXTENSION_STATE": state]]
        ])
        try daemon.start()
        let session = try daemon.host().begin("org.example.c")
        let channel = try session.hostChannel()
        channel.send("save gone")
        channel.close()
        let fifo = open(state + ".tmp", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        try #require(fifo >= 0)
        defer { close(fifo) }
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {  // until the save closes its end
            var pfd = pollfd(fd: fifo, events: Int16(POLLIN), revents: 0)
            try #require(poll(&pfd, 1, 10_000) == 1, "the save opens the FIFO")
            let n = read(fifo, &buffer, buffer.count)
            if n == 0 { break }
            try #require(n > 0 || errno == EAGAIN)
        }
        let end = try daemon.events.wait("the assertion's release or a crash") {
            $0.id == "org.example.c" && ($0.kind == "release" || $0.kind == "crash")
        }
        #expect(end.kind == "release", "\(end)")
    }

    @Test func withoutASupervisorTheCExtensionSaysSo() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try runProgram(try buildCExtension(in: directory), [])
        #expect(result.status == 1)
        #expect(result.err == "c-extension: not launched by extensiond\n")
    }

    /// The Python example, with the package from the source tree (PythonPackageTests installs
    /// it with pip).
    @Test func anExtensionInPythonTakesAssertionsThroughCtypes() throws {
        let directory = try TestDaemon.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = directory + "/state.txt"
        let daemon = try TestDaemon(manifests: [
            "py.json": [
                "id": "org.example.python", "executable": "/usr/bin/python3",
                "arguments": [Self.packageRoot + "/examples/python-extension/extension.py"],
                "environment": [
                    "PY_EXTENSION_STATE": state,
                    "EXTENSION_RUNTIME_LIB": try RuntimeC.library(),
                    "PYTHONPATH": Self.packageRoot + "/bindings/python/src",
                ],
            ]
        ])
        try daemon.start()
        let host = try daemon.host()
        let session = try host.begin("org.example.python")
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(session.pid)")
        channel.send("save hello from Python")
        #expect(channel.readLine() == "saved")
        let acquire = try daemon.events.wait("acquire", of: "org.example.python")
        #expect(acquire.detail == "python save")
        let release = try daemon.events.wait("release", of: "org.example.python")
        #expect(release.assertion == acquire.assertion)
        #expect(try String(contentsOfFile: state, encoding: .utf8) == "hello from Python\n")
        try host.dismiss(session)
        try daemon.events.wait("suspend", of: "org.example.python")
    }
}
