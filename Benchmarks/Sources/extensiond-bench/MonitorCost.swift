import ExtensionHost
import ExtensionProtocol
import ExtensionTransport
import Foundation
import Synchronization

/// A monitor connection that only counts the events it receives: the cheapest reader, so that
/// the bench, which shares the CPUs with the daemon, takes as little from it as it can. It reads
/// the count of each `events` message from its header and decodes nothing else (a
/// `ControlClient` would copy out every event's JSON and call a handler for each).
final class MonitorCounter: Sendable {
    /// The count, and the semaphore a waiter sleeps on; shared with the reader thread.
    final class Count: Sendable {
        let state = Mutex<(count: Int, target: Int?)>((0, nil))
        let reached = DispatchSemaphore(value: 0)

        func add(_ n: Int) {
            let wake = state.withLock { s -> Bool in
                s.count += n
                guard let target = s.target, s.count >= target else { return false }
                s.target = nil
                return true
            }
            if wake { reached.signal() }
        }
    }

    private let socket: PacketSocket
    private let counted = Count()
    private let done = DispatchSemaphore(value: 0)

    init(socketPath: String) throws {
        socket = try PacketSocket.connect(path: socketPath)
        _ = try socket.send(try WireEncoder.encoded(.monitor(tag: 1)))
        let reply = UnsafeMutableRawBufferPointer.allocate(byteCount: WireLimits.maxMessageSize, alignment: 8)
        defer { reply.deallocate() }
        guard case .datagram(let n, _, _) = try socket.receive(into: reply),
            case .ok = try WireDecoder.decode(UnsafeRawBufferPointer(rebasing: reply[0..<n]))
        else { throw BenchError("the daemon did not accept the monitor") }
        let (socket, counted, done) = (self.socket, self.counted, self.done)
        Thread.detachNewThread {
            MonitorCounter.runAhead()
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: WireLimits.maxMessageSize, alignment: 8)
            defer {
                buffer.deallocate()
                done.signal()
            }
            let events = MessageKind.events.rawValue, header = WireLimits.headerSize
            while case .datagram(let n, let descriptor, _) = try? socket.receive(into: buffer) {
                if let descriptor { PacketSocket.closeReceived(descriptor) }
                guard n >= header + 2, buffer[1] == events else { continue }
                counted.add(Int(buffer[header]) | Int(buffer[header + 1]) << 8)
            }
        }
    }

    /// Puts the calling thread, a reader, ahead of every ordinary thread: `SCHED_FIFO` at the
    /// lowest real-time priority, else (without the privilege) nice -10. In the bursts, 1,600
    /// chains keep both CPUs busy; a reader with an ordinary share of them fell, on loaded spells
    /// of this machine even at nice -10, the 1 MiB behind for which the daemon cuts a monitor off
    /// (docs/security.md). A real-time reader runs as soon as a datagram wakes it. The figure is
    /// the daemon's CPU; the baseline's reader (`sendWakingReader`) runs the same way, so that
    /// the wake-up it measures is the same kind.
    static func runAhead() {
        var parameters = sched_param(sched_priority: 1)
        if pthread_setschedparam(pthread_self(), SCHED_FIFO, &parameters) == 0 { return }
        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, -10)  // per thread on Linux
    }

    var count: Int { counted.state.withLock { $0.count } }

    /// Waits until `target` events have arrived in all.
    func wait(until target: Int, timeout: Double) throws {
        let already = counted.state.withLock { s -> Bool in
            if s.count >= target { return true }
            s.target = target
            return false
        }
        if already { return }
        if counted.reached.wait(timeout: .now() + timeout) == .timedOut {
            throw BenchError("the monitor received \(count) of \(target) events within \(timeout)s")
        }
    }

    /// Closes the connection (the reader sees its end and stops); `barrier` (a round trip
    /// through the daemon's loop) makes sure the daemon has dropped it before the next
    /// measurement.
    func close(barrier: ExtensionHostConnection) throws {
        shutdown(socket.fd, Int32(SHUT_RDWR))
        done.wait()
        socket.close()
        try barrier.prewarm([])
    }
}

/// What a monitor costs the daemon: its CPU per event for the same work with a monitor attached
/// and without, in the same run, rounds alternating.
struct MonitorCost {
    var label: String
    var without = Samples()
    var with = Samples()
    /// The physical floor, when there is one: CPU of the raw system calls the same delivery needs.
    var floor: Samples?

    /// The median cost a monitor adds per event, in seconds.
    var perEvent: Double { with.p50 - without.p50 }

    /// The sender's CPU for one datagram on a `SOCK_SEQPACKET` socketpair whose reader, a thread
    /// of this process, sleeps in `recv`, `gapMicroseconds` after the previous one: the least a
    /// daemon pays to deliver one event to a waiting monitor by itself.
    static func sendWakingReader(iterations: Int, gapMicroseconds: UInt32) throws -> Samples {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0 else { throw BenchError("socketpair failed") }
        let reader = fds[1]
        Thread.detachNewThread {
            MonitorCounter.runAhead()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while recv(reader, &buffer, buffer.count, 0) > 0 {}
            close(reader)
        }
        defer { close(fds[0]) }
        let datagram = [UInt8](repeating: UInt8(ascii: "x"), count: 200)  // about one event's `events` message
        var samples = Samples()
        for i in 0..<(iterations + 20) {
            usleep(gapMicroseconds)
            let c0 = threadCPUSeconds()
            guard send(fds[0], datagram, datagram.count, 0) == datagram.count else { throw BenchError("send failed") }
            if i >= 20 { samples.add(threadCPUSeconds() - c0) }
        }
        return samples
    }
}

extension Suite {
    /// The cost of a monitor per event, for two workloads:
    ///
    /// * one event per loop iteration: sequential assertions in one extension, 200 µs apart, so
    ///   that each `acquire` and each `release` is alone in its iteration and travels in a
    ///   datagram of its own (the worst case);
    /// * bursts: acquire+release chains in many extensions at once (the throughput workload),
    ///   many events per iteration and per datagram.
    ///
    /// Each round measures the daemon's CPU (schedstat) from the start of the work until the
    /// daemon is done with it: a control round trip after the work, and, with the monitor, every
    /// event received. Rounds without and with a monitor alternate.
    func measureMonitorCosts() throws {
        let rounds = o.quick ? 3 : 5

        log("monitor cost: one event per loop iteration (\(o.activities) sequential assertions per round)")
        var single = MonitorCost(label: "one event per iteration")
        let session = try host.begin(ids.assertions)
        guard let fd = session.channel else { throw BenchError("no channel from begin") }
        _ = try activities(fd, 50, hold: 0)  // warm-up
        for _ in 0..<rounds {
            for monitored in [false, true] {
                let monitor = monitored ? try MonitorCounter(socketPath: daemon.socketPath) : nil
                try host.prewarm([])
                let cpu0 = cpuSeconds(daemon.pid)
                _ = try activities(fd, o.activities, hold: 0)
                try host.prewarm([])
                let events = 2 * o.activities
                try monitor?.wait(until: events, timeout: 60)
                let perEvent = (cpuSeconds(daemon.pid) - cpu0) / Double(events)
                if monitored { single.with.add(perEvent) } else { single.without.add(perEvent) }
                try monitor?.close(barrier: host)
            }
        }
        close(fd)
        try host.dismiss(session)
        single.floor = try MonitorCost.sendWakingReader(iterations: o.activities, gapMicroseconds: Suite.gap)
        monitorCosts.append(single)

        log("monitor cost: bursts (\(ids.throughput.count) extensions × 16 chains)")
        var burst = MonitorCost(label: "bursts, \(ids.throughput.count) ext. × 16 chains")
        let control = try PipelinedControl(socketPath: daemon.socketPath)
        defer { control.close() }
        let sessions = try beginAllSessions(ids.throughput, on: control, tags: 1)
        let pairs = max(20, o.throughputPairs / 4)
        _ = try pairRound(sessions, pairs: 20, chains: 16)  // warm-up
        for _ in 0..<rounds {
            for monitored in [false, true] {
                let monitor = monitored ? try MonitorCounter(socketPath: daemon.socketPath) : nil
                try host.prewarm([])
                let cpu0 = cpuSeconds(daemon.pid)
                let r = try pairRound(sessions, pairs: pairs, chains: 16)
                if r.denied > 0 { throw BenchError("\(r.denied) assertions denied during the monitor-cost run") }
                try host.prewarm([])
                let events = 2 * r.completed
                try monitor?.wait(until: events, timeout: 120)
                let perEvent = (cpuSeconds(daemon.pid) - cpu0) / Double(events)
                if monitored { burst.with.add(perEvent) } else { burst.without.add(perEvent) }
                try monitor?.close(barrier: host)
            }
        }
        for s in sessions { close(s.channel!) }
        for id in ids.throughput { try host.kill(id) }
        try daemon.waitStates(ids.throughput, "not-running", via: host)
        monitorCosts.append(burst)

        for c in monitorCosts {
            details.append(Detail(name: "daemon CPU per event, no monitor (\(c.label))", samples: c.without, note: "schedstat, per round"))
            details.append(Detail(name: "  the same with a monitor attached", samples: c.with, note: "rounds alternated"))
            if let floor = c.floor {
                details.append(Detail(name: "  baseline: send of one datagram waking a sleeping reader", samples: floor, note: "sender's thread CPU, \(Suite.gap) µs apart"))
            }
        }
    }
}
