import ExtensionProtocol

/// Identifies one control-socket connection for the lifetime of the daemon.
public typealias HostID = UInt64

/// Who is on the other end of a control connection, as the kernel reported it (SO_PEERCRED).
public struct PeerIdentity: Equatable, Sendable, Codable {
    /// The peer's process id.
    public var pid: Int32
    /// The peer's effective user id; permission checks use it.
    public var uid: UInt32
    /// The peer's effective primary group id.
    public var gid: UInt32
    /// Supplementary groups of the peer process at connect time.
    public var groups: [UInt32]
    /// The declared app the peer process belongs to, as the kernel says (`AppProcessIdentity`:
    /// its systemd scope or service), or nil for a process of no declared app.
    public var app: String?

    /// An identity with these ids; by default no supplementary groups and no app.
    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = [], app: String? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.app = app
    }

    /// Whether the peer has `gid` as its primary or a supplementary group.
    public func isMember(of gid: UInt32) -> Bool { self.gid == gid || groups.contains(gid) }
}

/// Everything that can happen to the supervisor. The shell turns system events (socket
/// messages, child-process notifications, timers, signals) into these.
public enum Event: Equatable, Sendable {
    /// A host asks to begin a request on an extension.
    case begin(host: HostID, peer: PeerIdentity, tag: UInt32, extensionID: String)
    /// A host ends (dismisses) one of its requests.
    case end(host: HostID, tag: UInt32, requestID: UInt64)
    /// A host connection closed (the host dismissed everything, crashed or exited).
    case hostGone(host: HostID)
    /// A spawn effect succeeded: the process exists and exec succeeded.
    case spawned(extensionID: String, generation: UInt64, pid: Int32)
    /// A spawn effect failed.
    /// `configuration`: the failure comes from how the extension is installed (its program or a
    /// directory on its path cannot be reached or run), not from the extension: it is not
    /// counted as a crash, and does not throttle the next launch.
    case spawnFailed(extensionID: String, generation: UInt64, error: String, configuration: Bool = false)
    /// The process announced readiness (or exec succeeded, for `exec` readiness).
    case ready(extensionID: String, generation: UInt64)
    /// The kernel confirmed that every process of the group is stopped. `locks`: every file lock
    /// its processes held at that moment (see `HeldLock`).
    case stopConfirmed(extensionID: String, generation: UInt64, locks: [HeldLock] = [])
    /// The kernel confirmed that the group runs again.
    case continueConfirmed(extensionID: String, generation: UInt64)
    /// Every process of the extension is gone and its leader reaped. `status` is the leader's.
    /// `outlivedLeader`: some of its processes were still alive when the leader exited, and
    /// were killed. `memoryLimit`: the kernel's OOM killer ended a process of it within its
    /// `memoryMaxBytes` (`oom_kill` of its cgroup's `memory.events` went up).
    case exited(extensionID: String, generation: UInt64, status: ExitStatus, outlivedLeader: Bool = false, memoryLimit: Bool = false)
    /// The runtime asks for an assertion.
    case acquire(extensionID: String, generation: UInt64, tag: UInt32, reason: String)
    /// The runtime releases an assertion.
    case release(extensionID: String, generation: UInt64, assertionID: UInt64)
    /// The runtime read the *expire* for an assertion.
    case expireReceived(extensionID: String, generation: UInt64, assertionID: UInt64)
    /// The runtime channel was closed (or cut off for misbehaving) while the process lives.
    case channelClosed(extensionID: String, generation: UInt64, reason: String)
    /// Handing a request's channel to the extension failed.
    case deliveryFailed(extensionID: String, generation: UInt64, requestID: UInt64, error: String)
    /// While suspended, the process group holds a file lock that another process waits for.
    case lockContention(extensionID: String, generation: UInt64, detail: String)
    /// Its processes kept running through the stop for `seconds` (`GroupAction.stopRefused`).
    case stopRefused(extensionID: String, generation: UInt64, seconds: Double)
    /// Its container was measured at `bytes`, over its `limits.diskMaxBytes`.
    case diskLimitExceeded(extensionID: String, generation: UInt64, bytes: UInt64)
    /// The extension completed or cancelled a request it was given (`complete`/`cancel` on its
    /// runtime channel).
    case requestFinished(extensionID: String, generation: UInt64, requestID: UInt64, outcome: RequestOutcome)
    /// The extension answered its background refresh.
    case refreshDone(extensionID: String, generation: UInt64, refreshID: UInt64, answer: RefreshAnswer)
    /// A host forces a refresh (`extctl refresh`); answered `refreshed` or `failure`.
    case forceRefresh(host: HostID, peer: PeerIdentity, tag: UInt32, extensionID: String)
    /// A host subscribes to new data from these extensions; answered `ok` or `failure`.
    case subscribe(host: HostID, peer: PeerIdentity, tag: UInt32, extensionIDs: [String])
    /// The extension's runtime observes the notification hint `name`.
    case observe(extensionID: String, generation: UInt64, name: String)
    /// The extension's process opened the shared defaults suite `suite` (the daemon checked that
    /// it may): it is told of the other members' changes from now on (`suiteChanged`).
    case suiteOpened(extensionID: String, generation: UInt64, suite: String)
    /// A member changed the suite `suite`: every extension process that opened it, other than
    /// generation `writerGeneration` of `writer` (the member that wrote, if an extension), is
    /// told, or told once when next resumed.
    case suiteChanged(suite: String, writer: String?, writerGeneration: UInt64)
    /// A host posts the notification hint `name`; answered `ok` or `failure`.
    case post(host: HostID, peer: PeerIdentity, tag: UInt32, name: String)
    /// Time passed: process every deadline that is due.
    case tick
    /// An administrator sends a signal to an extension.
    case kill(host: HostID, tag: UInt32, extensionID: String, signal: Int32)
    /// An administrator resets an extension (`extctl reset`): it is ended, then its container
    /// emptied (`emptyContainer`), whether or not a manifest declares it.
    case reset(host: HostID, tag: UInt32, extensionID: String)
    /// The manifests were re-read. `host`/`tag` identify who asked, if anyone.
    case reload(manifests: [Manifest], errors: [ManifestError], host: HostID?, tag: UInt32)
    /// A host hints that it will soon open these extensions.
    case prewarm(host: HostID, peer: PeerIdentity, tag: UInt32, extensionIDs: [String])
    /// The daemon is asked to stop: end everything and exit when every process is gone.
    case shutdown
}

/// What the supervisor asks the shell to do. The shell performs effects in order.
public enum Effect: Equatable, Sendable {
    /// Spawn the manifest's executable in a new process group with a runtime channel.
    /// Answer with `spawned` then (for `exec` readiness) `ready`, or with `spawnFailed`.
    case spawn(extensionID: String, generation: UInt64, manifest: Manifest)
    /// SIGSTOP the whole group and answer with `stopConfirmed` once the kernel confirms it.
    case stop(extensionID: String, generation: UInt64)
    /// SIGCONT the whole group and answer with `continueConfirmed` once confirmed.
    case resume(extensionID: String, generation: UInt64)
    /// Send `signal` to the whole group, then SIGCONT when `thenContinue`.
    case signal(extensionID: String, generation: UInt64, signal: Int32, thenContinue: Bool)
    /// Create a host channel: a socketpair whose one end goes to the extension with
    /// `deliver(requestID)` and whose other end goes to the host with `begun`.
    /// With `channel == false` (exec readiness), only `begun` is sent.
    case openRequest(extensionID: String, generation: UInt64, requestID: UInt64, host: HostID, tag: UInt32, pid: Int32, channel: Bool)
    /// Send a message to a host connection.
    case reply(host: HostID, message: Message)
    /// Send a message to an extension's runtime channel.
    case send(extensionID: String, generation: UInt64, message: Message)
    /// Wake the supervisor with `tick` at this instant (nil: no timer needed).
    case armTimer(Instant?)
    /// Record (log, stream to monitors) a lifecycle event.
    case record(LifecycleEvent)
    /// Empty the container of `extensionID`, whose processes are all gone, and answer the
    /// host's `reset` with `ok` or `failure`. Comes before any launch of it the same event causes.
    case emptyContainer(extensionID: String, host: HostID, tag: UInt32)
    /// Shutdown is complete: every process is gone; the daemon may exit.
    case exit
}

/// Signal numbers the core needs (Linux values, identical on every Linux architecture we support).
public enum SignalNumber {
    /// SIGHUP.
    public static let hangup: Int32 = 1
    /// SIGINT.
    public static let interrupt: Int32 = 2
    /// SIGKILL.
    public static let kill: Int32 = 9
    /// SIGUSR2.
    public static let user2: Int32 = 12
    /// SIGTERM.
    public static let terminate: Int32 = 15
    /// SIGCHLD.
    public static let child: Int32 = 17
    /// SIGCONT.
    public static let cont: Int32 = 18
    /// SIGSTOP.
    public static let stop: Int32 = 19
    /// SIGTSTP.
    public static let terminalStop: Int32 = 20
    /// SIGTTIN.
    public static let ttin: Int32 = 21
    /// SIGTTOU.
    public static let ttou: Int32 = 22
    /// Signals only the supervisor may send: they would desynchronise its view of the process.
    public static let reserved: Set<Int32> = [cont, stop, terminalStop, ttin, ttou]
}

/// How an extension ended a request itself.
public enum RequestOutcome: Equatable, Sendable {
    /// Completed, returning these bytes to the host (at most `WireLimits.maxPayload`).
    case completed([UInt8])
    /// Cancelled, for this reason.
    case cancelled(String)
}
