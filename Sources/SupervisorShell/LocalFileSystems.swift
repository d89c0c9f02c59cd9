/// Which file systems check a permission without asking a server: those whose locked files
/// the lock survey may watch for opens (`LockSurvey.Found.watchable`). An inotify watch checks
/// the permission to read its file, and a file system served from user space or over a network
/// (FUSE, NFS, SMB, 9p, …) may ask its server to check it, which holds the caller for as long
/// as the server does not answer. A locked file on any other file system has its extension
/// checked for waiters instead (`WaiterChecks`), which reads only `/proc/locks`.
///
/// The file system of a descriptor is read from `/proc` alone, never from the file: its
/// `mnt_id` in `/proc/PID/fdinfo/FD`, and that mount's type in `/proc/PID/mountinfo` (the
/// process's own mount namespace: an extension's sandbox has one of its own). A mount that is
/// not in that table counts as unknown.
enum LocalFileSystems {
    /// Disk and memory file systems, whose permission checks use the kernel's copy of the inode
    /// (and at most read an access control list from their own device). Not `overlay`: it
    /// checks the permission on the file's layer, which may be on any file system.
    static let types: Set<String> = [
        "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "bcachefs", "zfs", "jfs", "reiserfs", "nilfs2",
        "vfat", "msdos", "exfat", "ntfs3", "hfs", "hfsplus", "udf", "iso9660", "squashfs", "erofs",
        "tmpfs", "ramfs", "devtmpfs",
    ]

    /// Whether a file system of type `type` (the third field after the ` - ` of a mountinfo
    /// line: `ext4`, `fuse.sshfs`, `nfs4`) checks permissions without asking anyone.
    static func isLocal(_ type: String) -> Bool { types.contains(type) }

    /// The type of each mount in a `/proc/PID/mountinfo` text, by mount id (its first field).
    /// Lines not in that form are skipped.
    static func mountTypes(_ mountinfo: String) -> [Int: String] {
        var types: [Int: String] = [:]
        for line in mountinfo.split(separator: "\n") {
            let fields = line.split(separator: " ")
            // The optional fields end with a field "-"; the type follows it.
            guard let id = fields.first.flatMap({ Int($0) }), let dash = fields.dropFirst(6).firstIndex(of: "-"), dash + 1 < fields.count
            else { continue }
            types[id] = String(fields[dash + 1])
        }
        return types
    }

    /// The mount id of a descriptor, from its `/proc/PID/fdinfo/FD` text (`mnt_id:\t42`).
    static func mountID(fdinfo: String) -> Int? {
        for line in fdinfo.split(separator: "\n") where line.hasPrefix("mnt_id:") {
            return Int(line.dropFirst("mnt_id:".count).drop { $0 == " " || $0 == "\t" })
        }
        return nil
    }
}
