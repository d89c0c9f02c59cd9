/*
 * extension_host.h: the C interface for hosts of extensiond, over D-Bus.
 *
 * Link with libExtensionHostC (pkg-config --cflags --libs extension-host), a small C library
 * (host-c/) on sd-bus (libsystemd): a client of extensiond's D-Bus interface (bus name
 * org.extensiond1, docs/dbus.md). A host begins requests on extensions, talks to an extension
 * over the request's channel, and is told how each request ended; it may also list the
 * extensions and follow their lifecycle events.
 *
 * Threads: an ext_host and its requests are used from one thread at a time (any thread, but
 * never two at once); the library starts no thread. Callbacks run on the calling thread, only
 * inside ext_host_process and ext_host_wait, and inside the blocking calls below where a
 * function says so. Hosts are independent of each other: the library has no shared state
 * (the text of a failed ext_host_open aside, which is per thread). After fork(2), the child
 * cannot use the parent's hosts (calls return -ECHILD); it may open its own.
 *
 * Returns: 0 or a value >= 0 on success, a negative errno value on failure; then
 * ext_host_error gives the failure's text. Failures of the daemon map to errno values as
 * follows (the text names the D-Bus error, org.extensiond1.Error.NAME): UnknownExtension,
 * UnknownRequest and ItemNotFound -ENOENT; NotPermitted -EPERM; BadRequest and
 * org.freedesktop.DBus.Error.InvalidArgs -EINVAL; LaunchTimeout -ETIMEDOUT; Throttled -EAGAIN;
 * LimitReached -ENOSPC; ShuttingDown -ESHUTDOWN; NotRunning -ESRCH; Interrupted -ECANCELED;
 * DuplicateItem -EEXIST; LaunchFailed, InternalError and any other org.extensiond1.Error -EIO.
 * Other D-Bus errors as sd-bus maps them: -EHOSTUNREACH when no daemon owns org.extensiond1
 * on the bus (org.freedesktop.DBus.Error.ServiceUnknown), -ETIMEDOUT without an answer in
 * time, -ENOTCONN / -ECONNRESET once the connection to the bus is lost. A NULL argument where
 * one is required gives -EINVAL (nothing is sent); no input makes the library abort.
 */
#ifndef EXTENSION_HOST_H
#define EXTENSION_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The daemon's bus name. */
#define EXT_HOST_BUS_NAME "org.extensiond1"

/* A connection to a bus, as a host of extensiond. */
typedef struct ext_host ext_host;

/* A request a host began (ext_host_begin), until ext_host_dismiss. */
typedef struct ext_host_request ext_host_request;

/* Which bus. DEFAULT: $EXTENSIOND_BUS ("system" or "session") when set; else the session bus
 * when org.extensiond1 has an owner there; else the system bus. sd-bus honours
 * DBUS_SYSTEM_BUS_ADDRESS and DBUS_SESSION_BUS_ADDRESS. */
typedef enum { EXT_HOST_BUS_DEFAULT = 0, EXT_HOST_BUS_SYSTEM = 1, EXT_HOST_BUS_SESSION = 2 } ext_host_bus;

/* Connects to `bus` (the system daemon's bus, a user's daemon's session bus; see ext_host_bus)
 * and sets *host to the new host, to close with ext_host_close. The connection's description
 * is "extension-host". With EXT_HOST_BUS_DEFAULT, one round trip (NameHasOwner) on the
 * session bus decides, when there is a session bus. Blocking: it waits for the bus's answers to
 * its Hello and to the match rule of request signals (a bus that refuses the connection fails
 * here). No call reaches the daemon: a host opens while no daemon runs (the calls then fail
 * with -EHOSTUNREACH).
 * Returns 0; -EINVAL for a NULL `host`, a `bus` outside the enum, or an $EXTENSIOND_BUS other
 * than "system" or "session" (unset or empty: the default rule); the connection's error when
 * the bus cannot be reached (-ENOENT, -ECONNREFUSED, -EACCES, -ENOMEDIUM for a session bus with
 * neither $DBUS_SESSION_BUS_ADDRESS nor $XDG_RUNTIME_DIR ...); -ENOMEM. On failure *host is
 * NULL and ext_host_error(NULL), on the same thread, gives the reason, naming the bus and its
 * address. */
int ext_host_open(ext_host_bus bus, ext_host **host);

/* Closes the connection (after sending what is queued): the daemon dismisses every request
 * the host left open, as it does for a closed control socket. Frees every request object of
 * the host (closing their channel descriptors): pointers to them must not be used again, nor
 * the host. Never call it from a callback of the host. NULL is ignored. */
void ext_host_close(ext_host *host);

/* The text of the host's last failure, "NAME: MESSAGE" with the D-Bus error's name (e.g.
 * "org.extensiond1.Error.UnknownExtension: no extension with id 'x'"); a failure that did not
 * come from the bus gets the name sd-bus gives its errno (org.freedesktop.DBus.Error.InvalidArgs,
 * org.freedesktop.DBus.Error.Timeout, ...). "" before any failure. A success leaves the text
 * as it was (like errno). For NULL: the text of the calling thread's last failed ext_host_open,
 * or "". The string belongs to the host (to the thread, for NULL) until its next failure or
 * ext_host_close. */
const char *ext_host_error(const ext_host *host);

/* Event-loop integration (poll(2), GLib, sd-event...): wait for ext_host_events() on
 * ext_host_fd(), then call ext_host_process until it returns 0. ext_host_wait blocks up to
 * timeout_usec (UINT64_MAX: forever) for something to arrive and processes it. Callbacks run
 * only inside ext_host_process/ext_host_wait (the blocking calls below run none), which must
 * not be called from a callback (-EBUSY).
 *
 * The blocking calls (ext_host_begin, ext_host_dismiss, ext_host_list, ext_host_monitor,
 * ext_host_prewarm, ext_host_post_hint) read the messages that arrive before their answer and
 * keep them queued in the host, not in the descriptor: after one of them, call
 * ext_host_process until it returns 0 before polling the descriptor again (ext_host_wait does
 * so itself). */

/* The connection's descriptor, to poll for ext_host_events(); it belongs to the host. -EINVAL
 * for NULL; -ENOTCONN once the connection is closed. */
int ext_host_fd(ext_host *host);

/* The poll(2) events to wait for on ext_host_fd (POLLIN, and POLLOUT while messages wait to be
 * sent), or -errno as ext_host_fd. */
int ext_host_events(ext_host *host);

/* Processes one step (reads or sends one message, running its callbacks): >0 when there may be
 * more to do (call it again), 0 when idle, -errno (-ECONNRESET once the bus connection is
 * lost; -EINVAL for NULL). */
int ext_host_process(ext_host *host);

/* Processes what is queued; if nothing was, waits up to `timeout_usec` microseconds
 * (UINT64_MAX: forever) for the connection and processes everything that arrived. >0 when
 * something was processed (not necessarily a callback: any message), 0 on timeout, -errno as
 * ext_host_process; -EINTR when a signal interrupted the wait. A failure that follows what was
 * processed (the connection lost, once its loss ended the requests) is returned by the next
 * call. */
int ext_host_wait(ext_host *host, uint64_t timeout_usec);

/* How a request ended. */
typedef enum { EXT_HOST_COMPLETED = 1, EXT_HOST_CANCELLED = 2, EXT_HOST_INTERRUPTED = 3 } ext_host_outcome;

/* The request ended: completed (payload, size; reason NULL), cancelled or interrupted (reason;
 * payload NULL, size 0). Interrupted also when the daemon that answered its Begin leaves the
 * bus (org.extensiond1 loses that owner: the daemon stopped, died or re-executes; reason
 * "extensiond left the bus: ...", "extensiond was replaced on the bus ..." when another program
 * took the name from it), and when the host's own connection to the bus is lost ("the host's
 * connection to the bus was lost"; every later call fails with -ENOTCONN or -ECONNRESET,
 * org.freedesktop.DBus.Error.Disconnected): nothing else would end it. A request the next owner
 * answered is not ended by the old owner's leaving. Called once per request; the request object
 * stays valid until ext_host_dismiss. payload and reason are valid only during the call. The
 * callback may call ext_host_dismiss on this request (then must not use it after) and any other
 * function of the host but ext_host_close. */
typedef void (*ext_host_request_callback)(ext_host_request *request, ext_host_outcome outcome,
                                          const void *payload, size_t size, const char *reason, void *context);

/* Begins a request on extension `extension_id` (the blocking call Manager.Begin, up to 120 s:
 * extensiond may launch or resume the extension first) and sets *request to it. The request's
 * channel (ext_host_request_channel) is connected to the extension's runtime; `callback(...,
 * context)` (may be NULL) tells how the request ended, from ext_host_process or ext_host_wait
 * (an end signal that came before Begin's answer too: it is kept and delivered by the next
 * ext_host_process). Only the daemon that answered Begin can end the request (signals from any other
 * sender are ignored). Returns 0; -EINVAL for a NULL host, extension_id or request, or an id
 * that is not UTF-8; or the daemon's failure (-ENOENT: UnknownExtension, -EPERM, -EAGAIN,
 * -ETIMEDOUT, -EIO: LaunchFailed, ..., see the top) or the bus's; -EBADMSG when the answer is
 * not (oh); -EMFILE when the channel cannot be duplicated, -ENOMEM (the request is dismissed
 * then). On failure *request is NULL. */
int ext_host_begin(ext_host *host, const char *extension_id, ext_host_request_callback callback, void *context,
                   ext_host_request **request);

/* The channel descriptor: the host's end of a SOCK_STREAM unix socket pair whose other end the
 * extension's runtime holds (close-on-exec). Owned by the request, closed by ext_host_dismiss
 * (dup it to keep it). An extension without a runtime channel: reads end-of-file at once. It
 * stays open after the request ended, until ext_host_dismiss. -EINVAL for NULL. */
int ext_host_request_channel(const ext_host_request *request);

/* The request's id (the decimal at the end of its object path; 0 if the path has none, or for
 * NULL). */
uint64_t ext_host_request_id(const ext_host_request *request);

/* The request's object path ("/org/extensiond1/request/ID"), owned by the request; NULL for
 * NULL. */
const char *ext_host_request_path(const ext_host_request *request);

/* 1 after the callback fired (the request ended: the daemon has forgotten it), else 0 (also for
 * NULL). */
int ext_host_request_is_over(const ext_host_request *request);

/* Ends the request: calls Request.Dismiss unless it is over (blocking, up to 30 s), closes the
 * channel descriptor and frees the request, always (the callback is never called after this;
 * the request must not be used again). Returns 0 (also when the daemon answers UnknownRequest
 * or UnknownObject: the request ended meanwhile, its signal still on the way); -EINVAL for
 * NULL; or the bus's failure, the request freed all the same (the daemon dismisses it when the
 * host's connection closes). */
int ext_host_dismiss(ext_host_request *request);

/* One extension, as Manager.ListExtensions gives it (sorted by id). */
typedef struct {
    const char *id, *point, *state, *app, *object_path;  /* app: "" when none */
    uint32_t pid;                                        /* 0 when not running */
} ext_host_extension;

/* Lists every extension (Manager.ListExtensions, blocking, up to 30 s): sets *list to an array
 * of *count entries (NULL and 0 when there is none), to free with ext_host_list_free(*list,
 * *count). `state` is the state word of `extctl list` (not-running, launching, active, background,
 * expiring, suspended, terminating; docs/json.md "States"). Returns 0; -EINVAL for a NULL argument; -EBADMSG when the answer
 * does not have the signature a(ssssuo); the bus's or the daemon's failure; -ENOMEM. On
 * failure *list is NULL and *count 0. */
int ext_host_list(ext_host *host, ext_host_extension **list, size_t *count);

/* Frees a list from ext_host_list (its strings included). NULL is ignored. */
void ext_host_list_free(ext_host_extension *list, size_t count);

/* One lifecycle event of an extension. The strings are valid only during the callback. */
typedef struct {
    const char *id, *event, *state, *detail;   /* event: LastEvent; detail: LastEventDetail */
    uint32_t pid;
} ext_host_event;

/* Called for each lifecycle event of an extension (ext_host_monitor). */
typedef void (*ext_host_event_callback)(const ext_host_event *event, void *context);

/* Subscribes to every extension's PropertiesChanged (a match on path_namespace
 * /org/extensiond1/extension, sender org.extensiond1); callback per change carrying LastEvent.
 * One subscription per host (a second call replaces it; NULL ends it).
 * The callback gets `id` decoded from the object path; `event` and `detail` from LastEvent and
 * LastEventDetail, `state` and `pid` from State and Pid (NULL, or 0, when the change does not
 * carry them), in the order the daemon emits them (that of `extctl monitor`). Changes without
 * LastEvent, signals sent to this connection alone (not broadcast) and malformed ones are
 * ignored. Blocking (the bus's AddMatch, up to 30 s). Returns 0; -EINVAL for a NULL host; the
 * bus's failure (the previous subscription is ended then as well); -ENOMEM. */
int ext_host_monitor(ext_host *host, ext_host_event_callback callback, void *context);

/* Asks the daemon to launch the extensions `extension_ids` (a NULL-terminated array; empty:
 * nothing) ahead of use (Manager.Prewarm, blocking, up to 30 s). Returns 0; -EINVAL for a NULL
 * argument or an id that is not UTF-8; the daemon's or the bus's failure. */
int ext_host_prewarm(ext_host *host, const char *const *extension_ids);

/* Posts the notification hint `name` (Manager.PostHint, blocking, up to 30 s): extensions
 * observing it are told. Returns 0; -EINVAL for a NULL argument (a malformed name: the daemon's
 * -EINVAL); the daemon's or the bus's failure. */
int ext_host_post_hint(ext_host *host, const char *name);

#ifdef __cplusplus
}
#endif

#endif
