import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The daemon's link to its transfer worker (`extensiond-transfer`, docs/transfers.md, "The
/// worker"): the process that speaks HTTP and TLS for background transfers, under a uid of its
/// own and the extensions' sandbox but with the host's network, holding no file but the
/// descriptors it is handed. Started at the first message, ended by `stop` (its socket closes:
/// it exits at once). Owned by the daemon's loop thread.
final class TransferWorker {
    /// How the worker is started: its program, and what its spawn request gets.
    struct Launch {
        var program: String
        var credentials: Credentials?
        var sandbox: SandboxPlan?
        var environment: [String]
    }

    private let kernel: any Kernel
    private let logger: Logger
    private let launch: () -> Result<Launch, SystemError>
    /// Each message the worker sends.
    var onMessage: (TransferWorkerMessage) -> Void = { _ in }
    /// The worker ended (or its socket failed): every task it performed is abandoned.
    var onGone: () -> Void = {}

    private struct Running {
        var socket: PacketSocket
        var watch: any Watch
        var pid: Int32
        var pidfd: Int32
        var output: ExtensionOutput?
    }
    private var running: Running?
    private var buffer = [UInt8](repeating: 0, count: 70_000)

    init(kernel: any Kernel, logger: Logger, launch: @escaping () -> Result<Launch, SystemError>) {
        self.kernel = kernel
        self.logger = logger
        self.launch = launch
    }

    /// Whether a worker runs.
    var isRunning: Bool { running != nil }

    /// The worker's pid, if it runs.
    var pid: Int32? { running?.pid }

    /// Sends `message` (with `descriptor`, which stays the caller's), starting the worker first
    /// if none runs.
    func send(_ message: TransferWorkerMessage, descriptor: Int32? = nil) -> SystemError? {
        if running == nil, let e = start() { return e }
        guard let r = running else { return .notSupported }
        let failure: SystemError
        do {
            if try r.socket.send(message.encoded, descriptor: descriptor) == .sent { return nil }
            failure = SystemError("the transfer worker reads nothing (its socket is full)", errno: 0)
        } catch {
            failure = error
        }
        // A message that did not go leaves the worker behind: it is ended, and every attempt it
        // had is tried again, on the next turn of the loop (not inside the caller's).
        logger.warning("cannot write to the transfer worker: \(failure); ending it")
        end()
        if case .failure(let e) = kernel.addTimer(at: kernel.now(), { [unowned self] in onGone() }) {
            logger.error("cannot arm a timer: \(e); the worker's attempts are tried again at the next event")
        }
        return failure
    }

    /// Ends the worker: its socket closes, and it exits at once (its transfers are abandoned).
    func stop() {
        guard running != nil else { return }
        logger.info("the transfer worker is no longer needed: stopping it")
        end()
    }

    private func start() -> SystemError? {
        let how: Launch
        switch launch() {
        case .success(let l): how = l
        case .failure(let e): return e
        }
        let pair: (PacketSocket, PacketSocket)
        do { pair = try PacketSocket.pair() } catch { return error }
        let ours = pair.0, its = pair.1
        do { try ours.setNonBlocking() } catch {
            ours.close(); its.close()
            return error
        }
        var output: (read: Int32, write: Int32)?
        if case .success(let pipe) = kernel.outputPipe() { output = pipe }
        var request = SpawnRequest(
            path: how.program, arguments: [], environment: how.environment, directory: "/", channelFD: its.fd, cgroupFD: nil,
            credentials: how.credentials, sandbox: how.sandbox, outputFD: output?.write)
        request.resourceLimits = [ResourceLimit(resource: .openFiles, value: 1024)]
        let spawned = kernel.spawn(request)
        its.close()
        if let output { kernel.close(output.write) }
        let child: (pid: Int32, pidfd: Int32)
        switch spawned {
        case .success(let c): child = c
        case .failure(let e):
            ours.close()
            if let output { kernel.close(output.read) }
            return SystemError("cannot start the transfer worker \(how.program): \(e)", errno: 0)
        }
        let watch: any Watch
        switch kernel.watch(fd: ours.fd, events: Poll.input, { [unowned self] _ in readAvailable() }) {
        case .success(let w): watch = w
        case .failure(let e):
            ours.close()
            _ = kernel.signal(pidfd: child.pidfd, SignalNumber.kill)
            _ = kernel.exitStatus(pidfd: child.pidfd, reap: true)
            kernel.close(child.pidfd)
            if let output { kernel.close(output.read) }
            return e
        }
        var relay: ExtensionOutput?
        if let output {
            relay = ExtensionOutput(extensionID: "extensiond-transfer", fd: output.read, kernel: kernel, logger: logger)
            if relay?.start() != nil {
                kernel.close(output.read)
                relay = nil
            }
        }
        running = Running(socket: ours, watch: watch, pid: child.pid, pidfd: child.pidfd, output: relay)
        logger.info("the transfer worker runs: \(how.program), pid \(child.pid)\(how.credentials.map { ", uid \($0.uid)" } ?? "")")
        return nil
    }

    private func readAvailable() {
        while let r = running {
            let result: PacketSocket.ReceiveResult
            do {
                result = try buffer.withUnsafeMutableBytes { try r.socket.receive(into: $0) }
            } catch {
                logger.warning("cannot read from the transfer worker: \(error)")
                return gone()
            }
            switch result {
            case .wouldBlock: return
            case .closed: return gone()
            case .datagram(let count, let descriptor, _):
                if let descriptor { kernel.close(descriptor) }
                guard let message = TransferWorkerMessage.decode(Array(buffer[0..<count])) else {
                    logger.error("the transfer worker sent a malformed message: ending it")
                    return gone()
                }
                onMessage(message)
            }
        }
    }

    private func gone() {
        guard running != nil else { return }
        end()
        logger.warning("the transfer worker ended: its transfers are resumed by a new one")
        onGone()
    }

    private func end() {
        guard let r = running else { return }
        running = nil
        r.watch.cancel()
        r.socket.close()
        // It exits when its socket closes; a worker that does not is killed.
        if !kernel.waitReadable(fd: r.pidfd, seconds: 1).isTrue { _ = kernel.signal(pidfd: r.pidfd, SignalNumber.kill) }
        _ = kernel.exitStatus(pidfd: r.pidfd, reap: true)
        kernel.close(r.pidfd)
        r.output?.finish()
    }
}

extension Result where Success == Bool {
    /// Whether this is `.success(true)`.
    fileprivate var isTrue: Bool { if case .success(true) = self { true } else { false } }
}
