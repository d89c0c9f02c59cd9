import ExtensionStatus

/// The JSON writer of the documents (`ExtensionStatus`), which the shell also writes its own
/// files with (the process registry).
typealias JSONWriter = ExtensionStatus.JSONWriter

/// A JSON value without a document type of its own, as `JSONWriter` prints it.
typealias JSONValue = ExtensionStatus.JSONValue
