import Foundation
import SupervisorCore

/// The pure core's share of a dismissal and of a resume, in process: a `Supervisor` holding
/// the suite's numbers of records (1,455, of which 1,000 run, one host holding a request on
/// each), driven through rounds of `end` → `stopConfirmed` → `begin` → `continueConfirmed` on
/// every running extension, as the mass phase drives the daemon. Each figure is nanoseconds
/// per event, the best round of `rounds`; no system call is involved.
enum CoreCycle {
    struct Figures {
        var end, stopConfirmed, begin, continueConfirmed: Double
    }

    static func run(quick: Bool) -> Figures {
        let running = quick ? 100 : 1000, records = quick ? 155 : 1455, rounds = quick ? 5 : 30
        let policy = Policy(
            backgroundSeconds: 0, expiryGraceSeconds: 3, assertionMaxSeconds: 60, launchTimeoutSeconds: 600,
            suspendedLifetimeSeconds: 86_400)
        let manifests = (0..<records).map { Manifest(id: "com.example.bench.core\($0)", executable: "/usr/libexec/bench", policy: policy) }
        var limits = SupervisorLimits()
        limits.daemonUID = 1000
        limits.maxRequestsPerHost = 100_000
        let peer = PeerIdentity(pid: 4242, uid: 1000, gid: 1000)
        var core = Supervisor(manifests: manifests, limits: limits, now: .seconds(0))
        var t = 0.0
        func step(_ event: Event) -> [Effect] {
            t += 0.000_01
            return core.handle(event, at: .seconds(t))
        }
        let ids = manifests.prefix(running).map(\.id)
        var generation: [String: UInt64] = [:], request: [String: UInt64] = [:]
        func opened(_ effects: [Effect], _ id: String) {
            for case .openRequest(_, _, let r, _, _, _, _) in effects { request[id] = r }
        }
        for (n, id) in ids.enumerated() {
            _ = step(.begin(host: 1, peer: peer, tag: 1, extensionID: id))
            let g = core.records[id]!.generation
            generation[id] = g
            _ = step(.spawned(extensionID: id, generation: g, pid: Int32(10_000 + n)))
            opened(step(.ready(extensionID: id, generation: g)), id)
        }
        precondition(request.count == running, "every extension opened its request")
        var best = Figures(end: .infinity, stopConfirmed: .infinity, begin: .infinity, continueConfirmed: .infinity)
        var effects = 0
        func timed(_ body: (String) -> Void) -> Double {
            let start = now()
            for id in ids { body(id) }
            return (now() - start) / Double(running) * 1e9
        }
        for round in 0..<rounds {
            let end = timed { effects += step(.end(host: 1, tag: 2, requestID: request[$0]!)).count }
            let stop = timed { effects += step(.stopConfirmed(extensionID: $0, generation: generation[$0]!)).count }
            let begin = timed { effects += step(.begin(host: 1, peer: peer, tag: 3, extensionID: $0)).count }
            let resume = timed { id in opened(step(.continueConfirmed(extensionID: id, generation: generation[id]!)), id) }
            guard round > 0 else { continue }  // the first round warms the caches and grows the buffers
            best = Figures(
                end: min(best.end, end), stopConfirmed: min(best.stopConfirmed, stop), begin: min(best.begin, begin),
                continueConfirmed: min(best.continueConfirmed, resume))
        }
        precondition(core.indexDiscrepancies().isEmpty && effects > 0, "the core stayed consistent and answered")
        return best
    }
}
