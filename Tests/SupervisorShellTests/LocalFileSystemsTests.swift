import Testing

@testable import SupervisorShell

/// Reading a descriptor's mount and its file system's type from `/proc` text, and which types
/// count as local.
struct LocalFileSystemsTests {
    @Test func theTypeOfEachMountIsReadFromItsMountinfoLine() {
        let mountinfo = """
            22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
            35 22 0:31 / /tmp rw,nosuid,nodev - tmpfs tmpfs rw,size=1024k
            61 22 0:52 / /mnt/remote rw,nosuid,nodev,relatime shared:40 master:12 - fuse.sshfs host:/srv rw,user_id=0,default_permissions
            70 22 0:60 / /net rw,relatime - nfs4 server:/export rw,vers=4.2
            80 22 0:70 / /merged rw - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c
            not a mount line
            90 22 0:80 / /broken rw no separator here

            """
        let types = LocalFileSystems.mountTypes(mountinfo)
        #expect(types == [22: "ext4", 35: "tmpfs", 61: "fuse.sshfs", 70: "nfs4", 80: "overlay"])
        #expect(types.filter { LocalFileSystems.isLocal($0.value) }.keys.sorted() == [22, 35], "overlay's layers may be on any file system")
    }

    @Test func theMountOfADescriptorIsItsFdinfoMntID() {
        #expect(LocalFileSystems.mountID(fdinfo: "pos:\t0\nflags:\t0100002\nmnt_id:\t61\nino:\t12\n") == 61)
        #expect(LocalFileSystems.mountID(fdinfo: "pos:\t0\nflags:\t02\n") == nil)
    }

    @Test(arguments: ["fuse", "fuseblk", "fuse.sshfs", "virtiofs", "nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "glusterfs", "overlay", "unknownfs"])
    func fileSystemsThatMayAskAServerAreNotLocal(type: String) {
        #expect(!LocalFileSystems.isLocal(type))
    }
}
