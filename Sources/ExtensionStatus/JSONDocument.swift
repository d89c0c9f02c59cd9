/// A document of docs/json.md, or a part of one: a stable interface, where fields may be added
/// but are never renamed or removed. Its `encode(to:)` is the definition of its JSON: members in
/// `JSONWriter.keyOrder`, each field either always present (`null` when it has no value) or left
/// out when it does not apply, as docs/json.md says of it. The daemon writes it with
/// `jsonBytes()`; `extctl` and other clients read it with any `Decoder` (Foundation's
/// `JSONDecoder`), which ignores fields it does not know.
public protocol JSONDocument: Codable, Sendable {}

extension JSONDocument {
    /// The document as the daemon sends it: compact JSON, keys sorted, strings and numbers as
    /// `JSONWriter` writes them.
    public func jsonBytes(capacity: Int = 256) -> [UInt8] {
        var writer = JSONWriter(capacity: capacity)
        do {
            try writer.write(self)
        } catch {
            // Unreachable: `JSONWriter.write(_:)` throws only what `encode(to:)` throws, and the
            // documents' `encode(to:)` throw only what the encoder's containers throw: nothing.
            assertionFailure("\(Self.self) could not be written: \(error)")
        }
        return writer.bytes
    }
}
