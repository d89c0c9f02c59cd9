import SupervisorCore
import SupervisorKernel

/// A re-exec of the daemon asked for (`extctl reexec`, SIGUSR2) and not done yet: who asked,
/// until when it may wait for the daemon to settle, and the retry timer meanwhile. Owned by
/// the daemon's loop.
final class Reexecution {
    /// The arguments the daemon was started with, given to the program that replaces it.
    let commandLine: [String]
    /// The path the daemon was started by, which a re-exec runs (nil: the running program's
    /// file).
    let programPath: String?
    /// After a hand-over: the `extctl reexec` to answer, and the version of the daemon replaced.
    private var answer: (requester: HandoverDocument.Requester, previousVersion: String)?

    init(commandLine: [String], programPath: String? = nil) {
        self.commandLine = commandLine
        self.programPath = programPath
    }

    /// Keeps the answer the new daemon owes once it serves (`takeAnswer`).
    func owe(_ requester: HandoverDocument.Requester, previousVersion: String) {
        answer = (requester, previousVersion)
    }

    /// The answer owed after a hand-over, once.
    func takeAnswer() -> (requester: HandoverDocument.Requester, previousVersion: String)? {
        defer { answer = nil }
        return answer
    }

    /// The `extctl reexec` to answer, if a connection asked (SIGUSR2 has none).
    private(set) var requester: HandoverDocument.Requester?
    /// Until when stops in flight and unsent messages may delay the hand-over.
    private(set) var deadline: Instant?
    private var retry: (any Cancellable)?

    /// How long a re-exec waits for stops in flight and peers' unsent messages.
    static let settleSeconds = 5.0
    /// How often it looks again meanwhile.
    static let retrySeconds = 0.01
    /// How long the new program's check of the document may take: 10 s, or half the
    /// watchdog's interval when the service manager asked for one (the check blocks the loop,
    /// which sends the watchdog's pings).
    static func checkSeconds(watchdogMicroseconds: UInt64?) -> Double {
        guard let usec = watchdogMicroseconds, usec > 0 else { return 10 }
        return min(10, Double(usec) / 2e6)
    }

    /// Whether a re-exec is under way.
    var isPending: Bool { deadline != nil }

    /// Whether the connections that do not read may still be cut off: once per re-exec.
    private(set) var mayCutOffLaggards = false

    /// Starts one, for `requester`, waiting at most until `deadline`.
    func begin(requester: HandoverDocument.Requester?, deadline: Instant) {
        self.requester = requester
        self.deadline = deadline
        mayCutOffLaggards = true
    }

    /// The connections that did not read were cut off at the deadline: the wait goes on until
    /// `deadline` for what that caused (their requests end, their extensions stop).
    func laggardsCutOff(deadline: Instant) {
        self.deadline = deadline
        mayCutOffLaggards = false
    }

    /// Keeps the timer of the next attempt.
    func keep(retry timer: any Cancellable) {
        retry?.cancel()
        retry = timer
    }

    /// Ends the one under way (done, or refused).
    func end() {
        retry?.cancel()
        retry = nil
        requester = nil
        deadline = nil
        mayCutOffLaggards = false
    }
}
