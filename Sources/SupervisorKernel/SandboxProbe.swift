import ExtensionTransport
import SupervisorCore

/// What the sandbox probe found: for each part of `SandboxPart.allCases`, nil when it can be
/// built, else the error of the step that failed; and whether a user namespace was needed.
public struct SandboxProbe: Equatable, Sendable {
    /// One entry per part, in the order of `SandboxPart.allCases`: nil when the part was
    /// built, else the errno of the failure.
    public var errors: [SystemError?]
    /// Whether the parts' namespaces are built inside a new user namespace: the file system
    /// part failed with the daemon's own privilege and worked inside one.
    public var userNamespace: Bool
    /// A probe result of these values, stored as given.
    public init(errors: [SystemError?], userNamespace: Bool) {
        self.errors = errors
        self.userNamespace = userNamespace
    }
}
