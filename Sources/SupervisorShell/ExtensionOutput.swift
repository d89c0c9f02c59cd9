import ExtensionProtocol
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
/// again. The loop wakes only when the extension writes. Owned by the daemon's loop thread.
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
        guard watch != nil else { return }
        switch kernel.readSome(fd: fd, limit: Self.readLimit) {
        case .success(let bytes?): take(bytes)
        case .success(nil): finish()
        case .failure(let e):
            logger.warning("cannot read the output of \(extensionID): \(e)", metadata: ["EXTENSION_ID": "\(extensionID)"])
            finish()
        }
    }

    /// Logs what is still in the pipe and the last partial line, and closes the read end.
    func finish() {
        guard let w = watch else { return }
        while case .success(let bytes?) = kernel.readSome(fd: fd, limit: Self.readLimit), !bytes.isEmpty { take(bytes) }
        if !partial.isEmpty { emit(partial) }
        partial = []
        reportDropped()
        w.cancel()
        watch = nil
        kernel.close(fd)
    }

    /// Says how many lines were not logged, if any.
    private func reportDropped() {
        guard dropped > 0 else { return }
        logger.warning(
            "\(extensionID): \(dropped) line(s) of its output not logged (more than \(Int(MessageRate.outputLinesPerSecond)) a second)",
            metadata: ["EXTENSION_ID": "\(extensionID)", "EXTENSION_OUTPUT": "1"])
        dropped = 0
    }

    /// Appends `bytes` to the partial line, logging each line it completes and each
    /// `lineLimit` bytes without a newline.
    private func take(_ bytes: [UInt8]) {
        var rest = bytes[...]
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
        let metadata: Logger.Metadata = ["EXTENSION_ID": "\(extensionID)", "EXTENSION_OUTPUT": "1"]
        let text = UntrustedText.escaped(String(decoding: line, as: UTF8.self))
        // Kept whatever the log's rate: memory bounded per extension, no journal write.
        history?.append(extensionID, text)
        guard rate.admit(at: kernel.now()) else {
            if dropped == 0 {
                logger.warning(
                    "\(extensionID): its output is over \(Int(MessageRate.outputLinesPerSecond)) lines a second; lines are not logged until it slows down",
                    metadata: metadata)
            }
            dropped += 1
            return
        }
        reportDropped()
        logger.info("\(extensionID): \(text)", metadata: metadata)
    }
}
