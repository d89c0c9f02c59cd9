import ExtensionHost
import Foundation
import Testing

/// Credentials and limits with the daemon running as root, as it does under the system unit:
/// extensions without `user` run under uids of their own. The test extension lives in the
/// build directory, which every uid can search; the daemon's private directory (0700) holds
/// the control socket, which extensions therefore cannot reach.
@Suite("Credentials and limits", .serialized, .enabled(if: getuid() == 0, "needs a root daemon"))
struct CredentialTests {
    /// The test extension, from a copy its own uid can reach (`ReachableCopies`).
    static func manifest(_ id: String, _ extra: [String: Any] = [:]) throws -> [String: Any] {
        var m = TestDaemon.testExtension(id, extra: extra)
        m["executable"] = try ReachableCopies.copy(BuildProducts.path("test-extension"))
        return m
    }

    /// Opens `id` and returns its channel and its pid, as the daemon gives it; the extension
    /// answers `ping` with the pid it has in its own pid namespace (1, when sandboxed).
    static func open(_ daemon: TestDaemon, _ host: ExtensionHostConnection, _ id: String) throws -> (HostChannel, Int32) {
        let session = try host.begin(id)
        let channel = try session.hostChannel()
        channel.send("ping")
        #expect(channel.readLine() == "pong \(try namespacePID(session.pid))")
        return (channel, session.pid)
    }

    /// The pid that process `pid` has in its own pid namespace (the last of its `NSpid`).
    static func namespacePID(_ pid: Int32) throws -> Int32 {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("NSpid:") })
        return try #require(Int32(line.split(whereSeparator: { $0 == "\t" || $0 == " " }).last ?? ""))
    }

    /// A field of /proc/PID/status, e.g. "Uid" → its first value.
    static func statusField(_ pid: Int32, _ name: String) throws -> String {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(name + ":") })
        return String(line.dropFirst(name.count + 1).split(whereSeparator: { $0 == "\t" || $0 == " " }).first ?? "")
    }

    static func statusEntry(_ daemon: TestDaemon, _ id: String) throws -> [String: Any] {
        let result = try daemon.extctl(["status", "--json", id])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any])
        return try #require((document["extensions"] as? [[String: Any]])?.first)
    }

    @Test func anExtensionWithoutUserRunsAsItsOwnUIDStableAcrossRelaunchesAndRestarts() throws {
        let id = "org.example.own"
        let daemon = try TestDaemon(manifests: ["own.json": try Self.manifest(id)], extensionsAsRoot: false)
        try daemon.start()
        var host = try daemon.host()
        var (_, pid) = try Self.open(daemon, host, id)
        let uid = try #require(UInt32(try Self.statusField(pid, "Uid")))
        #expect(uid >= 1_879_113_728 && uid < 1_879_113_728 + 65_536)
        #expect(try Self.statusField(pid, "Gid") == "\(uid)")
        #expect(try Self.statusField(pid, "CapEff") == "0000000000000000")
        #expect(try Self.statusField(pid, "CapBnd") == "0000000000000000")
        #expect(try Self.statusField(pid, "NoNewPrivs") == "1")
        let ids = try String(contentsOfFile: daemon.directory + "/state/ids.json", encoding: .utf8)
        #expect(ids.contains("\"\(id)\" : \(uid)"), "\(ids)")

        _ = try daemon.extctl(["kill", id])
        _ = try daemon.events.wait("exit", of: id)
        (_, pid) = try Self.open(daemon, host, id)
        #expect(try Self.statusField(pid, "Uid") == "\(uid)", "the same uid after a relaunch")

        host.close()
        #expect(daemon.stop() == 0)
        try daemon.start()
        host = try daemon.host()
        (_, pid) = try Self.open(daemon, host, id)
        #expect(try Self.statusField(pid, "Uid") == "\(uid)", "the same uid after a daemon restart")
        host.close()
        #expect(daemon.stop() == 0)
    }

    @Test func theSocketGroupOptionGivesTheSocketToAGroup() throws {
        let daemon = try TestDaemon(manifests: [:], extensionsAsRoot: false)
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        var info = stat()
        #expect(stat(daemon.socketPath, &info) == 0)
        #expect(info.st_gid == 65534)
        #expect(info.st_mode & 0o777 == 0o660)
        #expect(daemon.stop() == 0)
    }

    /// The group's members reach the socket when the daemon creates its directory: the
    /// directory is given to the group too.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv"))
    func aMemberOfTheSocketGroupReachesASocketInADirectoryTheDaemonCreates() throws {
        let daemon = try TestDaemon(manifests: [:], extensionsAsRoot: false, socket: "run/control.sock")
        chmod(daemon.directory, 0o711)
        let socket = daemon.socketPath
        try daemon.start(arguments: ["--socket-group", "nogroup"])
        defer { _ = daemon.stop() }
        var info = stat()
        #expect(stat(daemon.directory + "/run", &info) == 0)
        #expect(info.st_gid == 65534, "the directory is the group's")
        #expect(info.st_mode & 0o777 == 0o750)
        let member = try runProgram(
            "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", BuildProducts.path("extctl"), "list", "--socket", socket])
        #expect(member.status == 0, "\(member.err)")
        let stranger = try runProgram(
            "/usr/bin/setpriv", ["--reuid=65534", "--regid=65533", "--clear-groups", BuildProducts.path("extctl"), "list", "--socket", socket])
        #expect(stranger.status == 1)
        #expect(stranger.err == "extctl: cannot reach extensiond at \(socket): Permission denied\n")
    }

    @Test func nobodyRunsAs65534() throws {
        let daemon = try TestDaemon(manifests: ["n.json": try Self.manifest("org.example.nobody", ["user": "nobody"])], extensionsAsRoot: false)
        try daemon.start()
        let host = try daemon.host()
        let (_, pid) = try Self.open(daemon, host, "org.example.nobody")
        #expect(try Self.statusField(pid, "Uid") == "65534")
        host.close()
        #expect(daemon.stop() == 0)
    }

    @Test func twoExtensionsHaveDifferentUIDsAndCannotSignalEachOtherOrWriteCgroupFiles() throws {
        let daemon = try TestDaemon(
            manifests: ["a.json": try Self.manifest("org.example.a"), "b.json": try Self.manifest("org.example.b")], extensionsAsRoot: false)
        try daemon.start()
        let host = try daemon.host()
        let (a, pidA) = try Self.open(daemon, host, "org.example.a")
        let (b, pidB) = try Self.open(daemon, host, "org.example.b")
        #expect(try Self.statusField(pidA, "Uid") != Self.statusField(pidB, "Uid"))
        // Each is in a pid namespace of its own: the other's pid names no process there.
        b.send("signal \(pidA)")
        #expect(b.readLine() == "refused: No such process")
        a.send("signal \(pidB)")
        #expect(a.readLine() == "refused: No such process")
        // Its /proc (hidepid=invisible) has no entry for another uid's process at all.
        b.send("read-file /proc/\(pidA)/mem")
        #expect(b.readLine() == "refused: No such file or directory", "another extension's processes are invisible")
        // In the sandbox its own cgroup is on a read-only mount (EROFS comes before the
        // permission check the files' owner and mode would fail), and no other cgroup is there.
        if let cgroup = try Self.statusEntry(daemon, "org.example.a")["cgroup"] as? String {
            a.send("write-file \(cgroup)/cgroup.kill")
            #expect(a.readLine() == "refused: Read-only file system", "its own cgroup's files")
            b.send("write-file \(cgroup)/cgroup.freeze")
            #expect(b.readLine() == "refused: No such file or directory", "another extension's cgroup files")
        }
        a.send("probe-control \(daemon.socketPath)")
        #expect(a.readLine()?.hasPrefix("refused: ") == true, "the control socket, without hostAccess")
        host.close()
        #expect(daemon.stop() == 0)
    }

    @Test func rootIsRefusedUnlessTheConfigurationAllowsIt() throws {
        let root = try Self.manifest("org.example.root", ["user": "root"])
        let refused = try TestDaemon(manifests: ["root.json": root], extensionsAsRoot: false)
        try refused.start()
        let list = try refused.extctl(["list"])
        #expect(!list.out.contains("org.example.root"))
        #expect(
            refused.log().contains(
                "root.json: field 'user': runs as root, which the configuration does not allow (set \"allowRootExtensions\": true in the daemon's configuration file)"
            ))
        #expect(refused.stop() == 0)

        let allowed = try TestDaemon(manifests: ["root.json": root], config: ["allowRootExtensions": true], extensionsAsRoot: false)
        try allowed.start()
        let host = try allowed.host()
        let (_, pid) = try Self.open(allowed, host, "org.example.root")
        #expect(try Self.statusField(pid, "Uid") == "0")
        #expect(try Self.statusField(pid, "CapEff") == "0000000000000000", "root without capabilities")
        #expect(try Self.statusField(pid, "CapPrm") == "0000000000000000")
        // The child drops exactly the capabilities of the bounding set it was cloned with: the
        // daemon's (the unit's, by `UnitRestrictions`), which it keeps.
        #expect(try Self.statusField(pid, "CapBnd") == "0000000000000000", "nothing to gain at an exec")
        let daemonPID = try #require(allowed.process?.processIdentifier)
        #expect(try Self.statusField(daemonPID, "CapBnd") != "0000000000000000", "the daemon keeps its own")
        host.close()
        #expect(allowed.stop() == 0)
    }

    /// Where `clone3` is refused (ENOSYS, as a container runtime's filter does), the daemon has
    /// no cgroup to spawn into and forks: the child takes every step all the same, so a root
    /// extension without credentials to switch to gets no capability, not even in its bounding
    /// set, and no_new_privs.
    @Test func withoutClone3ARootExtensionStillGetsNoCapability() throws {
        let root = try Self.manifest("org.example.root", ["user": "root", "sandbox": "none"])
        let daemon = try TestDaemon(
            manifests: ["root.json": root], config: ["allowRootExtensions": true, "allowUnsandboxedExtensions": true], extensionsAsRoot: false)
        try daemon.start(wrapper: [BuildProducts.path("unit-restrictions"), "--no-clone3", "--"])
        let host = try daemon.host()
        let (_, pid) = try Self.open(daemon, host, "org.example.root")
        #expect(daemon.log().contains("process groups"), "no cgroup without clone3: \(daemon.log())")
        #expect(try Self.statusField(pid, "Uid") == "0")
        for field in ["CapBnd", "CapPrm", "CapEff"] {
            #expect(try Self.statusField(pid, field) == "0000000000000000", "\(field)")
        }
        #expect(try Self.statusField(pid, "NoNewPrivs") == "1")
        host.close()
        #expect(daemon.stop() == 0)
    }

    @Test func openFilesMaxShowsInProcLimits() throws {
        let daemon = try TestDaemon(
            manifests: ["f.json": try Self.manifest("org.example.files", ["limits": ["openFilesMax": 64]])], extensionsAsRoot: false)
        try daemon.start()
        let host = try daemon.host()
        let (_, pid) = try Self.open(daemon, host, "org.example.files")
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        #expect(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).prefix(2) == ["64", "64"], "\(line)")
        let entry = try Self.statusEntry(daemon, "org.example.files")
        let reported = try #require((entry["limits"] as? [String: Any])?["openFilesMax"] as? [String: Any])
        #expect(reported["value"] as? Int == 64)
        #expect(reported["enforcedBy"] as? String == "rlimit")
        // The widget's cpuWeight: a standalone daemon's extensions have no controllers (its
        // own cgroup keeps a process), so it is reported as not enforced, in status and as a
        // warning at load.
        let cpu = try #require((entry["limits"] as? [String: Any])?["cpuWeight"] as? [String: Any])
        #expect(cpu["enforcedBy"] as? String == "none")
        #expect(daemon.log().contains("org.example.files: limits.cpuWeight (50) cannot be enforced: no cpu controller in the extension's cgroup"))
        let text = try daemon.extctl(["status", "org.example.files"]).out
        #expect(text.contains("openFilesMax 64 (rlimit)"), "\(text)")
        host.close()
        #expect(daemon.stop() == 0)
    }

    @Test func memoryMaxBytesStopsAnAllocatingProcessAndTheExitIsRecorded() throws {
        let id = "org.example.hog"
        let daemon = try TestDaemon(
            manifests: ["m.json": try Self.manifest(id, ["limits": ["memoryMaxBytes": 1 << 30]])], extensionsAsRoot: false)
        try daemon.start()
        let host = try daemon.host()
        let (channel, _) = try Self.open(daemon, host, id)
        let entry = try Self.statusEntry(daemon, id)
        let enforcedBy = ((entry["limits"] as? [String: Any])?["memoryMaxBytes"] as? [String: Any])?["enforcedBy"] as? String
        channel.send("allocate 2048")
        let answer = channel.readLine(timeout: 30) ?? ""
        let exit = try daemon.events.wait("crash", of: id, timeout: 30)
        if enforcedBy == "rlimit" {
            // RLIMIT_DATA: malloc fails, and the extension ends as one without a handler does.
            #expect(answer.hasPrefix("malloc failed after "), "\(answer)")
            #expect(exit.detail?.hasPrefix("crashed, signal 6") == true, "\(exit)")
        } else {
            #expect(exit.detail?.hasPrefix("memory-limit") == true, "\(exit)")
        }
        let last = try #require(try Self.statusEntry(daemon, id)["lastExit"] as? [String: Any])
        #expect(last["reason"] as? String == (enforcedBy == "rlimit" ? "crashed" : "memory-limit"))
        host.close()
        #expect(daemon.stop() == 0)
    }

    @Test func tasksMaxBoundsAForkLoop() throws {
        let id = "org.example.forker"
        let daemon = try TestDaemon(manifests: ["t.json": try Self.manifest(id, ["limits": ["tasksMax": 48]])], extensionsAsRoot: false)
        try daemon.start()
        let host = try daemon.host()
        let (channel, _) = try Self.open(daemon, host, id)
        channel.send("spawn-until-refused")
        let answer = try #require(channel.readLine(timeout: 30))
        let started = try #require(Int(answer.dropFirst("started ".count).prefix { $0.isNumber }))
        #expect(started < 48, "\(answer)")
        #expect(answer.hasSuffix(": Resource temporarily unavailable"), "\(answer)")
        host.close()
        #expect(daemon.stop() == 0)
    }
}

@Suite("Shared containers", .serialized, .enabled(if: getuid() == 0, "needs a root daemon"))
struct SharedContainerTests {
    static let name = "group.org.example.shared"

    @Test func twoExtensionsSharingAContainerBothWriteThereAndAThirdCannotRead() throws {
        let shared: [String: Any] = ["sharedContainers": [Self.name]]
        let daemon = try TestDaemon(
            manifests: [
                "a.json": try CredentialTests.manifest("org.example.a", shared), "b.json": try CredentialTests.manifest("org.example.b", shared),
                "c.json": try CredentialTests.manifest("org.example.c"),
                "d.json": try CredentialTests.manifest("org.example.d", ["sandbox": "none"]),
            ], config: ["allowUnsandboxedExtensions": true], extensionsAsRoot: false)
        // The state directory lies in the daemon's private directory (0700): let other uids
        // pass through it (search only; the control socket inside stays root's, mode 0660).
        chmod(daemon.directory, 0o711)
        try daemon.start()
        let path = daemon.directory + "/state/containers/" + Self.name
        let listed = try daemon.extctl(["container", Self.name])
        #expect(listed.status == 0, "\(listed.err)")
        #expect(listed.out == path + "\n")

        var info = stat()
        #expect(stat(path, &info) == 0)
        // 0770 and a default ACL for its group (no setgid bit: the unit's RestrictSUIDSGID=yes
        // refuses one), so that what one member creates is the group's, whatever its umask.
        #expect(info.st_mode & 0o7777 == 0o770)
        #expect(info.st_uid == 0)
        let acl = try runProgram("/usr/bin/python3", ["-c", "import os, sys; print(os.getxattr(sys.argv[1], 'system.posix_acl_default').hex())", path])
        // Version 2, then the entries: USER_OBJ rwx, GROUP_OBJ none, GROUP gid rwx, MASK rwx, OTHER none.
        let gid = String(format: "%02x%02x%02x%02x", info.st_gid & 0xff, (info.st_gid >> 8) & 0xff, (info.st_gid >> 16) & 0xff, info.st_gid >> 24)
        #expect(acl.out == "02000000" + "01000700ffffffff" + "04000000ffffffff" + "08000700\(gid)" + "10000700ffffffff" + "20000000ffffffff\n", "\(acl)")
        let ids = try String(contentsOfFile: daemon.directory + "/state/ids.json", encoding: .utf8)
        #expect(ids.contains("\"\(Self.name)\" : \(info.st_gid)"), "\(ids)")

        let host = try daemon.host()
        #expect(try host.sharedContainerPath(Self.name) == path)
        let (a, pidA) = try CredentialTests.open(daemon, host, "org.example.a")
        let (b, _) = try CredentialTests.open(daemon, host, "org.example.b")
        let (c, pidC) = try CredentialTests.open(daemon, host, "org.example.c")
        let groupsA = try String(contentsOfFile: "/proc/\(pidA)/status", encoding: .utf8).split(separator: "\n").first { $0.hasPrefix("Groups:") } ?? ""
        #expect(groupsA.split(whereSeparator: { $0 == "\t" || $0 == " " }).contains("\(info.st_gid)"), "\(groupsA)")
        a.send("container \(Self.name)")
        #expect(a.readLine() == "container \(path)")
        c.send("container \(Self.name)")
        #expect(c.readLine() == "no container")

        a.send("write-file \(path)/from-a")
        #expect(a.readLine() == "written")
        b.send("write-file \(path)/from-b")
        #expect(b.readLine() == "written")
        b.send("read-file \(path)/from-a")
        #expect(b.readLine() == "read")
        a.send("read-file \(path)/from-b")
        #expect(a.readLine() == "read")
        // The daemon runs with the unit's UMask=0077, which the extensions inherit: the group
        // may still write what another member created.
        b.send("write-file \(path)/from-a")
        #expect(b.readLine() == "written")
        // In its sandbox, the state directory holds nothing but its own container.
        c.send("read-file \(path)/from-a")
        #expect(c.readLine() == "refused: No such file or directory")
        c.send("write-file \(path)/from-c")
        #expect(c.readLine() == "refused: No such file or directory")
        #expect(try CredentialTests.statusField(pidC, "Uid") != "0")
        // Without the sandbox, the container's group and mode keep it out all the same.
        let (d, _) = try CredentialTests.open(daemon, host, "org.example.d")
        d.send("read-file \(path)/from-a")
        #expect(d.readLine() == "refused: Permission denied")
        d.send("write-file \(path)/from-d")
        #expect(d.readLine() == "refused: Permission denied")

        let unknown = try daemon.extctl(["container", "group.org.example.none"])
        #expect(unknown.status != 0)
        #expect(unknown.err.contains("no loaded manifest names the shared container 'group.org.example.none'"), "\(unknown.err)")
        host.close()
        #expect(daemon.stop() == 0)
    }
}

@Suite("Credentials under a daemon that is not root", .serialized, .enabled(if: getuid() == 0, "needs root to start the daemon as another user"))
struct SessionCredentialTests {
    @Test func aManifestAskingForAnotherUserIsRefusedNamingTheFileAndKey() throws {
        let daemon = try TestDaemon(
            manifests: [
                "other.json": try CredentialTests.manifest("org.example.other", ["user": "root"]),
                "own.json": try CredentialTests.manifest("org.example.own"),
            ], extensionsAsRoot: false)
        try daemon.startAsNobody()
        let file = daemon.extensionsDirectory + "/other.json"
        #expect(
            daemon.log().contains(
                "\(file): field 'user': asks for user 'root' (uid 0), but this daemon runs as uid 65534 and is not root: it runs extensions as itself only"),
            "\(daemon.log())")
        let list = try daemon.extctl(["list"])
        #expect(!list.out.contains("org.example.other"))
        let host = try daemon.host()
        let (_, pid) = try CredentialTests.open(daemon, host, "org.example.own")
        #expect(try CredentialTests.statusField(pid, "Uid") == "65534", "extensions run as the daemon's user")
        #expect(try CredentialTests.statusField(pid, "NoNewPrivs") == "1")
        host.close()
        #expect(daemon.stop() == 0)
    }
}
