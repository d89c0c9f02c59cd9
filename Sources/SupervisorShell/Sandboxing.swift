import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The sandbox of this daemon's extensions (docs/security.md): what the kernel lets it build,
/// probed once at start by building each part in a throwaway child; the system-call filter,
/// built once; and the plan of each launch. Owned by the daemon's loop thread.
final class Sandboxing {
    let kernel: any Kernel
    /// What can be built here, and why not where it cannot.
    let support: SandboxSupport
    /// What the probe found (kept in a hand-over document: the new program does not probe again).
    let probe: SandboxProbe
    /// The parts a point that names none requires: all of them under a root daemon.
    let requiredByDefault: Set<SandboxPart>
    /// The filter (`struct sock_fprog`), allocated once for the daemon's life; nil when it
    /// could not be built.
    private let filter: UnsafeRawPointer?
    /// Hidden from every extension: the existing ones of /home, /root, /run/user, and the
    /// state directory.
    private let masks: [String]
    /// The daemon's state directory (its `ids.json`, every extension's container): never
    /// shown to an extension but for its own containers, whatever its manifest names.
    private let stateDirectory: String
    /// Private to each extension: the existing ones of /tmp and /var/tmp.
    private let scratch: [String]
    /// The directories the view hides or replaces, and those above them
    /// (`SandboxPlan.protectedDirectories`), found at start and at each reload.
    private let protectedDirectories: [ProtectedDirectory]
    /// The masks of every plan, as a plan orders them (one below another dropped): what the
    /// sandbox's template is made with (`SandboxTemplate`).
    let templateMasks: [String]
    /// The user-mode network stack (slirp4netns) that joins a point's network namespace to
    /// the host's network, or nil when there is none here (`support.noNetworkStack` says why).
    let networkStackProgram: String?

    /// Probes the sandbox, or takes `known` (a hand-over's) as what it would find.
    init(stateDirectory: String, manifestDirectories: [String] = [], kernel: any Kernel, logger: Logger, known: SandboxProbe? = nil) {
        self.kernel = kernel
        let daemonIsRoot = kernel.userID == 0
        let (filter, filterError, probe) = kernel.prepareSandbox(known: known.flatMap { $0.errors.count == SandboxPart.allCases.count ? $0 : nil })
        self.filter = filter
        self.probe = probe
        let userNamespace = probe.userNamespace
        var missing: [SandboxPart: String] = [:]
        for (i, part) in SandboxPart.allCases.enumerated() {
            guard let failed = part == .syscalls && filter == nil ? filterError ?? probe.errors[i] : probe.errors[i] else { continue }
            missing[part] = Sandboxing.reason(part, failed, userNamespace: userNamespace, daemonIsRoot: daemonIsRoot)
        }
        // A point's network namespace is kept between launches and entered with setns, which a
        // daemon without privilege cannot do from the user namespace each extension gets.
        let program = NetworkStacks.programPaths.first { kernel.isExecutable($0) }
        var noNetworkStack: String?
        if !daemonIsRoot || userNamespace {
            noNetworkStack = "a daemon that is not root gives an extension with the network the host's network namespace"
        } else if program == nil {
            noNetworkStack = "slirp4netns, which joins its network namespace to the host's network, is not installed"
        } else if case .success(let st) = kernel.status("/dev/net/tun", followLinks: true), st.kind == .other {
            noNetworkStack = nil
        } else {
            noNetworkStack = "/dev/net/tun, which slirp4netns needs, is not there"
        }
        networkStackProgram = noNetworkStack == nil ? program : nil
        // Landlock's scope (ABI 6) keeps an extension that has the host's network namespace
        // from the host's abstract unix sockets.
        support = SandboxSupport(
            missing: missing, userNamespace: userNamespace, noNetworkStack: noNetworkStack, abstractSocketScope: kernel.landlockABI >= 6)
        requiredByDefault = daemonIsRoot ? Set(SandboxPart.allCases) : []
        // Each by its real path (no link on it), as the plans name the directories they keep:
        // the view's mounts are ordered by their paths, each parent before what lies below it.
        func existing(_ paths: [String]) -> [String] {
            paths.filter { if case .success(let st) = kernel.status($0, followLinks: true) { st.kind == .directory } else { false } }
                .map { kernel.resolvePath($0) ?? $0 }
        }
        // The manifest directories too: other extensions' manifests (their environment may hold
        // tokens) are none of its business. A directory that holds the extension's own files is
        // bound back read-only (`plan`); a top-level system directory is never hidden.
        let manifests = existing(manifestDirectories).filter { !Sandboxing.systemDirectories.contains(SandboxView.normalized($0)) }
        // The cgroup tree (every other process's cgroup, pids and memory use) and the network
        // interfaces of the host (names and MAC addresses) are hidden as well: their list, and
        // the devices' directories it links to.
        let realStateDirectory = kernel.resolvePath(stateDirectory) ?? stateDirectory
        masks =
            existing(["/home", "/root", "/run/user", "/sys/fs/cgroup", "/sys/class/net"] + Sandboxing.interfaceDirectories(kernel))
            + [realStateDirectory] + manifests
        self.stateDirectory = realStateDirectory
        scratch = existing(["/tmp", "/var/tmp"])
        protectedDirectories = Sandboxing.protectedDirectories(masks + scratch + ["/proc", "/dev", "/dev/shm"], kernel: kernel)
        templateMasks = SandboxView(scratch: [], masks: masks, readOnly: [], writable: []).mounts.map(\.path)
        let enforced = SandboxPart.allCases.filter { missing[$0] == nil }.map(\.rawValue).joined(separator: ", ")
        let notEnforced = missing.isEmpty ? "" : "; not: " + missing.keys.sorted().map { "\($0.rawValue) (\(missing[$0]!))" }.joined(separator: ", ")
        let networked = noNetworkStack.map { "; extensions with the network: \($0)" } ?? "; extensions with the network: their point's slirp4netns"
        logger.info(
            "sandbox: \(enforced.isEmpty ? "nothing" : enforced) can be enforced\(userNamespace ? " (in a user namespace of each extension)" : "")\(notEnforced)\(networked)"
        )
    }

    /// The sandbox `manifest` gets, or the part its point requires that cannot be built.
    func decide(_ manifest: Manifest) -> Result<SandboxDecision, SandboxRefusal> {
        SandboxDecision.decide(manifest, support: support, requiredByDefault: requiredByDefault)
    }

    /// Whether `plan`'s view can start from the template: every mask of the template is one
    /// of the plan's, or lies below one of its private directories (which covers it). A plan
    /// that dropped one (a directory it keeps, such as a manifest directory holding its
    /// program, is shown as it is) builds its whole view: the template would hide it.
    func canStartFromTemplate(_ plan: SandboxPlan) -> Bool {
        guard plan.parts.contains(.filesystem), !plan.userNamespace else { return false }
        var masks = Set<String>()
        var scratch: [String] = []
        for m in plan.mounts {
            if m.kind == .mask { masks.insert(m.path) } else if m.kind == .scratch { scratch.append(m.path) }
        }
        return templateMasks.allSatisfy { mask in
            masks.contains(mask) || scratch.contains { mask == $0 || SandboxView.isBelow(mask, $0) }
        }
    }

    /// The plan of one launch: the parts of `decision`, and the file system view that keeps the
    /// executable's directory (and that of each script named by an absolute argument)
    /// read-only, and its container and shared containers writable.
    func plan(_ manifest: Manifest, _ decision: SandboxDecision, container: String?, cgroup: String? = nil) -> SandboxPlan? {
        guard decision.enabled, !decision.enforced.isEmpty || decision.scoped else { return nil }
        var mounts: [SandboxView.Mount] = []
        if decision.enforced.contains(.filesystem) {
            var readOnly = [Sandboxing.directory(of: manifest.executable)]
            for argument in manifest.arguments where argument.hasPrefix("/") {
                if case .success(let st) = kernel.status(argument, followLinks: true), st.kind == .regular {
                    readOnly.append(Sandboxing.directory(of: argument))
                }
            }
            // By their real paths: each is shown where it really is, and the child opens it
            // following no link (one put on the way since fails the launch), so that no link
            // leads a kept directory to what the view hides (the host's /tmp or /dev/shm, a
            // directory above a mask) or into the state directory.
            readOnly = readOnly.map { kernel.resolvePath($0) ?? $0 }
            // A manifest cannot show its extension the state directory (the ids of every
            // extension, the others' containers) by naming a file there, nor the host's /tmp
            // or /var/tmp instead of its private ones by naming a file right in them.
            readOnly.removeAll { Sandboxing.isWithin($0, stateDirectory) || scratch.contains($0) }
            // Its own cgroup stays visible, read-only, at its path (a runtime sizes itself from
            // its memory.max); the rest of the cgroup tree is hidden (`masks`).
            if let cgroup { readOnly.append(cgroup) }
            let writable = ((container.map { [$0] } ?? []) + manifest.sharedContainers.compactMap { manifest.containerPaths[$0] }).map {
                kernel.resolvePath($0) ?? $0
            }
            mounts = SandboxView(scratch: scratch, masks: masks, readOnly: readOnly, writable: writable).mounts
        }
        // The private tmpfs mounts hold at most the extension's memory limit (their pages are
        // charged to its memory cgroup too, where it has one).
        var plan = SandboxPlan(
            parts: Set(decision.enforced), userNamespace: support.userNamespace, mounts: mounts, filter: filter, uid: kernel.userID, gid: kernel.groupID,
            scratchBytes: manifest.policy.limits.memoryMaxBytes)
        plan.landlockScope = decision.scoped
        plan.hiddenDirectory = stateDirectoryIdentity
        plan.protectedDirectories = protectedDirectories
        return plan
    }

    /// `paths` (made real: no link on them) and every directory above each, by identity and real
    /// path, each pair once.
    static func protectedDirectories(_ paths: [String], kernel: any Kernel) -> [ProtectedDirectory] {
        var found: [ProtectedDirectory] = []
        var seen = Set<String>()
        for path in paths {
            guard var directory = kernel.resolvePath(path) else { continue }
            while seen.insert(directory).inserted {
                if case .success(let st) = kernel.status(directory, followLinks: false) {
                    found.append(ProtectedDirectory(identity: st.identity, path: directory))
                }
                if directory == "/" { break }
                directory = Sandboxing.directory(of: directory)
            }
        }
        return found
    }

    /// The state directory's device and inode: the child refuses a read-only kept directory
    /// that is it or lies below it, whatever path led there (the check above reads only text).
    private var stateDirectoryIdentity: FileIdentity? {
        guard case .success(let st) = kernel.status(stateDirectory, followLinks: true) else { return nil }
        return st.identity
    }

    /// The sandbox of a helper of the daemon that has the host's network (the transfer worker):
    /// every part that can be built but a network namespace, a file system view with nothing
    /// writable (no state directory, no container, no home) and `readOnly` kept, and the
    /// Landlock scope where there is one.
    func helperPlan(readOnly: [String]) -> SandboxPlan? {
        let parts = Set(SandboxPart.allCases.filter { support.missing[$0] == nil && $0 != .network })
        guard !parts.isEmpty else { return nil }
        let mounts = parts.contains(.filesystem) ? SandboxView(scratch: scratch, masks: masks, readOnly: readOnly, writable: []).mounts : []
        var plan = SandboxPlan(
            parts: parts, userNamespace: support.userNamespace, mounts: mounts, filter: filter, uid: kernel.userID, gid: kernel.groupID,
            scratchBytes: 16 << 20)
        plan.landlockScope = support.abstractSocketScope
        plan.hiddenDirectory = stateDirectoryIdentity
        plan.protectedDirectories = protectedDirectories
        return plan
    }

    /// Why `manifest`'s program will not work in its sandbox's view of the file system, or nil:
    /// its executable, the file it resolves to, its `#!` interpreter, or a script named by an
    /// absolute argument, under a directory the sandbox hides (`/home`, `/root`, `/run/user`)
    /// or replaces with a private one (`/tmp`, `/var/tmp`). Only the directory of the
    /// executable and of such a script stays visible: what lies beside or behind them there
    /// (a virtual environment's `lib/`, an interpreter a link points to) does not.
    func hiddenProgram(_ manifest: Manifest) -> String? {
        guard case .success(let decision) = decide(manifest), decision.enabled, decision.enforced.contains(.filesystem) else { return nil }
        let kept = [manifest.executable] + manifest.arguments.filter { $0.hasPrefix("/") }
        var named: [(what: String, path: String)] = kept.map { ($0 == manifest.executable ? "its executable" : "the script", $0) }
        let resolved = kernel.resolvePath(manifest.executable) ?? manifest.executable
        if resolved != manifest.executable { named.append(("its executable resolves to", resolved)) }
        // A script's first line (a binary is over the limit: not read).
        if case .success(let head) = kernel.inspectFile(resolved, limit: 1 << 20), let bytes = head.contents, bytes.starts(with: Array("#!".utf8)) {
            let line = String(decoding: bytes.dropFirst(2).prefix { $0 != 0x0A }, as: UTF8.self)
            if let interpreter = line.split(separator: " ").first.map(String.init), interpreter.hasPrefix("/") {
                named.append(("its interpreter", interpreter))
            }
        }
        let hiding = masks.filter { !$0.hasPrefix("/sys/") && !Sandboxing.isWithin($0, stateDirectory) } + scratch
        for (what, path) in named {
            guard let hidden = hiding.first(where: { SandboxView.isBelow(path, $0) }) else { continue }
            let visible =
                kept.contains(path)
                ? ": only \(Sandboxing.directory(of: path)) stays visible to it, not what lies beside it (a virtual environment's lib/)"
                : ", which it cannot reach"
            let how = scratch.contains(hidden) ? "which the sandbox replaces with a private, empty directory" : "which the sandbox hides"
            return "\(manifest.id): \(what) \(path) is under \(hidden), \(how)\(visible); install it in a directory such as /opt"
        }
        return nil
    }

    /// Whether a launch with `decision` enters its point's network namespace (it has the
    /// network, in a namespace of its own).
    static func needsNetworkStack(_ decision: SandboxDecision) -> Bool {
        decision.enabled && decision.network && decision.enforced.contains(.network)
    }

    /// The directories of `/sys/devices` that hold the host's network interfaces, as they are
    /// when the masks are made (at start and at each reload): the virtual ones', and each
    /// other interface's device's (the parent of what its `/sys/class/net` link resolves to).
    static func interfaceDirectories(_ kernel: any Kernel) -> [String] {
        var found = ["/sys/devices/virtual/net"]
        for name in kernel.listDirectory("/sys/class/net") ?? [] {
            guard let resolved = kernel.resolvePath("/sys/class/net/" + name), let slash = resolved.lastIndex(of: "/") else { continue }
            let parent = String(resolved[..<slash])
            if parent.hasPrefix("/sys/devices/") && !found.contains(parent) { found.append(parent) }
        }
        return found
    }

    /// Directories a manifest directory may be but that are never hidden: the system's own.
    static let systemDirectories: Set<String> = ["/", "/usr", "/etc", "/lib", "/lib64", "/bin", "/sbin", "/opt", "/var", "/srv", "/run", "/tmp"]

    /// Whether `path` is `directory` or below it (by path, as given).
    static func isWithin(_ path: String, _ directory: String) -> Bool {
        let base = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        return path == base || path.hasPrefix(base + "/")
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "/" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Why `part` cannot be built, for `extctl status` and the launch error.
    static func reason(_ part: SandboxPart, _ failure: SystemError, userNamespace: Bool, daemonIsRoot: Bool) -> String {
        let error = failure.reason
        switch part {
        case .filesystem, .network:
            let what = part == .filesystem ? "a mount namespace" : "a network namespace"
            return "\(what) cannot be created here (\(error)): the daemon has no CAP_SYS_ADMIN and unprivileged user namespaces are unavailable"
        case .proc:
            if failure.isNotImplemented {
                return "a pid namespace is made with clone3 (Linux 5.3), which this system refuses (\(error))"
            }
            if userNamespace || !daemonIsRoot {
                return "a pid namespace with a /proc of its own cannot be made here (\(error)): "
                    + "the daemon has no CAP_SYS_ADMIN and unprivileged user namespaces are unavailable"
            }
            return "a pid namespace with a /proc of its own cannot be made here (\(error))"
        case .syscalls:
            return "the seccomp filter cannot be installed (\(error))"
        }
    }
}
