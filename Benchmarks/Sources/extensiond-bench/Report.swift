import Foundation

/// One row of the printed table.
struct Row {
    enum Kind {
        /// Latency samples against a baseline's p50; `factor` is the target ratio (nil: report only).
        case latency(Samples, baseline: Samples?, factor: Double?)
        /// A value with a target: `met` decides.
        case value(String, baseline: String, ratio: String, met: Bool?)
        /// Latency samples with no baseline whose p50 must be at most `limit` seconds.
        case bounded(Samples, limit: Double)
    }

    var figure: String
    var kind: Kind
    var target: String

    var cells: [String] {
        switch kind {
        case let .latency(s, baseline, factor):
            let b = baseline.map { $0.isEmpty ? .nan : $0.p50 } ?? .nan
            let ratio = s.p50 / b
            let met: String
            if let factor, !ratio.isNaN { met = ratio <= factor ? "yes" : "NO" } else { met = "—" }
            return [figure, duration(s.p50), duration(s.p99), duration(s.max), duration(b),
                    ratio.isNaN ? "—" : String(format: "%.2f×", ratio), target, met]
        case let .value(v, baseline, ratio, met):
            return [figure, v, "—", "—", baseline, ratio, target, met.map { $0 ? "yes" : "NO" } ?? "—"]
        case let .bounded(s, limit):
            return [figure, duration(s.p50), duration(s.p99), duration(s.max), "—", "—", target, s.p50 <= limit ? "yes" : "NO"]
        }
    }
}

/// Prints a Markdown table with aligned columns.
func printTable(_ header: [String], _ rows: [[String]]) {
    var widths = header.map(\.count)
    for r in rows { for (i, c) in r.enumerated() { widths[i] = max(widths[i], c.count) } }
    func line(_ cells: [String]) -> String {
        "| " + cells.enumerated().map { i, c in c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }.joined(separator: " | ") + " |"
    }
    print(line(header))
    print("|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|")
    for r in rows { print(line(r)) }
}

/// The detail table: every measured distribution (figures, baselines, legs).
struct Detail {
    var name: String
    var samples: Samples
    var note: String = ""
}

func printDetails(_ details: [Detail]) {
    let rows = details.map { d in
        [d.name, "\(d.samples.count)", duration(d.samples.min), duration(d.samples.p50), duration(d.samples.p99), duration(d.samples.max), d.note]
    }
    printTable(["measurement", "n", "min", "p50", "p99", "max", "note"], rows)
}
