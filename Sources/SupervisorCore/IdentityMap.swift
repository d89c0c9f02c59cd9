/// A range of uids (and equal gids) the daemon hands out, from the configuration's
/// `extensionUIDs`: `first` and `count`. The default, 1879113728 (0x70010000) to
/// 1879179263, lies outside the ranges Debian and systemd give to system and regular users,
/// nspawn containers and `DynamicUser=` (see docs/operations.md).
public struct IdentityRange: Equatable, Sendable {
    public var first: UInt32
    public var count: UInt32

    public init(first: UInt32, count: UInt32) {
        self.first = first
        self.count = count
    }

    public static let defaultRange = IdentityRange(first: 1_879_113_728, count: 65_536)

    public func contains(_ id: UInt32) -> Bool { id >= first && UInt64(id) < UInt64(first) + UInt64(count) }
}

/// Which uid each extension id has (persisted by the shell as `<state>/ids.json`). An id keeps
/// its uid for as long as the file exists; no two ids share one.
public struct IdentityMap: Equatable, Sendable {
    /// Extension id → uid.
    public var extensions: [String: UInt32]

    public init(extensions: [String: UInt32] = [:]) { self.extensions = extensions }

    /// The uid of `id`: the recorded one, or else the lowest free uid of `range` (recorded).
    /// Returns nil when the range is exhausted; `changed` says whether the map must be saved.
    public mutating func uid(for id: String, in range: IdentityRange) -> (uid: UInt32, changed: Bool)? {
        if let uid = extensions[id] { return (uid, false) }
        let used = Set(extensions.values)
        var candidate = UInt64(range.first)
        let end = UInt64(range.first) + UInt64(range.count)
        while candidate < end {
            let c = UInt32(candidate)
            if !used.contains(c) {
                extensions[id] = c
                return (c, true)
            }
            candidate += 1
        }
        return nil
    }
}
