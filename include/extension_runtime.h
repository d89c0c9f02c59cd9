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

/* The longest URL ext_open_url accepts, in bytes. */
#define EXT_URL_MAX 2048

/* Called on a runtime thread with the outcome of ext_open_url. */
typedef void (*ext_open_url_callback)(bool opened, void *context);

/* Asks the system to open `url` for the extension (Apple's
 * NSExtensionContext.open(_:completionHandler:)): the app that declares its scheme, else the
 * session's handler for it. Returns at once; `callback(opened, context)` is then called
 * exactly once, on a runtime thread: `opened` true when extensiond handed the URL over; false
 * when it did not (no app or handler takes the scheme, the host's session is locked, the
 * extension point does not allow opening URLs, the extension has no open request from a host,
 * or it is over the rate limit: the reason is in extensiond's journal record), or when the
 * channel to extensiond closed before the answer. Returns 0, or, with nothing sent and the
 * callback never called: -EINVAL for a NULL or empty url, one holding a byte below 0x20 or
 * 0x7f or that is not UTF-8, or a NULL callback; -EMSGSIZE for a url over EXT_URL_MAX bytes;
 * -ENOTCONN without extensiond (or once its channel closed); -ENOMEM. `context` is passed
 * back from another thread. */
int ext_open_url(const char *url, ext_open_url_callback callback, void *context);

/* Shared defaults (docs/defaults.md): small typed settings an app and its extensions share in a
 * suite named after one of the app's groups (Apple's NSUserDefaults(suiteName:)).
 *
 * Reads (ext_defaults_type, ext_defaults_get_*, ext_defaults_keys) come from a read-only
 * mapping of the suite: no system call (the allocation of a returned copy aside), no waiting,
 * and every value current as of the read, other members' writes included. A read is
 * consistent: it never returns a value torn by a concurrent write. Writes (ext_defaults_set_*,
 * ext_defaults_remove) are round trips to extensiond, which block the calling thread until it
 * answers (callbacks of this runtime may call them); when one returns 0 the write is visible to
 * every member's reads. An ext_defaults handle may be used from any thread, until
 * ext_defaults_close.
 *
 * Values: one type byte (EXT_DEFAULTS_*), then little-endian: bool 1 byte (0 or 1); integer
 * int64; double IEEE-754 binary64; string u32 length + UTF-8; bytes u32 length + bytes; array u32
 * count + that many values; dictionary u32 count + count x (u32 key length + UTF-8 key + value),
 * keys unique and sorted bytewise ascending. At most 32 levels deep (a scalar alone is 1), at
 * most EXT_DEFAULTS_MAX_VALUE bytes. Keys: 1 to EXT_DEFAULTS_MAX_KEY bytes of UTF-8.
 *
 * Errors shared by the functions below: -EINVAL for a NULL argument; -EIO when the suite's
 * mapping is malformed (never the case for one extensiond wrote) or stays mid-write through
 * 1,000,000 attempts, or, for a write, when extensiond failed; -ENOTCONN without extensiond or
 * once its channel closed; -ENOMEM. A round trip made by a callback that the runtime had to run
 * on its reading thread (no thread could be created) returns -EAGAIN instead of waiting for an
 * answer only that thread could read. */
typedef struct ext_defaults ext_defaults;

#define EXT_DEFAULTS_MAX_KEY 255
#define EXT_DEFAULTS_MAX_VALUE 60000   /* one value, encoded */
#define EXT_DEFAULTS_MAX_SUITE 262144  /* the whole suite: its offsets table and entries */

#define EXT_DEFAULTS_BOOL 1
#define EXT_DEFAULTS_INTEGER 2
#define EXT_DEFAULTS_DOUBLE 3
#define EXT_DEFAULTS_STRING 4
#define EXT_DEFAULTS_BYTES 5
#define EXT_DEFAULTS_ARRAY 6
#define EXT_DEFAULTS_DICTIONARY 7

/* Opens the suite `suite`, a group of the app the extension's manifest names ("app"): one round
 * trip. Sets *out to a handle, to close with ext_defaults_close. Returns 0; -EINVAL for a
 * malformed name (letters, digits, '.', '-', '_', at most 255 bytes, not starting or ending
 * with '.', no ".."); -ENOENT when no app declares the group; -EPERM when it is not a group of
 * the extension's app; -EIO when the mapping extensiond handed over is not a suite; or as
 * above. */
int ext_defaults_open(const char *suite, ext_defaults **out);

/* Unmaps the suite and removes its change handlers: none is called once this returns (it waits
 * for calls running on other threads; a handler may close its own suite). NULL is ignored. The
 * handle must not be used again. */
void ext_defaults_close(ext_defaults *defaults);

/* The type of `key`'s value (EXT_DEFAULTS_*), or -ENOENT when the suite has no such key. */
int ext_defaults_type(ext_defaults *defaults, const char *key);

/* The value of `key`, when it has that type: 0, -ENOENT when there is no such key, -EDOM when
 * its value has another type, or as above (nothing is stored then).
 * ext_defaults_get_double converts an integer value too. ext_defaults_get_string and
 * ext_defaults_get_bytes store a malloc'ed copy (to free(3)) with a NUL after it (a string
 * holding U+0000 reads as far as it in C; ext_defaults_get_encoded has all of it).
 * ext_defaults_get_encoded stores a malloc'ed copy of the value's encoding (above), whatever
 * its type, and its length. */
int ext_defaults_get_bool(ext_defaults *defaults, const char *key, bool *out);
int ext_defaults_get_int64(ext_defaults *defaults, const char *key, int64_t *out);
int ext_defaults_get_double(ext_defaults *defaults, const char *key, double *out);
int ext_defaults_get_string(ext_defaults *defaults, const char *key, char **out);
int ext_defaults_get_bytes(ext_defaults *defaults, const char *key, void **out, size_t *length);
int ext_defaults_get_encoded(ext_defaults *defaults, const char *key, void **out,
                             size_t *length);

/* The suite's keys as of one moment, sorted bytewise: *keys (NULL-terminated too) and *count.
 * Free them with ext_defaults_free_keys. */
int ext_defaults_keys(ext_defaults *defaults, char ***keys, size_t *count);
void ext_defaults_free_keys(char **keys, size_t count);

/* Sets `key` to a value of the suite: one round trip, returning once extensiond answered.
 * Returns 0 (the value is visible to every member already); -EINVAL for a malformed key (empty,
 * over EXT_DEFAULTS_MAX_KEY bytes, not UTF-8), a string that is not UTF-8, a NULL value with a
 * non-zero length, or, for ext_defaults_set_encoded, an encoding that breaks the rules above
 * (checked before sending); -EMSGSIZE when the value's encoding is over
 * EXT_DEFAULTS_MAX_VALUE bytes (nothing is sent); -ENOSPC when extensiond refuses it as over a
 * limit (the suite over EXT_DEFAULTS_MAX_SUITE bytes, or the rate of writes); -EPERM or -ENOENT
 * when the extension is no longer a member of the suite, or no app declares its group any more;
 * or as above. */
int ext_defaults_set_bool(ext_defaults *defaults, const char *key, bool value);
int ext_defaults_set_int64(ext_defaults *defaults, const char *key, int64_t value);
int ext_defaults_set_double(ext_defaults *defaults, const char *key, double value);
int ext_defaults_set_string(ext_defaults *defaults, const char *key, const char *value);
int ext_defaults_set_bytes(ext_defaults *defaults, const char *key, const void *value,
                           size_t length);
int ext_defaults_set_encoded(ext_defaults *defaults, const char *key, const void *value,
                             size_t length);

/* Removes `key` (a key the suite does not have is no error): a round trip, as the setters. */
int ext_defaults_remove(ext_defaults *defaults, const char *key);

/* Called on a runtime thread when another member changed a suite. */
typedef void (*ext_defaults_handler)(const char *suite, void *context);

/* Adds a handler of the suite's changes: `handler(suite, context)` runs on a runtime thread when
 * another member (an app, another extension, an administrator) changed the suite: at once
 * while the extension runs, and once for all the changes made while it was suspended, when it
 * is resumed (it is never woken for them). Not for the process's own writes. Handlers of one
 * handle are called in the order they were added, until ext_defaults_close. Returns 0, or
 * -EINVAL / -ENOMEM. `context` is passed back from other threads. */
int ext_defaults_on_change(ext_defaults *defaults, ext_defaults_handler handler, void *context);

/* Secrets (docs/secrets.md): an app-group keychain kept by extensiond, like Apple's keychain
 * items shared through an access group. An item is a generic password (service, account) or
 * an internet password (server, account, protocol, port, path), both with a label, in an
 * access group (an app group the extension may use), with up to EXT_SECRET_MAX_DATA bytes of
 * data. Two items are the same item (a duplicate) when their class, group and class's
 * attributes are equal, an absent attribute being equal to an empty one (a port: to 0).
 *
 * Every function below is a round trip to extensiond that blocks the calling thread until it
 * answers (callbacks of this runtime may call them). The data the runtime copies (the message
 * it sends, the datagram it receives, an item's data) is overwritten with zeros
 * (explicit_bzero) before it is freed; the caller's own buffers are the caller's to clear.
 *
 * Errors shared by the functions below (negative returns): -EINVAL for a NULL or malformed
 * argument, checked before anything is sent (an item_class other than 0, 1 or 2, or 0 for an
 * add; a port outside 0...65535; a string that is not UTF-8 or is over its limit: group,
 * service, account, server and label EXT_SECRET_MAX_NAME bytes, protocol
 * EXT_SECRET_MAX_PROTOCOL, path EXT_SECRET_MAX_PATH), or when extensiond refuses the request as
 * malformed; -EMSGSIZE for data over EXT_SECRET_MAX_DATA bytes (nothing is sent); -EPERM when
 * extensiond does not permit it (an add naming a group the extension may not use, or an
 * extension with no group); -ENOSPC when over one of extensiond's limits (too many items);
 * -ENOTCONN without extensiond or once its channel closed; -ENOMEM; -EIO when extensiond failed
 * (or answered out of protocol). A round trip made by a callback that the runtime had to run on
 * its reading thread (no thread could be created) returns -EAGAIN instead of waiting for an
 * answer only that thread could read. */

#define EXT_SECRET_MAX_DATA 60000   /* an item's data, in bytes */
#define EXT_SECRET_MAX_NAME 255     /* group, service, account, server, label: bytes of UTF-8 */
#define EXT_SECRET_MAX_PROTOCOL 32  /* protocol: bytes of UTF-8 */
#define EXT_SECRET_MAX_PATH 1024    /* path: bytes of UTF-8 */

#define EXT_SECRET_GENERIC_PASSWORD 1
#define EXT_SECRET_INTERNET_PASSWORD 2

/* An item's description (ext_secret_add) or a query (the others). NULL strings are absent;
 * "" is present and empty. A query matches the items of its class (0: either) whose every
 * attribute the query gives is equal, in its group or, when `group` is NULL or "", in every
 * group the extension may use. */
typedef struct ext_secret_attributes {
    int item_class;        /* 0 (queries: any), EXT_SECRET_GENERIC_PASSWORD, EXT_SECRET_INTERNET_PASSWORD */
    const char *group;     /* NULL or "": automatic (queries: every group; add: the extension's first group) */
    const char *service, *account, *server, *protocol, *path, *label; /* NULL: absent */
    int port;              /* 1...65535; 0: absent (queries: any) */
} ext_secret_attributes;

/* An item found by ext_secret_copy. Its strings and data belong to the array; free it with
 * ext_secret_free. */
typedef struct ext_secret_item {
    int item_class;        /* EXT_SECRET_GENERIC_PASSWORD or EXT_SECRET_INTERNET_PASSWORD */
    char *group, *service, *account, *server, *protocol, *path, *label; /* NULL: absent */
    int port;              /* 0: absent (or 0) */
    void *data;            /* NULL and 0 unless asked for; zeroed by ext_secret_free */
    size_t length;
} ext_secret_item;

/* Adds an item (SecItemAdd) of class EXT_SECRET_GENERIC_PASSWORD or
 * EXT_SECRET_INTERNET_PASSWORD with `length` bytes of `data` (1...EXT_SECRET_MAX_DATA), in
 * `attributes->group` (NULL or "": the extension's first group). Returns 0 once it is stored;
 * -EEXIST when an item with the same identity exists already (nothing changes); -EINVAL for
 * NULL or empty data, for attributes of the other class (extensiond refuses a generic password
 * with a server, protocol, port or path, an internet password with a service), or as above;
 * -EMSGSIZE; -EPERM; -ENOSPC; or as above. */
int ext_secret_add(const ext_secret_attributes *attributes, const void *data, size_t length);

/* Finds the items matching `query` (SecItemCopyMatching). With `return_data` nonzero: the first
 * match, with its data (*count is 1); with 0: every match's attributes, without data (at most
 * 64 items: extensiond sends no more in one answer). Sets
 * *items to an array of *count items, to free with ext_secret_free(*items, *count). Returns 0;
 * -ENOENT when no item matches (an item of a group the extension may not use is never
 * revealed: it does not match); -EINVAL for a NULL `items` or `count`, or as above; or as
 * above. On an error, *items is NULL and *count 0. */
int ext_secret_copy(const ext_secret_attributes *query, int return_data, ext_secret_item **items, size_t *count);

/* Changes every item matching `query` (SecItemUpdate): its label to `new_label` when it is not
 * NULL, its data to `length` bytes of `data` (1...EXT_SECRET_MAX_DATA) when `data` is not NULL
 * (`length` is ignored when `data` is NULL). Returns 0; -ENOENT when no item matches; -EINVAL
 * when both `new_label` and `data` are NULL, for empty data, a label that is not UTF-8 or over
 * EXT_SECRET_MAX_NAME bytes, or as above; -EMSGSIZE; or as above. */
int ext_secret_update(const ext_secret_attributes *query, const char *new_label, const void *data, size_t length);

/* Deletes every item matching `query` (SecItemDelete). Returns 0; -ENOENT when no item
 * matches; or as above. */
int ext_secret_delete(const ext_secret_attributes *query);

/* Frees `count` items returned by ext_secret_copy, overwriting their data with zeros first.
 * NULL is ignored. */
void ext_secret_free(ext_secret_item *items, size_t count);

/* Background transfers (docs/transfers.md): downloads and uploads that extensiond performs in
 * its own process, whatever happens to the extension, like Apple's background URLSession. A
 * session is an identifier (chosen by the extension) in an app group of its app, whose shared
 * container holds the files. A task's completion or failure is delivered to the session's
 * callback while the process runs and is not suspended; once the callback has returned for it,
 * the runtime tells extensiond it was handled (the model's "did finish events") and it is never
 * delivered again. If the extension is suspended or ends first, the completions wait for the
 * containing app, which extensiond brings up to claim the session. Progress is delivered only
 * while the process runs (a suspended extension is never woken for it) and never acknowledged.
 *
 * ext_transfer_create, ext_transfer_cancel and ext_transfer_claim are round trips to extensiond
 * that block the calling thread until it answers (callbacks of this runtime may call them).
 *
 * Errors shared by the functions below (negative returns): -EINVAL for a NULL or malformed
 * argument, checked before anything is sent (a group or session that is NULL, empty, over 255
 * bytes or not UTF-8; an unknown method; a NULL `task`; a url that is NULL, empty, over
 * EXT_TRANSFER_MAX_URL bytes or not UTF-8; a path over EXT_TRANSFER_MAX_PATH bytes or not UTF-8;
 * an upload with a NULL or empty path), or when extensiond refuses the request as malformed
 * (not an http or https URL, a path outside the container, an upload's file it cannot read, a
 * group with no shared container, a task already over); -EPERM when extensiond does not permit
 * it (a group that is not one of the extension's app, an extension of no app, an extension
 * point that allows no transfers); -ENOENT when there is no such task (ext_transfer_cancel);
 * -ENOSPC when over one of extensiond's limits (the app's unfinished tasks:
 * transferTasksPerApp); -EIO when extensiond failed (or answered out of protocol); -ENOTCONN
 * without extensiond or once its channel closed; -ENOMEM. A round trip made by a callback that
 * the runtime had to run on its reading thread (no thread could be created) returns -EAGAIN
 * instead of waiting for an answer only that thread could read. */

#define EXT_TRANSFER_MAX_URL 8192   /* a task's URL, in bytes of UTF-8 */
#define EXT_TRANSFER_MAX_PATH 1024  /* a task's path in the shared container, in bytes of UTF-8 */

#define EXT_TRANSFER_DOWNLOAD 1     /* GET, to a file moved into the container on success */
#define EXT_TRANSFER_UPLOAD_PUT 2   /* PUT of a file of the container */
#define EXT_TRANSFER_UPLOAD_POST 3  /* POST of a file of the container */

#define EXT_TRANSFER_PROGRESS 1     /* `bytes` of `total` done (coalesced: a few a second at most) */
#define EXT_TRANSFER_COMPLETED 2    /* the server answered: `status`, and a download's `path` */
#define EXT_TRANSFER_FAILED 3       /* the task ended without an answer: `domain`, `code`, `text` */

/* One event of a session. Its strings belong to the runtime. */
typedef struct ext_transfer_event {
    uint64_t sequence;   /* a completion's or failure's number in its session; 0 for progress */
    uint64_t task;
    int kind;            /* EXT_TRANSFER_PROGRESS, _COMPLETED or _FAILED */
    uint64_t bytes;      /* done */
    int64_t total;       /* -1: unknown */
    int status;          /* the final HTTP status, 0 if none */
    const char *path;    /* a completed download's file (absolute), "" otherwise */
    const char *domain;  /* failed: "http", "curl", "posix" or "extensiond"; "" otherwise */
    int code;            /* failed: the error's code in its domain */
    const char *text;    /* failed: the error for people; "" otherwise */
} ext_transfer_event;   /* valid only during the callback */

/* Called on a runtime thread with each event of the session (group, session). */
typedef void (*ext_transfer_callback)(const char *group, const char *session, const ext_transfer_event *event, void *context);

/* Sets the callback of the session (group, session): events arrive on a runtime thread, in
 * order. After the callback has returned for every event of one transferEvents message, the
 * runtime sends transferHandled with the highest nonzero sequence (unless none), the model's
 * "did finish events", without waiting for its answer. An event whose sequence is not above
 * the highest already delivered for that session in this process is skipped (never delivered
 * twice). NULL callback removes it (the session's events are then dropped, not acknowledged,
 * from the next message on). A new callback replaces the session's. Events arrive once the
 * session is claimed (ext_transfer_claim, or a task created in it). `context` is passed back
 * unchanged, from other threads. Returns 0, -EINVAL (bad names, as above), -ENOMEM. */
int ext_transfer_set_handler(const char *group, const char *session, ext_transfer_callback callback, void *context);

/* Creates a task (one round trip). url: http or https, at most EXT_TRANSFER_MAX_URL bytes; path:
 * relative in the group's shared container, at most EXT_TRANSFER_MAX_PATH bytes ("" or NULL for
 * a download: the system names it, transfers/SESSION/TASK); method EXT_TRANSFER_DOWNLOAD,
 * EXT_TRANSFER_UPLOAD_PUT or EXT_TRANSFER_UPLOAD_POST; a nonzero `discretionary` makes the task
 * wait while the network is metered or the machine on battery. Creating a task claims its
 * session. Sets *task (0 on an error). 0 or -errno as above. */
int ext_transfer_create(const char *group, const char *session, int method, const char *url, const char *path,
                        int discretionary, uint64_t *task);

/* Cancels task `task`: it ends with a failure event (domain "extensiond", code 1). 0, -ENOENT
 * when extensiond knows no such task of the extension's app, or as above. */
int ext_transfer_cancel(uint64_t task);

/* Becomes the consumer of the session (group, session): the completions queued for it are sent
 * now (after a relaunch, say), and new events as they happen. 0 or -errno as above. */
int ext_transfer_claim(const char *group, const char *session);

#ifdef __cplusplus
}
#endif

#endif
