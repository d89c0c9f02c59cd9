import ArgumentParser
import ExtensionHost
import ExtensionStatus

/// Shell completion of extension ids (`extctl status <TAB>`): the ids the running daemon knows,
/// asked over the control socket given on the command line (`--socket`) or the default one.
/// Prints nothing when no daemon answers within a second.
enum ExtensionIDCompletion {
    static let kind: CompletionKind = .custom { words, _, prefix in ids(words: words, prefix: prefix) }

    /// The known ids starting with `prefix`, sorted; empty when the daemon cannot be asked.
    static func ids(words: [String], prefix: String) -> [String] {
        var socket = ControlClient.defaultSocketPath
        for (i, word) in words.enumerated() {
            if word == "--socket", i + 1 < words.count { socket = words[i + 1] }
            if word.hasPrefix("--socket=") { socket = String(word.dropFirst("--socket=".count)) }
        }
        guard let client = try? ControlClient(socketPath: socket) else { return [] }
        defer { client.close() }
        guard let reply = try? client.call(timeout: 1, { .query(tag: $0, kind: .list, extensionIDs: []) }),
            let document = try? decode(ListDocument.self, reply)
        else { return [] }
        return document.extensions.map(\.id).filter { $0.hasPrefix(prefix) }.sorted()
    }
}
