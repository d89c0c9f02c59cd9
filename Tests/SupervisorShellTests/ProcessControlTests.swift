import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// The exact kernel calls of one suspend, one resume and one kill, through the recording fake
/// of the kernel interface; and the cgroup subtree's set-up on both cgroup v2 layouts.
@Suite(.serialized)
struct ProcessControlTests {
    final class Recorder: ProcessControlDelegate {
        var confirmed = 0
        var exits: [(SupervisorCore.ExitStatus, Bool)] = []
        var oomKills: [Result<Int, SystemError>?] = []
        var confirmedMembers: [[Int32]] = []
        func stopConfirmed(_ p: SupervisedProcess, members: [Int32]) {
            confirmed += 1
            confirmedMembers.append(members)
        }
        func exited(_ p: SupervisedProcess, status: SupervisorCore.ExitStatus, outlivedLeader: Bool, oomKills: Result<Int, SystemError>?) {
            exits.append((status, outlivedLeader))
            self.oomKills.append(oomKills)
        }
        var refused: [Double] = []
        func stopRefused(_ p: SupervisedProcess, seconds: Double) { refused.append(seconds) }
        func isLeader(_ pid: Int32) -> Bool { pid == 100 }
    }

    let logger = Logger(label: "test")
    static let service = "/sys/fs/cgroup/system.slice/extensiond.service"
    static let cgroup = service + "/extensions/org.example.x"
    /// /proc/PID/stat of a sleeping process (22 fields after the command).
    static let sleeping = "100 (sh) S 1 100 100 0 -1 4194304 0 0 0 0 1 2 0 0 20 0 1 0 12345 1000 50"

    /// A kernel with a plain cgroup v2 mount and a delegated service cgroup with controllers.
    func systemdKernel() -> RecordingKernel {
        let k = RecordingKernel()
        k.files["/proc/self/mountinfo"] = "22 1 0:21 / / rw - ext4 /dev/vda rw\n30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n"
        k.files["/proc/self/cgroup"] = "0::/system.slice/extensiond.service\n"
        k.files[Self.service + "/cgroup.controllers"] = "cpuset cpu io memory pids\n"
        return k
    }

    func controlled(_ mechanism: SuspendMode) throws -> (RecordingKernel, ProcessControl, SupervisedProcess, Recorder) {
        let k = systemdKernel()
        let tree = try CgroupTree.setUp(kernel: k, underSystemd: true, socketPath: "/run/extensiond/control.sock", logger: logger).get()
        let control = ProcessControl(kernel: k, cgroups: tree, isSubreaper: true, logger: logger)
        let recorder = Recorder()
        control.attach(recorder)
        let p = SupervisedProcess(
            extensionID: "org.example.x", generation: 1, pid: 100, pidfd: 7,
            cgroup: ExtensionCgroup(path: Self.cgroup, directoryFD: 60, eventsFD: 61, procsFD: 62, freezeFD: mechanism == .freeze ? 63 : nil),
            mechanism: mechanism, channel: nil, queueLimit: 1024)
        k.descriptors[62] = "100\n"
        k.directories["/proc/100/task"] = ["100"]
        k.files["/proc/100/task/100/stat"] = Self.sleeping
        k.clearCalls()
        return (k, control, p, recorder)
    }

    /// The process-group fallback (no cgroup), the daemon a child subreaper.
    func controlledGroup() -> (RecordingKernel, ProcessControl, SupervisedProcess, Recorder) {
        let k = RecordingKernel()
        let control = ProcessControl(kernel: k, cgroups: nil, isSubreaper: true, logger: logger)
        let recorder = Recorder()
        control.attach(recorder)
        let p = SupervisedProcess(
            extensionID: "org.example.x", generation: 1, pid: 100, pidfd: 7, cgroup: nil, mechanism: .stop, channel: nil, queueLimit: 1024)
        k.directories["/proc/100/task"] = ["100"]
        k.files["/proc/100/task/100/children"] = ""
        return (k, control, p, recorder)
    }

    @Test func underSystemdTheDaemonMovesIntoALeafAndEnablesControllers() throws {
        let k = systemdKernel()
        let tree = try CgroupTree.setUp(kernel: k, underSystemd: true, socketPath: "/run/extensiond/control.sock", logger: logger).get()
        let pid = "\(k.processID)"
        let expected: [RecordingKernel.Call] = [
            .read("/proc/self/mountinfo"), .read("/proc/self/cgroup"),
            .makeDirectory(Self.service + "/supervisor"), .write(Self.service + "/supervisor/cgroup.procs", pid),
            .makeDirectory(Self.service + "/extensions"), .read(Self.service + "/cgroup.controllers"),
            .write(Self.service + "/cgroup.subtree_control", "+cpu +memory +pids"),
            .write(Self.service + "/extensions/cgroup.subtree_control", "+cpu +memory +pids"),
        ]
        #expect(k.calls == expected)
        #expect(tree.controllers == ["cpu", "memory", "pids"])
        #expect(tree.path(of: "org.example.x") == Self.cgroup)
    }

    @Test func withoutDelegationTheReasonIsGiven() {
        let k = systemdKernel()
        k.failingWrites[Self.service + "/supervisor/cgroup.procs"] = 13
        guard case .failure(let why) = CgroupTree.setUp(kernel: k, underSystemd: true, socketPath: "/run/x.sock", logger: logger) else {
            Issue.record("set-up succeeded without a writable service cgroup")
            return
        }
        #expect(why.description.contains("cannot move the daemon into \(Self.service)/supervisor"))
    }

    @Test func standaloneInTheHybridLayoutASubtreeBelowTheDaemonsCgroup() throws {
        let k = RecordingKernel()
        k.files["/proc/self/mountinfo"] = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
        k.files["/proc/self/cgroup"] = "4:memory:/x\n0::/\n"
        let tree = try CgroupTree.setUp(kernel: k, underSystemd: false, socketPath: "/tmp/a/control.sock", logger: logger).get()
        let base = "/sys/fs/cgroup/unified/extensiond-" + CgroupTree.tag("/tmp/a/control.sock")
        #expect(k.calls == [.read("/proc/self/mountinfo"), .read("/proc/self/cgroup"), .makeDirectory(base)])
        #expect(tree.extensionsPath == base)
        #expect(tree.controllers.isEmpty, "the daemon stays in its cgroup: no controllers can be passed down")
    }

    @Test func noCgroup2MountMeansTheFallback() {
        let k = RecordingKernel()
        k.files["/proc/self/mountinfo"] = "22 1 0:21 / / rw - ext4 /dev/vda rw\n"
        guard case .failure(let why) = CgroupTree.setUp(kernel: k, underSystemd: false, socketPath: "/tmp/x.sock", logger: logger) else {
            Issue.record("set-up succeeded without cgroup2")
            return
        }
        #expect(why.description == "no cgroup v2 file system is mounted")
    }

    @Test func cgroupProcsIsParsedLineByLine() {
        #expect(CgroupTree.parsePIDs(Array("100\n2147483647\n7\n".utf8)) == [100, 2147483647, 7])
        #expect(CgroupTree.parsePIDs(Array("".utf8)) == [])
        #expect(CgroupTree.parsePIDs(Array("12\n2147483648\n1x\n\n99999999999\n5".utf8)) == [12, 5], "out of range or not a number: skipped")
    }

    @Test func theCgroupIsCreatedWithItsEventsAndProcsOpen() throws {
        let k = systemdKernel()
        let tree = try CgroupTree.setUp(kernel: k, underSystemd: true, socketPath: "/run/extensiond/control.sock", logger: logger).get()
        k.clearCalls()
        let c = try tree.create("org.example.x", logger: logger).get()
        #expect(k.calls == [.makeDirectory(Self.cgroup), .open(Self.cgroup), .open(Self.cgroup + "/cgroup.events"), .open(Self.cgroup + "/cgroup.procs")])
        #expect(Set([c.directoryFD, c.eventsFD, c.procsFD]).count == 3)
        #expect(c.freezeFD == nil, "cgroup.freeze is kept open only for the freezer")
        k.clearCalls()
        let frozen = try tree.create("org.example.y", freezer: true, logger: logger).get()
        let path = tree.path(of: "org.example.y")
        #expect(
            k.calls == [
                .makeDirectory(path), .open(path), .open(path + "/cgroup.events"), .open(path + "/cgroup.procs"), .openForWriting(path + "/cgroup.freeze"),
            ])
        #expect(frozen.freezeFD != nil)
    }

    @Test func oneSuspendInACgroup() throws {
        let (k, control, p, recorder) = try controlled(.stop)
        control.suspend(p)
        #expect(
            k.calls == [
                .readFD(62), .kill(100, SignalNumber.stop), .addTimer(at: k.clock.adding(seconds: GroupControl.firstRetrySeconds)),
            ], "no /proc read: every pid of the cgroup gets SIGSTOP")
        k.clearCalls()
        k.stopped = [7]
        control.childrenChanged()
        #expect(
            k.calls == [
                .stopReported(pidfd: 7), .readFD(62),
                .cancelTimer(at: .seconds(100).adding(seconds: GroupControl.firstRetrySeconds)),
            ], "the leader's state comes from the kernel's report: no /proc read")
        #expect(recorder.confirmed == 1)
        #expect(recorder.confirmedMembers == [[100]], "the members of the confirming read, with no further read")
    }

    @Test func aStopWhoseMembersCannotBeReadIsCheckedAgainNotConfirmed() throws {
        let (k, control, p, recorder) = try controlled(.stop)
        control.suspend(p)
        let members = k.descriptors[62]
        k.descriptors[62] = nil  // cgroup.procs now fails (EBADF)
        k.clearCalls()
        k.stopped = [7]
        control.childrenChanged()
        let first = k.clock.adding(seconds: GroupControl.firstRetrySeconds)
        let second = k.clock.adding(seconds: GroupControl.firstRetrySeconds * 2)
        #expect(
            k.calls == [.stopReported(pidfd: 7), .readFD(62), .cancelTimer(at: first), .addTimer(at: second)],
            "the stop is read again later")
        #expect(recorder.confirmed == 0, "an unread group is not taken as stopped, nor as empty")
        k.descriptors[62] = members
        k.clearCalls()
        k.fireNextTimer()
        #expect(k.calls == [.readFD(62)])
        #expect(recorder.confirmedMembers == [[100]])
    }

    @Test func membersThatKeepRunningThroughTheStopAreReportedAsRefusingIt() throws {
        let (k, control, p, recorder) = try controlled(.stop)
        k.descriptors[62] = "100\n101\n"  // 101 keeps running: its /proc state says so
        k.directories["/proc/101/task"] = ["101"]
        k.files["/proc/101/task/101/stat"] = "101 (helper) R 1 101 101 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 0 0 0"
        control.suspend(p)
        k.stopped = [7]
        control.childrenChanged()
        var fired = 0
        while recorder.refused.isEmpty && fired < 1_000 {
            k.fireNextTimer()
            fired += 1
        }
        #expect(recorder.confirmed == 0)
        #expect(recorder.refused.count == 1)
        #expect((recorder.refused.first ?? 0) >= GroupControl.stopDeadlineSeconds)
        k.clearCalls()
        k.fireNextTimer()
        #expect(k.calls.isEmpty, "no check follows a refusal")
    }

    @Test func oneResumeInACgroup() throws {
        let (k, control, p, recorder) = try controlled(.stop)
        withExtendedLifetime(recorder) {  // the control's delegate, which it does not retain
            control.suspend(p)
            k.stopped = [7]
            control.childrenChanged()
            k.clearCalls()
            control.resume(p)
        }
        #expect(k.calls == [.kill(100, SignalNumber.cont)], "stopped alone: SIGCONT to the leader with no membership read")
    }

    @Test func theNextSuspendOfALeaderStoppedAloneSignalsItsGroupAndReadsOnce() throws {
        let (k, control, p, recorder) = try controlled(.stop)
        control.suspend(p)
        k.stopped = [7]
        control.childrenChanged()
        control.resume(p)
        k.clearCalls()
        control.suspend(p)
        #expect(
            k.calls == [.kill(-100, SignalNumber.stop), .addTimer(at: k.clock.adding(seconds: GroupControl.firstRetrySeconds))],
            "alone at its last stop: kill(-pgid), no cgroup.procs read before the signal")
        k.clearCalls()
        k.stopped = [7]
        control.childrenChanged()
        #expect(
            k.calls == [
                .stopReported(pidfd: 7), .readFD(62), .cancelTimer(at: k.clock.adding(seconds: GroupControl.firstRetrySeconds)),
            ], "the one read: after the leader's report, which finds any member outside the group")
        #expect(recorder.confirmed == 2)
    }

    /// A cgroup removed under a running extension (by another daemon ending what it took for
    /// leftovers) makes its `cgroup.events` fail with ENODEV at every turn of the loop: the
    /// watch is cancelled at the first, never read again.
    @Test func aCgroupRemovedUnderItsExtensionIsNoLongerWatched() throws {
        let (k, control, p, _) = try controlled(.stop)
        let watch = try k.watch(fd: 61, events: Poll.priority) { _ in }.get()
        p.keep(exitWatch: nil, eventsWatch: watch)
        k.failingDescriptorReads[61] = ENODEV
        control.cgroupEventsChanged(p)
        #expect((watch as? RecordingKernel.FakeWatch)?.cancelled == true)
    }

    @Test func oneKillInACgroupAndTheExitThatFollows() throws {
        let (k, control, p, recorder) = try controlled(.stop)
        control.signal(p, SignalNumber.kill, thenContinue: true)
        #expect(k.calls == [.write(Self.cgroup + "/cgroup.kill", "1")])
        k.clearCalls()
        k.exits[7] = .signaled(9)
        k.descriptors[61] = "populated 0\nfrozen 0\n"
        k.files[Self.cgroup + "/memory.events"] = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"
        control.leaderMayHaveExited(p)
        // memory.events is read before the cgroup is removed, which takes its files with it
        // (read after, the OOM kill was lost and the exit was a crash).
        #expect(
            k.calls == [
                .exitStatus(pidfd: 7, reap: false), .readFD(61), .exitStatus(pidfd: 7, reap: true),
                .listDirectory("/proc/\(k.processID)/task"), .read(Self.cgroup + "/memory.events"), .removeDirectory(Self.cgroup),
            ])
        #expect(recorder.exits.count == 1)
        #expect(recorder.exits.first?.0 == .signaled(9))
        #expect(recorder.exits.first?.1 == false)
        #expect(try recorder.oomKills.first??.get() == 1)
    }

    @Test func oneFreezeAndThaw() throws {
        let (k, control, p, recorder) = try controlled(.freeze)
        k.descriptors[61] = "populated 1\nfrozen 0\n"
        control.suspend(p)
        #expect(
            k.calls == [
                .writeFD(63, "1"), .addTimer(at: k.clock.adding(seconds: GroupControl.slowStopSeconds)), .readFD(61),
            ], "frozen is read once right after the write; not frozen yet: the notification confirms it")
        #expect(recorder.confirmed == 0)
        k.clearCalls()
        k.descriptors[61] = "populated 1\nfrozen 1\n"
        control.cgroupEventsChanged(p)
        #expect(
            k.calls == [.readFD(61), .cancelTimer(at: k.clock.adding(seconds: GroupControl.slowStopSeconds)), .readFD(62)],
            "a freeze is confirmed with no member read; the members are read once for the confirmation")
        #expect(recorder.confirmed == 1)
        k.clearCalls()
        control.resume(p)
        #expect(k.calls == [.writeFD(63, "0")], "no signal: the processes cannot observe it")
    }

    @Test func aFreezeCompleteAtOnceIsConfirmedByTheReadAfterTheWrite() throws {
        let (k, control, p, recorder) = try controlled(.freeze)
        k.descriptors[61] = "populated 1\nfrozen 1\n"
        control.suspend(p)
        #expect(
            k.calls == [
                .writeFD(63, "1"), .addTimer(at: k.clock.adding(seconds: GroupControl.slowStopSeconds)), .readFD(61),
                .cancelTimer(at: k.clock.adding(seconds: GroupControl.slowStopSeconds)), .readFD(62),
            ], "confirmed with no timer left armed")
        #expect(recorder.confirmed == 1)
    }

    @Test func aLeaderExitWithMembersLeftKillsThemAndWaitsForTheEmptyCgroup() throws {
        let (k, control, p, recorder) = try controlled(.stop)
        k.exits[7] = .exited(0)
        k.descriptors[61] = "populated 1\nfrozen 0\n"
        control.leaderMayHaveExited(p)
        #expect(k.calls == [.exitStatus(pidfd: 7, reap: false), .readFD(61), .write(Self.cgroup + "/cgroup.kill", "1")])
        #expect(recorder.exits.isEmpty)
        k.descriptors[61] = "populated 0\nfrozen 0\n"
        control.cgroupEventsChanged(p)
        #expect(recorder.exits.count == 1)
        #expect(recorder.exits.first?.1 == true, "recorded as outliving the leader")
    }

    @Test func aProcessGroupLeaderWithNoChildAndNoOrphanIsConfirmedAloneWithoutAScan() {
        let (k, control, p, recorder) = controlledGroup()
        control.suspend(p)
        #expect(k.calls == [.kill(-100, SignalNumber.stop), .addTimer(at: k.clock.adding(seconds: GroupControl.firstRetrySeconds))])
        k.clearCalls()
        k.stopped = [7]
        control.childrenChanged()
        #expect(
            k.calls == [
                .stopReported(pidfd: 7), .listDirectory("/proc/\(k.processID)/task"),
                .listDirectory("/proc/100/task"), .read("/proc/100/task/100/children"),
                .cancelTimer(at: k.clock.adding(seconds: GroupControl.firstRetrySeconds)),
            ], "no orphan adopted, no child: the leader alone, with no scan of /proc")
        #expect(recorder.confirmedMembers == [[100]])
        k.clearCalls()
        control.childrenChanged()
        #expect(k.calls.isEmpty, "confirmed: no stop report is awaited any more")
    }

    @Test func aProcessGroupLeaderWithAChildHasItsGroupScanned() {
        let (k, control, p, recorder) = controlledGroup()
        k.files["/proc/100/task/100/children"] = "101 "
        k.directories["/proc"] = ["100", "101", "self"]
        k.files["/proc/100/stat"] = Self.sleeping
        k.files["/proc/101/stat"] = "101 (sh) T 100 100 100 0 -1 4194304 0 0 0 0 1 2 0 0 20 0 1 0 12346 1000 50"
        k.directories["/proc/101/task"] = ["101"]
        k.files["/proc/101/task/101/stat"] = k.files["/proc/101/stat"]
        control.suspend(p)
        k.clearCalls()
        k.stopped = [7]
        control.childrenChanged()
        let descendants: [RecordingKernel.Call] = [
            .listDirectory("/proc/\(k.processID)/task"), .listDirectory("/proc/100/task"), .read("/proc/100/task/100/children"),
        ]
        let scan: [RecordingKernel.Call] = [
            .listDirectory("/proc"), .read("/proc/100/stat"), .read("/proc/101/stat"),
            .listDirectory("/proc/101/task"), .read("/proc/101/task/101/stat"),
        ]
        #expect(
            k.calls == [.stopReported(pidfd: 7)] + descendants + scan + descendants + scan + [
                .cancelTimer(at: k.clock.adding(seconds: GroupControl.firstRetrySeconds))
            ], "a child: the group is scanned (the leader's state from its report), and read again until the set is stable")
        #expect(recorder.confirmedMembers == [[100, 101]])
    }
}
