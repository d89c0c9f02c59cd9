import ArgumentParser
import ExtensionHost
import ExtensionProtocol
import ExtensionStatus

/// `extctl reexec`: replace extensiond's program in place, keeping every extension.
struct Reexec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replace extensiond's program with the one on disk, keeping every extension, request and connection (administrators only).",
        discussion: """
            extensiond checks the program on disk against its state first; when the check fails, it goes on \
            unchanged and this command exits 1 naming why. Otherwise prints one line, \
            'extensiond OLD → NEW (pid PID, N extension processes kept)', once the new program answers. \
            SIGUSR2 to extensiond does the same without an answer.
            """)

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let client = try connection.connect()
        // The daemon waits for stops in flight (up to 5 s) and runs the new program's check
        // (up to 10 s) before it execs.
        let reply = try perform { () throws(HostError) in try client.call(timeout: 60) { .reexec(tag: $0) } }
        let answer = try decode(ReexecReport.self, reply)
        let count = answer.extensions
        print(
            "extensiond \(safe(answer.previousVersion)) → \(safe(answer.version)) (pid \(answer.pid), \(count) extension process\(count == 1 ? "" : "es") kept)"
        )
    }
}
