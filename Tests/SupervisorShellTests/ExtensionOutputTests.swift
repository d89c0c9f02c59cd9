import ExtensionStatus
import ExtensionTransport
import Glibc
import Logging
import SupervisorKernel
import Testing

@testable import SupervisorShell

/// How the daemon reads an extension's output pipe (`ExtensionOutput`), through the recording
/// kernel: a flood of lines costs the loop a bounded amount of work per read, reading pauses
/// while the output is over its rate, and a teardown reads once.
struct ExtensionOutputTests {
    static let id = "org.example.chatty"
    static let fd: Int32 = 30

    /// An output read on a recording kernel, keeping its lines in a history of its own.
    func started() throws -> (RecordingKernel, OutputHistory, ExtensionOutput) {
        let k = RecordingKernel()
        let history = OutputHistory(wallClock: { 1_000 })
        let output = ExtensionOutput(extensionID: Self.id, fd: Self.fd, kernel: k, logger: Logger(label: "test"), history: history)
        try #require(output.start() == nil)
        return (k, history, output)
    }

    /// `count` lines `prefix0` … as the bytes of one read.
    static func lines(_ count: Int, from first: Int = 0, prefix: String = "l") -> [UInt8] {
        Array((first..<(first + count)).map { "\(prefix)\($0)\n" }.joined().utf8)
    }

    func events(_ k: RecordingKernel) -> [UInt32] {
        k.calls.compactMap { if case .setEvents(fd: Self.fd, let events) = $0 { events } else { nil } }
    }

    @Test func ofAReadOfManyLinesOnlyTheNewestAreHandled() throws {
        let (k, history, output) = try started()
        k.reads[Self.fd] = [Self.lines(5_000)]
        k.fire(fd: Self.fd)
        #expect(output.openFD == Self.fd)
        #expect(ExtensionOutput.linesPerRead == 1_000, "the burst")
        let kept = history.log(Self.id).lines.map(\.text)
        #expect(kept.count == OutputLog.kept)
        #expect(kept.first == "l\(5_000 - OutputLog.kept)" && kept.last == "l4999", "the newest, in order")
    }

    @Test func overItsRateReadingPausesThenResumes() throws {
        let (k, history, output) = try started()
        // Five reads of 200 lines: the burst (1,000) is spent, nothing is over it yet.
        for i in 0..<5 {
            k.reads[Self.fd] = [Self.lines(200, from: i * 200)]
            k.fire(fd: Self.fd)
        }
        #expect(events(k).isEmpty, "within the burst: read on")
        k.reads[Self.fd] = [Self.lines(200, from: 1_000)]
        k.fire(fd: Self.fd)
        #expect(events(k) == [0], "over the rate: no input watched")
        #expect(history.log(Self.id).lines.last?.text == "l1199", "what was read is still kept")
        k.advance(to: k.clock.adding(seconds: ExtensionOutput.pauseSeconds))
        #expect(events(k) == [0, Poll.input], "read again after the pause")
        #expect(output.openFD == Self.fd)
    }

    @Test func aHangUpWhilePausedIsReadAtOnce() throws {
        let (k, history, output) = try started()
        k.reads[Self.fd] = [Self.lines(1_100), Array("last words\n".utf8), nil]
        k.fire(fd: Self.fd)
        #expect(events(k) == [0], "900 lines not even looked at: over the rate")
        k.fire(fd: Self.fd, events: 0x010)  // EPOLLHUP: watched whatever the events
        // The pause ends; the burst was spent, so that line is over the rate too: paused again.
        #expect(events(k) == [0, Poll.input, 0])
        #expect(history.log(Self.id).lines.last?.text == "last words", "kept all the same")
        k.fire(fd: Self.fd, events: 0x010)
        #expect(output.openFD == nil, "end of file: closed")
        #expect(k.timers.allSatisfy { $0.cancelled }, "no timer left")
    }

    /// A writer that keeps the pipe full (a process outside the extension's cgroup holding the
    /// write end) cannot keep the teardown reading: at most a pipe's largest capacity (1 MiB),
    /// of which the newest lines are kept (an enlarged pipe's last words included), then the
    /// pipe is closed.
    @Test func aTeardownReadsAtMostAPipesLargestCapacity() throws {
        let (k, history, output) = try started()
        let chunk = Array(repeating: UInt8(ascii: "x"), count: 65_535) + [0x0A]
        k.reads[Self.fd] = Array(repeating: chunk, count: 15) + [Array("last words\n".utf8)] + Array(repeating: chunk, count: 40)
        output.finish()
        #expect(k.reads[Self.fd]?.count == 40, "1 MiB read: the rest of the 17th read and 39 more are left")
        #expect(history.log(Self.id).lines.contains { $0.text == "last words" })
        #expect(output.openFD == nil)
        #expect(k.calls.contains(.close(Self.fd)))
    }

    /// A resume the loop refuses is tried again after another pause.
    @Test func aRefusedResumeIsTriedAgain() throws {
        let (k, _, output) = try started()
        k.reads[Self.fd] = [Self.lines(1_100)]
        k.fire(fd: Self.fd)
        #expect(events(k) == [0])
        k.refusedEventChanges = EBUSY
        k.advance(to: k.clock.adding(seconds: ExtensionOutput.pauseSeconds))
        k.refusedEventChanges = nil
        k.advance(to: k.clock.adding(seconds: ExtensionOutput.pauseSeconds))
        #expect(events(k) == [0, Poll.input, Poll.input], "refused once, then watched again")
        #expect(output.openFD == Self.fd)
    }
}
