#if canImport(Glibc)
import Glibc
#endif
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
