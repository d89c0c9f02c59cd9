/// A JSON value built at run time, for a document without a type of its own; `JSONWriter`
/// prints it (`JSONWriter.encode(_:)`), objects with their keys sorted.
public enum JSONValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// Printed as a JSON integer.
    case integer(Int)
    /// Printed as `JSONWriter.number` prints doubles (`5`, `0.5`, `1e-05`).
    case number(Double)
    /// A string, escaped as `JSONWriter.string` escapes it.
    case string(String)
    /// The elements in order.
    case array([JSONValue])
    /// Members are printed in `JSONWriter.keyOrder`, whatever the dictionary's order.
    case object([String: JSONValue])
    /// Bytes that already are one JSON value (for example an event written by
    /// `ExtensionEvent.jsonBytes()`), copied as they are.
    case encoded([UInt8])

    /// `.integer`, or `.null` when there is no value (the "integer or null" fields of docs/json.md).
    public static func integerOrNull(_ value: (some BinaryInteger)?) -> JSONValue {
        value.map { .integer(Int($0)) } ?? .null
    }

    /// `.string`, or `.null` when there is no value.
    public static func stringOrNull(_ value: String?) -> JSONValue {
        value.map { .string($0) } ?? .null
    }
}
