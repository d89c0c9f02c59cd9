import Dispatch
import ExtensionHost
import ExtensionProtocol
import Foundation
import Synchronization

/// Background transfers (docs/transfers.md): a download of `size` bytes on loopback through the
/// daemon and its worker, beside `curl -o` of the same file from the same server (Python's
/// `http.server`, a real third-party server); the worker's peak resident set after a small and a
/// large download (it must not grow with the size); and the daemon's CPU per MB moved.
struct TransferFigures {
    var service = Samples()
    var curl = Samples()
    var curlSynced = Samples()
    var size = 0
    var workerPeakSmall: Int?
    var workerPeakLarge: Int?
    var daemonCPUPerMB: Double?
}

extension Suite {
    /// The group of the bench's app, whose shared container receives the downloads.
    static let transferGroup = "group.org.example.bench"

    func transferFigures() throws -> TransferFigures {
        var f = TransferFigures()
        f.size = o.quick ? 256 << 20 : 1 << 30
        let serveDir = dir + "/transfer-serve"
        try FileManager.default.createDirectory(atPath: serveDir, withIntermediateDirectories: true)
        log("transfers: writing \(f.size >> 20) MB to serve, and a 16 MB one")
        for (name, bytes) in [("large.bin", f.size), ("small.bin", 16 << 20)] {
            let r = try runCommand("/bin/sh", ["-c", "head -c \(bytes) /dev/urandom > \"$0\"", serveDir + "/" + name])
            guard r.status == 0 else { throw BenchError("cannot write \(name): \(r.err)") }
        }
        let port = 20_000 + Int(getpid() % 20_000)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        server.arguments = ["-m", "http.server", "--bind", "127.0.0.1", "--directory", serveDir, String(port)]
        server.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        server.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try server.run()
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        // Listening once curl gets an answer (connection refused until then).
        var listening = false
        for _ in 0..<500 where !listening {
            listening = (try? runCommand("/usr/bin/curl", ["-sf", "-o", "/dev/null", "http://127.0.0.1:\(port)/small.bin"]))?.status == 0
            if !listening { usleep(10_000) }
        }
        guard listening else { throw BenchError("python3 -m http.server did not answer on port \(port)") }

        // The download is the bench extension's (an extension of the bench's app): a
        // BackgroundSession of the app's group, timed from its create to its completion event.
        let session = try host.begin(Suite.secretsID)
        guard let fd = session.channel else { throw BenchError("no channel from begin") }
        defer { close(fd) }
        func download(_ name: String) throws -> Double {
            let request = Array("http://127.0.0.1:\(port)/\(name)".utf8) + [0] + Array("bench/\(name)".utf8)
            try writeAll(fd, [UInt8(ascii: "d")] + le32(UInt32(request.count)) + request)
            let answer = try readExactly(fd, 16)
            var ns: UInt64 = 0
            for b in 0..<8 { ns |= UInt64(answer[b]) << (8 * UInt64(b)) }
            let status = Int(answer[8]) | Int(answer[9]) << 8
            guard status == 200 else { throw BenchError("the download of \(name) did not complete with 200 (see the daemon's log)") }
            return Double(ns) / 1e9
        }
        func workerPeak() -> Int? {
            let children = (try? String(contentsOfFile: "/proc/\(daemon.pid)/task/\(daemon.pid)/children", encoding: .utf8)) ?? ""
            for pid in children.split(separator: " ").compactMap({ Int32($0) }) {
                guard let comm = readText("/proc/\(pid)/comm"), comm.hasPrefix("extensiond-tran"), let status = readText("/proc/\(pid)/status") else {
                    continue
                }
                return statusField(status, "VmHWM").map { $0 * 1024 }
            }
            return nil
        }
        _ = try download("small.bin")
        f.workerPeakSmall = workerPeak()
        let rounds = o.quick ? 2 : 3
        for i in 0..<rounds {
            log("transfers: \(f.size >> 20) MB through the service, then with curl -o (round \(i + 1) of \(rounds))")
            let cpu0 = cpuSeconds(daemon.pid)
            f.service.add(try download("large.bin"))
            let cpu = cpuSeconds(daemon.pid) - cpu0
            f.daemonCPUPerMB = min(f.daemonCPUPerMB ?? .infinity, cpu / Double(f.size >> 20))
            let t0 = now()
            let r = try runCommand("/usr/bin/curl", ["-sS", "-o", dir + "/curl-large.bin", "http://127.0.0.1:\(port)/large.bin"])
            guard r.status == 0 else { throw BenchError("curl: \(r.err)") }
            f.curl.add(now() - t0)
            try? FileManager.default.removeItem(atPath: dir + "/curl-large.bin")
            // The same, then the file made durable, as the service's is before it is told.
            let t1 = now()
            let synced = try runCommand("/bin/sh", ["-c", "curl -sS -o \"$0\" \"$1\" && sync -d \"$0\"", dir + "/curl-large.bin", "http://127.0.0.1:\(port)/large.bin"])
            guard synced.status == 0 else { throw BenchError("curl + sync: \(synced.err)") }
            f.curlSynced.add(now() - t1)
            try? FileManager.default.removeItem(atPath: dir + "/curl-large.bin")
        }
        f.workerPeakLarge = workerPeak()
        details.append(
            Detail(
                name: "transfer: \(f.size >> 20) MB download through the service", samples: f.service, note: "create → completion event (file synced, moved)"))
        details.append(Detail(name: "  beside it: curl -o of the same file", samples: f.curl, note: "same server, alternated"))
        details.append(Detail(name: "  and curl -o, then sync -d of the file", samples: f.curlSynced, note: "the durability the service gives"))
        return f
    }
}

/// Runs `path` with `arguments` to its end: its status and standard error.
func runCommand(_ path: String, _ arguments: [String]) throws -> (status: Int32, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = arguments
    let err = Pipe()
    p.standardError = err
    p.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
    try p.run()
    let bytes = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: bytes, as: UTF8.self))
}
