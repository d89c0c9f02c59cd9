import Foundation
import Synchronization

/// A program run on a real pseudo-terminal (python3's `pty` module), to which Ctrl-C is typed
/// (the terminal driver sends SIGINT to the foreground process group) or a signal sent, once
/// `marker` has appeared in what it printed, or once `go()` is called when `marker` is nil.
final class TerminalRun: Sendable {
    /// What the run reported: the exit status (128+N when ended by signal N, as a shell
    /// reports it), the milliseconds from the keystroke or signal to the exit, and the output.
    struct Result: CustomStringConvertible {
        var status: Int
        var milliseconds: Double
        var output: String
        var description: String { "status \(status) after \(milliseconds) ms, output \(output.debugDescription)" }
    }

    static let script = #"""
        import json, os, pty, re, select, signal, sys, time
        marker, how, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(argv[0], argv)
        out = b""
        deadline = time.monotonic() + 30
        def read_some(timeout):
            global out
            r, _, _ = select.select([fd], [], [], timeout)
            if r:
                try: out += os.read(fd, 4096)
                except OSError: pass
        if marker == "-":
            sys.stdin.readline()
        else:
            while not re.search(marker.encode(), out) and time.monotonic() < deadline:
                read_some(deadline - time.monotonic())
            if not re.search(marker.encode(), out):
                os.kill(pid, signal.SIGKILL)
                print(json.dumps({"error": "the marker never appeared", "output": out.decode(errors="replace")}), flush=True)
                sys.exit(0)
        print("SEEN", flush=True)
        start = time.monotonic()
        if how == "ctrl-c":
            os.write(fd, b"\x03")
        else:
            os.kill(pid, getattr(signal, how))
        _, status = os.waitpid(pid, 0)
        elapsed = (time.monotonic() - start) * 1000
        while True:
            r, _, _ = select.select([fd], [], [], 0)
            if not r: break
            try: chunk = os.read(fd, 4096)
            except OSError: break
            if not chunk: break
            out += chunk
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"status": code if code >= 0 else 128 - code, "ms": elapsed, "output": out.decode(errors="replace")}), flush=True)
        """#

    private let process = Process()
    private let input = Pipe()
    private let lines = Mutex<[String]>([])
    private let arrived = DispatchSemaphore(value: 0)

    /// Starts `arguments` on a pseudo-terminal. `how` is `ctrl-c` or a signal name (`SIGTERM`).
    init(_ arguments: [String], marker: String?, how: String = "ctrl-c") throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", Self.script, marker ?? "-", how] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        let reader = output.fileHandleForReading
        Thread.detachNewThread { [self] in
            var buffer = Data()
            while case let chunk = reader.availableData, !chunk.isEmpty {
                buffer += chunk
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer = Data(buffer[buffer.index(after: newline)...])
                    self.lines.withLock { $0.append(line) }
                    self.arrived.signal()
                }
            }
            self.arrived.signal()
        }
    }

    /// Types Ctrl-C (or sends the signal) now, for a run started without a marker.
    func go() { input.fileHandleForWriting.write(Data("go\n".utf8)) }

    /// Whether the marker has been seen (and the keystroke typed), waiting at most `timeout`.
    func seen(timeout: Double) -> Bool {
        let deadline = DispatchTime.now() + timeout
        while true {
            if lines.withLock({ $0.contains("SEEN") }) { return true }
            if arrived.wait(timeout: deadline) == .timedOut { return lines.withLock { $0.contains("SEEN") } }
        }
    }

    /// Waits for the run to end and returns what it reported.
    func result() throws -> Result {
        process.waitUntilExit()
        guard let last = lines.withLock({ $0.last }),
            let o = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any],
            let status = o["status"] as? Int, let ms = o["ms"] as? Double
        else { throw HarnessError("the terminal run reported nothing usable: \(lines.withLock { $0 })") }
        return Result(status: status, milliseconds: ms, output: o["output"] as? String ?? "")
    }
}
