import ExtensionProtocol
import ExtensionStatus
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// One extension's stdout and stderr: a pipe of its own, which its processes write and the
/// daemon reads on its loop. Nothing an extension does to its output reaches the daemon's log
/// stream or another extension's output: it holds only the write end of its own pipe (not the
/// daemon's stderr, a file or the journal's stream, which it could read, truncate or shut down).
///
/// Each line received becomes one log entry of the daemon, at `info`, with `EXTENSION_ID` (the
/// journal's field; `ID: ` before the line on the console) and every control character escaped
/// (`UntrustedText`). A line longer than `lineLimit` bytes is cut there; a partial line is kept
/// until its end comes, the pipe closes or the process is torn down. At most
/// `MessageRate.outputLinesPerSecond` lines a second are logged, in bursts of
/// `outputLineBurst`; what goes beyond is counted and said in one line once lines are admitted
/// again. What a flood costs the loop is bounded: of one read only the newest `linesPerRead`
/// lines are handled, and after a read over the rate the pipe is not read for `pauseSeconds`
/// (the extension's writes wait). The loop wakes only when the extension writes. Owned by the
/// daemon's loop thread.
final class ExtensionOutput {
    /// The longest line logged; longer ones are cut into pieces of this size.
    static let lineLimit = 4096
    /// The most bytes read at one wake-up.
    static let readLimit = 65536

    let extensionID: String
    /// The read end (non-blocking, close-on-exec), carried across a re-exec.
    let fd: Int32
    private let kernel: any Kernel
    private let logger: Logger
    private var watch: (any Watch)?
    private var partial: [UInt8] = []
    private var rate = MessageRate(perSecond: MessageRate.outputLinesPerSecond, burst: MessageRate.outputLineBurst)
    private var dropped = 0
    /// Whether the read being handled had lines over the rate.
    private var overRate = false
    /// While reading pauses (the output went over the rate): the timer that resumes it.
    private var resume: (any Cancellable)?

    /// How long reading pauses after a read with lines over the rate. Meanwhile the pipe fills
    /// and the extension's writes wait, so a flood costs the loop about ten reads a second,
    /// not a core: a pipe's 64 KiB per pause is still far more than is logged.
    static let pauseSeconds = 0.1
    /// Where each line is kept too, for `extctl logs` (nil: only logged).
    private let history: OutputHistory?

    init(extensionID: String, fd: Int32, kernel: any Kernel, logger: Logger, history: OutputHistory? = nil) {
        self.history = history
        self.extensionID = extensionID
        self.fd = fd
        self.kernel = kernel
        self.logger = logger
    }

    /// The read end while it is open (nil once the pipe has closed and it was let go).
    var openFD: Int32? { watch == nil ? nil : fd }

    /// Starts reading on the loop. Fails when the loop cannot watch the pipe (its output is
    /// then not read, and the extension blocks once the pipe is full).
    func start() -> SystemError? {
        switch kernel.watch(fd: fd, events: Poll.input, { [unowned self] _ in readAvailable() }) {
        case .success(let w):
            watch = w
            return nil
        case .failure(let e): return e
        }
    }

    /// Reads what is waiting (up to `readLimit` bytes) and logs its complete lines; at end of
    /// file, the last partial line too, and the pipe is closed.
    func readAvailable() {
        guard let watch else { return }
        // Paused, only a hang-up or an error wakes it (no input is watched): read on.
        if let resume {
            resume.cancel()
            self.resume = nil
            _ = watch.setEvents(Poll.input)
        }
        switch kernel.readSome(fd: fd, limit: Self.readLimit) {
        case .success(let bytes?):
            overRate = false
            take(bytes)
            if overRate { pause(watch) }
        case .success(nil): finish()
        case .failure(let e):
            logger.warning("cannot read the output of \(extensionID): \(e)", metadata: ["EXTENSION_ID": "\(extensionID)"])
            finish()
        }
    }

    /// Stops watching for input for `pauseSeconds`; reads on at once if that cannot be done.
    private func pause(_ watch: any Watch) {
        guard resume == nil, watch.setEvents(0) == nil else { return }
        if !armResume() { _ = watch.setEvents(Poll.input) }
    }

    /// Arms the timer that watches for input again after `pauseSeconds`; false if it cannot be.
    private func armResume() -> Bool {
        guard case .success(let timer) = kernel.addTimer(at: kernel.now().adding(seconds: Self.pauseSeconds), { [unowned self] in timerResumes() })
        else { return false }
        resume = timer
        return true
    }

    private func timerResumes() {
        resume = nil
        guard let watch, watch.setEvents(Poll.input) != nil else { return }
        // The loop refused the change (it watches nothing meanwhile): tried again after
        // another pause, rather than leaving the extension blocked on a full pipe for good.
        _ = armResume()
    }

    /// The most bytes read at a teardown: a pipe's largest capacity (`/proc/sys/fs/pipe-max-size`
    /// by default, which an extension may set its pipe to).
    static let teardownReadLimit = 1024 * 1024

    /// Logs what is still in the pipe (at most `teardownReadLimit` bytes: a writer that keeps
    /// the pipe full, a process outside the extension's cgroup holding the write end, cannot
    /// keep the loop reading; of them the newest lines, as of any read) and the last partial
    /// line, and closes the read end.
    func finish() {
        guard let w = watch else { return }
        resume?.cancel()
        resume = nil
        var left: [UInt8] = []
        while left.count < Self.teardownReadLimit,
            case .success(let bytes?) = kernel.readSome(fd: fd, limit: min(Self.readLimit, Self.teardownReadLimit - left.count)), !bytes.isEmpty
        {
            left += bytes
        }
        if !left.isEmpty { take(left) }
        if !partial.isEmpty { emit(partial) }
        partial = []
        reportDropped()
        w.cancel()
        watch = nil
        kernel.close(fd)
    }

    /// The read end is about to cross a re-exec (only the descriptor does): says now how many
    /// lines were not logged.
    func handingOver() { reportDropped() }

    /// Says how many lines were not logged, if any.
    private func reportDropped() {
        guard dropped > 0 else { return }
        logger.warning(
            "\(extensionID): \(dropped) line(s) of its output not logged (more than \(Int(MessageRate.outputLinesPerSecond)) a second)",
            metadata: ["EXTENSION_ID": "\(extensionID)", "EXTENSION_OUTPUT": "1"])
        dropped = 0
    }

    /// The most complete lines of one read handled one by one: the newest ones, as many as the
    /// rate's burst lets through. The lines before them in the same read are counted as not
    /// logged, without a look at their text, so that a writer of empty lines (64 Ki of them in
    /// a read) costs the loop a scan of the read, not 64 Ki log entries.
    static let linesPerRead = Int(MessageRate.outputLineBurst)

    /// Appends `bytes` to the partial line, logging each line it completes and each
    /// `lineLimit` bytes without a newline; of a read with more than `linesPerRead` complete
    /// lines, only the newest `linesPerRead`.
    private func take(_ bytes: [UInt8]) {
        var rest = bytes[...]
        let lines = bytes.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 }
        if lines > Self.linesPerRead {
            var skipped = 0
            while skipped < lines - Self.linesPerRead, let newline = rest.firstIndex(of: 0x0A) {
                rest = rest[(newline + 1)...]
                skipped += 1
            }
            partial = []
            notLogged(skipped)
        }
        while !rest.isEmpty {
            let window = rest.prefix(Self.lineLimit - partial.count)
            if let newline = window.firstIndex(of: 0x0A) {
                partial += rest[rest.startIndex..<newline]
                emit(partial)
                partial = []
                rest = rest[(newline + 1)...]
            } else {
                partial += window
                rest = rest.dropFirst(window.count)
                if partial.count == Self.lineLimit {
                    emit(partial)
                    partial = []
                }
            }
        }
    }

    private func emit(_ line: [UInt8]) {
        let text = UntrustedText.escaped(String(decoding: line, as: UTF8.self))
        // Kept whatever the log's rate: memory bounded per extension, no journal write.
        history?.append(extensionID, text)
        guard rate.admit(at: kernel.now()) else { return notLogged(1) }
        reportDropped()
        logger.info("\(extensionID): \(text)", metadata: ["EXTENSION_ID": "\(extensionID)", "EXTENSION_OUTPUT": "1"])
    }

    /// Counts `count` lines not logged, saying so at the first.
    private func notLogged(_ count: Int) {
        overRate = true
        if dropped == 0 {
            logger.warning(
                "\(extensionID): its output is over \(Int(MessageRate.outputLinesPerSecond)) lines a second; lines are not logged until it slows down",
                metadata: ["EXTENSION_ID": "\(extensionID)", "EXTENSION_OUTPUT": "1"])
        }
        dropped += count
    }
}
