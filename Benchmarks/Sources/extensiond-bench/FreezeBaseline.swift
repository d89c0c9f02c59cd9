import CBenchShims
import Foundation

/// Raw cgroup v2 freezing, with no daemon: the baselines of the `suspend: "freeze"` figures.
/// Each raw extension gets a cgroup of its own below the bench's current one (as extensiond's
/// standalone subtree is), frozen by writing `cgroup.freeze` and confirmed by `frozen 1` in
/// `cgroup.events`, waited for with poll(POLLPRI): the same notification the daemon uses.
final class RawCgroups {
    let root: String

    /// nil when no writable cgroup v2 is found (the freeze figures are then left out).
    init?(label: String) {
        guard let mount = RawCgroups.mountPoint(), let own = RawCgroups.ownPath() else { return nil }
        root = mount + (own == "/" ? "" : own) + "/extensiond-bench-\(label)-\(getpid())"
        guard mkdir(root, 0o755) == 0 || errno == EEXIST else { return nil }
    }

    static func mountPoint() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ")
            guard let dash = f.firstIndex(of: "-"), dash + 1 < f.count, f[dash + 1] == "cgroup2" else { continue }
            return String(f[4])
        }
        return nil
    }

    static func ownPath() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
    }

    /// A cgroup holding `pid`, with its `cgroup.events` open for POLLPRI.
    struct Group {
        let path: String
        let events: Int32
    }

    func place(_ pid: Int32, name: String) throws -> Group {
        let path = root + "/" + name
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { throw BenchError("mkdir \(path): \(String(cString: strerror(errno)))") }
        try write(path + "/cgroup.procs", "\(pid)")
        let fd = open(path + "/cgroup.events", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BenchError("open \(path)/cgroup.events: \(String(cString: strerror(errno)))") }
        return Group(path: path, events: fd)
    }

    func write(_ path: String, _ text: String) throws {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard text.withCString({ Glibc.write(fd, $0, strlen($0)) }) >= 0 else { throw BenchError("write \(path): \(String(cString: strerror(errno)))") }
    }

    /// Whether `cgroup.events` says `frozen 1` (reading it also re-arms POLLPRI).
    static func frozen(_ g: Group) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = pread(g.events, &buffer, buffer.count, 0)
        guard n > 0 else { return false }
        return String(decoding: buffer[0..<n], as: UTF8.self).contains("frozen 1")
    }

    /// Writes `cgroup.freeze` of every group, then waits (POLLPRI) until each reports `frozen`
    /// as asked.
    func setFrozen(_ groups: [Group], _ on: Bool) throws {
        for g in groups { try write(g.path + "/cgroup.freeze", on ? "1" : "0") }
        var waiting = groups.filter { RawCgroups.frozen($0) != on }
        while !waiting.isEmpty {
            var fds = waiting.map { pollfd(fd: $0.events, events: Int16(POLLPRI), revents: 0) }
            let rc = poll(&fds, nfds_t(fds.count), 10_000)
            guard rc > 0 else { throw BenchError("cgroup.events did not report frozen \(on ? 1 : 0) within 10 s") }
            waiting = waiting.filter { RawCgroups.frozen($0) != on }
        }
    }

    func remove(_ groups: [Group]) {
        for g in groups {
            close(g.events)
            rmdir(g.path)
        }
        rmdir(root)
    }
}

extension Baselines {
    /// On one raw extension in a cgroup of its own: freeze → `frozen 1`, then thaw + one ping
    /// round trip on its request channel (the freeze counterparts of SIGSTOP + waitid and
    /// SIGCONT + ping). nil without a writable cgroup v2.
    static func freezeAndThaw(executable: String, iterations: Int) throws -> (freeze: Samples, thaw: Samples)? {
        guard let cgroups = RawCgroups(label: "freeze") else { return nil }
        let e = try RawExtension(executable: executable, id: "raw.freeze")
        let g = try cgroups.place(e.pid, name: "e")
        defer {
            e.kill()
            cgroups.remove([g])
        }
        try e.waitReady()
        try e.deliver()
        try ping(e.request)
        var freeze = Samples(), thaw = Samples()
        for i in 0..<(iterations + 5) {
            let t0 = now()
            try cgroups.setFrozen([g], true)
            let t1 = now()
            try cgroups.write(g.path + "/cgroup.freeze", "0")
            try ping(e.request)
            let t2 = now()
            if i >= 5 {
                freeze.add(t1 - t0)
                thaw.add(t2 - t1)
            }
            try cgroups.setFrozen([g], false)
        }
        return (freeze, thaw)
    }

    /// `count` raw extensions, each in a cgroup of its own: every cgroup.freeze written, then
    /// every `frozen 1` waited for. nil without a writable cgroup v2.
    static func massFreeze(executable: String, count: Int, repetitions: Int) throws -> Samples? {
        guard let cgroups = RawCgroups(label: "mass-freeze") else { return nil }
        var extensions: [RawExtension] = []
        var groups: [RawCgroups.Group] = []
        defer {
            for e in extensions { e.kill() }
            cgroups.remove(groups)
        }
        for i in 0..<count {
            let e = try RawExtension(executable: executable, id: "raw.massfreeze.\(i)")
            extensions.append(e)
            groups.append(try cgroups.place(e.pid, name: "e\(i)"))
        }
        for e in extensions { try e.waitReady() }
        var samples = Samples()
        for _ in 0..<repetitions {
            let t0 = now()
            try cgroups.setFrozen(groups, true)
            samples.add(now() - t0)
            try cgroups.setFrozen(groups, false)
        }
        return samples
    }
}
