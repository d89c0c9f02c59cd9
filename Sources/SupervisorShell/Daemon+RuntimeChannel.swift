import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
import SupervisorKernel

/// The private channel between the daemon and each extension's runtime.
extension Daemon {
    func channelReadable(_ p: SupervisedProcess, events: UInt32) {
        guard let channel = p.channel else { return }
        if let e = channel.flush(events) { return cutOff(p, reason: "channel write failed: \(e)") }
        guard events & (Poll.input | Poll.hangup | Poll.error) != 0 else { return }
        // One batch: the events of the messages read now go to the monitors together.
        var end: Peer.ReadEnd?
        inBatch { end = channel.read(into: receiveBuffer, budget: Daemon.readBudget) { message in
            guard p.admission.admit(at: kernel.iterationTime()) else {
                cutOff(p, reason: "flooding its channel (over \(MessageRate.perSecond) messages per second)")
                return false
            }
            let (id, g) = (p.extensionID, p.generation)
            switch message {
            case .ready: post(.ready(extensionID: id, generation: g))
            case .acquire(let tag, let reason): post(.acquire(extensionID: id, generation: g, tag: tag, reason: reason))
            case .release(let a): post(.release(extensionID: id, generation: g, assertionID: a))
            case .expireReceived(let a): post(.expireReceived(extensionID: id, generation: g, assertionID: a))
            case .observe(let name): post(.observe(extensionID: id, generation: g, name: name))
            case .refreshDone(let r, let answer): post(.refreshDone(extensionID: id, generation: g, refreshID: r, answer: answer))
            case .complete(let r, let payload):
                post(.requestFinished(extensionID: id, generation: g, requestID: r, outcome: .completed(payload)))
            case .cancel(let r, let reason):
                post(.requestFinished(extensionID: id, generation: g, requestID: r, outcome: .cancelled(reason)))
            default:
                cutOff(p, reason: "sent \(message.kind), which extensions may not send")
                return false
            }
            return true
        } }
        switch end {
        case nil: return
        case .closed: channelEnded(p)
        case .failed(let reason), .violation(let reason): cutOff(p, reason: reason)
        }
    }

    /// The runtime closed its channel. If the process does not exit within a short grace
    /// (it usually is exiting), it is ended: it can no longer receive requests.
    func channelEnded(_ p: SupervisedProcess) {
        p.closeChannel()
        let closed = Event.channelClosed(extensionID: p.extensionID, generation: p.generation, reason: "closed by the extension")
        switch kernel.addTimer(at: kernel.now().adding(seconds: Daemon.channelCloseGraceSeconds), { [unowned self, unowned p] in
            p.channelGrace = nil
            post(closed)
        }) {
        case .success(let timer): p.channelGrace = timer
        case .failure(let error):
            logger.warning("cannot arm the channel-close grace timer of \(p.extensionID) (\(error)); ending it now")
            post(closed)
        }
    }

    /// Ends the channel of a misbehaving extension, recording why.
    func cutOff(_ p: SupervisedProcess, reason: String) {
        logger.warning("cutting off runtime channel of \(p.extensionID) (pid \(p.pid)): \(reason)")
        p.closeChannel()
        post(.channelClosed(extensionID: p.extensionID, generation: p.generation, reason: reason))
    }

    func send(_ message: Message, to p: SupervisedProcess, descriptor: Int32? = nil, key: UInt64? = nil) -> Bool {
        guard let channel = p.channel else {
            if let descriptor { PacketSocket.closeReceived(descriptor) }
            return false
        }
        switch channel.send(message, encoder: &encoder, descriptor: descriptor, key: key) {
        case .accepted: return true
        case .closed: return false
        case .unencodable(let problem):
            logger.error("\(problem)")
            return false
        case .overflow:
            cutOff(p, reason: "does not read its channel (over \(Daemon.connectionQueueLimit) bytes queued)")
            return false
        case .failed(let e):
            cutOff(p, reason: "channel write failed: \(e)")
            return false
        }
    }

    @discardableResult
    func send(_ message: Message, to p: SupervisedProcess) -> Bool {
        send(message, to: p, descriptor: nil)
    }

    func openRequest(_ id: String, _ generation: UInt64, _ requestID: UInt64, _ host: HostID, _ tag: UInt32, _ pid: Int32, _ channel: Bool) {
        guard channel else {
            send(.begun(tag: tag, requestID: requestID, pid: pid, hasChannel: false), to: host)
            return
        }
        guard let p = process(id, generation) else { return }
        let hostEnd: Int32, extensionEnd: Int32
        do {
            (hostEnd, extensionEnd) = try PacketSocket.streamPair()
        } catch {
            post(.deliveryFailed(extensionID: id, generation: generation, requestID: requestID, error: error.description))
            return
        }
        guard send(.deliver(requestID: requestID), to: p, descriptor: extensionEnd, key: requestID) else {
            PacketSocket.closeReceived(hostEnd)
            post(.deliveryFailed(extensionID: id, generation: generation, requestID: requestID, error: "the runtime channel is closed"))
            return
        }
        send(.begun(tag: tag, requestID: requestID, pid: pid, hasChannel: true), to: host, descriptor: hostEnd)
    }
}
