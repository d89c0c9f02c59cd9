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

    func survey(_ k: RecordingKernel) -> LockSurvey { LockSurvey(kernel: k, ownPID: 1, containersRoot: nil) }

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

    @Test func aWaiterAloneReadsNothing() {
        let k = RecordingKernel()
        let waiter = entry("1: -> FLOCK  ADVISORY  WRITE 100 08:01:42 0 EOF")
        #expect(waiter.waiting)
        #expect(survey(k).locks(heldBy: [100], procLocks: [waiter]).isEmpty)
        #expect(!readsDescriptors(k))
    }
}
