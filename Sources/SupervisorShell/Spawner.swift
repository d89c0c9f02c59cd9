import CShims
import ExtensionTransport
import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// Environment variables the supervisor sets for every extension (see docs/protocol.md).
public enum RuntimeEnvironment {
    /// The descriptor number of the runtime channel (always 3).
    public static let channelFD = "EXTENSIOND_CHANNEL_FD"
    /// The extension's id.
    public static let extensionID = "EXTENSIOND_EXTENSION_ID"
}

/// A freshly spawned extension process.
struct SpawnedProcess {
    var pid: Int32
    var pidfd: Int32
    /// The daemon's end of the runtime channel (non-blocking); nil for `exec` readiness.
    var channel: PacketSocket?
}

/// Starts extension processes: new session and process group, clean environment plus the
/// manifest's, stdin on /dev/null, the runtime channel at fd 3, nothing else inherited.
enum Spawner {
    /// Variables passed through from the daemon's environment when set.
    static let passedThrough = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "XDG_RUNTIME_DIR"]

    static func environment(for manifest: Manifest, channel: Bool) -> [String] {
        var env: [String: String] = ["PATH": "/usr/local/bin:/usr/bin:/bin"]
        for name in passedThrough {
            if let value = getenv(name) { env[name] = String(cString: value) }
        }
        for (k, v) in manifest.environment { env[k] = v }
        env[RuntimeEnvironment.extensionID] = manifest.id
        if channel { env[RuntimeEnvironment.channelFD] = "3" }
        return env.keys.sorted().map { "\($0)=\(env[$0]!)" }
    }

    static func spawn(_ manifest: Manifest) throws(SystemError) -> SpawnedProcess {
        let withChannel = manifest.readiness == .runtime
        var daemonEnd: PacketSocket?
        var childEnd: PacketSocket?
        if withChannel {
            let (a, b) = try PacketSocket.pair()
            _ = shim_set_nonblocking(a.fd)
            daemonEnd = a
            childEnd = b
        }
        defer { childEnd?.close() }
        let argv = [manifest.executable] + manifest.arguments
        let envp = environment(for: manifest, channel: withChannel)
        let directory = String(manifest.executable[..<(manifest.executable.lastIndex(of: "/") ?? manifest.executable.startIndex)])
        let pid: pid_t = withCStrings(argv) { argvPtr in
            withCStrings(envp) { envPtr in
                manifest.executable.withCString { path in
                    directory.withCString { cwd in
                        var options = shim_spawn_options(
                            path: path, argv: argvPtr, envp: envPtr, cwd: directory.isEmpty ? nil : cwd,
                            channel_fd: childEnd?.fd ?? -1, stdout_fd: -1)
                        return shim_spawn(&options)
                    }
                }
            }
        }
        if pid < 0 {
            daemonEnd?.close()
            throw SystemError("spawn \(manifest.executable)", errno: -pid)
        }
        let pidfd = shim_pidfd_open(pid)
        if pidfd < 0 {
            _ = shim_kill(-pid, SIGKILL)
            daemonEnd?.close()
            throw SystemError("pidfd_open(\(pid))", errno: -pidfd)
        }
        return SpawnedProcess(pid: pid, pidfd: pidfd, channel: daemonEnd)
    }

    /// Calls `body` with a NULL-terminated C array of the strings.
    static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for p in pointers { free(p) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
