import CShims
import ExtensionProtocol
import ExtensionTransport
import Logging
import SupervisorCore
#if canImport(Glibc)
import Glibc
#endif

/// The private channel between the daemon and each extension's runtime.
extension Daemon {
    func channelReadable(_ p: SupervisedProcess, events: UInt32) {
        if events & Poll.output != 0, let channel = p.channel {
            if !p.outbound.flush(on: channel) { return cutOff(p, reason: "channel write failed") }
            if p.outbound.isEmpty { p.channelSource?.setIOEvents(Poll.input) }
        }
        guard events & Poll.input | Poll.hangup | Poll.error != 0 else { return }
        for _ in 0..<Daemon.readBudget {
            guard let channel = p.channel else { return }
            let result: PacketSocket.ReceiveResult
            do { result = try channel.receive(into: receiveBuffer) } catch { return cutOff(p, reason: "\(error)") }
            switch result {
            case .wouldBlock: return
            case .closed: return channelEnded(p)
            case .datagram(let count, let descriptor, let truncated):
                if let descriptor { close(descriptor) }  // extensions never send descriptors
                if truncated || descriptor != nil { return cutOff(p, reason: "sent an oversized message or a descriptor") }
                let message: Message
                do {
                    message = try WireDecoder.decode(UnsafeRawBufferPointer(rebasing: receiveBuffer[0..<count]))
                } catch {
                    return cutOff(p, reason: "malformed message: \(error)")
                }
                guard p.admission.admit(at: loop.now()) else {
                    return cutOff(p, reason: "flooding its channel (over \(MessageRate.perSecond) messages per second)")
                }
                let (id, g) = (p.extensionID, p.generation)
                switch message {
                case .ready: post(.ready(extensionID: id, generation: g))
                case .acquire(let tag, let reason): post(.acquire(extensionID: id, generation: g, tag: tag, reason: reason))
                case .release(let a): post(.release(extensionID: id, generation: g, assertionID: a))
                case .expireReceived(let a): post(.expireReceived(extensionID: id, generation: g, assertionID: a))
                default: return cutOff(p, reason: "sent \(message.kind), which extensions may not send")
                }
            }
        }
    }

    /// The runtime closed its channel. If the process does not exit within a short grace
    /// (it usually is exiting), it is ended: it can no longer receive requests.
    func channelEnded(_ p: SupervisedProcess) {
        p.closeChannel()
        p.channelGrace = try? loop.addTimer(at: loop.now().adding(seconds: Daemon.channelCloseGraceSeconds)) { [unowned self, unowned p] in
            p.channelGrace = nil
            post(.channelClosed(extensionID: p.extensionID, generation: p.generation, reason: "closed by the extension"))
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
            if let descriptor { close(descriptor) }
            return false
        }
        do { try encoder.encode(message) } catch {
            if let descriptor { close(descriptor) }
            logger.error("cannot encode \(message.kind): \(error)")
            return false
        }
        switch p.outbound.send(encoder.bytes, descriptor: descriptor, key: key, on: channel) {
        case .sent: return true
        case .queued:
            p.channelSource?.setIOEvents(Poll.input | Poll.output)
            return true
        case .overflow:
            cutOff(p, reason: "does not read its channel (over \(Daemon.connectionQueueLimit) bytes queued)")
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
            close(hostEnd)
            post(.deliveryFailed(extensionID: id, generation: generation, requestID: requestID, error: "the runtime channel is closed"))
            return
        }
        send(.begun(tag: tag, requestID: requestID, pid: pid, hasChannel: true), to: host, descriptor: hostEnd)
    }
}
