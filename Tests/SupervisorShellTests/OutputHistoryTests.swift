import ExtensionStatus
import SupervisorCore
import Testing

@testable import SupervisorShell

/// The kept output lines (OutputHistory): what crosses a re-exec stays within its budget, and who
/// follows is checked again.
@Suite struct OutputHistoryTests {
    static func history(extensions: Int, linesEach: Int, bytesEach line: Int) -> OutputHistory {
        let h = OutputHistory(wallClock: { 1_000 })
        for e in 0..<extensions {
            h.launched("e\(e)")
            for i in 0..<linesEach { h.append("e\(e)", String(repeating: "x", count: line - 8) + String(format: "%08d", i)) }
        }
        return h
    }

    /// What the document's lines cost (`OutputHistory.handoverCost`).
    static func cost(_ h: OutputHistory.Handover) -> Int {
        h.kept.values.reduce(0) { $0 + $1.lines.reduce(0) { $0 + OutputHistory.handoverCost($1) } }
    }

    @Test func theHandoverKeepsEveryLineWithinItsBudget() {
        let h = Self.history(extensions: 3, linesEach: 10, bytesEach: 100)
        let all = h.handover(byteLimit: 30 * OutputHistory.handoverCost(h.log("e0").lines[0]))
        #expect(all.kept.values.allSatisfy { $0.lines.count == 10 && $0.sinceLaunch == 10 })
        #expect(all == h.handover)
    }

    @Test func overItsBudgetEachExtensionKeepsItsNewestLinesInAnEqualShare() {
        let h = Self.history(extensions: 4, linesEach: 50, bytesEach: 1_000)
        let trimmed = h.handover(byteLimit: 20_000)
        #expect(Self.cost(trimmed) <= 20_000)
        let line = OutputHistory.handoverCost(h.log("e0").lines[0])
        #expect(line > 1_000 && line < 1_100, "its text, its time and its framing")
        for (id, lines) in trimmed.kept {
            #expect(lines.lines.count == 5_000 / line, "\(id): a share of 5,000 bytes")
            #expect(lines.lines.last?.text.hasSuffix("00000049") == true, "the newest line stays")
            #expect(lines.sinceLaunch == lines.lines.count)
        }
    }

    /// The budget bounds the encoded document, not only its text: 1,000 extensions of 200
    /// one-byte lines are 200 KB of text, but 10 MB of lines in the binary form.
    @Test func theEncodedHandoverStaysWithinItsBudgetWhateverTheLinesLength() throws {
        let h = OutputHistory(wallClock: { 1_000_000_000 })
        for e in 0..<1_000 {
            for i in 0..<OutputLog.kept { h.append("org.example.e\(e)", String(i % 10)) }
        }
        let document = h.handover
        let encoded = try BinaryEncoder().encode(document)
        let framing = 64 * document.kept.count  // each extension's id, its container and its count
        #expect(encoded.count <= OutputHistory.handoverByteLimit + framing, "\(encoded.count) bytes")
        #expect(document.kept.values.allSatisfy { $0.lines.last?.text == "9" && $0.lines.count > 10 }, "each keeps its newest lines")
        for k in document.kept.values {
            let each = try BinaryEncoder().encode(k.lines)
            #expect(each.count <= k.lines.reduce(0) { $0 + OutputHistory.handoverCost($1) } + 9, "a line costs no more than its handoverCost")
        }
    }

    @Test func aHandoverOverItsBoundsIsCutToThemAtRestore() {
        let big = Self.history(extensions: 1, linesEach: 120, bytesEach: 1_000)
        var document = big.handover(byteLimit: Int.max)
        document.kept["e0"]?.lines += (0..<80).map { OutputLog.Line(time: "t", text: String(repeating: "y", count: 1_000) + "\($0)") }
        let restored = OutputHistory(wallClock: { 1_000 })
        restored.restore(document, hosts: [])
        let lines = restored.log("e0").lines
        #expect(lines.count <= OutputLog.kept)
        #expect(lines.reduce(0) { $0 + $1.text.utf8.count } <= OutputHistory.byteLimit)
        #expect(lines.last?.text.hasSuffix("79") == true)
    }

    @Test func aFollowingNoLongerAllowedStopsAndIsReported() {
        let h = Self.history(extensions: 2, linesEach: 1, bytesEach: 10)
        var delivered: [HostID] = []
        h.deliver = { host, _ in delivered.append(host) }
        h.follow(7, ["e0", "e1"])
        h.follow(8, ["e1"])
        let stopped = h.recheckFollowers { host, id in !(host == 7 && id == "e1") && host != 8 }
        #expect(stopped.map(\.host) == [7, 8])
        #expect(stopped.map(\.ids) == [["e1"], ["e1"]])
        h.append("e1", "after")
        #expect(delivered.isEmpty, "no one follows e1 now")
        h.append("e0", "after")
        #expect(delivered == [7])
        h.forgetLines(of: "e0")
        #expect(h.log("e0").lines.isEmpty)
    }
}
