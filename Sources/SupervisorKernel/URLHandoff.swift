import CBus
import ExtensionTransport
import SupervisorCore

#if canImport(Glibc)
import Glibc
#endif

/// Handing a URL to what opens it, off the loop (each step is a D-Bus call that can wait):
/// first whether the host's session is locked (logind), then the app or handler it goes to.
public struct URLHandoff: Sendable {
    /// Who takes the URL.
    public enum Target: Sendable, Equatable {
        /// `org.freedesktop.Application.Open` on the bus name `appID` (the system bus, or the
        /// session bus).
        case application(appID: String, systemBus: Bool)
        /// `org.freedesktop.Application.ActivateAction(action, [parameter], {})` on the bus name
        /// `appID` (an app brought up in the background; `url` is not used).
        case applicationAction(appID: String, action: String, parameter: String, systemBus: Bool)
        /// A transient service `unit` of the service manager (the system's, running as
        /// `user`; or the user's) running `command`.
        case service(unit: String, command: [String], systemManager: Bool, user: String?)
        /// The session's handler for the scheme: found when the handoff runs (`SchemeHandlers`).
        case schemeHandler(scheme: String)
    }

    /// The URL.
    public var url: String
    /// The pid whose logind session must not be locked (the host's), if any.
    public var hostPID: Int32?
    /// Who takes it.
    public var target: Target

    /// The handoff of `url` to `target`, refused if `hostPID`'s session is locked.
    public init(url: String, hostPID: Int32?, target: Target) {
        self.url = url
        self.hostPID = hostPID
        self.target = target
    }

    /// How it ended.
    public enum Outcome: Sendable, Equatable {
        /// Handed over; what took it.
        case opened(String)
        /// The host's session is locked.
        case locked
        /// Nothing takes the scheme.
        case noHandler(String)
        /// A step failed; why.
        case failed(String)
    }

    /// Each D-Bus call's bound.
    static let timeoutMicroseconds: UInt64 = 10_000_000

    /// Runs it, on the calling thread (blocking).
    func perform() -> Outcome {
        var why = [CChar](repeating: 0, count: 512)
        func reason() -> String { String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        if let pid = hostPID {
            var locked: Int32 = 0
            let rc = bus_session_locked(pid_t(pid), Self.timeoutMicroseconds, &locked, &why, why.count)
            if rc == 0 && locked != 0 { return .locked }
            // No system bus, no logind on it, or a host in no session: no session that could be
            // locked. Any other failure (a timeout, a refusal) cannot tell: nothing is opened.
            if rc < 0 && ![-ENXIO, -ESRCH, -ENOENT, -ECONNREFUSED].contains(rc) {
                return .failed("cannot tell whether the host's session is locked: \(reason())")
            }
        }
        switch target {
        case .application(let appID, let systemBus):
            let rc = bus_application_open(systemBus ? 1 : 0, appID, url, Self.timeoutMicroseconds, &why, why.count)
            return rc == 0 ? .opened("org.freedesktop.Application.Open on \(appID)") : .failed(reason())
        case .applicationAction(let appID, let action, let parameter, let systemBus):
            let rc = bus_application_activate_action(systemBus ? 1 : 0, appID, action, parameter, Self.timeoutMicroseconds, &why, why.count)
            return rc == 0 ? .opened("org.freedesktop.Application.ActivateAction('\(action)') on \(appID)") : .failed(reason())
        case .service(let unit, let command, let systemManager, let user):
            return startService(unit: unit, command: command, systemManager: systemManager, user: user)
        case .schemeHandler(let scheme):
            guard let handler = SchemeHandlers.find(scheme: scheme) else {
                return .noHandler("no handler for x-scheme-handler/\(scheme) in mimeapps.list or the applications directories")
            }
            if handler.dbusActivatable {
                let rc = bus_application_open(0, handler.id, url, Self.timeoutMicroseconds, &why, why.count)
                return rc == 0 ? .opened("org.freedesktop.Application.Open on \(handler.id) (\(handler.path))") : .failed(reason())
            }
            guard let command = URLOpening.expandExec(handler.exec, url: url), let program = SchemeHandlers.resolve(command[0]) else {
                return .failed("the Exec of \(handler.path) cannot be run: '\(handler.exec)'")
            }
            let unit = "app-extensiond-\(URLHandoff.unitEscaped(handler.id))@\(UInt32.random(in: 1...UInt32.max)).service"
            return startService(unit: unit, command: [program] + command.dropFirst(), systemManager: false, user: nil)
        }
    }

    /// `id` escaped for a unit name as systemd escapes (`-` and anything but letters, digits,
    /// `:`, `_` and `.` as `\xNN`), so that the freedesktop parsing of `app-…` names gets it back.
    public static func unitEscaped(_ id: String) -> String {
        var out = ""
        for b in id.utf8 {
            let c = Character(Unicode.Scalar(b))
            if c.isASCII && (c.isLetter || c.isNumber || c == ":" || c == "_" || c == ".") { out.append(c) } else { out += "\\x" + String(b, radix: 16) }
        }
        return out
    }

    private func startService(unit: String, command: [String], systemManager: Bool, user: String?) -> Outcome {
        var why = [CChar](repeating: 0, count: 512)
        var pointers: [UnsafePointer<CChar>?] = command.map { UnsafePointer(strdup($0)) } + [nil]
        defer { for p in pointers { free(UnsafeMutablePointer(mutating: p)) } }
        let rc = pointers.withUnsafeMutableBufferPointer { argv in
            bus_start_transient_service(
                systemManager ? 1 : 0, unit, "Opened by extensiond: \(command[0])", argv.baseAddress, user, Self.timeoutMicroseconds, &why, why.count)
        }
        _ = pointers
        return rc == 0 ? .opened("the service \(unit)") : .failed(String(decoding: why.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
}
