import CBenchShims
import ExtensionHost
import Foundation

/// The D-Bus interface's figure (issue 43, docs/dbus.md): a request begun over the bus against the
/// same request begun on the direct socket and a bare D-Bus round trip through the same bus.
struct DBusFigures {
    /// Manager.Begin → the channel → a ping answered, on a suspended extension.
    var begin = Samples()
    /// The same with `ExtensionHostConnection` on the control socket.
    var direct = Samples()
    /// org.freedesktop.DBus.Peer.Ping to extensiond itself, through the same dbus-daemon.
    var bare = Samples()
}

extension Suite {
    /// A private dbus-daemon and a daemon of its own on it (`--bus=session`) with one extension,
    /// suspended between requests. Each round takes one sample of each of the three, in turn,
    /// so that the machine's drift falls on all of them alike; each request is dismissed and the
    /// extension seen suspended before the next round.
    func dbusFigures() throws -> DBusFigures {
        let id = "bench.dbus"
        log("D-Bus: a dbus-daemon and a daemon of its own on it")
        try FileManager.default.createDirectory(atPath: dir + "/dbus-figure/bus", withIntermediateDirectories: true)
        let bus = try DBusBaseline(directory: dir + "/dbus-figure/bus")
        defer { bus.stop() }
        let own = try DaemonUnderTest(
            daemonPath: o.daemon, directory: dir + "/dbus-figure/daemon", manifests: [(id, o.extensionPath, "bench")], config: daemonConfig(),
            arguments: ["--bus=session"], environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address])
        defer { _ = own.stop() }
        let host = try ExtensionHostConnection(socketPath: own.socketPath)
        defer { host.close() }
        var error: Int32 = 0
        guard let client = bench_dbus_open(bus.address, &error) else { throw BenchError("sd-bus connect: \(String(cString: strerror(-error)))") }
        defer { bench_dbus_close(client) }

        // The first request launches the extension; its pid must stay through every round.
        let first = try host.begin(id)
        let pid = first.pid
        try ping(first.channel!)
        close(first.channel!)
        try host.dismiss(first)

        var figures = DBusFigures()
        let rounds = o.quick ? 100 : 1_000
        var path = [CChar](repeating: 0, count: 128)
        for round in 0..<(rounds + rounds / 10) {
            let kept = round >= rounds / 10
            // Over the bus.
            try own.waitStates([id], "suspended", via: host)
            var fd: Int32 = -1
            var t0 = now()
            var rc = bench_dbus_begin(client, id, &fd, &path, path.count)
            if rc < 0 { throw BenchError("Manager.Begin over D-Bus: \(String(cString: strerror(-rc)))") }
            try ping(fd)
            var t = now() - t0
            close(fd)
            rc = bench_dbus_dismiss(client, path)
            if rc < 0 { throw BenchError("Request.Dismiss over D-Bus: \(String(cString: strerror(-rc)))") }
            if kept { figures.begin.add(t) }
            // On the control socket.
            try own.waitStates([id], "suspended", via: host)
            t0 = now()
            let session = try host.begin(id)
            guard let channel = session.channel else { throw BenchError("no channel from begin") }
            try ping(channel)
            t = now() - t0
            guard session.pid == pid else { throw BenchError("the extension was launched again (pid \(pid) → \(session.pid))") }
            close(channel)
            try host.dismiss(session)
            if kept { figures.direct.add(t) }
            // A bare round trip to the same process through the same bus.
            t0 = now()
            rc = bench_dbus_ping(client, "org.extensiond1")
            t = now() - t0
            if rc < 0 { throw BenchError("Peer.Ping to org.extensiond1: \(String(cString: strerror(-rc)))") }
            if kept { figures.bare.add(t) }
        }
        return figures
    }
}
