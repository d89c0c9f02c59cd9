import Foundation

/// The HTTP(S) server of the transfer tests (Tests/Fixtures/transfer-server/server.py) on
/// loopback: deterministic content by name and size, and what a test needs to steer it (drops,
/// 5xx answers, a refused `Range`, holds that the test releases) and to count what it sent.
/// It ends with the test: its stdin is a pipe the harness holds, and it exits at its end.
final class TransferServer {
    let process = Process()
    let port: Int
    let tls: Bool
    let directory: String
    private let stdin = Pipe()

    /// Starts it in `directory` (its CA and certificate with `tls`).
    init(directory: String, tls: Bool) throws {
        self.directory = directory
        self.tls = tls
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let stdout = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [RuntimeC.packageRoot + "/Tests/Fixtures/transfer-server/server.py", "--dir", directory] + (tls ? ["--tls"] : [])
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        // The first line, once it listens: "READY <port>".
        var line = [UInt8]()
        while true {
            let byte = stdout.fileHandleForReading.readData(ofLength: 1)
            guard let b = byte.first else { throw HarnessError("the transfer server exited before it was ready") }
            if b == 0x0A { break }
            line.append(b)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("READY "), let p = Int(text.dropFirst(6)) else { throw HarnessError("the transfer server said '\(text)'") }
        port = p
    }

    deinit {
        try? stdin.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    /// The CA certificate that signed the server's (with `tls`).
    var caFile: String { directory + "/ca.pem" }

    /// The URL of `path` (with its query) on this server.
    func url(_ path: String) -> String { "\(tls ? "https" : "http")://127.0.0.1:\(port)\(path)" }

    /// Calls a control endpoint over plain curl (trusting the test CA) and returns the body.
    @discardableResult
    func control(_ method: String, _ path: String) throws -> String {
        var arguments = ["-sS", "-X", method, "--max-time", "130", url(path)]
        if tls { arguments += ["--cacert", caFile] }
        let r = try runProgram("/usr/bin/curl", arguments)
        guard r.status == 0 else { throw HarnessError("curl \(path): \(r.err)") }
        return r.out
    }

    /// Waits (on the server, which answers when it happens) until a request for `name` holds.
    func waitHold(_ name: String, timeout: Int = 60) throws {
        let body = try control("GET", "/_wait_hold/\(name)?timeout=\(timeout)")
        guard body.contains("true") else { throw HarnessError("no request for \(name) held within \(timeout)s: \(body)") }
    }

    /// Lets the holding request for `name` go on.
    func release(_ name: String) throws { try control("POST", "/_release/\(name)") }

    /// What the server did for `name`.
    struct Stats: Decodable {
        struct Request: Decodable {
            var method: String
            var range: String?
            var if_range: String?
            var status: Int
            var sent: Int
        }
        struct Upload: Decodable {
            var size: Int
            var sha256: String
        }
        var requests: [Request]
        var sent_total: Int
        var uploads: [Upload]
    }

    func stats(_ name: String) throws -> Stats {
        try JSONDecoder().decode(Stats.self, from: Data(try control("GET", "/_stats/\(name)").utf8))
    }

    /// The SHA-256 (hex) of the whole content of `name` of `size` bytes.
    func sha256(_ name: String, size: Int) throws -> String {
        try control("GET", "/_sha256/\(name)?size=\(size)").trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// The SHA-256 (hex) of the file at `path`.
func fileSHA256(_ path: String) throws -> String {
    let r = try runProgram("/usr/bin/sha256sum", [path])
    return String(r.out.prefix { $0 != " " })
}
