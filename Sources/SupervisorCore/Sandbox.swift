/// A part of an extension's sandbox (docs/security.md, "The sandbox").
public enum SandboxPart: String, CaseIterable, Sendable, Codable, Comparable {
    /// A mount namespace of its own: the system read-only; `/home`, `/root`, `/run/user` and
    /// the state directory hidden (but its containers); private `/tmp`, `/var/tmp` and
    /// `/dev/shm`; a `/dev` of pseudo-devices.
    case filesystem
    /// A pid namespace of its own, whose first process the extension is, and its `/proc`:
    /// no other process exists for it.
    case proc
    /// A network namespace of its own: loopback only with `"network": false`; otherwise its
    /// point's, which a user-mode stack (slirp4netns) joins to the host's network. Either
    /// way its abstract unix sockets are not the host's.
    case network
    /// The system-call filter (seccomp).
    case syscalls

    /// Orders parts as they are declared: filesystem, proc, network, syscalls.
    public static func < (a: SandboxPart, b: SandboxPart) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// What the kernel lets this daemon build, found once when it starts.
public struct SandboxSupport: Equatable, Sendable {
    /// Why each part that cannot be built cannot (absent: it can).
    public var missing: [SandboxPart: String]
    /// Whether the namespaces come from a user namespace of the extension's own (a daemon
    /// without privilege) rather than from the daemon's privilege.
    public var userNamespace: Bool

    /// Why an extension with the network cannot have a namespace of its own (no user-mode
    /// stack here), or nil when it can.
    public var noNetworkStack: String?
    /// Whether Landlock can scope an extension's abstract unix sockets and signals (ABI 6,
    /// Linux 6.12): what an extension that keeps the host's network namespace gets instead.
    public var abstractSocketScope: Bool

    /// Support with these parts missing; by default every part can be built, with the
    /// daemon's privilege, and a network stack is there.
    public init(missing: [SandboxPart: String] = [:], userNamespace: Bool = false, noNetworkStack: String? = nil, abstractSocketScope: Bool = false) {
        self.missing = missing
        self.userNamespace = userNamespace
        self.noNetworkStack = noNetworkStack
        self.abstractSocketScope = abstractSocketScope
    }

    /// Every part, built with the daemon's privilege.
    public static let complete = SandboxSupport()
}

/// The sandbox one extension gets, decided from its manifest, its point and what the daemon
/// can build. Pure.
public struct SandboxDecision: Equatable, Sendable {
    /// The parts built for it, in `SandboxPart` order.
    public var enforced: [SandboxPart]
    /// The parts it would get but does not, each with why, in `SandboxPart` order.
    public var notEnforced: [(part: SandboxPart, reason: String)]
    /// Whether it has the host's network (false: loopback only, when `network` is enforced;
    /// true with `network` enforced: through its point's network stack).
    public var network: Bool
    /// False when the manifest opts out (`"sandbox": "none"`).
    public var enabled: Bool
    /// Whether Landlock scopes its abstract unix sockets and signals: it keeps the host's
    /// network namespace (no network stack here), and may connect to none of the host's
    /// abstract sockets.
    public var scoped = false

    /// Whether both decisions are the same, part by part and reason by reason.
    public static func == (a: SandboxDecision, b: SandboxDecision) -> Bool {
        a.enforced == b.enforced && a.network == b.network && a.enabled == b.enabled && a.scoped == b.scoped
            && a.notEnforced.map(\.part) == b.notEnforced.map(\.part) && a.notEnforced.map(\.reason) == b.notEnforced.map(\.reason)
    }

    /// Decides the sandbox of `manifest` under `support`. `requiredByDefault` is the set of parts
    /// a point that names none requires (every part under a root daemon, none otherwise).
    /// Fails naming the first part its point requires that cannot be built.
    public static func decide(
        _ manifest: Manifest, support: SandboxSupport, requiredByDefault: Set<SandboxPart>
    ) -> Result<SandboxDecision, SandboxRefusal> {
        let network = manifest.policy.network
        guard manifest.sandboxed else {
            return .success(
                SandboxDecision(
                    enforced: [], notEnforced: [(.filesystem, "the manifest says \"sandbox\": \"none\"")], network: network, enabled: false))
        }
        let required = manifest.policy.sandboxRequires.map(Set.init) ?? requiredByDefault
        var enforced: [SandboxPart] = []
        var notEnforced: [(part: SandboxPart, reason: String)] = []
        for part in SandboxPart.allCases {
            if let why = support.missing[part] ?? (part == .network && network ? support.noNetworkStack : nil) {
                if required.contains(part) { return .failure(SandboxRefusal(part: part, reason: why)) }
                notEnforced.append((part, why))
            } else {
                enforced.append(part)
            }
        }
        var decision = SandboxDecision(enforced: enforced, notEnforced: notEnforced, network: network, enabled: true)
        decision.scoped = network && !enforced.contains(.network) && support.abstractSocketScope
        return .success(decision)
    }

    /// One line for `extctl status`: what is enforced, and what is not and why.
    public var summary: String {
        guard enabled else { return "none (the manifest says \"sandbox\": \"none\"; allowed by allowUnsandboxedExtensions)" }
        let networkText = network ? "network (a namespace of its own)" : "network (loopback only)"
        var text = enforced.isEmpty ? "nothing enforced" : enforced.map { $0 == .network ? networkText : $0.rawValue }.joined(separator: ", ")
        text += network ? "; network allowed" : ""
        if !notEnforced.isEmpty {
            text += "; not enforced: " + notEnforced.map { "\($0.part.rawValue) (\($0.reason))" }.joined(separator: ", ")
        }
        if scoped { text += "; the host's abstract unix sockets out of reach (Landlock)" }
        return text
    }
}

/// A part a point requires that this daemon cannot build: the launch fails with it.
public struct SandboxRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// The part that cannot be built.
    public var part: SandboxPart
    /// Why the kernel does not let this daemon build it.
    public var reason: String

    /// A refusal naming `part` and why it cannot be built.
    public init(part: SandboxPart, reason: String) {
        self.part = part
        self.reason = reason
    }

    /// The refusal as a sentence naming the part and the reason.
    public var description: String {
        "the sandbox part '\(part.rawValue)', which its extension point requires, cannot be enforced: \(reason)"
    }
}
