import ExtensionProtocol
import ExtensionTransport
import SupervisorCore
import SupervisorKernel

/// The private channel between the daemon and each extension's runtime: what the runtime
/// sends becomes core events; what the core sends goes out on it, never blocking.
extension ExtensionProcesses {
    func channelReadable(_ p: SupervisedProcess, events: UInt32) {
        guard let channel = p.channel else { return }
        if let e = channel.flush(events) { return cutOff(p, reason: "channel write failed: \(e)") }
        guard events & (Poll.input | Poll.hangup | Poll.error) != 0 else { return }
        // One batch: the events of the messages read now go to the monitors together.
        var end: Peer.ReadEnd?
        func readMessages() {
            end = channel.read(into: buffers.receive, budget: ExtensionProcesses.readBudget) { message in
                guard p.admitMessage(at: kernel.iterationTime()) else {
                    cutOff(p, reason: "flooding its channel (over \(MessageRate.perSecond) messages per second)")
                    return false
                }
                let (id, g) = (p.extensionID, p.generation)
                switch message {
                case .ready: sink?.post(.ready(extensionID: id, generation: g))
                case .acquire(let tag, let reason): sink?.post(.acquire(extensionID: id, generation: g, tag: tag, reason: reason))
                case .release(let a): sink?.post(.release(extensionID: id, generation: g, assertionID: a))
                case .expireReceived(let a): sink?.post(.expireReceived(extensionID: id, generation: g, assertionID: a))
                case .observe(let name): sink?.post(.observe(extensionID: id, generation: g, name: name))
                case .refreshDone(let r, let answer): sink?.post(.refreshDone(extensionID: id, generation: g, refreshID: r, answer: answer))
                case .complete(let r, let payload):
                    sink?.post(.requestFinished(extensionID: id, generation: g, requestID: r, outcome: .completed(payload)))
                case .cancel(let r, let reason):
                    sink?.post(.requestFinished(extensionID: id, generation: g, requestID: r, outcome: .cancelled(reason)))
                case .openURL, .suiteOpen, .suiteWrite, .secretAdd, .secretCopy, .secretUpdate, .secretDelete, .transferCreate, .transferCancel,
                    .transferClaim, .transferHandled:
                    calls?.call(message, from: p)
                default:
                    cutOff(p, reason: "sent \(message.kind), which extensions may not send")
                    return false
                }
                return true
            }
        }
        if let sink { sink.batch(readMessages) } else { readMessages() }
        switch end {
        case nil: return
        case .closed: channelEnded(p)
        case .failed(let reason), .violation(let reason): cutOff(p, reason: reason)
        }
    }

    /// The runtime closed its channel. If the process does not exit within a short grace
    /// (it usually is exiting), it is ended: it can no longer receive requests.
    private func channelEnded(_ p: SupervisedProcess) {
        p.closeChannel()
        armChannelGrace(p, until: kernel.now().adding(seconds: ExtensionProcesses.channelCloseGraceSeconds))
    }

    /// Ends `p` at `until` unless it has exited by then (its channel is closed).
    func armChannelGrace(_ p: SupervisedProcess, until: Instant) {
        let closed = Event.channelClosed(extensionID: p.extensionID, generation: p.generation, reason: "closed by the extension")
        switch kernel.addTimer(
            at: until,
            { [unowned self, unowned p] in
                p.endChannelGrace()
                sink?.post(closed)
            })
        {
        case .success(let timer): p.startChannelGrace(timer, until: until)
        case .failure(let error):
            logger.warning("cannot arm the channel-close grace timer of \(p.extensionID) (\(error)); ending it now")
            sink?.post(closed)
        }
    }

    /// Ends the channel of a misbehaving extension, recording why.
    private func cutOff(_ p: SupervisedProcess, reason: String) {
        logger.warning("cutting off runtime channel of \(p.extensionID) (pid \(p.pid)): \(reason)")
        p.closeChannel()
        sink?.post(.channelClosed(extensionID: p.extensionID, generation: p.generation, reason: reason))
    }

    /// Sends `message` (with `descriptor`, always consumed) on the channel of `p`; whether it
    /// was sent or queued. An extension that does not read, or whose channel fails, is cut off.
    @discardableResult
    func send(_ message: Message, to p: SupervisedProcess, descriptor: Int32? = nil, key: UInt64? = nil) -> Bool {
        guard let channel = p.channel else {
            if let descriptor { PacketSocket.closeReceived(descriptor) }
            return false
        }
        switch buffers.send(message, on: channel, descriptor: descriptor, key: key) {
        case .accepted: return true
        case .closed: return false
        case .unencodable(let problem):
            logger.error("\(problem)")
            return false
        case .overflow:
            cutOff(p, reason: "does not read its channel (over \(ExtensionProcesses.channelQueueLimit) bytes queued)")
            return false
        case .failed(let e):
            cutOff(p, reason: "channel write failed: \(e)")
            return false
        }
    }

    /// The core's `send` to generation `generation` of `id`. A request ended before its
    /// channel was even handed over (the extension has not read its queue, typically because
    /// it is stopped) drops both instead of queueing the `ended`.
    func send(_ message: Message, to id: String, _ generation: UInt64) {
        guard let p = process(id, generation) else { return }
        if case .ended(let requestID) = message, p.channel?.cancel(key: requestID) == true { return }
        send(message, to: p)
    }

    /// Hands request `requestID` to generation `generation` of `id` with its end of a new
    /// stream pair (`deliver`); returns the host's end, or why it could not be delivered
    /// (nil when that generation is gone).
    func deliver(_ requestID: UInt64, to id: String, _ generation: UInt64) -> Result<Int32, DeliveryFailure>? {
        guard let p = process(id, generation) else { return nil }
        let hostEnd: Int32, extensionEnd: Int32
        do {
            (hostEnd, extensionEnd) = try PacketSocket.streamPair()
        } catch {
            return .failure(DeliveryFailure(reason: error.description))
        }
        guard send(.deliver(requestID: requestID), to: p, descriptor: extensionEnd, key: requestID) else {
            PacketSocket.closeReceived(hostEnd)
            return .failure(DeliveryFailure(reason: "the runtime channel is closed"))
        }
        return .success(hostEnd)
    }
}

/// Who answers what an extension's runtime asks of the system (`openURL`, `suiteOpen`,
/// `suiteWrite`): the daemon.
protocol RuntimeCalls: AnyObject {
    /// `message` came from `p`'s runtime; the answer goes back with `send(_:to:descriptor:)`.
    func call(_ message: Message, from p: SupervisedProcess)
}

/// Why a request could not be handed to its extension.
struct DeliveryFailure: Error {
    var reason: String
}
