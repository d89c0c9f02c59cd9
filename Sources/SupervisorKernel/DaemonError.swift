/// A startup failure with a message for the administrator.
public struct DaemonError: Error, CustomStringConvertible {
    /// The message, as given: a sentence naming what is wrong.
    public var description: String
    /// An error with the message `description`.
    public init(_ description: String) { self.description = description }
}
