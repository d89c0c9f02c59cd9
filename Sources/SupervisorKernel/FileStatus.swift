/// Which file an open descriptor refers to: `st_dev` and `st_ino` of stat(2).
public struct FileIdentity: Hashable, Sendable {
    /// The device the file is on (`st_dev`).
    public var device: UInt64
    /// The file's inode number on that device (`st_ino`).
    public var inode: UInt64
    /// The identity of the given device and inode numbers, stored as given.
    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// What stat(2) says about a file: enough for the daemon's ownership and type checks.
public struct FileStatus: Equatable, Sendable {
    /// The file type bits of `st_mode` (`S_IFMT`).
    public enum Kind: Equatable, Sendable {
        /// `S_IFREG`: a regular file.
        case regular
        /// `S_IFDIR`: a directory.
        case directory
        /// `S_IFLNK`: a symbolic link (only seen when links are not followed: lstat, `O_NOFOLLOW`).
        case symbolicLink
        /// Any other type: a FIFO, a socket, a character or block device.
        case other
    }
    /// The file's type.
    public var kind: Kind
    /// The permission bits (`st_mode & 07777`).
    public var permissions: UInt32
    /// The owning user id (`st_uid`).
    public var owner: UInt32
    /// The owning group id (`st_gid`).
    public var group: UInt32
    /// The size in bytes (`st_size`).
    public var size: Int64
    /// Which file it is (`st_dev`, `st_ino`).
    public var identity: FileIdentity
    /// A status of these values, stored as given.
    public init(kind: Kind, permissions: UInt32, owner: UInt32, group: UInt32, size: Int64, identity: FileIdentity) {
        self.kind = kind
        self.permissions = permissions
        self.owner = owner
        self.group = group
        self.size = size
        self.identity = identity
    }
    /// Whether others may write it (`S_IWOTH`).
    public var isWorldWritable: Bool { permissions & 0o002 != 0 }
    /// Whether the sticky bit is set (`S_ISVTX`).
    public var isSticky: Bool { permissions & 0o1000 != 0 }
}
