import Foundation
import Synchronization

/// A pseudo-terminal whose terminal end a program is given as its stdout and stderr, as a
/// shell gives its terminal, open for reading and writing; what the program writes is read
/// from the other end by a thread of its own, so the program never blocks on a full terminal.
final class PseudoTerminal: Sendable {
    /// The terminal end, open for reading and writing, for the program.
    let terminal: FileHandle
    private let controller: Int32
    private let output = Mutex<[UInt8]>([])
    private let arrived = DispatchSemaphore(value: 0)

    init() throws {
        // posix_openpt and its companions are not in the Glibc module; they are these calls.
        let (unlock, number): (UInt, UInt) = (0x4004_5431, 0x8004_5430)  // TIOCSPTLCK, TIOCGPTN
        let controller = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var locked: Int32 = 0
        var index: UInt32 = 0
        guard controller >= 0, ioctl(controller, unlock, &locked) == 0, ioctl(controller, number, &index) == 0 else {
            throw HarnessError("no pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        let fd = open("/dev/pts/\(index)", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { throw HarnessError("cannot open /dev/pts/\(index): \(String(cString: strerror(errno)))") }
        self.controller = controller
        terminal = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        Thread.detachNewThread { [self] in
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(controller, &chunk, chunk.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                output.withLock { $0 += chunk[0..<n] }
                arrived.signal()
            }
            arrived.signal()
        }
    }

    /// What was written to the terminal so far.
    var text: String { output.withLock { String(decoding: $0, as: UTF8.self) } }

    /// Whether `line` has been written to the terminal, waiting at most `timeout` seconds.
    func waitFor(_ line: String, timeout: Double = 10) -> Bool {
        let deadline = DispatchTime.now() + timeout
        while !text.contains(line) {
            if arrived.wait(timeout: deadline) == .timedOut { return text.contains(line) }
        }
        return true
    }

    /// Closes the terminal end here (the program keeps its own); the reader ends when every
    /// program holding it has closed it too.
    func close() { try? terminal.close() }
}
