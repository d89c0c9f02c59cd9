import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel
import Testing

@testable import SupervisorShell

#if canImport(Glibc)
import Glibc
#endif

/// The survey of a stopped extension's descriptors runs on a thread of its own: the loop serves
/// while it reads, the stop is confirmed when it returns, and a survey that returns after its
/// suspension ended confirms nothing.
extension DaemonOnRecordingKernelTests {
    /// The file the widget's one descriptor locks.
    static let lockedFile = "/data/widget.sqlite"

    /// /proc/locks shows a POSIX write lock of the leader, and its descriptor 3 holds it.
    func scriptALockOfTheLeader() throws {
        let k = kernel
        let line = "1: POSIX  ADVISORY  WRITE \(Self.leader) 08:01:42 0 EOF\n"
        k.descriptors[try #require(k.opened["/proc/locks"])] = line
        k.directories["/proc/\(Self.leader)/fdinfo"] = ["3"]
        k.files["/proc/\(Self.leader)/fdinfo/3"] = "pos:\t0\nflags:\t02\nmnt_id:\t42\nlock:\t\(line)"
        k.files["/proc/\(Self.leader)/mountinfo"] = "42 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        k.links["/proc/\(Self.leader)/fd/3"] = Self.lockedFile
    }

    /// A host connected, the widget begun and ready: the host, its watch, the extension's end of
    /// its runtime channel, and the open request. The caller closes the sockets.
    func begunWidget() throws -> (host: PacketSocket, watch: Int32, runtime: PacketSocket, requestID: UInt64) {
        let listenerFD = try #require(kernel.watches.first { !$0.cancelled }?.fd)
        let (host, connectionFD) = try connectClient()
        let (runtime, requestID) = try beginReady(host: host, watch: connectionFD, otherWatches: [listenerFD])
        return (host, connectionFD, runtime, requestID)
    }

    /// Begins the widget for `host` (whose connection is watched on `watch`; `otherWatches` are
    /// the other descriptors watched) and makes its runtime ready: the extension's end of its
    /// runtime channel and the delivered request. The streams are closed.
    func beginReady(host: PacketSocket, watch: Int32, otherWatches: [Int32]) throws -> (runtime: PacketSocket, requestID: UInt64) {
        let k = kernel
        try send(.begin(tag: 1, extensionID: Self.id), on: host)
        #expect(k.fire(fd: watch))
        let runtime = try #require(k.runtimeChannels[Self.leader])
        try runtime.setNonBlocking()
        let taken = [Self.leaderPidfd, watch] + otherWatches
        let channelFD = try #require(k.watches.last { !$0.cancelled && !taken.contains($0.fd) }?.fd)
        try send(.ready, on: runtime)
        #expect(k.fire(fd: channelFD))
        let delivered = try messages(on: runtime)
        let deliveredRequest: UInt64? = if case .deliver(let id)? = delivered.first?.0 { id } else { nil }
        let requestID = try #require(deliveredRequest, "no deliver: \(delivered.map(\.0))")
        for (_, fd) in delivered { if let fd { close(fd) } }
        for (_, fd) in try messages(on: host) { if let fd { close(fd) } }
        return (runtime, requestID)
    }

    /// Runs `body` with a host connected and the widget begun and ready (`begunWidget`), then
    /// closes the sockets and ends the daemon.
    func withBegunWidget(_ body: (_ host: PacketSocket, _ watch: Int32, _ runtime: PacketSocket, _ requestID: UInt64) throws -> Void) throws {
        defer { tearDown() }
        let (host, watch, runtime, requestID) = try begunWidget()
        defer {
            host.close()
            runtime.close()
        }
        try body(host, watch, runtime, requestID)
    }

    /// Ends request `requestID` (tag `tag`): the SIGSTOP goes out and the stop is in flight.
    func dismiss(_ requestID: UInt64, tag: UInt32, host: PacketSocket, watch: Int32) throws {
        try send(.end(tag: tag, requestID: requestID), on: host)
        #expect(kernel.fire(fd: watch))
        #expect(try messages(on: host).map(\.0) == [.ok(tag: tag)])
        #expect(daemon.core.records[Self.id]?.phase == .stopping(wasExpiring: false))
    }

    /// The kernel reports the leader's stop (SIGCHLD, then `waitid` on its pidfd).
    func reportTheLeadersStop() {
        kernel.stopped.insert(Self.leaderPidfd)
        kernel.raise(SignalNumber.child, sender: Self.leader, code: childStoppedCode)
    }

    var readsTheLeadersDescriptors: Bool { kernel.calls.contains(.listDirectory("/proc/\(Self.leader)/fdinfo")) }

    /// Dismisses the widget that holds a lock (`scriptALockOfTheLeader`): its stop reported, the
    /// read of /proc/locks returned, and the survey of its descriptors under way.
    func stopWithItsSurveyUnderWay(_ requestID: UInt64, tag: UInt32, host: PacketSocket, watch: Int32) throws {
        try dismiss(requestID, tag: tag, host: host, watch: watch)
        reportTheLeadersStop()
        kernel.finishBackgroundWork()
        kernel.advance(to: kernel.clock)  // the survey starts on the loop's next turn
    }

    /// Begins a request on the widget again (tag `tag`): it is resumed, and the new request is
    /// delivered. Returns the request's id.
    func beginAgain(tag: UInt32, host: PacketSocket, watch: Int32, runtime: PacketSocket) throws -> UInt64 {
        kernel.stopped.remove(Self.leaderPidfd)
        try send(.begin(tag: tag, extensionID: Self.id), on: host)
        #expect(kernel.fire(fd: watch))
        let delivered = try messages(on: runtime).last?.0
        let requestID: UInt64? = if case .deliver(let id)? = delivered { id } else { nil }
        for (_, fd) in try messages(on: host) { if let fd { close(fd) } }
        return try #require(requestID, "no deliver: \(String(describing: delivered))")
    }

    @Test func theDescriptorsOfAStopThatMayHoldALockAreSurveyedOffTheLoop() throws {
        let k = kernel
        try withBegunWidget { host, watch, runtime, requestID in
            try scriptALockOfTheLeader()
            k.identities["/proc/\(Self.leader)/fd/3"] = FileIdentity(device: 0x801, inode: 42)
            try dismiss(requestID, tag: 2, host: host, watch: watch)
            k.clearCalls()
            reportTheLeadersStop()
            #expect(k.calls.contains(.inBackground), "/proc/locks, read after a quiet spell: \(k.calls)")
            k.finishBackgroundWork()
            k.advance(to: k.clock)  // the survey starts on the loop's next turn
            #expect(k.backgroundWork.count == 1, "the survey of the descriptors: \(k.calls)")
            #expect(!readsTheLeadersDescriptors, "the loop read the descriptors itself: \(k.calls)")
            #expect(daemon.core.records[Self.id]?.phase == .stopping(wasExpiring: false), "confirmed before its survey returned")

            // The loop serves while the survey runs.
            try send(.prewarm(tag: 20, extensionIDs: []), on: host)
            #expect(k.fire(fd: watch))
            #expect(try messages(on: host).map(\.0) == [.ok(tag: 20)])

            k.finishBackgroundWork()
            #expect(readsTheLeadersDescriptors, "\(k.calls)")
            #expect(daemon.core.records[Self.id]?.state == .suspended)
            #expect(k.calls.contains(.watchOpens(["/proc/\(Self.leader)/fd/3"])), "the locked file is watched for opens: \(k.calls)")
            // By the survey, before it looked at other processes' descriptors (the file has an
            // identity, so the exclusive lock's file is looked for): no open falls between the
            // two.
            let watched = try #require(k.calls.firstIndex(of: .watchOpens(["/proc/\(Self.leader)/fd/3"])))
            let others = try #require(k.calls.firstIndex(of: .listDirectory("/proc")), "the exclusive lock's file is looked for elsewhere: \(k.calls)")
            #expect(watched < others, "\(k.calls)")
            let inotify = try #require(k.inotifyDescriptors.last)
            #expect(k.watches.contains { $0.fd == inotify && !$0.cancelled }, "the loop watches the survey's inotify descriptor")
        }
    }

    /// A lock on a file of a network file system (here NFS) is not watched for opens (the
    /// watch's permission check could wait for the server): the group is checked for waiters
    /// instead, and the check reads /proc/locks on another thread.
    @Test func aLockOnAFileOfANetworkFileSystemIsCheckedForWaitersNotWatched() throws {
        let k = kernel
        try withBegunWidget { host, watch, runtime, requestID in
            try scriptALockOfTheLeader()
            k.files["/proc/\(Self.leader)/mountinfo"] = "42 1 0:61 / /data rw,relatime shared:1 - nfs4 server:/export rw,vers=4.2\n"
            try stopWithItsSurveyUnderWay(requestID, tag: 2, host: host, watch: watch)
            k.finishBackgroundWork()
            #expect(daemon.core.records[Self.id]?.state == .suspended)
            #expect(!k.calls.contains { if case .watchOpens = $0 { true } else { false } }, "a file on NFS is watched for opens: \(k.calls)")
            k.files["/proc/locks"] = """
                1: POSIX  ADVISORY  WRITE \(Self.leader) 08:01:42 0 EOF
                1: -> POSIX  ADVISORY  WRITE 4321 08:01:42 0 EOF

                """
            k.clearCalls()
            k.advance(to: k.clock.adding(seconds: WaiterChecks.checkSeconds))
            #expect(k.calls == [.inBackground], "the check for waiters, off the loop: \(k.calls)")
            k.finishBackgroundWork()
            let events = daemon.core.records[Self.id]?.recentEvents.map(\.kind) ?? []
            #expect(events.contains(.lockHeldWhileSuspended), "the waiter found by the check is contention: \(events)")
        }
    }

    /// A stop whose members hold no lock /proc/locks shows is confirmed without a survey: nothing
    /// goes to another thread.
    @Test func aStopThatHoldsNoLockIsConfirmedWithoutASurvey() throws {
        let k = kernel
        try withBegunWidget { host, watch, runtime, requestID in
            k.descriptors[try #require(k.opened["/proc/locks"])] = "1: POSIX  ADVISORY  WRITE 99 08:01:42 0 EOF\n"
            try dismiss(requestID, tag: 2, host: host, watch: watch)
            k.clearCalls()
            reportTheLeadersStop()
            k.finishBackgroundWork()
            #expect(k.backgroundWork.isEmpty, "a survey started: \(k.calls)")
            #expect(!readsTheLeadersDescriptors)
            #expect(daemon.core.records[Self.id]?.state == .suspended)
        }
    }

    /// The survey of a stop returns after the extension was resumed and dismissed again, before
    /// the kernel reported the second stop: it must not confirm that one, whose processes may
    /// still run. The second stop is confirmed by its own survey.
    @Test func aSurveyThatReturnsAfterItsSuspensionEndedConfirmsNothing() throws {
        let k = kernel
        try withBegunWidget { host, watch, runtime, requestID in
            try scriptALockOfTheLeader()
            try stopWithItsSurveyUnderWay(requestID, tag: 2, host: host, watch: watch)
            #expect(k.backgroundWork.count == 1, "the first stop's survey is under way")

            // Begun again: resumed at once, the survey still under way.
            let second = try beginAgain(tag: 3, host: host, watch: watch, runtime: runtime)
            #expect(k.calls.contains(.kill(Self.leader, SignalNumber.cont)) || k.calls.contains(.kill(-Self.leader, SignalNumber.cont)), "\(k.calls)")
            #expect(daemon.core.records[Self.id]?.state == .active)

            // Dismissed again; its stop is not reported yet when the first survey returns.
            try dismiss(second, tag: 4, host: host, watch: watch)
            k.clearCalls()
            k.finishBackgroundWork()
            #expect(daemon.core.records[Self.id]?.phase == .stopping(wasExpiring: false), "a survey of the suspension before confirmed this one")
            let dropped = try #require(k.inotifyDescriptors.last, "the survey made no watch")
            #expect(k.calls.contains(.close(dropped)), "the watch the dropped survey made is closed: \(k.calls)")
            #expect(!k.watches.contains { $0.fd == dropped && !$0.cancelled }, "a watch installed for a running group: \(k.calls)")

            // Its own stop and survey confirm it.
            reportTheLeadersStop()
            k.finishBackgroundWork()
            k.advance(to: k.clock)  // the survey starts on the loop's next turn
            k.finishBackgroundWork()
            #expect(daemon.core.records[Self.id]?.state == .suspended)
        }
    }

    /// A re-exec asked while a survey is under way waits for it, then goes ahead: the stop it
    /// confirms is in flight until then, and a hand-over with a stop in flight is refused.
    @Test func aReexecWaitsForASurveyUnderWay() throws {
        let k = kernel
        try withBegunWidget { host, watch, runtime, requestID in
            try scriptALockOfTheLeader()
            try stopWithItsSurveyUnderWay(requestID, tag: 2, host: host, watch: watch)
            #expect(k.backgroundWork.count == 1, "the survey is under way")
            daemon.requestReexec(from: nil)
            k.advance(to: k.clock.adding(seconds: 0.05))
            #expect(daemon.extensions.isBusy, "the survey under way does not hold the re-exec back")
            #expect(k.executions.isEmpty)
            k.finishBackgroundWork()
            #expect(daemon.core.records[Self.id]?.state == .suspended)
            #expect(!daemon.extensions.isBusy)
            k.clearCalls()
            k.advance(to: k.clock.adding(seconds: 0.1))
            #expect(
                k.executions.count == 1,
                "the re-exec went ahead once the survey returned (server busy: \(daemon.server.isBusy), extensions busy: \(daemon.extensions.isBusy), pending: \(daemon.reexecution.isPending)): \(k.calls)"
            )
        }
    }

    /// The survey of an earlier stop returns after the extension was resumed, dismissed again
    /// and its second stop confirmed by the kernel, while that stop's own survey is still under
    /// way: it must not confirm the second stop (`GroupControl.suspensions` tells them apart,
    /// since the group is stopped again). The second survey confirms it.
    @Test func theSurveyOfAnEarlierStopDoesNotConfirmALaterOne() throws {
        let k = kernel
        try withBegunWidget { host, watch, runtime, requestID in
            try scriptALockOfTheLeader()
            try stopWithItsSurveyUnderWay(requestID, tag: 2, host: host, watch: watch)
            #expect(k.backgroundWork.count == 1, "the first stop's survey is under way")

            let second = try beginAgain(tag: 3, host: host, watch: watch, runtime: runtime)
            try dismiss(second, tag: 4, host: host, watch: watch)
            reportTheLeadersStop()  // /proc/locks was read just before: read again on the loop
            k.advance(to: k.clock)
            #expect(k.backgroundWork.count == 2, "the second stop's survey is under way too")

            k.backgroundWork.removeFirst()()  // the first survey returns
            #expect(daemon.core.records[Self.id]?.phase == .stopping(wasExpiring: false), "confirmed by the survey of the stop before")
            k.finishBackgroundWork()
            #expect(daemon.core.records[Self.id]?.state == .suspended)
        }
    }

    /// A large /proc/locks (many locks on the system) is read and parsed on another thread even
    /// right after another read: the kernel makes its text at each read, and parsing it takes
    /// time in proportion.
    @Test func aLargeProcLocksIsReadOffTheLoopEvenRightAfterAnotherRead() throws {
        let k = kernel
        try withBegunWidget { host, watch, runtime, requestID in
            // 1,000 locks of another process: about 45 KB.
            k.descriptors[try #require(k.opened["/proc/locks"])] = (1...1000).map { "\($0): POSIX  ADVISORY  WRITE 99 08:01:\($0) 0 EOF\n" }.joined()
            try dismiss(requestID, tag: 2, host: host, watch: watch)
            reportTheLeadersStop()
            k.finishBackgroundWork()
            #expect(daemon.core.records[Self.id]?.state == .suspended)

            let second = try beginAgain(tag: 3, host: host, watch: watch, runtime: runtime)
            // Dismissed 5 ms later: within `warmSeconds` of the last read, but that read was large.
            k.advance(to: k.clock.adding(seconds: 0.005))
            try dismiss(second, tag: 4, host: host, watch: watch)
            k.clearCalls()
            reportTheLeadersStop()
            #expect(k.calls.contains(.inBackground), "\(k.calls)")
            #expect(!k.calls.contains { if case .readFD = $0 { true } else { false } }, "read on the loop: \(k.calls)")
            #expect(daemon.core.records[Self.id]?.phase == .stopping(wasExpiring: false))
            k.finishBackgroundWork()
            #expect(daemon.core.records[Self.id]?.state == .suspended)
        }
    }

    /// A suspended group holding a shared flock through a descriptor none of its processes has
    /// open is checked for waiters every second: each check reads /proc/locks on another
    /// thread, and a waiter it finds is contention.
    @Test func theCheckForWaitersReadsProcLocksOffTheLoop() throws {
        let k = kernel
        try withBegunWidget { host, watch, runtime, requestID in
            let held = "1: FLOCK  ADVISORY  READ \(Self.leader) 08:01:42 0 EOF\n"
            k.descriptors[try #require(k.opened["/proc/locks"])] = held
            k.directories["/proc/\(Self.leader)/fdinfo"] = []
            try dismiss(requestID, tag: 2, host: host, watch: watch)
            reportTheLeadersStop()
            k.finishBackgroundWork()  // /proc/locks
            k.advance(to: k.clock)  // the survey starts on the loop's next turn
            k.finishBackgroundWork()  // the survey
            #expect(daemon.core.records[Self.id]?.state == .suspended, "a shared lock blocks nobody yet")

            k.files["/proc/locks"] = held + "1: -> FLOCK  ADVISORY  WRITE 999 08:01:42 0 EOF\n"
            k.clearCalls()
            k.advance(to: k.clock.adding(seconds: WaiterChecks.checkSeconds))
            #expect(k.calls.contains(.inBackground), "\(k.calls)")
            #expect(!k.calls.contains(.read("/proc/locks")), "read on the loop: \(k.calls)")
            #expect(daemon.core.records[Self.id]?.state == .suspended)
            k.finishBackgroundWork()
            #expect(k.calls.contains(.read("/proc/locks")))
            #expect(daemon.core.records[Self.id]?.recentEvents.contains { $0.kind == .lockHeldWhileSuspended } == true)
            #expect(daemon.core.records[Self.id]?.state == .terminating, "the default policy ends it")
        }
    }
}
