/// A range of uids (and equal gids) the daemon hands out, from the configuration's
/// `extensionUIDs`: `first` and `count`. The default, 1879113728 (0x70010000) to
/// 1879179263, lies outside the ranges Debian and systemd give to system and regular users,
/// nspawn containers and `DynamicUser=` (see docs/operations.md).
public struct IdentityRange: Equatable, Sendable {
    /// The lowest id of the range.
    public var first: UInt32
    /// How many ids the range holds, from `first` on.
    public var count: UInt32

    /// The `count` ids from `first` on.
    public init(first: UInt32, count: UInt32) {
        self.first = first
        self.count = count
    }

    /// The range used when the configuration names none (given in the type's description).
    public static let defaultRange = IdentityRange(first: 1_879_113_728, count: 65_536)

    /// Whether `id` lies in the range.
    public func contains(_ id: UInt32) -> Bool { id >= first && UInt64(id) < UInt64(first) + UInt64(count) }
}

/// Which uid each extension id has, and which gid each shared container has (persisted by
/// the shell as `<state>/ids.json`). An id keeps its number for as long as the file exists; no
/// two ids or containers share one (an extension's primary gid is its uid's number, so
/// containers' gids are taken from the same pool).
public struct IdentityMap: Equatable, Sendable {
    /// Extension id → uid.
    public var extensions: [String: UInt32]
    /// Shared container name → gid (those the configuration does not give a group).
    public var containers: [String: UInt32]

    /// A map with these entries; empty by default.
    public init(extensions: [String: UInt32] = [:], containers: [String: UInt32] = [:]) {
        self.extensions = extensions
        self.containers = containers
    }

    /// The gid of container `name`: the recorded one, or else the lowest free number of `range`.
    public mutating func gid(forContainer name: String, in range: IdentityRange) -> (gid: UInt32, changed: Bool)? {
        if let gid = containers[name] { return (gid, false) }
        guard let free = lowestFree(in: range) else { return nil }
        containers[name] = free
        return (free, true)
    }

    private func lowestFree(in range: IdentityRange) -> UInt32? {
        let used = Set(extensions.values).union(containers.values)
        var candidate = UInt64(range.first)
        let end = UInt64(range.first) + UInt64(range.count)
        while candidate < end {
            if !used.contains(UInt32(candidate)) { return UInt32(candidate) }
            candidate += 1
        }
        return nil
    }

    /// The uid of `id`: the recorded one, or else the lowest free uid of `range` (recorded).
    /// Returns nil when the range is exhausted; `changed` says whether the map must be saved.
    public mutating func uid(for id: String, in range: IdentityRange) -> (uid: UInt32, changed: Bool)? {
        if let uid = extensions[id] { return (uid, false) }
        guard let free = lowestFree(in: range) else { return nil }
        extensions[id] = free
        return (free, true)
    }
}
