#ifndef EXTENSIOND_BUS_SERVICE_H
#define EXTENSIOND_BUS_SERVICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The daemon's D-Bus interface (docs/dbus.md): the objects and their vtables, on sd-bus,
/// attached to the daemon's sd-event loop. What each call means is decided by the handlers
/// (Swift, SupervisorKernel/BusService.swift); this file only speaks D-Bus. Everything here runs
/// on the loop's thread.

/// The well-known name and the manager's object.
#define BUS_SERVICE_NAME "org.extensiond1"
#define BUS_SERVICE_PATH "/org/extensiond1"

typedef struct bus_service bus_service;
/// A method call being answered: the message, referenced until one `bus_call_reply*` finishes it.
typedef struct bus_call bus_call;
/// A reply or signal being written (an sd_bus_message).
typedef struct bus_writer bus_writer;
/// A watch on a bus name's owner leaving (a match for NameOwnerChanged).
typedef struct bus_watch bus_watch;
/// A question to polkit in flight (an asynchronous call on the service's connection).
typedef struct bus_query bus_query;

/// The kinds of object: the manager, an extension (key: its id), a request (key: its number).
enum { BUS_OBJECT_MANAGER = 0, BUS_OBJECT_EXTENSION = 1, BUS_OBJECT_REQUEST = 2 };

typedef struct bus_service_handlers {
    /// A method call on an object of `object` kind. The handler owns `call` and must finish it
    /// with exactly one `bus_call_reply*`, now or later.
    void (*call)(void *context, bus_call *call, int object, const char *key, const char *member, const char *sender);
    /// Whether the object exists: 1 or 0.
    int (*exists)(void *context, int object, const char *key);
    /// Appends the value of `property` (its D-Bus type as declared) to `writer`; 0 or -errno.
    int (*property)(void *context, int object, const char *key, const char *property, bus_writer *writer);
    /// The keys of every object of `object` kind: a NULL-terminated malloc'd array of malloc'd
    /// strings (freed here), or NULL.
    char **(*children)(void *context, int object);
    /// The owner of a watched unique name left the bus (`why` NULL), or its leaving cannot be
    /// watched (`why` says why: the bus refused the match). Called once per watch.
    void (*gone)(void *context, const char *name, const char *why);
    /// The connection to the bus was lost (the bus daemon restarted or closed it); nothing more
    /// comes on it. May be NULL.
    void (*lost)(void *context);
} bus_service_handlers;

/// Connects to the bus (`system` 1: the system bus, else the session bus; both honour
/// DBUS_*_BUS_ADDRESS), registers the objects, attaches the connection to `event` (an sd_event)
/// and requests the name. 0 or -errno with `why` written: -EEXIST when another owns the name.
int bus_service_open(int system, void *event, const bus_service_handlers *handlers, void *context, bus_service **service, char *why,
                     size_t why_size);
/// Releases the name (waiting for the bus's reply, at most 2 s) and closes the connection;
/// calls not yet answered are dropped.
void bus_service_close(bus_service *service);
/// The connection's unique name (":1.42").
const char *bus_service_unique_name(bus_service *service);

/// Starts watching `name` (a unique name) leave the bus; `gone` is called once when it does.
/// The match is added without waiting: messages from one connection are handled in order by the
/// bus, so a call made after this one sees the match in place. If the bus refuses the match,
/// `gone` is called with why.
int bus_service_watch(bus_service *service, const char *name, bus_watch **watch);
void bus_watch_free(bus_watch *watch);

/// The credentials of `call`'s sender, from the bus (one call to it): euid, pid, egid (or the
/// first group when the bus gives none), and up to `*group_count` supplementary groups
/// (`*group_count` is set to how many there are, which may be more). 0 or -errno with `why`.
int bus_call_credentials(bus_call *call, uint32_t *uid, int32_t *pid, uint32_t *gid, uint32_t *groups, int *group_count, char *why,
                         size_t why_size);

/// Reads the next argument of `call`: a string (valid while the call lives), an int32, a string
/// array (malloc'd NULL-terminated, free with bus_strv_free), or the keys of an a{sv} (the values
/// skipped; malloc'd as a string array). 0 or -errno.
int bus_call_read_string(bus_call *call, const char **value);
int bus_call_read_int32(bus_call *call, int32_t *value);
int bus_call_read_strv(bus_call *call, char ***value);
int bus_call_read_option_keys(bus_call *call, char ***keys);
void bus_strv_free(char **strv);

/// Finishes `call`: an empty reply, a string, an object path, an object path and a descriptor
/// (duplicated by sd-bus; the caller keeps `fd`), an error. Each frees `call`. 0 or -errno (the
/// call is freed anyway).
int bus_call_reply(bus_call *call);
int bus_call_reply_string(bus_call *call, const char *value);
int bus_call_reply_path(bus_call *call, const char *path);
int bus_call_reply_path_fd(bus_call *call, const char *path, int fd);
int bus_call_reply_error(bus_call *call, const char *name, const char *message);
/// A reply written by the caller: `bus_call_writer` gives the reply to append to (NULL when it
/// cannot be made), `bus_call_reply_written` sends it and frees `call`.
bus_writer *bus_call_writer(bus_call *call);
int bus_call_reply_written(bus_call *call);
/// Drops `call` without answering (the daemon is going away).
void bus_call_free(bus_call *call);

/// Appending to a reply or signal. `type` of open: 'a', 'r' (struct), 'e' (dict entry), 'v'.
int bus_writer_open(bus_writer *writer, char type, const char *contents);
int bus_writer_close(bus_writer *writer);
int bus_writer_string(bus_writer *writer, const char *value);
int bus_writer_path(bus_writer *writer, const char *value);
int bus_writer_uint32(bus_writer *writer, uint32_t value);
int bus_writer_uint64(bus_writer *writer, uint64_t value);
int bus_writer_strv(bus_writer *writer, char **strv);

/// The object path of extension `id` (systemd's escaping under /org/extensiond1/extension),
/// malloc'd; NULL when out of memory.
char *bus_extension_path(const char *id);

/// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` on extension `id`'s object with
/// State, Pid, Since, Requests, Assertions, LastEvent and LastEventDetail.
int bus_service_extension_changed(bus_service *service, const char *id, const char *state, uint32_t pid, const char *since,
                                  uint32_t requests, uint32_t assertions, const char *event, const char *detail);
/// Emits `signal` (Completed: `payload`; Cancelled or Interrupted: `reason`) on request
/// `request`'s object, to `destination` only.
int bus_service_request_signal(bus_service *service, uint64_t request, const char *destination, const char *signal, const void *payload,
                               size_t size, const char *reason);
/// Emits the manager's `Reexecuted` signal (broadcast): whether the re-exec took place, the
/// version of the program now running, the one before, and what happened.
int bus_service_emit_reexecuted(bus_service *service, int succeeded, const char *version, const char *previous, const char *detail);

/// Asks polkit (org.freedesktop.PolicyKit1, on the service's own connection, without waiting)
/// whether the system bus connection `sender` may do `action`, allowing it to ask the user;
/// bounded by `timeout_usec`. `done` runs once on the loop: `rc` 0 with `allowed` 1 or 0,
/// -ESRCH when there is no polkit on the bus, -ENOBUFS when the bus refused it for its limit of
/// replies waited for (LimitsExceeded), another -errno with `why` otherwise; never after
/// `bus_query_free`. A question with a cancellation id of its own: one that times out, or is
/// freed before its answer, is cancelled at polkit (CancelCheckAuthorization). 0 or -errno
/// (then `done` never runs).
int bus_service_check_polkit(bus_service *service, const char *sender, const char *action, unsigned long long timeout_usec,
                             void (*done)(void *userdata, int rc, int allowed, const char *why), void *userdata, bus_query **query);
/// Frees a question: cancels it (here and at polkit) when it is still in flight. `done` does not
/// run after this.
void bus_query_free(bus_query *query);

#ifdef __cplusplus
}
#endif
#endif
