import CBenchShims
import ExtensionProtocol
import Foundation

/// The bench extension started without a supervisor: the bench plays the daemon's part on its
/// runtime channel (fd 3): it waits for `ready` and hands it a request channel with `deliver`.
/// This is the physical limit the supervised figures are compared with.
final class RawExtension {
    let pid: Int32
    /// The bench's end of the runtime channel (SOCK_SEQPACKET).
    let runtime: Int32
    /// The host end of the request channel, once delivered.
    var request: Int32 = -1

    /// Spawns it exactly as extensiond would; does not wait for `ready`.
    init(executable: String, id: String) throws {
        var fds: [Int32] = [-1, -1]
        let rc = bench_seqpacket_pair(&fds)
        if rc != 0 { throw BenchError("socketpair: \(String(cString: strerror(-rc)))") }
        defer { close(fds[1]) }
        do {
            pid = try spawnLikeTheDaemon(executable, environment: extensionEnvironment(id: id), channel: fds[1])
        } catch {
            close(fds[0])
            throw error
        }
        runtime = fds[0]
    }

    /// Blocks until the extension sends `ready` on its runtime channel.
    func waitReady() throws {
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = recv(runtime, &buffer, buffer.count, 0)
        guard n > 0 else { throw BenchError("raw extension \(pid) closed its channel before ready") }
        guard case .ready? = try? WireDecoder.decode(Array(buffer[0..<n])) else {
            throw BenchError("raw extension \(pid) sent something other than ready")
        }
    }

    /// Hands it a request channel, as the daemon's `deliver` does; keeps the host end.
    func deliver(requestID: UInt64 = 1) throws {
        var pair: [Int32] = [-1, -1]
        guard bench_stream_pair(&pair) == 0 else { throw BenchError("socketpair failed") }
        let bytes = try WireEncoder.encoded(.deliver(requestID: requestID))
        let rc = bytes.withUnsafeBytes { bench_send_fd(runtime, $0.baseAddress, $0.count, pair[1]) }
        close(pair[1])
        if rc < 0 { throw BenchError("deliver: \(String(cString: strerror(Int32(-rc))))") }
        if request >= 0 { close(request) }
        request = pair[0]
    }

    /// SIGKILL (and SIGCONT, in case it is stopped) to its group, then reaps it.
    func kill() {
        _ = Glibc.kill(-pid, SIGKILL)
        _ = Glibc.kill(-pid, SIGCONT)
        _ = bench_waitid(pid, WEXITED)
        close(runtime)
        if request >= 0 { close(request) }
    }
}

enum Baselines {
    /// A raw round trip over a SOCK_SEQPACKET socketpair between this process and a helper
    /// process that echoes each datagram (the floor of any request/reply between two processes).
    /// With `cpus`, the bench is pinned to the first CPU and the helper to the second: the same
    /// CPU measures two context switches, two CPUs measure two cross-CPU wake-ups.
    static func socketpairRoundTrip(iterations: Int, gapMicroseconds: UInt32, cpus: (Int32, Int32)? = nil) throws -> Samples {
        var fds: [Int32] = [-1, -1]
        guard bench_seqpacket_pair(&fds) == 0 else { throw BenchError("socketpair failed") }
        let helperCPU = cpus.map { ["\($0.1)"] } ?? []
        let pid = try spawnLikeTheDaemon(selfExecutable, arguments: ["--helper", "echo"] + helperCPU, environment: [], channel: fds[1], quiet: true)
        close(fds[1])
        if let cpus { _ = bench_pin_cpu(cpus.0) }
        defer {
            if cpus != nil { _ = bench_pin_cpu(-1) }
            close(fds[0])
            _ = bench_waitid(pid, WEXITED)
        }
        var samples = Samples()
        var byte: UInt8 = 1
        for i in 0..<(iterations + iterations / 10) {
            let t0 = now()
            guard send(fds[0], &byte, 1, 0) == 1, recv(fds[0], &byte, 1, 0) == 1 else { throw BenchError("echo helper failed") }
            if i >= iterations / 10 { samples.add(now() - t0) }
            if gapMicroseconds > 0 { usleep(gapMicroseconds) }
        }
        return samples
    }

    /// Raw spawn of the extension binary + handshake over its inherited socketpair: spawn as the
    /// daemon does, wait for `ready`, deliver a request channel, one ping on it.
    static func rawLaunch(executable: String, iterations: Int) throws -> Samples {
        var samples = Samples()
        for i in 0..<(iterations + 2) {
            let t0 = now()
            let e = try RawExtension(executable: executable, id: "raw.\(i)")
            try e.waitReady()
            try e.deliver()
            try ping(e.request)
            let t = now() - t0
            e.kill()
            if i >= 2 { samples.add(t) }  // two warm-up launches (page cache)
        }
        return samples
    }

    /// On one raw extension with a request channel: SIGSTOP to its group + waitid(WSTOPPED), then
    /// SIGCONT + one ping round trip on its request channel; and, while it runs, a new request
    /// channel delivered + one ping on it (the extension's own share of every begin).
    static func stopAndContinue(executable: String, iterations: Int) throws -> (stop: Samples, cont: Samples, request: Samples) {
        let e = try RawExtension(executable: executable, id: "raw.stop")
        defer { e.kill() }
        try e.waitReady()
        try e.deliver()
        try ping(e.request)
        var stop = Samples(), cont = Samples(), request = Samples()
        for i in 0..<(iterations + 5) {
            let t0 = now()
            _ = Glibc.kill(-e.pid, SIGSTOP)
            let code = bench_waitid(e.pid, WSTOPPED)
            let t1 = now()
            guard code == CLD_STOPPED else { throw BenchError("waitid(WSTOPPED) returned \(code)") }
            let t2 = now()
            _ = Glibc.kill(-e.pid, SIGCONT)
            try ping(e.request)
            let t3 = now()
            try e.deliver(requestID: UInt64(i + 2))
            try ping(e.request)
            let t4 = now()
            if i >= 5 {
                stop.add(t1 - t0)
                cont.add(t3 - t2)
                request.add(t4 - t3)
            }
        }
        return (stop, cont, request)
    }

    /// performExpiringActivity in a raw extension whose runtime channel is answered by a minimal
    /// C responder (granted at once, nothing else): the runtime library's own share of an acquire.
    static func acquireWithMinimalResponder(executable: String, iterations: Int, gapMicroseconds: UInt32) throws -> Samples {
        let e = try RawExtension(executable: executable, id: "raw.assert")
        defer { e.kill() }
        try e.waitReady()
        try e.deliver()
        let fd = e.runtime
        let responder = Thread { bench_minimal_responder(fd) }
        responder.start()
        try writeAll(e.request, [UInt8(ascii: "a")] + le32(UInt32(iterations)) + le32(0) + le32(gapMicroseconds))
        let raw = try readExactly(e.request, iterations * 32)
        var samples = Samples()
        for k in 0..<iterations {
            let b = k * 32
            if u64(raw[b + 24..<b + 32]) != 0 { throw BenchError("minimal responder: assertion denied") }
            samples.add(Double(u64(raw[b + 8..<b + 16]) - u64(raw[b..<b + 8])) / 1e9)
        }
        return samples
    }

    /// `count` raw extensions, all stopped at once: every SIGSTOP sent, then every waitid. Also
    /// the CPU time of the sending thread per extension (kill + waitid), for comparison with
    /// the daemon's CPU per dismissal.
    static func massStop(executable: String, count: Int, repetitions: Int) throws -> (wall: Samples, cpuPerStop: Samples) {
        var extensions: [RawExtension] = []
        defer { for e in extensions { e.kill() } }
        for i in 0..<count { extensions.append(try RawExtension(executable: executable, id: "raw.mass.\(i)")) }
        for e in extensions { try e.waitReady() }
        var samples = Samples(), cpu = Samples()
        for _ in 0..<repetitions {
            let c0 = threadCPUSeconds()
            let t0 = now()
            for e in extensions { _ = Glibc.kill(-e.pid, SIGSTOP) }
            for e in extensions {
                let code = bench_waitid(e.pid, WSTOPPED)
                guard code == CLD_STOPPED else { throw BenchError("waitid(WSTOPPED) returned \(code)") }
            }
            samples.add(now() - t0)
            cpu.add((threadCPUSeconds() - c0) / Double(count))
            for e in extensions { _ = Glibc.kill(-e.pid, SIGCONT) }
            for e in extensions { _ = bench_waitid(e.pid, WCONTINUED) }
        }
        return (samples, cpu)
    }
}

/// A private dbus-daemon, a service peer on it, and sd-bus clients: what a logind-style design
/// (a supervisor behind the system bus) would cost per method call.
final class DBusBaseline {
    let daemon: Process
    let service: Process
    let address: String
    static let serviceName = "org.extensiond.BenchPeer"

    static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") }

    init(directory: String) throws {
        daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        daemon.arguments = ["--session", "--nofork", "--nopidfile", "--address=unix:path=\(directory)/bus", "--print-address=1"]
        let out = Pipe()
        daemon.standardOutput = out
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        var line: [UInt8] = []
        let h = out.fileHandleForReading
        while true {
            let d = h.readData(ofLength: 1)
            if d.isEmpty || d.first == UInt8(ascii: "\n") { break }
            line.append(d.first!)
        }
        address = String(decoding: line, as: UTF8.self)
        guard !address.isEmpty else { throw BenchError("dbus-daemon printed no address") }

        service = Process()
        service.executableURL = URL(fileURLWithPath: selfExecutable)
        service.arguments = ["--helper", "dbus-service", address, DBusBaseline.serviceName]
        let ready = Pipe()
        service.standardOutput = ready
        try service.run()
        guard ready.fileHandleForReading.readData(ofLength: 1).count == 1 else { throw BenchError("the D-Bus service peer did not start") }
    }

    /// Peer.Ping round trips to `destination` over one sd-bus connection.
    func ping(destination: String, iterations: Int) throws -> Samples {
        var error: Int32 = 0
        guard let bus = bench_dbus_open(address, &error) else { throw BenchError("sd-bus connect: \(String(cString: strerror(-error)))") }
        defer { bench_dbus_close(bus) }
        var samples = Samples()
        for i in 0..<(iterations + iterations / 10) {
            let t0 = now()
            let rc = bench_dbus_ping(bus, destination)
            let t = now() - t0
            if rc < 0 { throw BenchError("Peer.Ping to \(destination): \(String(cString: strerror(-rc)))") }
            if i >= iterations / 10 { samples.add(t) }
        }
        return samples
    }

    func stop() {
        service.terminate()
        daemon.terminate()
        service.waitUntilExit()
        daemon.waitUntilExit()
    }
}
