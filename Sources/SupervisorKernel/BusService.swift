import CBus
import ExtensionTransport

#if canImport(Glibc)
import Glibc
#endif

/// The kinds of object of the D-Bus interface (docs/dbus.md).
public enum BusObject: Int32, Sendable {
    /// `/org/extensiond1`, `org.extensiond1.Manager`.
    case manager = 0
    /// `/org/extensiond1/extension/ID`, `org.extensiond1.Extension`; its key is the id.
    case extensionObject = 1
    /// `/org/extensiond1/request/N`, `org.extensiond1.Request`; its key is the number.
    case request = 2
}

/// Who answers the D-Bus interface's calls: the daemon's front end (SupervisorShell/BusInterface).
/// Called on the loop's thread only.
public protocol BusServiceHandler: AnyObject {
    /// A method call; the handler finishes `call` with exactly one reply, now or later.
    func busCall(_ call: BusCall, object: BusObject, key: String, member: String, sender: String)
    /// Whether the object exists.
    func busObjectExists(_ object: BusObject, key: String) -> Bool
    /// Writes the value of `property` of the object, of the type the interface declares; false
    /// when there is no such object or property.
    func busProperty(_ object: BusObject, key: String, property: String, into writer: BusWriter) -> Bool
    /// The keys of every object of a kind (for introspection's child nodes).
    func busChildren(_ object: BusObject) -> [String]
    /// A watched unique name left the bus (`why` nil), or the bus refused to report its leaving
    /// (`why` says so). Called once per watch.
    func busNameGone(_ name: String, why: String?)
    /// The connection to the bus was lost (the bus daemon restarted, say): nothing more comes on
    /// it. The handler closes the service, from a later loop iteration, and may connect again.
    func busLost()
}

/// What polkit said of a system-bus caller's action (docs/dbus.md, "Access").
public enum PolkitAnswer: Sendable, Equatable {
    /// The action is allowed (perhaps after the user authenticated).
    case allowed
    /// It is not.
    case refused
    /// No polkit on the system bus.
    case absent
    /// The bus refused the question for its limit of replies the daemon waits for
    /// (`max_replies_per_connection`); why.
    case limited(String)
    /// The check failed; why.
    case failed(String)
}

/// A question to polkit in flight on the service's connection: `cancel` (or dropping it) makes
/// sure its answer is never delivered.
public final class PolkitQuery {
    fileprivate var query: OpaquePointer?
    fileprivate let done: (PolkitAnswer) -> Void

    fileprivate init(_ done: @escaping (PolkitAnswer) -> Void) { self.done = done }

    deinit { cancel() }

    /// Cancels the question: its answer, if it comes, is dropped.
    public func cancel() {
        if let query { bus_query_free(query) }
        query = nil
    }
}

/// The credentials the bus vouches for about a caller.
public struct BusCredentials: Sendable, Equatable {
    /// The effective uid.
    public var uid: UInt32
    /// The process id.
    public var pid: Int32
    /// The effective gid (the first group when the bus gives none).
    public var gid: UInt32
    /// The supplementary groups (at most 64).
    public var groups: [UInt32]
}

/// One method call being answered. Finished by exactly one of the reply methods; one never
/// finished is dropped unanswered when this object goes.
public final class BusCall {
    private var call: OpaquePointer?

    init(_ call: OpaquePointer) { self.call = call }

    deinit { if let call { bus_call_free(call) } }

    /// The caller's credentials, from the bus (a round trip to it).
    public func credentials() -> Result<BusCredentials, SystemError> {
        guard let call else { return .failure(.notSupported) }
        var uid: UInt32 = 0
        var pid: Int32 = 0
        var gid: UInt32 = 0
        var groups = [UInt32](repeating: 0, count: 64)
        var count = Int32(groups.count)
        var why = [CChar](repeating: 0, count: 256)
        let rc = bus_call_credentials(call, &uid, &pid, &gid, &groups, &count, &why, why.count)
        guard rc >= 0 else { return .failure(SystemError(String(cString: why), errno: -rc)) }
        return .success(BusCredentials(uid: uid, pid: pid, gid: gid, groups: Array(groups.prefix(Int(min(count, 64))))))
    }

    /// The next argument, a string.
    public func readString() -> String? {
        guard let call else { return nil }
        var value: UnsafePointer<CChar>?
        guard bus_call_read_string(call, &value) >= 0, let value else { return nil }
        return String(cString: value)
    }

    /// The next argument, an int32.
    public func readInt32() -> Int32? {
        guard let call else { return nil }
        var value: Int32 = 0
        return bus_call_read_int32(call, &value) >= 0 ? value : nil
    }

    /// The next argument, a string array.
    public func readStrings() -> [String]? {
        guard let call else { return nil }
        var strv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        guard bus_call_read_strv(call, &strv) >= 0 else { return nil }
        return BusCall.take(strv)
    }

    /// The keys of the next argument, an `a{sv}` (its values skipped).
    public func readOptionKeys() -> [String]? {
        guard let call else { return nil }
        var strv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        guard bus_call_read_option_keys(call, &strv) >= 0 else { return nil }
        return BusCall.take(strv)
    }

    private static func take(_ strv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> [String] {
        defer { bus_strv_free(strv) }
        var list: [String] = []
        var i = 0
        while let s = strv?[i] {
            list.append(String(cString: s))
            i += 1
        }
        return list
    }

    @discardableResult
    private func finish(_ reply: (OpaquePointer) -> Int32) -> Int32 {
        guard let call else { return -EALREADY }
        self.call = nil
        return reply(call)
    }

    /// An empty reply.
    public func reply() { finish { bus_call_reply($0) } }
    /// A string.
    public func reply(string: String) { finish { bus_call_reply_string($0, string) } }
    /// An object path.
    public func reply(path: String) { finish { bus_call_reply_path($0, path) } }
    /// An object path and a descriptor (duplicated into the message: the caller keeps `fd`).
    /// Fails when the reply cannot be sent: the descriptor cannot be duplicated, the connection
    /// does not pass descriptors, the caller expects no reply (ENOMSG), or the call was answered.
    @discardableResult
    public func reply(path: String, descriptor fd: Int32) -> SystemError? {
        let rc = finish { bus_call_reply_path_fd($0, path, fd) }
        return rc < 0 ? SystemError("reply with the request's descriptor", errno: -rc) : nil
    }
    /// An error: its D-Bus name and message.
    public func reply(error name: String, _ message: String) { finish { bus_call_reply_error($0, name, message) } }
    /// A reply `write` composes; an `InternalError` if it cannot be made or `write` fails.
    public func reply(_ write: (BusWriter) -> Bool) {
        guard let call else { return }
        guard let writer = bus_call_writer(call), write(BusWriter(writer)) else {
            return reply(error: "org.extensiond1.Error.InternalError", "the reply could not be written")
        }
        finish { bus_call_reply_written($0) }
    }
}

/// Appends values to a reply or a property. Each returns false when appending failed.
public struct BusWriter {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    /// Opens a container: `type` "a", "r", "e" or "v" with its contents' signature.
    public func open(_ type: Character, _ contents: String) -> Bool { bus_writer_open(pointer, CChar(type.asciiValue ?? 0), contents) >= 0 }
    /// Closes the container opened last.
    public func close() -> Bool { bus_writer_close(pointer) >= 0 }
    /// A string.
    public func string(_ value: String) -> Bool { bus_writer_string(pointer, value) >= 0 }
    /// An object path.
    public func path(_ value: String) -> Bool { bus_writer_path(pointer, value) >= 0 }
    /// A `u`.
    public func uint32(_ value: UInt32) -> Bool { bus_writer_uint32(pointer, value) >= 0 }
    /// A `t`.
    public func uint64(_ value: UInt64) -> Bool { bus_writer_uint64(pointer, value) >= 0 }
    /// An `as`.
    public func strings(_ values: [String]) -> Bool {
        var pointers: [UnsafeMutablePointer<CChar>?] = values.map { strdup($0) }
        pointers.append(nil)
        defer { for p in pointers { free(p) } }
        return bus_writer_strv(pointer, &pointers) >= 0
    }
}

/// The daemon's connection to a message bus, owning the name `org.extensiond1` and serving its
/// objects on the loop (sd-bus attached to the sd-event loop). Owned by the loop; `close` ends it.
public final class BusService {
    private var service: OpaquePointer?
    private unowned let handler: any BusServiceHandler
    private var watches: [String: OpaquePointer] = [:]
    /// Whether it is on the system bus (else the session bus).
    public let isSystemBus: Bool

    init(system: Bool, event: OpaquePointer, handler: any BusServiceHandler) throws(SystemError) {
        self.handler = handler
        isSystemBus = system
        var handlers = bus_service_handlers(
            call: { context, call, object, key, member, sender in
                let me = Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue()
                let owned = BusCall(call!)
                guard let kind = BusObject(rawValue: object) else { return owned.reply(error: "org.freedesktop.DBus.Error.UnknownObject", "no such object") }
                me.handler.busCall(owned, object: kind, key: String(cString: key!), member: String(cString: member!), sender: String(cString: sender!))
            },
            exists: { context, object, key in
                let me = Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue()
                guard let kind = BusObject(rawValue: object) else { return 0 }
                return me.handler.busObjectExists(kind, key: String(cString: key!)) ? 1 : 0
            },
            property: { context, object, key, property, writer in
                let me = Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue()
                guard let kind = BusObject(rawValue: object) else { return -ENOENT }
                return me.handler.busProperty(kind, key: String(cString: key!), property: String(cString: property!), into: BusWriter(writer!)) ? 0 : -ENOENT
            },
            children: { context, object in
                let me = Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue()
                guard let kind = BusObject(rawValue: object) else { return nil }
                let keys = me.handler.busChildren(kind)
                let strv = calloc(keys.count + 1, MemoryLayout<UnsafeMutablePointer<CChar>?>.stride)!.assumingMemoryBound(to: UnsafeMutablePointer<CChar>?.self)
                for (i, key) in keys.enumerated() { strv[i] = strdup(key) }
                return strv
            },
            gone: { context, name, why in
                let me = Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue()
                me.handler.busNameGone(String(cString: name!), why: why.map { String(cString: $0) })
            },
            lost: { context in
                let me = Unmanaged<BusService>.fromOpaque(context!).takeUnretainedValue()
                me.handler.busLost()
            })
        var why = [CChar](repeating: 0, count: 256)
        var made: OpaquePointer?
        let rc = bus_service_open(system ? 1 : 0, UnsafeMutableRawPointer(event), &handlers, Unmanaged.passUnretained(self).toOpaque(), &made, &why, why.count)
        guard rc >= 0, let made else { throw SystemError(String(cString: why), errno: -rc) }
        service = made
    }

    deinit { close() }

    /// Releases the name and closes the connection; calls not answered yet are dropped.
    public func close() {
        for w in watches.values { bus_watch_free(w) }
        watches.removeAll()
        if let service { bus_service_close(service) }
        service = nil
    }

    /// Watches the unique name `name` leave the bus (`busNameGone`), once.
    public func watch(_ name: String) -> SystemError? {
        guard let service, watches[name] == nil else { return nil }
        var watch: OpaquePointer?
        let rc = bus_service_watch(service, name, &watch)
        guard rc >= 0, let watch else { return SystemError("watch \(name) on the bus", errno: -rc) }
        watches[name] = watch
        return nil
    }

    /// Stops watching `name`.
    public func unwatch(_ name: String) {
        if let w = watches.removeValue(forKey: name) { bus_watch_free(w) }
    }

    /// Asks polkit whether the system-bus connection `sender` may do `action`, letting it ask
    /// the user (up to 25 s), without waiting: `done` gets the answer on the loop, once, unless
    /// the returned query is cancelled or dropped first. A question that times out, or is
    /// cancelled before its answer, is cancelled at polkit too (`CancelCheckAuthorization`).
    /// Fails when the question cannot be sent.
    public func checkPolkit(sender: String, action: String, _ done: @escaping (PolkitAnswer) -> Void) -> Result<PolkitQuery, SystemError> {
        guard let service else { return .failure(.notSupported) }
        let query = PolkitQuery(done)
        var made: OpaquePointer?
        let rc = bus_service_check_polkit(
            service, sender, action, 25_000_000,
            { userdata, rc, allowed, why in
                // The query is alive: freeing it (cancel) removes the slot, so no answer comes after.
                let query = Unmanaged<PolkitQuery>.fromOpaque(userdata!).takeUnretainedValue()
                let answer: PolkitAnswer =
                    rc == -ESRCH
                    ? .absent
                    : rc == -ENOBUFS ? .limited(String(cString: why!)) : rc < 0 ? .failed(String(cString: why!)) : allowed != 0 ? .allowed : .refused
                query.done(answer)
            }, Unmanaged.passUnretained(query).toOpaque(), &made)
        guard rc >= 0, let made else { return .failure(SystemError("ask polkit (CheckAuthorization)", errno: -rc)) }
        query.query = made
        return .success(query)
    }

    /// The object path of extension `id`.
    public static func extensionPath(_ id: String) -> String {
        guard let p = bus_extension_path(id) else { return "/" }
        defer { free(p) }
        return String(cString: p)
    }

    /// Emits PropertiesChanged on extension `id` with the values of one lifecycle event.
    public func extensionChanged(
        _ id: String, state: String, pid: UInt32, since: String, requests: UInt32, assertions: UInt32, event: String, detail: String
    ) -> SystemError? {
        guard let service else { return nil }
        let rc = bus_service_extension_changed(service, id, state, pid, since, requests, assertions, event, detail)
        return rc < 0 ? SystemError("PropertiesChanged on \(id)", errno: -rc) : nil
    }

    /// Emits the manager's `Reexecuted` signal to everyone listening: whether the re-exec took
    /// place, this program's version, the version before, and what happened.
    public func reexecuted(succeeded: Bool, version: String, previousVersion: String, detail: String) -> SystemError? {
        guard let service else { return nil }
        let rc = bus_service_emit_reexecuted(service, succeeded ? 1 : 0, version, previousVersion, detail)
        return rc < 0 ? SystemError("Reexecuted", errno: -rc) : nil
    }

    /// Emits `signal` on request `request`'s object to `destination` only.
    public func requestSignal(_ request: UInt64, to destination: String, _ signal: String, payload: [UInt8] = [], reason: String = "") -> SystemError? {
        guard let service else { return nil }
        let rc = payload.withUnsafeBytes { bus_service_request_signal(service, request, destination, signal, $0.baseAddress, $0.count, reason) }
        return rc < 0 ? SystemError("\(signal) on request \(request)", errno: -rc) : nil
    }
}
