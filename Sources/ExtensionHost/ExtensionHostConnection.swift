import ExtensionProtocol
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// An open request on an extension: the host's handle on it.
public struct ExtensionSession: Sendable, Equatable {
    /// The request id (the extension sees the same id).
    public let requestID: UInt64
    /// The extension's process id.
    public let pid: Int32
    /// The host's end of a stream socket connected directly to the extension; nil for
    /// extensions with `exec` readiness, which have no host channel. The host owns it.
    public let channel: Int32?
}

/// A host's connection to extensiond. Requests begun on it end when they are dismissed, when
/// the connection is closed, or when the host process exits (the kernel closes the socket).
public final class ExtensionHostConnection: Sendable {
    /// The underlying control connection.
    public let client: ControlClient

    /// Connects to extensiond (the default socket unless `socketPath` is given).
    public init(socketPath: String? = nil) throws(HostError) {
        client = try ControlClient(socketPath: socketPath ?? ControlClient.defaultSocketPath)
    }

    /// A host connection over an existing control connection.
    public init(client: ControlClient) {
        self.client = client
    }

    /// Begins a request on `extensionID`: launches it if it is not running, resumes it if it
    /// is suspended, and returns once it is ready, with a channel to it.
    /// Throws the daemon's error (unknown id, launch failed or timed out, crash-loop throttle,
    /// not permitted…) as a `HostError`.
    public func begin(_ extensionID: String, timeout: Double = 60) throws(HostError) -> ExtensionSession {
        let reply = try client.call(timeout: timeout) { .begin(tag: $0, extensionID: extensionID) }
        guard case let .begun(requestID, pid, channel) = reply else { throw HostError("unexpected reply to begin") }
        return ExtensionSession(requestID: requestID, pid: pid, channel: channel)
    }

    /// Dismisses a request; the extension is suspended once no request is left on it and it
    /// holds no assertion. Does not close the session's channel: the host closes it.
    public func dismiss(_ session: ExtensionSession) throws(HostError) {
        _ = try client.call { .end(tag: $0, requestID: session.requestID) }
    }

    /// Hints that these extensions will soon be opened: they are launched and suspended at once,
    /// so the later `begin` costs a resume instead of a launch.
    public func prewarm(_ extensionIDs: [String]) throws(HostError) {
        _ = try client.call { .prewarm(tag: $0, extensionIDs: extensionIDs) }
    }

    /// Called when a request is interrupted (the extension exited, crashed or was killed),
    /// with the request id and the reason.
    public func onInterruption(_ handler: @escaping @Sendable (UInt64, String) -> Void) {
        client.setInterruptionHandler(handler)
    }

    /// Closes the connection, ending every request on it.
    /// The extensions of `point` (every point when empty) this host may open (the manifest's
    /// `hosts` rule, as for `begin`) whose `activation` rule accepts `content`, sorted by id.
    /// With empty content, every extension of the point this host may open. An extension
    /// without an `activation` rule matches no content.
    public func extensions(point: String, content: ActivationContent) throws(HostError) -> [DiscoveredExtension] {
        let reply = try client.call { .discover(tag: $0, point: point, content: content) }
        guard case .extensions(let found) = reply else { throw HostError("unexpected reply to discover") }
        return found
    }

    /// Calls `handler` (on the connection's reader thread) when an extension completes or
    /// cancels one of this connection's requests, with the request id and the result. The
    /// request is then over: no dismiss is needed, and a later one is harmless.
    public func onResult(_ handler: @escaping @Sendable (UInt64, RequestResult) -> Void) {
        client.setResultHandler(handler)
    }

    /// Posts the notification hint `name`: extensions observing it that run are told now,
    /// suspended ones once when next resumed (a hint never resumes or launches one). Names under
    /// an extension's id (`com.example.stocks.widget.quotes`) may be posted by hosts that may
    /// open that extension; other names by root and the daemon's uid only. Throws the daemon's
    /// refusal (`notPermitted`, `badRequest`, or `limitReached` over 200 posts a second).
    public func post(_ name: String) throws(HostError) {
        _ = try client.call { .post(tag: $0, name: name) }
    }

    /// Calls `handler` (on the connection's reader thread) with an extension's id each time a
    /// background refresh of one of `extensionIDs` brings new data, so a visible panel can
    /// redraw. Each id must be one this host may open (the manifest's `hosts`). Subscriptions
    /// last as long as the connection.
    public func subscribeToNewData(_ extensionIDs: [String], _ handler: @escaping @Sendable (String) -> Void) throws(HostError) {
        client.setNewDataHandler(handler)
        _ = try client.call { .subscribe(tag: $0, extensionIDs: extensionIDs) }
    }

    /// Refreshes the extension now, whatever its schedule and budget, and returns its answer
    /// (`newData`, `noData` or `failed`). Throws when the extension does not support refresh
    /// (no `refresh` in its manifest, or no handler registered) or did not answer in time.
    public func refresh(_ extensionID: String, timeout: Double = 120) throws(HostError) -> RefreshAnswer {
        let reply = try client.call(timeout: timeout) { .forceRefresh(tag: $0, extensionID: extensionID) }
        guard case .refreshed(let answer) = reply else { throw HostError("unexpected reply to refresh") }
        return answer
    }

    /// The directory of the shared container `name` (such as `group.com.example.stocks`), for
    /// an app that shares it with its extensions. Allowed to root, the daemon's uid, the
    /// administrator group and members of the container's group (docs/security.md); throws
    /// the daemon's refusal otherwise, or `unknownExtension` when no loaded manifest names it.
    public func sharedContainerPath(_ name: String) throws(HostError) -> String {
        let reply = try client.call { .query(tag: $0, kind: .container, extensionIDs: [name]) }
        guard case .json(let bytes) = reply else { throw HostError("unexpected reply to a container query") }
        guard let path = Self.stringMember("path", of: bytes) else {
            throw HostError("malformed container reply: \(String(decoding: bytes, as: UTF8.self))")
        }
        return path
    }

    /// The string value of member `name` in a flat JSON object written by the daemon (escapes
    /// `\"`, `\\` and `\/` undone; a path holds no other escaped character).
    static func stringMember(_ name: String, of bytes: [UInt8]) -> String? {
        let key = Array("\"\(name)\":".utf8)
        guard bytes.count > key.count else { return nil }
        var i = 0
        while i + key.count <= bytes.count, Array(bytes[i..<i + key.count]) != key { i += 1 }
        i += key.count
        while i < bytes.count, bytes[i] == UInt8(ascii: " ") { i += 1 }
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return nil }
        i += 1
        var out: [UInt8] = []
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") { return String(decoding: out, as: UTF8.self) }
            if b == UInt8(ascii: "\\"), i + 1 < bytes.count {
                i += 1
                out.append(bytes[i])
            } else {
                out.append(b)
            }
            i += 1
        }
        return nil
    }

    public func close() { client.close() }
}
