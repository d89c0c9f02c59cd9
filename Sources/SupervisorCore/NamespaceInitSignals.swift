/// The signals of a process that is the first of its own pid namespace, as the sandbox makes
/// every extension (docs/security.md, "Processes"): the kernel delivers a signal sent to it
/// from outside the namespace only if it has a handler for it (SIGKILL and SIGSTOP always).
/// A SIGTERM to an extension that never set a handler would be dropped, and its stop would
/// wait out the grace. `deliverable` gives the signal with the effect the original has on any
/// other process. Pure: read from the process's `/proc/PID/status` by the shell.
public struct NamespaceInitSignals: Equatable, Sendable {
    /// Whether the process is its pid namespace's first process (pid 1 there).
    public var isNamespaceInit: Bool
    /// The signals it has a handler for (`SigCgt`), bit `n - 1` for signal `n`.
    public var caught: UInt64
    /// The signals it ignores (`SigIgn`).
    public var ignored: UInt64

    /// Facts given outright (tests).
    public init(isNamespaceInit: Bool, caught: UInt64, ignored: UInt64) {
        self.isNamespaceInit = isNamespaceInit
        self.caught = caught
        self.ignored = ignored
    }

    /// Reads the `NSpid`, `SigCgt` and `SigIgn` lines of a `/proc/PID/status`; nil when one is
    /// missing or malformed. `NSpid` lists the pid in each namespace from the reader's down:
    /// the process is a namespace's first when there are two or more and the last is 1.
    public init?(status: [UInt8]) {
        var nspid: [Substring]?
        var caught: UInt64?
        var ignored: UInt64?
        for line in String(decoding: status, as: UTF8.self).split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = line[line.index(after: colon)...].split(whereSeparator: { $0 == "\t" || $0 == " " })
            switch line[..<colon] {
            case "NSpid": nspid = value
            case "SigCgt": caught = value.first.flatMap { UInt64($0, radix: 16) }
            case "SigIgn": ignored = value.first.flatMap { UInt64($0, radix: 16) }
            default: continue
            }
        }
        guard let nspid, !nspid.isEmpty, let caught, let ignored else { return nil }
        self.init(isNamespaceInit: nspid.count >= 2 && nspid.last == "1", caught: caught, ignored: ignored)
    }

    /// The signal to send for `signal`, or nil when none is needed: `signal` itself where the
    /// kernel delivers it (not a namespace's first process; SIGKILL, SIGSTOP, SIGCONT; a
    /// handled signal). Otherwise what the default action does, with a signal the kernel
    /// delivers: SIGKILL for one that ends the process, SIGSTOP for one that stops it, and
    /// nil for an ignored one or one whose default is to ignore it.
    public func deliverable(_ signal: Int32) -> Int32? {
        guard isNamespaceInit, signal > 0, signal <= 64 else { return signal }
        if signal == SignalNumber.kill || signal == SignalNumber.stop || signal == SignalNumber.cont { return signal }
        let bit = UInt64(1) << UInt64(signal - 1)
        if caught & bit != 0 { return signal }
        if ignored & bit != 0 { return nil }
        switch signal {
        case SignalNumber.child, 23 /* SIGURG */, 28 /* SIGWINCH */: return nil
        case SignalNumber.terminalStop, SignalNumber.ttin, SignalNumber.ttou: return SignalNumber.stop
        default: return SignalNumber.kill
        }
    }
}
