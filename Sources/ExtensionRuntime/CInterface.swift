#if canImport(Glibc)
import Glibc
#endif
import ExtensionProtocol
import Foundation

// The C ABI of ExtensionRuntime, declared in include/extension_runtime.h and linked from
// libExtensionRuntimeC.so (pkg-config: extension-runtime). Same semantics as the Swift API.

/// A C callback with its context pointer. The pointer is the caller's: the runtime only passes
/// it back, so carrying it across threads is the caller's contract (documented in the header).
struct CCallback<F>: @unchecked Sendable {
    let function: F
    let context: UnsafeMutableRawPointer?
}

/// `int ext_runtime_start(ext_request_handler on_request, void *context)`: announces readiness
/// and delivers each request (its id and the extension's end of the host channel, which the
/// handler owns) on a runtime thread. Returns 0, or -ENOTCONN when not launched by extensiond.
@_cdecl("ext_runtime_start")
public func ext_runtime_start(
    _ onRequest: (@convention(c) (UInt64, Int32, UnsafeMutableRawPointer?) -> Void)?,
    _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard ExtensionMain.isSupervised else { return -ENOTCONN }
    let callback = CCallback(function: onRequest, context: context)
    ExtensionMain.start(onRequest: { request in
        if let f = callback.function {
            f(request.id, request.channel.fd, callback.context)
        } else {
            request.channel.close()
        }
    })
    return 0
}

/// `int ext_runtime_is_supervised(void)`: 1 when launched by extensiond, else 0.
@_cdecl("ext_runtime_is_supervised")
public func ext_runtime_is_supervised() -> Int32 {
    ExtensionMain.isSupervised ? 1 : 0
}

/// `int ext_perform_expiring_activity(const char *reason, ext_activity_block block, void *context)`:
/// `performExpiringActivity` for C. Returns 0, or -EINVAL for a NULL or empty reason or a NULL
/// block (the block is then not called).
@_cdecl("ext_perform_expiring_activity")
public func ext_perform_expiring_activity(
    _ reason: UnsafePointer<CChar>?,
    _ block: (@convention(c) (Bool, UnsafeMutableRawPointer?) -> Void)?,
    _ context: UnsafeMutableRawPointer?
) -> Int32 {
    ext_perform_expiring_activity_with_cleanup(reason, block, nil, context)
}

/// `int ext_perform_expiring_activity_with_cleanup(const char *reason, ext_activity_block block,
/// ext_activity_cleanup cleanup, void *context)`: as `ext_perform_expiring_activity`, and calls
/// `cleanup(context)` exactly once, after every call of `block` has returned (and the assertion,
/// if one was granted, was released): the moment `context` may be freed.
@_cdecl("ext_perform_expiring_activity_with_cleanup")
public func ext_perform_expiring_activity_with_cleanup(
    _ reason: UnsafePointer<CChar>?,
    _ block: (@convention(c) (Bool, UnsafeMutableRawPointer?) -> Void)?,
    _ cleanup: (@convention(c) (UnsafeMutableRawPointer?) -> Void)?,
    _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard let reason, reason.pointee != 0, let block else { return -EINVAL }
    let callback = CCallback(function: block, context: context)
    let run: @Sendable (Bool) -> Void = { expired in callback.function(expired, callback.context) }
    var finished: (@Sendable () -> Void)?
    if let cleanup {
        let done = CCallback(function: cleanup, context: context)
        finished = { done.function(done.context) }
    }
    ExpiringActivity.perform(reason: String(cString: reason), block: run, onFinished: finished)
    return 0
}

/// `int ext_request_complete(uint64_t request_id, const void *payload, size_t length)`: ends the
/// request, returning `length` bytes to its host (`ExtensionRequest.complete(returning:)`).
/// Returns 0; -EINVAL for a NULL payload with a non-zero length; -EMSGSIZE over
/// EXT_REQUEST_MAX_PAYLOAD bytes (nothing is sent); -ENOTCONN without extensiond or once its
/// channel is closed.
@_cdecl("ext_request_complete")
public func ext_request_complete(_ requestID: UInt64, _ payload: UnsafeRawPointer?, _ length: Int) -> Int32 {
    guard length == 0 || payload != nil else { return -EINVAL }
    let bytes = length == 0 ? [] : Array(UnsafeRawBufferPointer(start: payload, count: length))
    return status(of: { () throws(RequestError) in
        try ExtensionRequest(id: requestID, channel: RequestChannel(fd: -1)).complete(returning: bytes)
    })
}

/// `int ext_request_cancel(uint64_t request_id, const char *reason)`: ends the request without a
/// result, telling its host `reason` (`ExtensionRequest.cancel(reason:)`). Returns 0; -EINVAL for
/// a NULL reason; -ENOTCONN without extensiond or once its channel is closed.
@_cdecl("ext_request_cancel")
public func ext_request_cancel(_ requestID: UInt64, _ reason: UnsafePointer<CChar>?) -> Int32 {
    guard let reason else { return -EINVAL }
    let text = String(cString: reason)
    return status(of: { () throws(RequestError) in
        try ExtensionRequest(id: requestID, channel: RequestChannel(fd: -1)).cancel(reason: text)
    })
}

/// 0, or the negative errno the C ABI reports for a `RequestError`.
private func status(of body: () throws(RequestError) -> Void) -> Int32 {
    do {
        try body()
        return 0
    } catch {
        switch error {
        case .payloadTooLarge: return -EMSGSIZE
        case .notSupervised, .supervisorGone: return -ENOTCONN
        }
    }
}

/// `int ext_observe(const char *name, ext_hint_handler handler, void *context)`: observes the
/// notification hint `name` (`ExtensionMain.observe`); `handler(name, context)` runs on a
/// runtime thread. Returns 0; -EINVAL for a NULL or malformed name or a NULL handler;
/// -ENOTCONN without extensiond.
@_cdecl("ext_observe")
public func ext_observe(
    _ name: UnsafePointer<CChar>?,
    _ handler: (@convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void)?,
    _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard let name, let handler else { return -EINVAL }
    let callback = CCallback(function: handler, context: context)
    do {
        try ExtensionMain.observe(String(cString: name)) { posted in
            posted.withCString { callback.function($0, callback.context) }
        }
        return 0
    } catch {
        switch error {
        case .badName: return -EINVAL
        case .notSupervised, .supervisorGone: return -ENOTCONN
        }
    }
}

/// `int ext_runtime_on_refresh(ext_refresh_handler handler, void *context)`: handles background
/// refreshes (`ExtensionMain.onRefresh`): `handler(refresh_id, context)` runs on a runtime
/// thread; answer with `ext_refresh_complete`. Returns 0; -EINVAL for a NULL handler;
/// -ENOTCONN without extensiond.
@_cdecl("ext_runtime_on_refresh")
public func ext_runtime_on_refresh(
    _ handler: (@convention(c) (UInt64, UnsafeMutableRawPointer?) -> Void)?,
    _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard let handler else { return -EINVAL }
    guard let channel = RuntimeChannel.shared else { return -ENOTCONN }
    let callback = CCallback(function: handler, context: context)
    channel.setRefreshHandler { refreshID in callback.function(refreshID, callback.context) }
    return 0
}

/// `int ext_refresh_complete(uint64_t refresh_id, int result)`: answers a refresh with
/// EXT_REFRESH_NEW_DATA, EXT_REFRESH_NO_DATA or EXT_REFRESH_FAILED. Returns 0; -EINVAL for
/// another result; -ENOTCONN without extensiond. Answering twice, or an id that is not the
/// refresh in flight, is ignored by extensiond.
@_cdecl("ext_refresh_complete")
public func ext_refresh_complete(_ refreshID: UInt64, _ result: Int32) -> Int32 {
    let answer: RefreshAnswer
    switch result {
    case 0: answer = .newData
    case 1: answer = .noData
    case 2: answer = .failed
    default: return -EINVAL
    }
    guard let channel = RuntimeChannel.shared else { return -ENOTCONN }
    return channel.trySend(.refreshDone(refreshID: refreshID, answer: answer)) ? 0 : -ENOTCONN
}
