import ExtensionProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the supervisor tells an extension about its environment.
public enum ExtensionContext {
    /// The extension's own container: a directory only it can read and write, kept across its
    /// relaunches and extensiond's restarts until an administrator resets it (`extctl reset`).
    /// It is also its `HOME`, with the XDG base directories inside. Nil when the process was
    /// not started by extensiond. Read from `EXTENSIOND_CONTAINER`.
    public static var containerURL: URL? {
        guard let value = getenv("EXTENSIOND_CONTAINER") else { return nil }
        let path = String(cString: value)
        return path.isEmpty ? nil : URL(fileURLWithPath: path, isDirectory: true)
    }

    /// The directory of the shared container `group` (a name from the manifest's
    /// `sharedContainers`, such as `group.com.example.stocks`), which the extension can read
    /// and write together with the other extensions and apps admitted to it. Nil when the
    /// manifest does not name that container (or the process was not started by extensiond).
    /// Read from `EXTENSION_SHARED_CONTAINER_<NAME>` (`SharedContainer.environmentName`).
    public static func sharedContainerURL(forGroup group: String) -> URL? {
        guard let value = getenv(SharedContainer.environmentName(for: group)) else { return nil }
        let path = String(cString: value)
        return path.isEmpty ? nil : URL(fileURLWithPath: path, isDirectory: true)
    }

    /// Asks the system to open `url` (Apple's `NSExtensionContext.open(_:completionHandler:)`):
    /// a URL of a scheme the extension's app declares brings that app up with it; any other
    /// goes to the session's handler for its scheme. True once it was handed over; false when
    /// nothing takes the scheme, the host's session is locked, the extension point does not
    /// allow opening URLs, no host has the extension open, over the rate of opens, or without
    /// extensiond. extensiond records each answer with its reason in the journal.
    public static func open(_ url: URL) async -> Bool {
        await open(url.absoluteString)
    }

    /// `open(_:)` for a URL as text.
    public static func open(_ url: String) async -> Bool {
        guard let channel = RuntimeChannel.shared, url.utf8.count <= WireLimits.maxURL else { return false }
        return await withCheckedContinuation { continuation in
            channel.call({ .openURL(tag: $0, url: url) }) { answer in
                if let fd = answer.descriptor { close(fd) }
                continuation.resume(returning: answer.failure == nil)
            }
        }
    }
}
