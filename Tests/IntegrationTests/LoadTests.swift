import ExtensionHost
import Foundation
import Synchronization
import Testing

/// A bounded load test on the local machine: hundreds of concurrent hosts open and dismiss
/// requests on dozens of extensions that take and release assertions, for a fixed duration.
/// Knobs: EXTENSIOND_LOAD_SECONDS (default 4), EXTENSIOND_LOAD_HOSTS (default 200),
/// EXTENSIOND_LOAD_EXTENSIONS (default 24). docs/reliability.md has the figures of a long run.
@Suite(.serialized)
struct LoadTests {
    struct Totals: Sendable {
        var requests = 0
        var assertions = 0
        var failures: [String] = []
    }

    static func knob(_ name: String, _ fallback: Int) -> Int {
        Int(ProcessInfo.processInfo.environment[name] ?? "") ?? fallback
    }

    func rssKilobytes(_ pid: Int32) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }

    @Test func hundredsOfHostsOnDozensOfExtensions() throws {
        let seconds = Double(Self.knob("EXTENSIOND_LOAD_SECONDS", 4))
        let hostCount = Self.knob("EXTENSIOND_LOAD_HOSTS", 200)
        let extensionCount = Self.knob("EXTENSIOND_LOAD_EXTENSIONS", 24)
        var manifests: [String: [String: Any]] = [:]
        let ids = (0..<extensionCount).map { "com.example.load\($0)" }
        for id in ids {
            manifests["\(id).json"] = TestDaemon.testExtension(id, policy: ["backgroundSeconds": 1, "expiryGraceSeconds": 0.5])
        }
        let daemon = try TestDaemon(manifests: manifests, config: ["limits": ["maxConnectionsPerUID": hostCount + 16]])
        try daemon.start()
        let daemonPID = try #require(daemon.process?.processIdentifier)

        // Warm up: launch every extension once, so the baseline includes their records.
        let warm = try daemon.host()
        for id in ids {
            let s = try warm.begin(id)
            try warm.dismiss(s)
        }
        try eventually("every extension is suspended after warm-up") {
            ids.allSatisfy { id in daemon.events.all.contains { $0.kind == "suspend" && $0.id == id } }
        }
        let baseline = rssKilobytes(daemonPID)

        let totals = Mutex(Totals())
        let finished = DispatchGroup()
        let deadline = Date().addingTimeInterval(seconds)
        var clients: [ControlClient] = []
        for h in 0..<hostCount {
            let host = try daemon.host()
            clients.append(host.client)
            finished.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                var rng = SystemRandomNumberGenerator()
                var local = Totals()
                while Date() < deadline {
                    let id = ids[Int.random(in: 0..<ids.count, using: &rng)]
                    do {
                        let session = try host.begin(id, timeout: 30)
                        local.requests += 1
                        if h % 4 == 0, let fd = session.channel {
                            // A quarter of the hosts make the extension take an assertion.
                            let channel = HostChannel(fd: fd)
                            channel.send("assert 0.002 load")
                            let granted = channel.readLine(timeout: 10)
                            let released = channel.readLine(timeout: 10)
                            if granted == "granted" && released == "released" {
                                local.assertions += 1
                            } else if granted != "denied" {
                                local.failures.append("\(id): assertion answered \(granted ?? "nothing"), \(released ?? "nothing")")
                            }
                        }
                        try host.dismiss(session)
                        session.channel.map { _ = close($0) }
                    } catch {
                        local.failures.append("\(id): \(error)")
                    }
                }
                totals.withLock {
                    $0.requests += local.requests
                    $0.assertions += local.assertions
                    $0.failures += local.failures
                }
            }
        }
        #expect(finished.wait(timeout: .now() + seconds + 60) == .success, "hosts did not finish")
        let result = totals.withLock { $0 }
        #expect(result.failures.isEmpty, "\(result.failures.count) failures, first: \(result.failures.prefix(3))")
        #expect(clients.allSatisfy { $0.unmatchedReplies == 0 }, "a reply was lost or doubled")
        for c in clients { c.close() }

        // Every extension settles in the state the protocol demands: no request is open, so
        // each is suspended (or, holding nothing, on its way there), never left running.
        try eventually("every extension is suspended", timeout: 20) {
            guard let out = try? daemon.extctl(["list", "--json"]).out,
                let doc = try? JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any],
                let list = doc["extensions"] as? [[String: Any]]
            else { return false }
            return list.count == extensionCount && list.allSatisfy { $0["state"] as? String == "suspended" && $0["requests"] as? Int == 0 }
        }
        // Nothing is stopped that should not be: every stopped process belongs to a suspended extension.
        let status = try daemon.extctl(["status", "--json"])
        let doc = try JSONSerialization.jsonObject(with: Data(status.out.utf8)) as? [String: Any]
        for e in doc?["extensions"] as? [[String: Any]] ?? [] {
            #expect((e["assertions"] as? [Any])?.isEmpty == true)
            for member in e["processes"] as? [[String: Any]] ?? [] {
                #expect(member["state"] as? String == "T", "\(e["id"] ?? "?"): member \(member) is not stopped")
            }
        }
        let after = rssKilobytes(daemonPID)
        #expect(after < baseline + 16_384, "daemon RSS \(after) kB after the load, baseline \(baseline) kB")
        print(
            "load: \(hostCount) hosts, \(extensionCount) extensions, \(Int(seconds)) s: \(result.requests) requests "
                + "(\(Int(Double(result.requests) / seconds))/s), \(result.assertions) assertions, \(result.failures.count) failures; "
                + "daemon RSS \(baseline) kB before, \(after) kB after")
    }
}
