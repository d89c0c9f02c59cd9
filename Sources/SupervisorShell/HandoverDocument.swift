import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// What one daemon hands the program that replaces it (`extctl reexec`, SIGUSR2): the core's
/// state as the core writes it (`Supervisor.Snapshot`), and the shell's part, which names the
/// descriptors that cross the `execve` and what each is. One versioned document in the compact
/// binary form of `BinaryFormat` (after `signature`), written
/// to a file beside the control socket while the new program's check (`--check-handover`)
/// reads the same bytes on its stdin, before the old one execs it; then read and removed by
/// the new daemon (`--handover`).
///
/// Kept: every extension process (same pid, its pidfd, its runtime channel, its cgroup and the
/// files of it the daemon keeps open, and how it was last stopped), every control connection (its socket
/// and who it is, monitors included), the listening socket, and the next host id. Rebuilt by
/// the new daemon: watches and timers (the core's deadline from its records; a closing
/// channel's grace from its deadline; a suspended group's lock watch from its locks and its
/// inotify descriptor, which cross: a stopped group takes no lock), the process registry (with
/// the start times the old one recorded). A hand-over waits until no
/// stop is in flight and no peer has unsent messages, so neither crosses the exec.
struct HandoverDocument: Codable {
    /// The document's version; a daemon refuses one it does not know, naming both.
    static let currentVersion = 2
    /// The bytes a hand-over document starts with.
    static let signature = Array("extensiond hand-over\n".utf8)

    struct Connection: Codable, Equatable {
        var host: HostID
        var fd: Int32
        var pid: Int32
        var uid: UInt32
        var gid: UInt32
        var groups: [UInt32]
        var isMonitor: Bool
        /// The declared app it belongs to (nil for none, or from a daemon that knew no apps).
        var app: String? = nil
    }

    struct Process: Codable, Equatable {
        var extensionID: String
        var generation: UInt64
        var pid: Int32
        var pidfd: Int32
        /// The leader's start time as the process registry recorded it (nil when it had none):
        /// the new program records it without reading /proc again.
        var startTicks: UInt64?
        /// The daemon's end of the runtime channel, if it is open.
        var channel: Int32?
        /// The read end of its output pipe (`ExtensionOutput`), if it is open.
        var output: Int32? = nil
        /// When the channel closed and the process has until this instant to exit.
        var channelGraceUntil: Instant?
        /// The extension's cgroup; nil on the process-group fallback.
        var cgroup: String?
        /// Its `cgroup.events` and `cgroup.procs`, open: they cross the `execve` like the
        /// pidfd, so the new program opens nothing again.
        var cgroupEvents: Int32?
        var cgroupProcs: Int32?
        /// Its `cgroup.freeze`, when kept open (the freezer suspends it).
        var cgroupFreeze: Int32?
        /// `cgroup.freeze` is kept open (the freezer suspends it).
        var freezer: Bool
        var memoryCgroupV1: String?
        var memoryOOMKillsAtStart: Int?
        var mechanism: SuspendMode
        /// How the group stands: running, stopped or frozen (a stop in flight never crosses).
        var group: GroupControl.Snapshot
        /// The locks the suspended group holds and how they are watched; nil when it holds
        /// none (or runs).
        var locks: Locks?
    }

    /// A suspended group's locks as `LockWatch` watches them. The inotify descriptor crosses
    /// the `execve`, so an open of a locked file made during the hand-over waits in it and is
    /// seen by the new program; the locks are not read again (a stopped group takes none).
    struct Locks: Codable, Equatable {
        /// Members of the group that hold file locks.
        var holders: [Int32]
        /// The locks on each watched file, by the inotify watch descriptor of the file.
        var files: [WatchedFile]
        /// The inotify descriptor watching those files for opens, if they are watched.
        var openWatch: Int32?
        /// Whether the periodic check for blocked waiters is armed.
        var checking: Bool

        struct WatchedFile: Codable, Equatable {
            var watch: Int32
            var locks: [HeldLock]
        }

        /// These locks without those of the holders in `gone` (members that died meanwhile:
        /// their locks went with them); nil when no holder is left.
        func without(_ gone: Set<Int32>) -> Locks? {
            let left = holders.filter { !gone.contains($0) }
            guard !left.isEmpty else { return nil }
            var kept = self
            kept.holders = left
            kept.files = files.compactMap { f in
                let locks = f.locks.filter { !gone.contains($0.pid) }
                return locks.isEmpty ? nil : WatchedFile(watch: f.watch, locks: locks)
            }
            return kept
        }
    }

    /// What the sandbox probe found, by part (`SandboxPart`'s raw value): the error number of the
    /// step that failed, 0 when the part can be built. The new program takes it instead of
    /// probing again; it probes when a part it knows is missing.
    struct Sandbox: Codable, Equatable {
        var errnos: [String: Int32]
        var userNamespace: Bool

        init(_ probe: SandboxProbe) {
            errnos = [:]
            for (part, error) in zip(SandboxPart.allCases, probe.errors) { errnos[part.rawValue] = error?.errno ?? 0 }
            userNamespace = probe.userNamespace
        }

        /// The probe's result, or nil when the document lacks a part this program knows.
        var probe: SandboxProbe? {
            var errors: [SystemError?] = []
            for part in SandboxPart.allCases {
                guard let number = errnos[part.rawValue] else { return nil }
                errors.append(number == 0 ? nil : SystemError(errno: number))
            }
            return SandboxProbe(errors: errors, userNamespace: userNamespace)
        }
    }

    /// The `extctl reexec` waiting for the new daemon's answer, if it came from one.
    struct Requester: Codable, Equatable {
        var host: HostID
        var tag: UInt32
    }

    var version: Int
    /// `extensiond --version` of the daemon that wrote it.
    var daemonVersion: String
    /// The core's state. In the file its records are not here but in the `recordParts` values
    /// that follow this one (`HandoverFile`).
    var core: Supervisor.Snapshot
    /// How many parts of the core's records follow this value in the file.
    var recordParts: Int
    var listener: Int32
    /// Where the control socket is (its registry and hand-over files are named after it).
    var socketPath: String
    /// The socket file, when the old daemon created it (and the new one removes it at exit).
    var ownedSocketPath: String?
    var nextHostID: HostID
    var connections: [Connection]
    var processes: [Process]
    var requester: Requester?
    var sandbox: Sandbox
    /// The shared containers the manifests named, by name (the new program does not read the
    /// manifests again: its records carry them).
    var sharedContainers: [String: SharedContainers.Container]
    /// The containers' directory with the state directory's links resolved.
    var containersRoot: String
    /// The points' network stacks and who is in each (nil from a daemon that had none).
    var networkStacks: NetworkStacks.Handover? = nil
    /// The apps the manifests declared (nil from a daemon that knew none).
    var apps: [AppManifest]? = nil
    /// The open shared defaults suites (nil from a daemon that had none open, or knew none).
    var defaults: DefaultsSuites.Handover? = nil
    /// Who consumes each background session (nil from a daemon that had none).
    var transfers: TransferService.Handover? = nil
    /// Each extension's last output lines and who follows them (`extctl logs -f`); nil from a
    /// daemon that kept none.
    var outputs: OutputHistory.Handover? = nil

    /// Every descriptor the document names: what must cross the `execve`.
    var descriptors: [Int32] {
        [listener] + connections.map(\.fd)
            + processes.flatMap {
                [$0.pidfd] + [$0.channel, $0.output, $0.cgroupEvents, $0.cgroupProcs, $0.cgroupFreeze, $0.locks?.openWatch].compactMap { $0 }
            }
            + (networkStacks?.stacks.values.flatMap { [$0.namespaceFD, $0.pidfd, $0.control] } ?? [])
            + (defaults?.suites.values.sorted() ?? [])
    }
}
