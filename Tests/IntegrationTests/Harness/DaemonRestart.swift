import Foundation

extension TestDaemon {
    /// The daemon's process registry (next to its socket: control.sock → control.processes.json).
    var registryPath: String { directory + "/control.processes.json" }

    /// The daemon's pid while it runs.
    var pid: Int32? { process.flatMap { $0.isRunning ? $0.processIdentifier : nil } }

    /// Kills the daemon with SIGKILL, as a crash or a watchdog would: no shutdown, its
    /// extensions are left as they are. Returns once it has been reaped. `start()` then
    /// starts a successor on the same directory and socket.
    func crash(timeout: Double = 20) throws {
        guard let p = process, p.isRunning else { throw HarnessError("the daemon is not running") }
        kill(p.processIdentifier, SIGKILL)
        guard waitForExit(timeout: timeout) else { throw HarnessError("the daemon survived SIGKILL for \(timeout)s") }
    }
}

extension NotifySocket {
    /// The next sd_notify datagram, or nil after `timeout` seconds.
    func next(timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, Int32(left * 1000) + 1) <= 0 { continue }
            let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n > 0 { return String(decoding: buffer[0..<n], as: UTF8.self) }
        }
    }

    /// Waits for a datagram one of whose lines satisfies `match`; returns that line, or nil
    /// after `timeout` seconds. Earlier datagrams are consumed and appended to `seen`.
    func waitForLine(timeout: Double, seen: inout [String], _ match: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while let datagram = next(timeout: max(0, deadline.timeIntervalSinceNow)) {
            seen.append(datagram)
            if let line = datagram.split(separator: "\n").map(String.init).first(where: match) { return line }
        }
        return nil
    }
}
