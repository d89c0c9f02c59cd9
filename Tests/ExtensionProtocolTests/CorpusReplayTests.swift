import ExtensionProtocol
import Foundation
import Testing

/// Replays the fuzzing corpus (Fuzz/corpus) and every input that ever crashed the decoder
/// (Fuzz/crashes) through the same checks as the libFuzzer target: decoding never traps, and
/// an accepted datagram re-encodes to exactly its input.
@Suite("Fuzz corpus replay")
struct CorpusReplayTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    static func inputs(_ folder: String) -> [URL] {
        let dir = fuzzDirectory.appendingPathComponent(folder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { dir.appendingPathComponent($0) }
    }

    @Test func theSeedCorpusCoversEveryMessageKind() throws {
        let corpus = Self.inputs("corpus")
        var kinds = Set<UInt8>()
        for url in corpus {
            let bytes = [UInt8](try Data(contentsOf: url))
            if let message = try? WireDecoder.decode(bytes) { kinds.insert(message.kind.rawValue) }
        }
        #expect(kinds.count == 22, "the seeds decode to \(kinds.count) distinct kinds")
    }

    @Test func everyCorpusAndCrashInputIsHandled() throws {
        let all = Self.inputs("corpus") + Self.inputs("crashes")
        #expect(!all.isEmpty)
        for url in all {
            let bytes = [UInt8](try Data(contentsOf: url))
            if let message = try? WireDecoder.decode(bytes) {
                #expect(try WireEncoder.encoded(message) == bytes, "\(url.lastPathComponent) is not canonical")
            }
        }
    }
}
