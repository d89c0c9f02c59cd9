import SupervisorKernel
import Testing

@testable import SupervisorShell

/// Which entries of /proc/locks make the survey read a stopped group's descriptors: each read
/// is a directory listing and a file per descriptor, so a lock the group cannot hold must not
/// cause one.
struct LockSurveyTests {
    /// A line of /proc/locks as the kernel writes it.
    func entry(_ line: String) -> FileLocks.Entry { FileLocks.entries(line)[0] }

    func flock(pid: Int32) -> FileLocks.Entry { entry("1: FLOCK  ADVISORY  WRITE \(pid) 08:01:42 0 EOF") }

    func survey(_ k: RecordingKernel) -> LockSurvey { LockSurvey(files: k, ownPID: 1, containersRoot: nil) }

    func readsDescriptors(_ k: RecordingKernel) -> Bool { k.calls.contains(.listDirectory("/proc/100/fdinfo")) }

    @Test func aFlockOfALiveProcessOutsideTheGroupReadsNothing() {
        let k = RecordingKernel()
        k.statuses["/proc/555"] = FileStatus(kind: .directory, permissions: 0o555, owner: 0, group: 0, size: 0, identity: FileIdentity(device: 0, inode: 555))
        #expect(survey(k).locks(heldBy: [100], procLocks: [flock(pid: 555)]).isEmpty)
        #expect(!readsDescriptors(k), "\(k.calls)")
    }

    @Test func aFlockOfAProcessThatExitedMayBeTheGroupsAndIsLookedFor() {
        let k = RecordingKernel()
        _ = survey(k).locks(heldBy: [100], procLocks: [flock(pid: 556)])
        #expect(readsDescriptors(k))
    }

    @Test func aLockOfAMemberOrAnOFDLockIsLookedFor() {
        for entry in [flock(pid: 100), entry("2: OFDLCK ADVISORY  WRITE -1 08:01:43 0 EOF")] {
            let k = RecordingKernel()
            _ = survey(k).locks(heldBy: [100], procLocks: [entry])
            #expect(readsDescriptors(k), "\(entry)")
        }
    }

    @Test func aFlockHeldThroughADescriptorNoMemberHasOpenCountsAsOpenElsewhere() {
        let k = RecordingKernel()
        k.directories["/proc/100/fdinfo"] = []  // the descriptor was sent away and closed
        let found = survey(k).locks(heldBy: [100], procLocks: [flock(pid: 100)])
        #expect(found.count == 1)
        #expect(found.first?.lock.pid == 100)
        #expect(found.first?.lock.openElsewhere == true)
        #expect(found.first?.lock.blocksOthers == true, "exclusive, and who else has it open cannot be known")
        #expect(found.first?.lock.path == "the inode 08:01:42, through a descriptor no process of the extension has open")
    }

    /// The descriptors read are bounded: the members /proc/locks names come first, and a lock
    /// of a member whose descriptors were not all read counts as open elsewhere.
    @Test func aSurveyReadsAtMostItsBudgetOfDescriptorsNamedMembersFirst() {
        let k = RecordingKernel()
        k.directories["/proc/50/fdinfo"] = ["0", "1"]
        k.directories["/proc/100/fdinfo"] = ["0", "1", "2", "3", "4"]
        k.files["/proc/100/fdinfo/4"] = "pos:\t0\nflags:\t02\nlock:\t1: POSIX  ADVISORY  WRITE 100 08:01:42 0 EOF\n"
        var survey = survey(k)
        survey.descriptorBudget = 3
        let found = survey.locks(heldBy: [50, 100], procLocks: [entry("1: POSIX  ADVISORY  WRITE 100 08:01:42 0 EOF")])
        let reads = k.calls.compactMap { call -> String? in
            if case .read(let path) = call, path.contains("/fdinfo/") { return path }
            return nil
        }
        #expect(reads == ["/proc/100/fdinfo/0", "/proc/100/fdinfo/1", "/proc/100/fdinfo/2"], "the named member first, three in all")
        #expect(found.count == 1)
        #expect(found.first?.lock.kind == .posix)
        #expect(found.first?.lock.openElsewhere == true)
        #expect(found.first?.lock.path == "the inode 08:01:42 (the extension's descriptors were not all read: more than 3)")

        let all = RecordingKernel()
        all.directories["/proc/100/fdinfo"] = ["0", "1", "2", "3", "4"]
        all.files["/proc/100/fdinfo/4"] = k.files["/proc/100/fdinfo/4"]
        let complete = self.survey(all).locks(heldBy: [100], procLocks: [entry("1: POSIX  ADVISORY  WRITE 100 08:01:42 0 EOF")])
        #expect(complete.first?.lock.openElsewhere == false, "read within the budget: the lock as its descriptor shows it")
    }

    @Test func aWaiterAloneReadsNothing() {
        let k = RecordingKernel()
        let waiter = entry("1: -> FLOCK  ADVISORY  WRITE 100 08:01:42 0 EOF")
        #expect(waiter.waiting)
        #expect(survey(k).locks(heldBy: [100], procLocks: [waiter]).isEmpty)
        #expect(!readsDescriptors(k))
    }

    /// Whether flocks' takers live is checked at most `aliveChecks` times (a `stat` each, on
    /// the loop's thread): past that the answer is unknown, and the survey's thread decides.
    @Test func tellingWhetherFlocksTakersLiveStopsAtItsBound() {
        let k = RecordingKernel()
        let pids: [Int32] = Array(500..<510)
        for pid in pids {
            k.statuses["/proc/\(pid)"] = FileStatus(
                kind: .directory, permissions: 0o555, owner: 0, group: 0, size: 0, identity: FileIdentity(device: 0, inode: UInt64(pid)))
        }
        let flocks = pids.map { flock(pid: $0) }
        #expect(survey(k).mayHoldLocks([100], procLocks: flocks, aliveChecks: 10) == false)
        k.clearCalls()
        #expect(survey(k).mayHoldLocks([100], procLocks: flocks, aliveChecks: 9) == nil)
        #expect(k.calls.count == 9, "\(k.calls)")
        #expect(survey(k).mayHoldLocks([100], procLocks: flocks + [flock(pid: 100)], aliveChecks: 10) == true)
    }
}
