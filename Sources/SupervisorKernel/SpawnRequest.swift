import ExtensionTransport
import SupervisorCore

/// What the spawn of one extension process needs.
public struct SpawnRequest: Equatable {
    /// The executable, run as it is named (no `$PATH` search); also the child's `argv[0]`.
    public var path: String
    /// The arguments after `argv[0]`.
    public var arguments: [String]
    /// The child's whole environment, `NAME=value` each (nothing of the daemon's is added).
    public var environment: [String]
    /// The child's working directory; nil keeps the daemon's.
    public var directory: String?
    /// The descriptor to place at fd 3 in the child, or nil.
    public var channelFD: Int32?
    /// A descriptor to place at fd 4 in the child (with a `channelFD` at 3), or nil.
    public var extraFD: Int32? = nil
    /// The capabilities the child keeps (a trusted helper that needs some: the network stack,
    /// which enters a namespace and drops them itself), by number; empty drops them all.
    public var keptCapabilities: [Int32] = []
    /// An O_DIRECTORY descriptor of the cgroup the child starts in, or nil.
    public var cgroupFD: Int32?
    /// The credentials the child switches to before exec; nil keeps the daemon's.
    public var credentials: Credentials?
    /// Resource limits set in the child before exec (soft and hard).
    public var resourceLimits: [ResourceLimit] = []
    /// The sandbox the child builds before it switches credentials, or nil.
    public var sandbox: SandboxPlan?
    /// `cgroup.procs` of the cgroup v1 memory cgroup the child joins first, open for writing, or nil.
    public var memoryCgroupProcsFD: Int32? = nil
    /// The child's stdout and stderr (the write end of its own output pipe); nil gives it the
    /// daemon's (a terminal's write-only open of its own where the daemon's is a terminal).
    public var outputFD: Int32? = nil

    /// A request of these values, stored as given. The descriptors stay the caller's: the
    /// spawn neither closes them nor takes them over.
    public init(
        path: String, arguments: [String], environment: [String], directory: String?, channelFD: Int32?, cgroupFD: Int32?,
        credentials: Credentials?, resourceLimits: [ResourceLimit] = [], sandbox: SandboxPlan? = nil, memoryCgroupProcsFD: Int32? = nil,
        outputFD: Int32? = nil
    ) {
        self.outputFD = outputFD
        self.path = path
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
        self.channelFD = channelFD
        self.cgroupFD = cgroupFD
        self.credentials = credentials
        self.resourceLimits = resourceLimits
        self.sandbox = sandbox
        self.memoryCgroupProcsFD = memoryCgroupProcsFD
    }
}

/// What the child of one launch builds (sandbox.h) before it switches credentials.
public struct SandboxPlan: Equatable {
    /// The parts built.
    public var parts: Set<SandboxPart>
    /// Whether the child first enters a user namespace of its own (a daemon without root).
    public var userNamespace: Bool
    /// The mounts of the child's file system view (`.filesystem`), applied in this order.
    public var mounts: [SandboxView.Mount]
    /// The system-call filter (from `Kernel.prepareSandbox`), installed with `.syscalls`.
    public var filter: UnsafeRawPointer?
    /// The daemon's user id, mapped to itself in the user namespace.
    public var uid: UInt32
    /// The daemon's group id, mapped to itself in the user namespace.
    public var gid: UInt32
    /// The size of each private tmpfs (`/tmp`, `/var/tmp`, `/dev/shm`) in bytes, or nil for
    /// the kernel's default (half the machine's memory).
    public var scratchBytes: UInt64?
    /// Whether the child is scoped with Landlock (`SandboxDecision.scoped`): no connection to
    /// an abstract unix socket bound outside it, no signal to a process outside it.
    public var landlockScope = false
    /// With `.network`: the network namespace the child enters (its point's, which a
    /// user-mode stack joins to the host's network), or nil for a new one with its loopback
    /// only. The descriptor stays the caller's.
    public var networkNamespaceFD: Int32? = nil
    /// With `.filesystem` and no user namespace: the template the view starts from
    /// (`Kernel.sandboxTemplate`), its descriptor and the masks it was made with; nil to build
    /// the whole view in the child. The descriptor stays the caller's.
    public var template: SandboxTemplateRef? = nil
    /// A directory (the daemon's state directory) that no read-only kept directory of the view
    /// may be or lie below. The child checks the directory it opens, walking up from it, so a
    /// link on a kept directory's path, even one put there after the plan was made, cannot
    /// show it; such a spawn fails (`EXDEV` at the file system view). Nil checks nothing.
    public var hiddenDirectory: FileIdentity? = nil
    /// The directories the view hides or replaces and every directory above them, each with its
    /// real path (`Sandboxing.protectedDirectories`). A read-only kept directory that is one of
    /// them must be named by that path, so that the view's masks lie below it; reached by
    /// another path (a link on it, another mount of it) the spawn fails (`EXDEV` at the file
    /// system view), as it would otherwise show what those masks hide.
    public var protectedDirectories: [ProtectedDirectory] = []

    /// A plan of these values, stored as given. `filter` is not copied: it must stay valid
    /// until the spawn that uses it returns.
    public init(
        parts: Set<SandboxPart>, userNamespace: Bool, mounts: [SandboxView.Mount], filter: UnsafeRawPointer?, uid: UInt32, gid: UInt32,
        scratchBytes: UInt64? = nil
    ) {
        self.scratchBytes = scratchBytes
        self.parts = parts
        self.userNamespace = userNamespace
        self.mounts = mounts
        self.filter = filter
        self.uid = uid
        self.gid = gid
    }
}

/// A sandbox template a plan starts from (`Kernel.sandboxTemplate`).
public struct SandboxTemplateRef: Equatable, Sendable {
    /// Its mount namespace's descriptor.
    public var fd: Int32
    /// The masks it was made with.
    public var masks: [String]

    /// A reference to the template `fd`, made with `masks`.
    public init(fd: Int32, masks: [String]) {
        self.fd = fd
        self.masks = masks
    }
}

/// One rlimit for a spawned child.
public struct ResourceLimit: Equatable, Sendable {
    /// The limited resource.
    public enum Resource: Equatable, Sendable {
        /// `RLIMIT_DATA`: the size of the child's data (data segment, heap, private writable
        /// mappings), in bytes.
        case data
        /// `RLIMIT_NOFILE`: one more than the highest descriptor number the child may open.
        case openFiles
        /// `RLIMIT_NPROC`: the number of processes (threads included) of the child's real user id.
        case processes
    }
    /// Which resource is limited.
    public var resource: Resource
    /// The limit, set as both the soft and the hard limit.
    public var value: UInt64
    /// A limit of `value` on `resource`.
    public init(resource: Resource, value: UInt64) {
        self.resource = resource
        self.value = value
    }
}

/// A directory a sandbox's view hides or replaces, or one above such a directory
/// (`SandboxPlan.protectedDirectories`).
public struct ProtectedDirectory: Equatable, Sendable {
    /// Which directory it is.
    public var identity: FileIdentity
    /// Its real path (no link on it).
    public var path: String
    /// The directory of this identity and path, stored as given.
    public init(identity: FileIdentity, path: String) {
        self.identity = identity
        self.path = path
    }
}
