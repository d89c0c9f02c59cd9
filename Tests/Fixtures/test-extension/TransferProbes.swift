import ExtensionProtocol
import ExtensionRuntime
import Synchronization

/// The events this process's background sessions received, one line each:
/// "progress TASK BYTES", "completed TASK STATUS PATH" or "failed TASK DOMAIN CODE".
let transferEvents = Mutex<[String]>([])

/// Each session this process made, by `group/identifier` (kept alive: its handler is the session's).
let transferSessions = Mutex<[String: BackgroundSession]>([:])

func transferSession(_ identifier: String, _ group: String) -> BackgroundSession {
    transferSessions.withLock { sessions in
        if let s = sessions[group + "/" + identifier] { return s }
        let s = BackgroundSession(identifier: identifier, group: group) { e in
            let line =
                switch e.kind {
                case .progress: "progress \(e.task) \(e.bytes)"
                case .completed: "completed \(e.task) \(e.status) \(e.path.isEmpty ? "-" : e.path)"
                case .failed: "failed \(e.task) \(e.domain) \(e.code)"
                }
            transferEvents.withLock { $0.append(line) }
        }
        sessions[group + "/" + identifier] = s
        return s
    }
}

/// The test extension's commands for background transfers (TransferTests):
///   transfer-download <session> <group> <url> [path] -> "created <task>" or "refused: <error>"
///   transfer-upload <session> <group> <path> <url>    -> "created <task>" or "refused: <error>"
///   transfer-cancel <session> <group> <task>          -> "cancelled" or "refused: <error>"
///   transfer-claim <session> <group>                  -> "claimed" or "refused: <error>"
///   transfer-events                                   -> the events so far, joined by "; " ("none" without any)
func transferProbe(_ line: String) -> String? {
    let words = line.split(separator: " ").map(String.init)
    func word(_ i: Int) -> String { words.count > i ? words[i] : "" }
    func outcome(_ body: () throws(TransferFailure) -> String) -> String {
        do { return try body() } catch { return "refused: \(error.text)" }
    }
    switch words.first {
    case "transfer-download":
        return outcome { () throws(TransferFailure) in "created \(try transferSession(word(1), word(2)).download(word(3), to: word(4)))" }
    case "transfer-upload":
        return outcome { () throws(TransferFailure) in "created \(try transferSession(word(1), word(2)).upload(word(3), to: word(4)))" }
    case "transfer-cancel":
        return outcome { () throws(TransferFailure) in
            try transferSession(word(1), word(2)).cancel(UInt64(word(3)) ?? 0)
            return "cancelled"
        }
    case "transfer-claim":
        return outcome { () throws(TransferFailure) in
            try transferSession(word(1), word(2)).claim()
            return "claimed"
        }
    case "transfer-events":
        let lines = transferEvents.withLock { $0 }
        return lines.isEmpty ? "none" : lines.joined(separator: "; ")
    default:
        return nil
    }
}
