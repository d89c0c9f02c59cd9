import ArgumentParser
import CSystemd
import CShims
import Logging
import SupervisorShell
#if canImport(Glibc)
import Glibc
#endif

/// `extensiond`: the extension lifecycle supervisor. Runs in the foreground.
@main
struct ExtensionDaemonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extensiond",
        abstract: "Supervise extension processes: launch on demand, suspend on dismiss, reclaim when unused.",
        discussion: """
            With no options, listens on $XDG_RUNTIME_DIR/extensiond/control.sock (root: \
            /run/extensiond/control.sock) and reads manifests from the standard data \
            directories. SIGHUP re-reads manifests; SIGTERM ends every extension and exits. \
            See docs/extensiond.md.
            """)

    @Option(name: .long, help: ArgumentHelp("Control socket path.", valueName: "path"))
    var socket: String?

    @Option(name: .customLong("extensions"), help: ArgumentHelp("Extension directory (repeatable; replaces the defaults).", valueName: "dir"))
    var extensionDirectories: [String] = []

    @Option(name: .long, help: ArgumentHelp("Configuration file (JSON: extension-point policies, limits).", valueName: "file"))
    var config: String?

    func run() throws {
        // Signals the loop owns must be blocked before any other thread exists.
        let owned: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGCHLD, 0]
        _ = owned.withUnsafeBufferPointer { shim_block_signals($0.baseAddress!) }
        signal(SIGPIPE, SIG_IGN)
        LoggingSystem.bootstrap { label in ConsoleLogHandler(label: label) }
        let logger = Logger(label: "extensiond")

        var inherited: Int32?
        let passed = sd_listen_fds(1)
        if passed == 1 {
            inherited = SD_LISTEN_FDS_START
        } else if passed > 1 {
            logger.warning("\(passed) sockets passed by the service manager; using the first")
            inherited = SD_LISTEN_FDS_START
        }
        let options = DaemonOptions(
            socketPath: socket, extensionDirectories: extensionDirectories, configFile: config,
            inheritedListener: inherited)
        let daemon: Daemon
        do {
            daemon = try Daemon(options: options, logger: logger)
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        let status = try daemon.run(onReady: { _ = sd_notify(0, "READY=1") })
        _ = sd_notify(0, "STOPPING=1")
        if status != 0 { throw ExitCode(status) }
    }
}
