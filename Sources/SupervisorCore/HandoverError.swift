/// Why a hand-over document could not be written, read or restored. Its `description` names
/// what is wrong, for the daemon that refuses the hand-over and the administrator who asked.
public enum HandoverError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The daemon is shutting down: every extension is being ended, nothing is left to hand over.
    case shuttingDown
    /// A spawn was asked for this extension and not answered yet: the document could not name
    /// its process.
    case spawnInFlight(extensionID: String)
    /// A stop or resume of this extension waits for the kernel's confirmation: the shell's
    /// part of it does not cross the exec.
    case stopInFlight(extensionID: String)
    /// The document's version is not one this daemon reads (`readable`).
    case unsupportedVersion(found: Int, readable: ClosedRange<Int>)
    /// The bytes are not a hand-over document: not in its form, or a member missing or of the
    /// wrong type. The detail names the member, by its path from the top.
    case corrupt(String)
    /// The document decodes but contradicts itself (two records with one id, a running record
    /// without a pid, a request id held twice…). The detail names the contradiction.
    case inconsistent(String)
    /// The document was written at a later instant of the monotonic clock than the restore's
    /// `now`: it comes from another boot, whose instants mean nothing here.
    case clockBehind(takenAt: Instant, now: Instant)
    /// The state could not be written in the document's form.
    case unencodable(String)

    /// One sentence naming what is wrong.
    public var description: String {
        switch self {
        case .shuttingDown:
            return "no hand-over while shutting down: every extension is being ended"
        case .spawnInFlight(let id):
            return "'\(id)' is being spawned and its process is not known yet: hand over once the spawn is answered"
        case .stopInFlight(let id):
            return "the stop or resume of '\(id)' is not confirmed yet: hand over once it is"
        case let .unsupportedVersion(found, readable):
            let reads = readable.count == 1 ? "version \(readable.lowerBound)" : "versions \(readable.lowerBound) to \(readable.upperBound)"
            let which = found > readable.upperBound ? "newer than" : "older than"
            return "the hand-over document has version \(found), \(which) this daemon reads (\(reads))"
        case .corrupt(let detail):
            return "the hand-over document is corrupt: \(detail)"
        case .inconsistent(let detail):
            return "the hand-over document is inconsistent: \(detail)"
        case let .clockBehind(takenAt, now):
            return "the hand-over document was written at \(takenAt) of the monotonic clock, later than now (\(now)): it comes from another boot"
        case .unencodable(let detail):
            return "the supervisor's state cannot be written as a hand-over document: \(detail)"
        }
    }
}
