import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// Environment variables the supervisor sets for every extension (see docs/protocol.md).
public enum RuntimeEnvironment {
    /// The descriptor number of the runtime channel (always 3).
    public static let channelFD = "EXTENSIOND_CHANNEL_FD"
    /// The extension's id.
    public static let extensionID = "EXTENSIOND_EXTENSION_ID"
    /// The path of its own container (also its `HOME`).
    public static let container = "EXTENSIOND_CONTAINER"
}

/// A freshly spawned extension process.
struct SpawnedProcess {
    var pid: Int32
    var pidfd: Int32
    /// The daemon's end of the runtime channel (non-blocking); nil for `exec` readiness.
    var channel: PacketSocket?
    /// The read end of the process's output pipe (its stdout and stderr), or nil when the
    /// kernel gave none (the recording kernel of the tests).
    var output: Int32?
}

/// Starts extension processes: in their cgroup from the first instruction (when there is one),
/// new session and process group, clean environment plus the manifest's, stdin on /dev/null,
/// the runtime channel at fd 3, nothing else inherited.
enum Spawner {
    /// Variables passed through from the daemon's environment when set. `XDG_RUNTIME_DIR` only
    /// to an extension whose file system is not sandboxed (the sandbox hides `/run/user`).
    static let passedThrough = ["PATH", "LANG", "LC_ALL", "TZ", "XDG_RUNTIME_DIR"]

    /// The clean environment of an extension: a few of the daemon's variables; with a
    /// container, `HOME` and the XDG base directories in it; then the manifest's own; then the
    /// supervisor's `EXTENSIOND_*` and shared-container variables.
    static func environment(
        for manifest: Manifest, channel: Bool, container: String? = nil, sandboxedFiles: Bool = false, daemon: (String) -> String?
    ) -> [String] {
        var env: [String: String] = ["PATH": "/usr/local/bin:/usr/bin:/bin"]
        for name in passedThrough where !(sandboxedFiles && name == "XDG_RUNTIME_DIR") {
            if let value = daemon(name) { env[name] = value }
        }
        if let container {
            env["HOME"] = container
            env["XDG_CONFIG_HOME"] = container + "/.config"
            env["XDG_CACHE_HOME"] = container + "/.cache"
            env["XDG_DATA_HOME"] = container + "/.local/share"
            env["XDG_STATE_HOME"] = container + "/.local/state"
            env[RuntimeEnvironment.container] = container
        } else if let home = daemon("HOME") {
            env["HOME"] = home
        }
        for (k, v) in manifest.environment { env[k] = v }
        for (name, path) in manifest.containerPaths { env[SharedContainer.environmentName(for: name)] = path }
        env[RuntimeEnvironment.extensionID] = manifest.id
        if channel { env[RuntimeEnvironment.channelFD] = "3" }
        return env.keys.sorted().map { "\($0)=\(env[$0]!)" }
    }

    /// Spawns the manifest's executable through `kernel`, in the cgroup `cgroupFD` when given,
    /// with its credentials, the limits that `limits` says rlimits enforce (and the cgroup v1
    /// memory cgroup whose `cgroup.procs` is `memoryCgroupProcsFD`), its container as `HOME`,
    /// and the sandbox of `sandbox`.
    static func spawn(
        _ manifest: Manifest, kernel: any Kernel, cgroupFD: Int32?, limits: [LimitEnforcement] = [], memoryCgroupProcsFD: Int32? = nil,
        container: String? = nil, sandbox: SandboxPlan? = nil
    ) throws(SystemError) -> SpawnedProcess {
        let withChannel = manifest.readiness == .runtime
        var daemonEnd: PacketSocket?
        var childEnd: PacketSocket?
        if withChannel {
            let (a, b) = try PacketSocket.pair()
            do throws(SystemError) {
                try a.setNonBlocking()
            } catch {
                a.close()
                b.close()
                throw error
            }
            daemonEnd = a
            childEnd = b
        }
        defer { childEnd?.close() }
        // Its stdout and stderr: a pipe of its own (`ExtensionOutput`), never the daemon's.
        let output: (read: Int32, write: Int32)
        switch kernel.outputPipe() {
        case .success(let pipe): output = pipe
        case .failure(let e):
            daemonEnd?.close()
            throw e
        }
        defer { kernel.close(output.write) }
        let directory = String(manifest.executable[..<(manifest.executable.lastIndex(of: "/") ?? manifest.executable.startIndex)])
        let request = SpawnRequest(
            path: manifest.executable, arguments: manifest.arguments,
            environment: environment(
                for: manifest, channel: withChannel, container: container, sandboxedFiles: sandbox?.parts.contains(.filesystem) ?? false,
                daemon: kernel.environment),
            directory: directory.isEmpty ? nil : directory, channelFD: childEnd?.fd, cgroupFD: cgroupFD,
            credentials: switchedCredentials(manifest.credentials, kernel: kernel), resourceLimits: rlimits(limits),
            sandbox: sandbox, memoryCgroupProcsFD: memoryCgroupProcsFD, outputFD: output.write)
        switch kernel.spawn(request) {
        case .success(let (pid, pidfd)):
            return SpawnedProcess(pid: pid, pidfd: pidfd, channel: daemonEnd, output: output.read)
        case .failure(let e):
            daemonEnd?.close()
            kernel.close(output.read)
            var step = e.operation
            if e.isPermissionDenied, e.operation == "execve" || e.operation == "chdir",
                let why = refusal(manifest.executable, as: manifest.credentials, kernel: kernel)
            {
                step += "; " + why
            }
            if e.isTooManyLinks, sandbox != nil, e.operation.hasPrefix("sandbox: the file system view") {
                step +=
                    "; a directory it keeps read-only (its executable's, or a script's it names) has a link on its path that was not there when the launch was planned"
            }
            if e.isCrossDevice, sandbox?.hiddenDirectory != nil || sandbox?.protectedDirectories.isEmpty == false,
                e.operation.hasPrefix("sandbox: the file system view")
            {
                step +=
                    "; a directory it keeps read-only (its executable's, or a script's it names) is reached through a link or another mount: the state directory, a directory below it, or one above what the sandbox hides"
            }
            throw e.during("spawn \(manifest.executable)" + (step.isEmpty ? "" : " (\(step))"))
        }
    }

    /// Whether a spawn failed as the child entered the template of its file system view
    /// (`setns`, `unshare`), not in what it adds of its own.
    static func failedEnteringTemplate(_ e: SystemError) -> Bool { e.operation.contains("(sandbox: entering the template") }

    /// Whether a spawn failed because of how the extension is installed (its program or a
    /// directory on the way cannot be reached or run as the extension's uid): not a crash of
    /// the extension, so it is not counted for throttling (docs/extensiond.md, "Launch errors").
    static func isConfigurationError(_ e: SystemError) -> Bool {
        e.isPathProblem && (e.operation.contains("(execve") || e.operation.contains("(chdir"))
    }

    /// What the extension's uid cannot pass on the way to `executable`, and to the file it
    /// resolves to (a venv's python is a link into an interpreter's tree): the first directory
    /// it may not search, or the file it may not execute, as root sees them. Nil when nothing
    /// on those paths refuses it.
    static func refusal(_ executable: String, as credentials: Credentials?, kernel: any Kernel) -> String? {
        let who = credentials ?? Credentials(uid: kernel.userID, gid: kernel.groupID, groups: kernel.supplementaryGroups)
        var targets = [executable]
        if let resolved = kernel.resolvePath(executable), resolved != executable { targets.append(resolved) }
        for target in targets {
            let components = PathTraversal.prefixes(target).compactMap { path -> PathTraversal.Component? in
                guard case .success(let st) = kernel.status(path, followLinks: true) else { return nil }
                return PathTraversal.Component(
                    path: path, permissions: st.permissions, owner: st.owner, group: st.group, isDirectory: st.kind == .directory)
            }
            if let refused = PathTraversal.firstRefused(components, as: who) {
                return PathTraversal.explanation(refused, target: target, as: who)
            }
        }
        return nil
    }

    /// The credentials the child switches to: none under a daemon that is not root (it runs
    /// extensions as itself), nor when they are the daemon's own (an extension of `"user":
    /// "root"`): `setgroups` would then change nothing, and fails in a user namespace whose
    /// `setgroups` is denied, as a root user manager's `PrivateUsers=yes` makes it.
    static func switchedCredentials(_ credentials: Credentials?, kernel: any Kernel) -> Credentials? {
        guard kernel.userID == 0, let c = credentials else { return nil }
        let own = c.uid == kernel.userID && c.gid == kernel.groupID && c.groups == kernel.supplementaryGroups
        return own ? nil : c
    }

    /// The rlimits of the limits enforced by `rlimit`: memoryMaxBytes as RLIMIT_DATA (writable
    /// private memory, not address space: see docs/policies.md), tasksMax as RLIMIT_NPROC,
    /// openFilesMax as RLIMIT_NOFILE.
    static func rlimits(_ limits: [LimitEnforcement]) -> [ResourceLimit] {
        limits.filter { $0.by == .rlimit }.compactMap { l -> ResourceLimit? in
            switch l.key {
            case "memoryMaxBytes": return ResourceLimit(resource: .data, value: l.value)
            case "tasksMax": return ResourceLimit(resource: .processes, value: l.value)
            case "openFilesMax": return ResourceLimit(resource: .openFiles, value: l.value)
            default: return nil
            }
        }
    }

    /// The cgroup file of a limit enforced by `cgroup`.
    static func cgroupFile(_ key: String) -> String? {
        switch key {
        case "memoryMaxBytes": return "memory.max"
        case "tasksMax": return "pids.max"
        case "cpuWeight": return "cpu.weight"
        default: return nil
        }
    }
}
