/*
 * extension_runtime.h: the C interface of extensiond's ExtensionRuntime.
 *
 * Link with libExtensionRuntimeC (pkg-config --cflags --libs extension-runtime), a small C
 * library (runtime-c/) that speaks the runtime channel's wire protocol itself: it needs only
 * libc and pthreads. The semantics are those of the Swift API; see docs/assertions.md.
 *
 * Threads: the runtime reads its channel on one thread of its own (started on the first call
 * that needs the channel); every callback below runs on a runtime thread of its own, which
 * ends when the callback returns. An idle extension has one runtime thread.
 */
#ifndef EXTENSION_RUNTIME_H
#define EXTENSION_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called on a runtime thread for each request a host begins. `channel_fd` is the extension's
 * end of a stream socket connected to the host; the handler owns it and must close it.
 * SIGPIPE: a write(2) to it once the host has closed its end raises SIGPIPE, whose default
 * disposition ends the process. The runtime changes no signal disposition (an ignored signal
 * would stay ignored in every program the extension executes): write with send(2) and
 * MSG_NOSIGNAL, which fails with EPIPE instead, or ignore or handle SIGPIPE yourself. */
typedef void (*ext_request_handler)(uint64_t request_id, int channel_fd, void *context);

/* Called on a private runtime thread. See ext_perform_expiring_activity. */
typedef void (*ext_activity_block)(bool expired, void *context);

/* Called once an activity is over. See ext_perform_expiring_activity_with_cleanup. */
typedef void (*ext_activity_cleanup)(void *context);

/* Announces readiness to extensiond and starts delivering requests to `on_request`, once per
 * process. Returns 0, -EINVAL for a NULL `on_request`, -ENOTCONN when the process was not
 * launched by extensiond, or -EALREADY when it was started already (nothing is sent; the first
 * handler stays). Launched by extensiond means: $EXTENSIOND_CHANNEL_FD names an AF_UNIX
 * SOCK_SEQPACKET socket. The runtime reads that variable on its first call and removes it from
 * the environment, valid or not, so that the programs the extension runs do not inherit it
 * (nor the channel, which it makes close-on-exec).
 * `context` is passed back unchanged, from other threads: it must stay valid and be safe to
 * use from them. */
int ext_runtime_start(ext_request_handler on_request, void *context);

/* 1 when the process was launched by extensiond (it inherited a runtime channel, as
 * ext_runtime_start describes), else 0. */
int ext_runtime_is_supervised(void);

/* The longest reason ext_perform_expiring_activity accepts, in bytes of UTF-8. */
#define EXT_ACTIVITY_MAX_REASON 1024

/* Takes a task assertion held by extensiond, like ProcessInfo.performExpiringActivity:
 *  - granted: `block(false, context)` runs asynchronously; the assertion is released when it
 *    returns (and when the expired call, if any, has returned too);
 *  - about to expire: `block(true, context)` is called a second time, concurrently, on
 *    another thread, at most once: stop the work and return quickly;
 *  - not granted (expiring, suspending, background time spent, too many assertions held, or
 *    no extensiond): `block(true, context)` only, at once.
 * `reason` is shown by `extctl status`; it is sent as UTF-8, each byte that is not part of valid
 * UTF-8 as U+FFFD (3 bytes). Returns 0, -EINVAL when `reason` is NULL or empty or `block` is
 * NULL, -EMSGSIZE when `reason` so sent is over EXT_ACTIVITY_MAX_REASON bytes, or -ENOMEM when
 * the activity cannot be allocated (in these cases nothing is called). */
int ext_perform_expiring_activity(const char *reason, ext_activity_block block, void *context);

/* As ext_perform_expiring_activity, and calls `cleanup(context)` exactly once after every call
 * of `block` has returned and the assertion (if granted) was released: where `context` may be
 * freed. `cleanup` may be NULL. */
int ext_perform_expiring_activity_with_cleanup(const char *reason, ext_activity_block block,
                                               ext_activity_cleanup cleanup, void *context);

/* Called on a runtime thread when an observed notification hint is posted. */
typedef void (*ext_hint_handler)(const char *name, void *context);

/* The most distinct names one process may observe (ext_observe). */
#define EXT_OBSERVE_MAX_NAMES 256

/* Observes the notification hint `name` (ExtensionMain.observe): `handler(name, context)` runs
 * for each post made while the process runs, and once for all the posts made while it was
 * suspended, when it is resumed; a hint never resumes or launches it. Names: letters, digits,
 * '.', '-', '_', at most 255 bytes, not starting or ending with '.', no "..". A name may be
 * observed by several handlers, each called in the order they were added. Returns 0, -EINVAL
 * for a NULL or malformed name or a NULL handler, -ENOTCONN without extensiond, -ENOSPC for a
 * new name when EXT_OBSERVE_MAX_NAMES names are observed already (nothing is observed), or
 * -ENOMEM. `context` is passed back from other threads. */
int ext_observe(const char *name, ext_hint_handler handler, void *context);

/* Answers to a background refresh (ext_refresh_complete). */
#define EXT_REFRESH_NEW_DATA 0
#define EXT_REFRESH_NO_DATA 1
#define EXT_REFRESH_FAILED 2

/* Called on a runtime thread when extensiond refreshes the extension in the background. */
typedef void (*ext_refresh_handler)(uint64_t refresh_id, void *context);

/* Handles background refreshes (ExtensionMain.onRefresh): `handler(refresh_id, context)` runs
 * when extensiond refreshes the extension (its manifest's `refresh` schedule, or `extctl
 * refresh`); answer with ext_refresh_complete within the policy's refreshSeconds, or the
 * refresh counts as failed. Call it before ext_runtime_start. Returns 0, -EINVAL for a NULL
 * handler, or -ENOTCONN without extensiond. */
int ext_runtime_on_refresh(ext_refresh_handler handler, void *context);

/* Answers refresh `refresh_id` with EXT_REFRESH_NEW_DATA, EXT_REFRESH_NO_DATA or
 * EXT_REFRESH_FAILED. Returns 0, -EINVAL for another value, or -ENOTCONN without extensiond. */
int ext_refresh_complete(uint64_t refresh_id, int result);

/* The largest result ext_request_complete accepts, in bytes. */
#define EXT_REQUEST_MAX_PAYLOAD 60000

/* Ends request `request_id`, returning `length` bytes from `payload` to its host (Apple's
 * completeRequest(returningItems:)). The request is then over, as if the host had dismissed
 * it; the request channel stays open until the extension closes it. Returns 0, -EINVAL for a
 * NULL payload with a non-zero length, -EMSGSIZE above EXT_REQUEST_MAX_PAYLOAD (nothing is
 * sent), or -ENOTCONN without extensiond. A request already ended is ignored by extensiond. */
int ext_request_complete(uint64_t request_id, const void *payload, size_t length);

/* Ends request `request_id` without a result, telling its host `reason` (Apple's
 * cancelRequest(withError:); cut at 4096 bytes). Returns 0, -EINVAL for a NULL reason,
 * -ENOTCONN without extensiond (or when the message cannot be sent), or -ENOMEM. */
int ext_request_cancel(uint64_t request_id, const char *reason);

/* The directory of the shared container `group` (an app group's shared files), as extensiond
 * passes it: the value of the environment variable EXTENSION_SHARED_CONTAINER_<NAME>, where
 * NAME is `group` upper-cased with every byte other than an ASCII letter or digit replaced by
 * '_' ("group.com.example" -> EXTENSION_SHARED_CONTAINER_GROUP_COM_EXAMPLE). Returns NULL when
 * `group` is NULL or the variable is unset or empty. The string belongs to the process
 * environment: it stays valid for the life of the process unless the program itself changes that
 * variable. */
const char *ext_shared_container_path(const char *group);

/* The extension's own container: a directory only it can read and write, kept across its
 * relaunches and extensiond's restarts until an administrator resets it (`extctl reset`). It is
 * also its HOME, with XDG_CONFIG_HOME, XDG_CACHE_HOME, XDG_DATA_HOME and XDG_STATE_HOME inside.
 * The value of EXTENSIOND_CONTAINER; NULL when that variable is unset or empty (not started
 * by extensiond). The string belongs to the process environment, as above. */
const char *ext_container_path(void);

#ifdef __cplusplus
}
#endif

#endif
