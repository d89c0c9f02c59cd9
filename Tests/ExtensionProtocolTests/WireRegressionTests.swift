import ExtensionProtocol
import Testing

@Suite("Wire regressions")
struct WireRegressionTests {
    // The reserved header field must be 0: non-canonical datagrams are refused.
    @Test(arguments: [UInt16(1), 0x0100, 0xFFFF])
    func nonZeroReservedBytesAreRefused(reserved: UInt16) {
        #expect(decodeError(frame(kind: 64, [], reserved: reserved)) == .invalidValue("reserved"))
    }

    @Test func acceptedInputIsCanonicalEvenWhenTheReservedBytesAreMutated() throws {
        var rng = SplitMix64(seed: 99)
        let valid = try sampleMessages.map { try WireEncoder.encoded($0) }
        var accepted = 0
        for _ in 0..<20_000 {
            var bytes = valid[Int.random(in: 0..<valid.count, using: &rng)]
            bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            guard let message = try? WireDecoder.decode(bytes) else { continue }
            accepted += 1
            #expect(try WireEncoder.encoded(message) == bytes)
            if try WireEncoder.encoded(message) != bytes { return }
        }
        #expect(accepted > 100)
    }
}
