import SupervisorCore

/// The journal's `MESSAGE_ID` of each kind of entry the daemon logs: 128-bit ids, generated
/// once (`systemd-id128 new`) and never changed, so `journalctl MESSAGE_ID=…` finds one kind of
/// event across versions. Listed in docs/operations.md.
public enum MessageIDs {
    /// An extension's URL was opened, or not (`ExtensionContext.open`): one entry per decision.
    public static let urlOpen = "5f3c0e7e2a9b4d1c8e6f1a2b3c4d5e6f"

    /// The id of a lifecycle event kind. Exhaustive on purpose: a new kind needs a new id.
    public static func id(for kind: LifecycleEvent.Kind) -> String {
        switch kind {
        case .launch: "6cd6b8f3432e4d25bb783e6ec5c9750c"
        case .ready: "8e6b0fd14d6a499ba6ec4e8e7be5d7b1"
        case .launchFailed: "2fc804f85d8b404795dcbea6fddf6369"
        case .launchTimeout: "dc403b93e5004886a5c51c85c2df3973"
        case .begin: "06fcf23958fd4e898b9cabf6e11a962a"
        case .end: "8e37fa4ef010439887e7d71b175a0864"
        case .refuse: "066aa096e921481089cd673c1afc8a9a"
        case .suspend: "a46abf7ba7694ca19691fb842f5d7024"
        case .resume: "abc1ae5a24d54b58bbe895b7d00a1327"
        case .stopSent: "25098eb2e7334a3b82cc583f697649cf"
        case .acquire: "2b4da270239140a396e8655ce516c2ef"
        case .release: "c0f88997dd0c4e94a9370c800c89defd"
        case .expire: "89f64b3200734e9fbac6bfa62e2f9705"
        case .deny: "ee7ad5af0a954790a4dd6bf57f630f62"
        case .overrun: "2cf95725e66f4395b69070c778162f5e"
        case .expiryUnacknowledged: "b972fc2fb9ca4cdeae1d99096c834431"
        case .exit: "1e582187419f43a8901d8e152034fb3f"
        case .crash: "b283658e62f44fc7923248ccfd4b9f42"
        case .reclaim: "34e02b778ec149608612e6e3ef4b22ec"
        case .kill: "1cea5d4b6668447b9699dedf25eeaa4f"
        case .throttle: "04a0e41050c445969ef670b5ad3fd39c"
        case .reload: "b4cca436d05249649cf81409c0834925"
        case .manifestError: "d0dc605cac92418a8b4fad5f10145fac"
        case .prewarm: "93779bb03f054a22a8d7a06d90ebb9e7"
        case .lockHeldWhileSuspended: "e5b0e5c010774b9586e41f8494e6b364"
        case .lockHeldAtSuspend: "1aacf767cd3d4dafa16f005f8438f0ba"
        case .refresh: "3066079266c84634a399bb1d5b1e0afb"
        case .refreshed: "b7a6c7eb2a3e4805bae0d0da1e3fb497"
        }
    }

    /// A process of a previous daemon instance was found alive at startup and killed
    /// (see `ProcessRegistry`).
    public static let leftoverReaped = "6868efdc8c95478081221a145c03db83"

    /// The id for the value of an `EVENT` metadata key (a `LifecycleEvent.Kind` raw value).
    static func id(forEvent raw: String) -> String? {
        LifecycleEvent.Kind(rawValue: raw).map(id(for:))
    }
}
