import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The network of sandboxed extensions that have one (docs/security.md, "Network"): for each
/// extension point, a network namespace the daemon keeps, which a user-mode stack
/// (slirp4netns, as root with four capabilities only, `keptCapabilities`, and its own sandbox
/// where it can build one) joins to the host's network. Each such
/// extension enters its point's namespace at spawn, so its abstract unix sockets are not the
/// host's, and it reaches the host's addresses (but its loopback) and beyond through the stack.
///
/// A point's stack is made at the first launch that needs it, and kept: a later launch only
/// enters it (`setns`). Its helper is stopped (SIGSTOP) whenever no extension of the point
/// runs (none alive, or all suspended), so an idle point costs no wake-up (the stack's timer
/// fires every second while it runs), and continued before the first one runs again. It ends
/// with the daemon: its control socket (`--exit-fd`) is the daemon's, and crosses a re-exec.
/// slirp4netns takes the namespace by path: it is bound at `PREFIX.POINT` beside the control
/// socket (as `ip netns add` binds one), in the daemon's mount namespace (private under the
/// unit), and unbound when the stack ends.
/// Owned by the daemon's loop thread.
final class NetworkStacks {
    /// One point's stack.
    struct Stack: Codable, Equatable {
        /// The network namespace, kept open by the daemon, and where it is bound.
        var namespaceFD: Int32
        var path: String
        /// The helper's pid and pidfd.
        var pid: Int32
        var pidfd: Int32
        /// The daemon's end of the helper's control socket: the helper wrote its readiness
        /// there, and exits when it closes.
        var control: Int32
        /// Whether the helper is stopped (no extension of the point runs).
        var stopped: Bool
    }

    /// What crosses a re-exec: every stack, and which extension is in which, running or not.
    struct Handover: Codable, Equatable {
        var stacks: [String: Stack]
        var members: [String: Member]
    }

    /// An extension process in a point's namespace.
    struct Member: Codable, Equatable {
        var point: String
        var running: Bool
    }

    let kernel: any Kernel
    let logger: Logger
    /// The slirp4netns executable.
    let program: String
    /// The start of each namespace's path: `PREFIX.POINT`.
    let pathPrefix: String
    private var stacks: [String: Stack] = [:]
    private var members: [String: Member] = [:]
    /// Whether slirp4netns builds its own sandbox (`--enable-sandbox`: a mount namespace of
    /// its own, every capability but CAP_NET_BIND_SERVICE dropped once its tap device is
    /// made). Cleared, with a warning, the first time a helper fails to build it (its
    /// `pivot_root` fails in some mount namespaces a service manager makes).
    private(set) var helperSandbox = true

    /// How long a helper has to say it is ready.
    static let readySeconds = 5.0

    /// Where slirp4netns is looked for.
    static let programPaths = ["/usr/bin/slirp4netns", "/usr/local/bin/slirp4netns", "/bin/slirp4netns"]

    init(kernel: any Kernel, logger: Logger, program: String, pathPrefix: String) {
        self.kernel = kernel
        self.logger = logger
        self.program = program
        self.pathPrefix = pathPrefix
    }

    /// The namespaces' path prefix of the daemon whose control socket is `socketPath`.
    static func pathPrefix(forSocket socketPath: String) -> String {
        (socketPath.hasSuffix(".sock") ? String(socketPath.dropLast(5)) : socketPath) + ".netns"
    }

    /// Where `point`'s namespace is bound: its name as it is when it is a plain name (letters,
    /// digits, `.`, `-`, `_`), else `=` and its bytes in hexadecimal.
    func path(of point: String) -> String {
        let plain =
            !point.isEmpty && !point.hasPrefix(".")
            && point.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E || c == 0x2D || c == 0x5F
            }
        // "=" never begins a plain name: the hexadecimal form (two digits a byte) cannot be one.
        return pathPrefix + "." + (plain ? point : "=" + point.utf8.map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined())
    }

    /// The stacks and their members as a handover document names them.
    var handover: Handover { Handover(stacks: stacks, members: members) }

    /// Every descriptor the stacks hold: what must cross a re-exec.
    var descriptors: [Int32] { stacks.values.flatMap { [$0.namespaceFD, $0.pidfd, $0.control] } }

    /// Takes over the stacks a previous daemon handed over.
    func restore(_ h: Handover) {
        stacks = h.stacks
        members = h.members
    }

    /// The network namespace of `point`, its stack started first if it has none (or its
    /// helper died): the loop waits for the helper to say it is ready, a few milliseconds
    /// once per point. Fails naming the step.
    func namespace(for point: String) -> Result<Int32, SystemError> {
        if let stack = stacks[point] {
            if case .success(nil) = kernel.exitStatus(pidfd: stack.pidfd, reap: false) { return .success(stack.namespaceFD) }
            logger.warning("the network stack of point '\(point)' (pid \(stack.pid)) has exited; starting another")
            discard(point)
        }
        switch start(point) {
        case .success(let stack): return .success(stack.namespaceFD)
        case .failure(.exitedEarly(let e)) where helperSandbox:
            // Its own sandbox is what fails where a service manager's mount namespace refuses
            // its pivot_root; a helper that exits for another reason fails again below.
            helperSandbox = false
            logger.warning(
                "slirp4netns exited before it was ready (\(e)); the network stacks run without --enable-sandbox from now on, with \(NetworkStacks.keptCapabilityNames)"
            )
            return start(point).map(\.namespaceFD).mapError(\.error)
        case .failure(let failure): return .failure(failure.error)
        }
    }

    /// Why a helper could not be started.
    private enum StartFailure: Error {
        /// It exited before it said it was ready.
        case exitedEarly(SystemError)
        /// Anything else: the namespace, the spawn, a read, or no answer in time.
        case other(SystemError)

        var error: SystemError {
            switch self {
            case .exitedEarly(let e), .other(let e): e
            }
        }
    }

    /// The capabilities a helper keeps (the rest are dropped from its bounding set before it
    /// runs): CAP_SYS_ADMIN to enter the namespace and build its own sandbox, CAP_NET_ADMIN to
    /// make its tap device, CAP_NET_BIND_SERVICE (which its sandbox keeps), CAP_SETPCAP to
    /// drop the others itself.
    static let keptCapabilities: [Int32] = [21, 12, 10, 8]
    static let keptCapabilityNames = "CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_BIND_SERVICE and CAP_SETPCAP only"

    private func start(_ point: String) -> Result<Stack, StartFailure> {
        let namespace: Int32
        switch kernel.networkNamespace() {
        case .success(let fd): namespace = fd
        case .failure(let e): return .failure(.other(e))
        }
        let path = path(of: point)
        _ = kernel.unbindNamespace(at: path)  // a killed predecessor's
        if let e = kernel.bindNamespace(namespace, at: path) {
            kernel.close(namespace)
            return .failure(.other(e))
        }
        func undo(_ fds: [Int32]) {
            for fd in fds { kernel.close(fd) }
            _ = kernel.unbindNamespace(at: path)
        }
        let ready: (read: Int32, write: Int32)
        switch kernel.outputPipe() {
        case .success(let pipe): ready = pipe
        case .failure(let e):
            undo([namespace])
            return .failure(.other(e))
        }
        let control: (ours: Int32, its: Int32)
        do { control = try PacketSocket.streamPair() } catch {
            undo([namespace, ready.read, ready.write])
            return .failure(.other(error))
        }
        // fd 3: where it writes "1" once configured; fd 4: its control socket, whose closing
        // ends it. --enable-sandbox: a mount namespace of its own with nothing but what it
        // needs, and every capability dropped once its tap device is made.
        var request = SpawnRequest(
            path: program,
            arguments: ["--configure", "--mtu=65520", "--disable-host-loopback"] + (helperSandbox ? ["--enable-sandbox"] : [])
                + ["--netns-type=path", "--ready-fd=3", "--exit-fd=4", path, "tap0"],
            environment: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], directory: "/", channelFD: ready.write, cgroupFD: nil, credentials: nil)
        request.extraFD = control.its
        request.keptCapabilities = NetworkStacks.keptCapabilities
        let spawned = kernel.spawn(request)
        kernel.close(control.its)
        kernel.close(ready.write)
        guard case .success(let child) = spawned else {
            undo([namespace, ready.read, control.ours])
            if case .failure(let e) = spawned { return .failure(.other(e)) }
            return .failure(.other(SystemError.notSupported))
        }
        let stack = Stack(namespaceFD: namespace, path: path, pid: child.pid, pidfd: child.pidfd, control: control.ours, stopped: false)
        let answer: Result<[UInt8]?, SystemError>? =
            switch kernel.waitReadable(fd: ready.read, seconds: NetworkStacks.readySeconds) {
            case .success(true): kernel.readSome(fd: ready.read, limit: 1)
            case .success(false): nil  // no answer in time
            case .failure(let e): .failure(e)
            }
        kernel.close(ready.read)
        switch answer {
        case .success(let bytes?)? where bytes == Array("1".utf8):
            stacks[point] = stack
            logger.info("the network stack of point '\(point)' runs: slirp4netns, pid \(child.pid)")
            return .success(stack)
        case .success(nil)?:
            end(stack)
            return .failure(.exitedEarly(SystemError("slirp4netns exited before it was ready (its output is in the log)", errno: 0)))
        case .failure(let e)?:
            end(stack)
            return .failure(.other(e))
        case .success?:
            end(stack)
            return .failure(.other(SystemError("slirp4netns said something else than it was ready", errno: 0)))
        case nil:
            end(stack)
            return .failure(.other(SystemError("slirp4netns was not ready within \(Int(NetworkStacks.readySeconds)) s", errno: 0)))
        }
    }

    /// Extension `id` of `point` was launched into the point's namespace: the point's helper
    /// runs (it was continued when the namespace was asked for, if stopped).
    func running(_ id: String, point: String) {
        members[id] = Member(point: point, running: true)
        continueIfStopped(point)
    }

    /// Extension `id` is about to be resumed: its point's helper runs first.
    func resumed(_ id: String) {
        guard var member = members[id] else { return }
        member.running = true
        members[id] = member
        continueIfStopped(member.point)
    }

    private func continueIfStopped(_ point: String) {
        guard var stack = stacks[point], stack.stopped else { return }
        if let e = kernel.signal(pidfd: stack.pidfd, SignalNumber.cont), !e.isNoProcess {
            logger.warning("cannot continue the network stack of point '\(point)': \(e)")
        }
        stack.stopped = false
        stacks[point] = stack
    }

    /// Extension `id` is suspended: its point's helper stops when none of its extensions runs.
    func suspended(_ id: String) {
        guard var member = members[id] else { return }
        member.running = false
        members[id] = member
        stopIfIdle(member.point)
    }

    /// Extension `id`'s process is gone.
    func ended(_ id: String) {
        guard let member = members.removeValue(forKey: id) else { return }
        stopIfIdle(member.point)
    }

    private func stopIfIdle(_ point: String) {
        guard var stack = stacks[point], !stack.stopped, !members.values.contains(where: { $0.point == point && $0.running }) else { return }
        if let e = kernel.signal(pidfd: stack.pidfd, SignalNumber.stop), !e.isNoProcess {
            logger.warning("cannot stop the network stack of point '\(point)': \(e)")
            return
        }
        stack.stopped = true
        stacks[point] = stack
    }

    /// Ends every stack (the daemon stops).
    func endAll() {
        for point in Array(stacks.keys) { discard(point) }
    }

    private func discard(_ point: String) {
        guard let stack = stacks.removeValue(forKey: point) else { return }
        end(stack)
    }

    /// Kills a helper, reaps it, and closes what the daemon held of its stack.
    private func end(_ stack: Stack) {
        _ = kernel.signal(pidfd: stack.pidfd, SignalNumber.kill)
        _ = kernel.signal(pidfd: stack.pidfd, SignalNumber.cont)
        _ = kernel.waitReadable(fd: stack.pidfd, seconds: 1)
        _ = kernel.exitStatus(pidfd: stack.pidfd, reap: true)
        for fd in [stack.namespaceFD, stack.pidfd, stack.control] { kernel.close(fd) }
        if let e = kernel.unbindNamespace(at: stack.path) { logger.warning("cannot remove the network namespace at \(stack.path): \(e)") }
    }
}
