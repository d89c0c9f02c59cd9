import SupervisorKernel

/// Where the daemon listens and what it reads. Defaults follow the XDG base directories for a
/// user daemon and /run, /etc and /usr/share for root (see docs/extensiond.md).
public struct DaemonOptions: Sendable {
    /// The control socket path.
    public var socketPath: String
    /// Extension directories, searched in order (the first manifest to claim an id wins).
    public var extensionDirectories: [String]
    /// Whether `extensionDirectories` was given explicitly (absent ones are then errors).
    public var explicitDirectories: Bool
    /// The configuration file, if any.
    public var configFile: String?
    /// A listening socket passed by the service manager (socket activation), if any.
    public var inheritedListener: Int32?
    /// How extension processes are held together.
    public var containment: ContainmentChoice = .auto
    /// Where the daemon keeps what must outlive it (`ids.json`: the uids of extensions).
    /// Created when first needed.
    public var stateDirectory: String
    /// The group (name or number) the control socket is given, mode 0660, so that its
    /// members may connect; nil keeps the daemon's group. Not applied to a socket passed by
    /// the service manager (`SocketGroup=` sets that one).
    public var socketGroup: String?
    /// The arguments the daemon was started with (without the program's name): a re-exec
    /// starts the new program with the same ones.
    public var commandLine: [String] = []
    /// The program the daemon was started as, a path that names whatever file is there when a
    /// re-exec runs it (`LinuxKernel.programPath(invokedAs:)`); nil falls back on the running
    /// program's file (`Kernel.executablePath`).
    public var programPath: String?
    /// A hand-over document left by the daemon this one replaces (`--handover`): the state
    /// and descriptors to take over instead of starting afresh.
    public var handoverPath: String?

    /// Which message bus the D-Bus interface is on (docs/dbus.md).
    public var bus: BusChoice = .auto

    /// The `--bus` choices.
    public enum BusChoice: String, Sendable, CaseIterable {
        /// The system bus for a root daemon, else the session bus; none when it cannot be reached.
        case auto
        /// The system bus.
        case system
        /// The session bus.
        case session
        /// No D-Bus interface.
        case none

        /// Whether the interface goes on the system bus (true), the session bus (false), or
        /// nowhere (nil), for a daemon running as `uid`.
        public func systemBus(uid: UInt32) -> Bool? {
            switch self {
            case .auto: uid == 0
            case .system: true
            case .session: false
            case .none: nil
            }
        }
    }

    /// The `--containment` choices.
    public enum ContainmentChoice: String, Sendable, CaseIterable {
        /// A cgroup per extension when a writable cgroup v2 exists, process groups otherwise.
        case auto
        /// A cgroup per extension, or the daemon refuses to start.
        case cgroup
        /// Process groups only, even where cgroups would work.
        case processGroup = "process-group"
    }

    /// Options with the defaults of a daemon running with `kernel`'s identity and environment
    /// for whatever is not given.
    public init(
        kernel: any Kernel, socketPath: String? = nil, extensionDirectories: [String] = [], configFile: String? = nil, inheritedListener: Int32? = nil
    ) {
        self.socketPath = socketPath ?? DaemonOptions.defaultSocketPath(kernel)
        self.explicitDirectories = !extensionDirectories.isEmpty
        self.extensionDirectories = extensionDirectories.isEmpty ? DaemonOptions.defaultExtensionDirectories(kernel) : extensionDirectories
        self.configFile = configFile ?? DaemonOptions.defaultConfigFile(kernel)
        self.stateDirectory = DaemonOptions.defaultStateDirectory(kernel)
        self.inheritedListener = inheritedListener
    }

    /// `$STATE_DIRECTORY` under systemd (`StateDirectory=extensiond`, its first entry); else
    /// `/var/lib/extensiond` for root, and `$XDG_STATE_HOME/extensiond` (default
    /// `~/.local/state/extensiond`) for others.
    public static func defaultStateDirectory(_ kernel: any Kernel) -> String {
        let env = kernel.nonEmptyEnvironment
        if let dirs = env("STATE_DIRECTORY"), let first = dirs.split(separator: ":").first { return String(first) }
        if kernel.userID == 0 && env("XDG_STATE_HOME") == nil { return "/var/lib/extensiond" }
        return (env("XDG_STATE_HOME") ?? (env("HOME") ?? "/") + "/.local/state") + "/extensiond"
    }

    /// `$XDG_RUNTIME_DIR/extensiond/control.sock`, or `/run/extensiond/control.sock` without it.
    public static func defaultSocketPath(_ kernel: any Kernel) -> String {
        let env = kernel.nonEmptyEnvironment
        if let runtime = env("XDG_RUNTIME_DIR") { return runtime + "/extensiond/control.sock" }
        return "/run/extensiond/control.sock"
    }

    /// For root: /etc/extensiond/extensions, /usr/local/share/extensiond/extensions,
    /// /usr/share/extensiond/extensions. For others: `$XDG_DATA_HOME/extensiond/extensions`
    /// then each `$XDG_DATA_DIRS` entry's `extensiond/extensions`.
    public static func defaultExtensionDirectories(_ kernel: any Kernel) -> [String] {
        let env = kernel.nonEmptyEnvironment
        if kernel.userID == 0 && env("XDG_DATA_HOME") == nil {
            return ["/etc/extensiond/extensions", "/usr/local/share/extensiond/extensions", "/usr/share/extensiond/extensions"]
        }
        let home = env("HOME") ?? "/"
        let dataHome = env("XDG_DATA_HOME") ?? home + "/.local/share"
        let dataDirs = (env("XDG_DATA_DIRS") ?? "/usr/local/share:/usr/share").split(separator: ":").map(String.init)
        return ([dataHome] + dataDirs).map { $0 + "/extensiond/extensions" }
    }

    /// `$XDG_CONFIG_HOME/extensiond/config.json` (or `/etc/extensiond/config.json` for root) when it exists.
    public static func defaultConfigFile(_ kernel: any Kernel) -> String? {
        let env = kernel.nonEmptyEnvironment
        let candidate: String
        if kernel.userID == 0 && env("XDG_CONFIG_HOME") == nil {
            candidate = "/etc/extensiond/config.json"
        } else {
            candidate = (env("XDG_CONFIG_HOME") ?? (env("HOME") ?? "/") + "/.config") + "/extensiond/config.json"
        }
        return kernel.status(candidate, followLinks: true).isSuccess ? candidate : nil
    }
}
