// libFuzzer entry point for the wire decoder: every byte extensiond reads from a socket goes
// through WireDecoder.decode. Built by scripts/fuzz.sh with `--sanitize=fuzzer --sanitize=address`
// (which compiles this file as a library: no top-level code). The corpus in Fuzz/corpus and any
// past crash in Fuzz/crashes are replayed by Tests/ExtensionProtocolTests/CorpusReplayTests.swift.
import ExtensionProtocol
#if canImport(Glibc)
import Glibc
#endif

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWireDecoder(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = UnsafeRawBufferPointer(start: data, count: size)
    if let message = try? WireDecoder.decode(input) {
        // An accepted datagram must re-encode to exactly the same bytes (canonical form).
        guard let again = try? WireEncoder.encoded(message), again.elementsEqual(input) else {
            fatalError("decoded \(message.kind) does not re-encode to its input")
        }
    }
    return 0
}
