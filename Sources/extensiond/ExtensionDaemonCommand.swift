import ArgumentParser
import Logging
import SupervisorKernel
import SupervisorShell

/// `extensiond`: the extension lifecycle supervisor. Runs in the foreground.
@main
struct ExtensionDaemonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "extensiond",
        abstract: "Supervise extension processes: launch on demand, suspend on dismiss, reclaim when unused.",
        discussion: """
            With no options, listens on $XDG_RUNTIME_DIR/extensiond/control.sock (without \
            XDG_RUNTIME_DIR: /run/extensiond/control.sock) and reads manifests from the standard data \
            directories. SIGHUP re-reads manifests; SIGTERM ends every extension and exits. \
            Under systemd it takes the socket passed by extensiond.socket, reports readiness \
            and status, pings the watchdog and logs structured journal entries. \
            See docs/extensiond.md and docs/operations.md.
            """,
        version: daemonVersion)

    @Option(name: .long, help: ArgumentHelp("Control socket path.", valueName: "path"))
    var socket: String?

    @Option(name: .customLong("extensions"), help: ArgumentHelp("Extension directory (repeatable; replaces the defaults).", valueName: "dir"))
    var extensionDirectories: [String] = []

    @Option(name: .long, help: ArgumentHelp("Configuration file (JSON: extension-point policies, limits).", valueName: "file"))
    var config: String?

    @Option(
        name: .customLong("log-target"),
        help: ArgumentHelp(
            "Where to log: auto (the journal when stderr is connected to it, else the console), console (lines on stderr) or journal (structured entries).",
            valueName: "target"))
    var logTarget: LogTarget = .auto

    @Option(
        name: .customLong("log-level"),
        help: ArgumentHelp(
            "Lowest priority logged: trace, debug, info, notice, warning, error or critical. Assertion acquire and release are logged at debug.",
            valueName: "level"))
    var logLevel: Logger.Level = .info

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How extension processes are held together: auto (a cgroup per extension when a writable cgroup v2 exists, else process groups), cgroup (required) or process-group.",
            valueName: "mode"))
    var containment: DaemonOptions.ContainmentChoice = .auto

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Which message bus the D-Bus interface (org.extensiond1) is on: auto (the system bus for root, else the session bus; none when it cannot be reached), system, session or none.",
            valueName: "bus"))
    var bus: DaemonOptions.BusChoice = .auto

    @Option(
        name: .customLong("state-directory"),
        help: ArgumentHelp(
            "Where lasting state is kept (ids.json: the uid of each extension). Default: $STATE_DIRECTORY under systemd, /var/lib/extensiond for root, else $XDG_STATE_HOME/extensiond (~/.local/state/extensiond).",
            valueName: "dir"))
    var stateDirectory: String?

    @Option(
        name: .customLong("socket-group"),
        help: ArgumentHelp(
            "Give the control socket to this group (name or number), mode 0660, so that its members may connect. Ignored for a socket passed by the service manager (use SocketGroup=).",
            valueName: "group"))
    var socketGroup: String?

    @Option(
        name: .customLong("handover"),
        help: ArgumentHelp(
            "Take over the state and descriptors a replaced extensiond left in this hand-over document (given by extensiond itself when it re-executes; see extctl reexec).",
            valueName: "file"))
    var handover: String?

    @Option(
        name: .customLong("check-handover"),
        help: ArgumentHelp(
            "Check that this program can take over the hand-over document, then exit: 0 when it can (with what it read and how long that took on stdout), 1 with the reason on stderr. Give it the daemon's other options: its --config is read and checked too. The daemon runs it, with its own arguments, before it re-executes.",
            valueName: "file"))
    var checkHandover: String?

    /// The arguments to start the replacement with: this command line without the hand-over's.
    static func replacementArguments(_ arguments: [String]) -> [String] {
        var kept: [String] = []
        var skipNext = false
        for a in arguments {
            if skipNext {
                skipNext = false
                continue
            }
            if a == "--handover" || a == "--check-handover" {
                skipNext = true
                continue
            }
            if a.hasPrefix("--handover=") || a.hasPrefix("--check-handover=") { continue }
            kept.append(a)
        }
        return kept
    }

    func run() throws {
        if let checkHandover {
            let kernel = try LinuxKernel(withLoop: false)
            switch Daemon.checkHandover(at: checkHandover, configFile: config, kernel: kernel) {
            case .success(let report): print(report)
            case .failure(let problem):
                DaemonProcess.printError("extensiond: \(problem)")
                throw ExitCode(1)
            }
            return
        }
        DaemonProcess.prepare()
        let target = logTarget.resolved()
        LoggingSystem.bootstrap { label in target.makeHandler(label: label) }
        var logger = Logger(label: "extensiond")
        logger.logLevel = logLevel
        if logTarget == .journal && target != .journal {
            logger.warning("journald is not running (no \(LogTarget.journalSocket)); logging to the console")
        }

        // Socket activation: the socket the service manager passed replaces --socket.
        let inherited: SocketActivation.Listener?
        do {
            inherited = try SocketActivation.inheritedListener()
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        var socketPath = socket
        if let inherited {
            if inherited.passed > 1 { logger.warning("\(inherited.passed) sockets passed by the service manager; using the first") }
            if let path = inherited.path, !path.hasPrefix("@") {
                if let socket, socket != path { logger.warning("--socket \(socket) ignored: the service manager passed \(path)") }
                socketPath = path
            }
        }
        let kernel: LinuxKernel
        do {
            kernel = try LinuxKernel()
        } catch {
            logger.critical("cannot start: the event loop cannot be created: \(error)")
            throw ExitCode(1)
        }
        var options = DaemonOptions(
            kernel: kernel, socketPath: socketPath, extensionDirectories: extensionDirectories, configFile: config,
            inheritedListener: inherited?.fd)
        options.containment = containment
        options.bus = bus
        if let stateDirectory { options.stateDirectory = stateDirectory }
        options.socketGroup = socketGroup
        options.commandLine = Self.replacementArguments(Array(CommandLine.arguments.dropFirst()))
        options.programPath = CommandLine.arguments.first.flatMap { LinuxKernel.programPath(invokedAs: $0) }
        options.handoverPath = handover
        let daemon: Daemon
        do {
            daemon = try Daemon(options: options, kernel: kernel, logger: logger)
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        let status = try daemon.run()
        if status != 0 { throw ExitCode(status) }
    }
}

extension LogTarget: ExpressibleByArgument {}
extension DaemonOptions.ContainmentChoice: ExpressibleByArgument {}
extension DaemonOptions.BusChoice: ExpressibleByArgument {}
extension Logger.Level: @retroactive ExpressibleByArgument {}
