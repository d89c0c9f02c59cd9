/*
 * host.c: libExtensionHostC, a host's client of extensiond's D-Bus interface
 * (include/extension_host.h; the interface: docs/dbus.md).
 *
 * On sd-bus. Every method call is a blocking sd_bus_call with a timeout (120 s for Begin,
 * which may launch an extension; 30 s for the rest): messages that arrive meanwhile are queued
 * by sd-bus and dispatched by the next sd_bus_process, so callbacks run only inside
 * ext_host_process and ext_host_wait.
 *
 * Request signals (Completed, Cancelled, Interrupted) are unicast to the connection that began
 * the request. A request's path is known only from Begin's answer, so one match per host,
 * installed at open, covers every request path; the handler finds the request by path and
 * accepts the signal only from the connection that answered its Begin. A signal for a path no
 * request of the host has (yet) is kept in a small bounded list that Begin consults; one found
 * there is delivered by the next ext_host_process.
 *
 * Nothing else would end a request whose daemon is gone, so a second match, on the bus's
 * NameOwnerChanged for org.extensiond1, ends as interrupted every open request the old owner
 * (by unique name) answered, whether the name went free (a stop, a crash, a re-exec: the daemon
 * releases the name before its execve) or straight to another program; and sd-bus's local
 * Disconnected ends every open request when the host's own connection is lost.
 *
 * No shared state: everything lives in the ext_host, but the text of a failed ext_host_open,
 * which has no host to live in (thread-local).
 */
#define _GNU_SOURCE
#include "extension_host.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

#define MANAGER_PATH "/org/extensiond1"
#define MANAGER_INTERFACE "org.extensiond1.Manager"
#define REQUEST_INTERFACE "org.extensiond1.Request"
#define EXTENSION_INTERFACE "org.extensiond1.Extension"
#define REQUEST_PREFIX "/org/extensiond1/request"
#define EXTENSION_PREFIX "/org/extensiond1/extension"
#define DESCRIPTION "extension-host"

#define CALL_TIMEOUT_USEC (30ULL * 1000000ULL)
#define BEGIN_TIMEOUT_USEC (120ULL * 1000000ULL)
/* End signals kept for paths no request has yet (oldest dropped first). */
#define PENDING_MAX 64
#define ERROR_MAX 2048

#define REQUEST_MATCH                                                                                            \
    "type='signal',sender='" EXT_HOST_BUS_NAME "',interface='" REQUEST_INTERFACE "',path_namespace='" REQUEST_PREFIX \
    "'"
/* The daemon leaving the bus (or being replaced: a re-exec's new program takes the name). */
#define OWNER_MATCH                                                                                             \
    "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus'," \
    "member='NameOwnerChanged',arg0='" EXT_HOST_BUS_NAME "'"
#define MONITOR_MATCH                                                                                          \
    "type='signal',sender='" EXT_HOST_BUS_NAME "',interface='org.freedesktop.DBus.Properties',"               \
    "member='PropertiesChanged',path_namespace='" EXTENSION_PREFIX "'"

/* An end signal, copied out of its message. */
struct end_signal {
    char *path;
    char *sender; /* NULL: none */
    ext_host_outcome outcome;
    void *payload; /* completed: malloc'ed copy (NULL when empty) */
    size_t size;
    char *reason; /* cancelled, interrupted */
};

struct ext_host {
    sd_bus *bus;
    sd_bus_slot *request_match;
    sd_bus_slot *owner_match;
    sd_bus_slot *disconnect_match;
    sd_bus_slot *monitor_match;
    ext_host_event_callback monitor_callback;
    void *monitor_context;
    ext_host_request *requests; /* open requests, doubly linked */
    struct end_signal *pending[PENDING_MAX];
    size_t pending_count;
    char error[ERROR_MAX];
};

struct ext_host_request {
    ext_host *host;
    ext_host_request *previous, *next;
    uint64_t id;
    char *path;
    char *sender; /* the unique name that answered Begin; NULL when the answer had none */
    int fd;
    int over;
    struct end_signal *deferred; /* an end that came before Begin's answer, for ext_host_process */
    ext_host_request_callback callback;
    void *context;
};

/* The text of the calling thread's last failed ext_host_open (no host to keep it). */
static _Thread_local char open_error[ERROR_MAX];

static bool streq(const char *a, const char *b) {
    return a && b && strcmp(a, b) == 0;
}

static void vformat(char *buffer, const char *format, va_list arguments) {
    vsnprintf(buffer, ERROR_MAX, format, arguments);
}

/* Sets the host's error text; returns `r` (a negative errno value). */
__attribute__((format(printf, 3, 4))) static int fail(ext_host *host, int r, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vformat(host->error, format, arguments);
    va_end(arguments);
    return r;
}

__attribute__((format(printf, 2, 3))) static int fail_open(int r, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vformat(open_error, format, arguments);
    va_end(arguments);
    return r;
}

/* The D-Bus error name sd-bus gives errno `r` (e.g. org.freedesktop.DBus.Error.Timeout), with
 * its message, into `e`. */
static void errno_error(sd_bus_error *e, int r) {
    sd_bus_error_free(e);
    sd_bus_error_set_errno(e, r < 0 ? -r : r);
}

/* The errno value of a failure the daemon answered (docs in the header); `r` for others. */
static int daemon_errno(const char *name, int r) {
    static const char prefix[] = "org.extensiond1.Error.";
    static const struct {
        const char *name;
        int error;
    } table[] = {
        {"UnknownExtension", ENOENT}, {"UnknownRequest", ENOENT}, {"ItemNotFound", ENOENT},
        {"NotPermitted", EPERM},      {"BadRequest", EINVAL},     {"LaunchTimeout", ETIMEDOUT},
        {"Throttled", EAGAIN},        {"LimitReached", ENOSPC},   {"ShuttingDown", ESHUTDOWN},
        {"NotRunning", ESRCH},        {"Interrupted", ECANCELED}, {"DuplicateItem", EEXIST},
        {"LaunchFailed", EIO},        {"InternalError", EIO},
    };
    if (!name || strncmp(name, prefix, sizeof prefix - 1) != 0)
        return r;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name + sizeof prefix - 1, table[i].name) == 0)
            return -table[i].error;
    return -EIO;
}

/* Records the failure `r` of `interface.member` ("NAME: MESSAGE"); returns its errno value. */
static int fail_call(ext_host *host, int r, const sd_bus_error *bus_error, const char *interface,
                     const char *member) {
    /* Once the connection is gone, every call fails the same way (sd-bus's own error says
     * System.Error.ENOTCONN): say so, not the errno alone. */
    if ((r == -ENOTCONN || r == -ECONNRESET) && sd_bus_is_open(host->bus) <= 0)
        return fail(host, r,
                    SD_BUS_ERROR_DISCONNECTED ": the host's connection to the bus was lost (the bus stopped, or closed "
                    "it): %s (calling %s.%s); open a new host",
                    strerror(-r), interface, member);
    if (sd_bus_error_is_set(bus_error))
        return fail(host, daemon_errno(bus_error->name, r), "%s: %s", bus_error->name,
                    bus_error->message ? bus_error->message : "");
    sd_bus_error e = SD_BUS_ERROR_NULL;
    errno_error(&e, r);
    fail(host, r, "%s: %s (calling %s.%s)", e.name ? e.name : "org.freedesktop.DBus.Error.Failed",
         e.message ? e.message : strerror(-r), interface, member);
    sd_bus_error_free(&e);
    return r;
}

/* Records an invalid (NULL) argument; returns -EINVAL. */
static int fail_argument(ext_host *host, const char *function, const char *argument) {
    return fail(host, -EINVAL, SD_BUS_ERROR_INVALID_ARGS ": %s: %s is NULL", function, argument);
}

/* A new method call of the daemon, or -errno (recorded). */
static int new_call(ext_host *host, const char *path, const char *interface, const char *member,
                    sd_bus_message **m) {
    int r = sd_bus_message_new_method_call(host->bus, m, EXT_HOST_BUS_NAME, path, interface, member);
    return r < 0 ? fail_call(host, r, NULL, interface, member) : 0;
}

/* Records that the arguments of `member` could not be added to its message (a string that is
 * not UTF-8, say); unrefs `m`. */
static int fail_arguments(ext_host *host, sd_bus_message *m, int r, const char *interface, const char *member) {
    sd_bus_message_unref(m);
    sd_bus_error e = SD_BUS_ERROR_NULL;
    errno_error(&e, r);
    fail(host, r, "%s: %s (the arguments of %s.%s cannot be sent: not UTF-8?)",
         e.name ? e.name : SD_BUS_ERROR_INVALID_ARGS, e.message ? e.message : strerror(-r), interface, member);
    sd_bus_error_free(&e);
    return r;
}

/* Sends `m` (unref'ed) and waits up to `timeout` for its answer (*reply, when `reply` is not
 * NULL). An error named in `harmless` (NULL-terminated) counts as success. 0 or -errno
 * (recorded). */
static int send_call(ext_host *host, sd_bus_message *m, uint64_t timeout, sd_bus_message **reply,
                     const char *const *harmless) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    const char *interface = sd_bus_message_get_interface(m), *member = sd_bus_message_get_member(m);
    char what[256];
    snprintf(what, sizeof what, "%s", member ? member : "?");
    char where[256];
    snprintf(where, sizeof where, "%s", interface ? interface : "?");
    int r = sd_bus_call(host->bus, m, timeout, &e, reply);
    sd_bus_message_unref(m);
    if (r >= 0)
        return 0;
    for (const char *const *h = harmless; h && *h; h++)
        if (sd_bus_error_has_name(&e, *h)) {
            sd_bus_error_free(&e);
            return 0;
        }
    r = fail_call(host, r, &e, where, what);
    sd_bus_error_free(&e);
    return r;
}

static void free_end(struct end_signal *end) {
    if (!end)
        return;
    free(end->path);
    free(end->sender);
    free(end->payload);
    free(end->reason);
    free(end);
}

/* A signal is accepted from the connection that answered the request's Begin (NULL: any). */
static bool same_sender(const char *expected, const char *sender) {
    return !expected || streq(expected, sender);
}

static void deliver(ext_host_request *request, ext_host_outcome outcome, const void *payload, size_t size,
                    const char *reason) {
    request->over = 1;
    ext_host_request_callback callback = request->callback;
    void *context = request->context;
    /* The callback may dismiss (free) the request: nothing touches it after. */
    if (callback)
        callback(request, outcome, payload, size, reason, context);
}

/* Keeps an end signal for a path no request of the host has. */
static void keep_pending(ext_host *host, const char *path, const char *sender, ext_host_outcome outcome,
                         const void *payload, size_t size, const char *reason) {
    struct end_signal *end = calloc(1, sizeof *end);
    if (!end)
        return;
    end->outcome = outcome;
    end->size = size;
    end->path = strdup(path);
    end->sender = sender ? strdup(sender) : NULL;
    end->reason = reason ? strdup(reason) : NULL;
    end->payload = size > 0 ? malloc(size) : NULL;
    if (!end->path || (sender && !end->sender) || (reason && !end->reason) || (size > 0 && !end->payload)) {
        free_end(end);
        return;
    }
    if (size > 0)
        memcpy(end->payload, payload, size);
    if (host->pending_count == PENDING_MAX) {
        free_end(host->pending[0]);
        memmove(host->pending, host->pending + 1, (PENDING_MAX - 1) * sizeof host->pending[0]);
        host->pending_count--;
    }
    host->pending[host->pending_count++] = end;
}

/* Removes and returns the kept end signal for `path` from `sender` (NULL: any), or NULL. */
static struct end_signal *take_pending(ext_host *host, const char *path, const char *sender) {
    for (size_t i = 0; i < host->pending_count; i++) {
        struct end_signal *end = host->pending[i];
        if (streq(end->path, path) && same_sender(sender, end->sender)) {
            memmove(host->pending + i, host->pending + i + 1, (host->pending_count - i - 1) * sizeof host->pending[0]);
            host->pending_count--;
            return end;
        }
    }
    return NULL;
}

/* Completed(ay), Cancelled(s), Interrupted(s) of a request (the match REQUEST_MATCH). */
static int on_request_signal(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
    (void)ret_error;
    ext_host *host = userdata;
    const char *member = sd_bus_message_get_member(m), *path = sd_bus_message_get_path(m);
    const char *sender = sd_bus_message_get_sender(m);
    ext_host_outcome outcome;
    const void *payload = NULL;
    size_t size = 0;
    const char *reason = NULL;
    if (!member || !path)
        return 0;
    if (strcmp(member, "Completed") == 0) {
        if (!sd_bus_message_has_signature(m, "ay") || sd_bus_message_read_array(m, 'y', &payload, &size) < 0)
            return 0;
        outcome = EXT_HOST_COMPLETED;
    } else if (strcmp(member, "Cancelled") == 0 || strcmp(member, "Interrupted") == 0) {
        if (!sd_bus_message_has_signature(m, "s") || sd_bus_message_read(m, "s", &reason) < 0)
            return 0;
        outcome = member[0] == 'C' ? EXT_HOST_CANCELLED : EXT_HOST_INTERRUPTED;
    } else
        return 0;
    for (ext_host_request *request = host->requests; request; request = request->next)
        if (streq(request->path, path)) {
            /* Another sender's signal, or a second end: ignored. */
            if (request->over || request->deferred || !same_sender(request->sender, sender))
                return 0;
            deliver(request, outcome, payload, size, reason);
            return 0;
        }
    keep_pending(host, path, sender, outcome, payload, size, reason);
    return 0;
}

/* Ends, as interrupted with `reason`, every open request that `gone` (the unique name that lost
 * org.extensiond1; NULL: whoever, the connection itself is lost) answered, and every one whose
 * answer named no sender: its daemon is gone, and nothing would end it. Only the old owner's:
 * NameOwnerChanged may be dispatched late, after a Begin the next owner answered (a host that
 * begins a request after a re-exec before it processes what came meanwhile). A callback may
 * dismiss any request, or begin one, so the list is walked again from its head after each
 * delivery. */
static void interrupt_requests(ext_host *host, const char *gone, const char *reason) {
    for (;;) {
        ext_host_request *request = host->requests;
        while (request && (request->over || request->deferred || (gone && request->sender && !streq(request->sender, gone))))
            request = request->next;
        if (!request)
            return;
        deliver(request, EXT_HOST_INTERRUPTED, NULL, 0, reason);
    }
}

/* NameOwnerChanged of org.extensiond1 (the match OWNER_MATCH), from the bus itself: the daemon
 * left the bus (no new owner: a stop, a crash, a re-exec's release of the name), or another
 * program took the name straight from it: the requests the old owner answered end. */
static int on_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
    (void)ret_error;
    ext_host *host = userdata;
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    /* Only the bus can tell (it sets every message's sender): one another client sends to this
     * connection alone (a unicast signal, which no rule of the bus's filters) is ignored. */
    if (!streq(sd_bus_message_get_sender(m), "org.freedesktop.DBus"))
        return 0;
    if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || !streq(name, EXT_HOST_BUS_NAME))
        return 0;
    if (!old_owner || !*old_owner)
        return 0; /* the name was free: no request of ours was answered by nobody */
    interrupt_requests(host, old_owner,
                       new_owner && *new_owner ? "extensiond was replaced on the bus (another program took "
                                                 "org.extensiond1): the request ended with it"
                                               : "extensiond left the bus: the request ended with it");
    return 0;
}

/* The host's own connection to the bus is gone (sd-bus's local Disconnected). */
static int on_disconnected(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
    (void)m, (void)ret_error;
    interrupt_requests(userdata, NULL, "the host's connection to the bus was lost");
    return 0;
}

/* PropertiesChanged of an extension (the match MONITOR_MATCH). */
static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
    (void)ret_error;
    ext_host *host = userdata;
    ext_host_event_callback callback = host->monitor_callback;
    void *context = host->monitor_context;
    const char *path = sd_bus_message_get_path(m);
    char *id = NULL;
    /* The daemon broadcasts its PropertiesChanged (dbus-daemon checks the sender of broadcasts
     * against the rule's sender='org.extensiond1'); one sent to this connection alone could
     * come from anyone. */
    if (!callback || !path || sd_bus_message_get_destination(m))
        return 0;
    if (sd_bus_path_decode(path, EXTENSION_PREFIX, &id) <= 0 || !id)
        return 0;
    const char *interface = NULL, *event = NULL, *state = NULL, *detail = NULL;
    uint32_t pid = 0;
    int r = sd_bus_message_has_signature(m, "sa{sv}as") ? sd_bus_message_read(m, "s", &interface) : -EBADMSG;
    if (r < 0 || !streq(interface, EXTENSION_INTERFACE))
        goto done;
    r = sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r < 0)
        goto done;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key;
        r = sd_bus_message_read(m, "s", &key);
        if (r < 0)
            goto done;
        if (strcmp(key, "LastEvent") == 0)
            r = sd_bus_message_read(m, "v", "s", &event);
        else if (strcmp(key, "LastEventDetail") == 0)
            r = sd_bus_message_read(m, "v", "s", &detail);
        else if (strcmp(key, "State") == 0)
            r = sd_bus_message_read(m, "v", "s", &state);
        else if (strcmp(key, "Pid") == 0)
            r = sd_bus_message_read(m, "v", "u", &pid);
        else
            r = sd_bus_message_skip(m, "v");
        if (r < 0)
            goto done;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
            goto done;
    }
    if (r < 0 || !event)
        goto done;
    ext_host_event e = {.id = id, .event = event, .state = state, .detail = detail, .pid = pid};
    callback(&e, context);
done:
    free(id);
    return 0;
}

/* The address sd-bus uses for `bus`, for error texts. */
static void describe_address(ext_host_bus bus, char *buffer, size_t size) {
    const char *e;
    if (bus == EXT_HOST_BUS_SYSTEM) {
        e = getenv("DBUS_SYSTEM_BUS_ADDRESS");
        snprintf(buffer, size, "%s", e && *e ? e : "unix:path=/run/dbus/system_bus_socket");
    } else if ((e = getenv("DBUS_SESSION_BUS_ADDRESS")) && *e)
        snprintf(buffer, size, "%s", e);
    else if ((e = getenv("XDG_RUNTIME_DIR")) && *e)
        snprintf(buffer, size, "unix:path=%s/bus", e);
    else
        snprintf(buffer, size, "neither $DBUS_SESSION_BUS_ADDRESS nor $XDG_RUNTIME_DIR is set");
}

static const char *bus_word(ext_host_bus bus) {
    return bus == EXT_HOST_BUS_SYSTEM ? "system" : "session";
}

/* The D-Bus error name sd-bus gives errno `r`, into `buffer`. */
static const char *errno_name(int r, char *buffer, size_t size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    errno_error(&e, r);
    snprintf(buffer, size, "%s", e.name ? e.name : SD_BUS_ERROR_FAILED);
    sd_bus_error_free(&e);
    return buffer;
}

/* Connects to `bus`; on failure, writes why into `why`. */
static int connect_bus(ext_host_bus bus, sd_bus **out, char *why, size_t size) {
    int r = bus == EXT_HOST_BUS_SYSTEM ? sd_bus_open_system_with_description(out, DESCRIPTION)
                                       : sd_bus_open_user_with_description(out, DESCRIPTION);
    if (r < 0) {
        char address[512];
        describe_address(bus, address, sizeof address);
        snprintf(why, size, "cannot connect to the %s bus (%s): %s", bus_word(bus), address, strerror(-r));
        *out = NULL;
    }
    return r;
}

/* 1 when org.extensiond1 has an owner on `bus`, 0 when not, -errno (why in `why`). */
static int daemon_on(sd_bus *bus, char *why, size_t size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL, *reply = NULL;
    int owned = 0;
    int r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                           "org.freedesktop.DBus", "NameHasOwner");
    if (r >= 0)
        r = sd_bus_message_append(m, "s", EXT_HOST_BUS_NAME);
    if (r >= 0)
        r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, &e, &reply);
    if (r >= 0)
        r = sd_bus_message_read(reply, "b", &owned);
    if (r < 0)
        snprintf(why, size, "NameHasOwner on the session bus failed: %s",
                 sd_bus_error_is_set(&e) ? e.message : strerror(-r));
    sd_bus_error_free(&e);
    sd_bus_message_unref(m);
    sd_bus_message_unref(reply);
    return r < 0 ? r : owned ? 1 : 0;
}

API int ext_host_open(ext_host_bus bus, ext_host **out) {
    if (!out)
        return fail_open(-EINVAL, SD_BUS_ERROR_INVALID_ARGS ": ext_host_open: host is NULL");
    *out = NULL;
    if (bus != EXT_HOST_BUS_DEFAULT && bus != EXT_HOST_BUS_SYSTEM && bus != EXT_HOST_BUS_SESSION)
        return fail_open(-EINVAL, SD_BUS_ERROR_INVALID_ARGS ": ext_host_open: bus %d is not an ext_host_bus", (int)bus);
    sd_bus *b = NULL;
    char why[1024] = "", name[128];
    int r;
    if (bus == EXT_HOST_BUS_DEFAULT) {
        const char *chosen = getenv("EXTENSIOND_BUS");
        if (chosen && *chosen) {
            if (strcmp(chosen, "system") == 0)
                bus = EXT_HOST_BUS_SYSTEM;
            else if (strcmp(chosen, "session") == 0)
                bus = EXT_HOST_BUS_SESSION;
            else
                return fail_open(-EINVAL,
                                 SD_BUS_ERROR_INVALID_ARGS ": EXTENSIOND_BUS is '%.200s': it must be \"system\" or "
                                                           "\"session\" (or unset: the session bus when "
                                                           "org.extensiond1 is there, else the system bus)",
                                 chosen);
        }
    }
    if (bus == EXT_HOST_BUS_DEFAULT) {
        /* The session bus when a daemon is there, else the system bus. */
        char session_why[768] = "";
        r = connect_bus(EXT_HOST_BUS_SESSION, &b, session_why, sizeof session_why);
        if (r >= 0) {
            r = daemon_on(b, session_why, sizeof session_why);
            if (r == 0)
                snprintf(session_why, sizeof session_why, "org.extensiond1 has no owner on the session bus");
            if (r <= 0)
                b = sd_bus_flush_close_unref(b);
        }
        if (!b) {
            r = connect_bus(EXT_HOST_BUS_SYSTEM, &b, why, sizeof why);
            if (r < 0)
                return fail_open(r, "%s: %s (the session bus was not used: %s)", errno_name(r, name, sizeof name), why,
                                 session_why);
        }
    } else {
        r = connect_bus(bus, &b, why, sizeof why);
        if (r < 0)
            return fail_open(r, "%s: %s", errno_name(r, name, sizeof name), why);
    }
    ext_host *host = calloc(1, sizeof *host);
    if (!host) {
        sd_bus_flush_close_unref(b);
        return fail_open(-ENOMEM, SD_BUS_ERROR_NO_MEMORY ": ext_host_open: out of memory");
    }
    host->bus = b;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    /* AddMatch waits for the bus's Hello: a bus that refuses the connection fails here. */
    r = sd_bus_add_match(b, &host->request_match, REQUEST_MATCH, on_request_signal, host);
    if (r < 0) {
        errno_error(&e, r);
        fail_open(r, "%s: the bus refused the connection or its match rule: %s", e.name ? e.name : "?",
                  e.message ? e.message : strerror(-r));
        sd_bus_error_free(&e);
        sd_bus_flush_close_unref(b);
        free(host);
        return r;
    }
    /* The daemon's leaving, and the connection's loss (a local match: nothing is asked of the
     * bus), end the open requests. */
    r = sd_bus_add_match(b, &host->owner_match, OWNER_MATCH, on_owner_changed, host);
    if (r >= 0)
        r = sd_bus_match_signal(b, &host->disconnect_match, "org.freedesktop.DBus.Local", NULL, "org.freedesktop.DBus.Local",
                                "Disconnected", on_disconnected, host);
    if (r < 0) {
        fail_open(r, "%s: the bus refused a match rule: %s", errno_name(r, name, sizeof name), strerror(-r));
        sd_bus_slot_unref(host->request_match);
        sd_bus_slot_unref(host->owner_match);
        sd_bus_flush_close_unref(b);
        free(host);
        return r;
    }
    *out = host;
    return 0;
}

static void free_request(ext_host_request *request) {
    if (request->fd >= 0)
        close(request->fd);
    free_end(request->deferred);
    free(request->path);
    free(request->sender);
    free(request);
}

API void ext_host_close(ext_host *host) {
    if (!host)
        return;
    while (host->requests) {
        ext_host_request *request = host->requests;
        host->requests = request->next;
        free_request(request);
    }
    for (size_t i = 0; i < host->pending_count; i++)
        free_end(host->pending[i]);
    /* Slots hold references to the bus: released first. */
    sd_bus_slot_unref(host->request_match);
    sd_bus_slot_unref(host->owner_match);
    sd_bus_slot_unref(host->disconnect_match);
    sd_bus_slot_unref(host->monitor_match);
    sd_bus_flush_close_unref(host->bus);
    free(host);
}

API const char *ext_host_error(const ext_host *host) {
    return host ? host->error : open_error;
}

API int ext_host_fd(ext_host *host) {
    if (!host)
        return -EINVAL;
    int r = sd_bus_get_fd(host->bus);
    return r < 0 ? fail_call(host, r, NULL, "sd_bus", "get_fd") : r;
}

API int ext_host_events(ext_host *host) {
    if (!host)
        return -EINVAL;
    int r = sd_bus_get_events(host->bus);
    return r < 0 ? fail_call(host, r, NULL, "sd_bus", "get_events") : r;
}

API int ext_host_process(ext_host *host) {
    if (!host)
        return -EINVAL;
    /* An end that came before its Begin's answer first. */
    for (ext_host_request *request = host->requests; request; request = request->next)
        if (request->deferred) {
            struct end_signal *end = request->deferred;
            request->deferred = NULL;
            if (!request->over)
                deliver(request, end->outcome, end->payload, end->size, end->reason);
            free_end(end);
            return 1;
        }
    int r = sd_bus_process(host->bus, NULL);
    if (r == -EBUSY)
        return fail(host, r, SD_BUS_ERROR_FAILED ": ext_host_process or ext_host_wait called from a callback of the host");
    return r < 0 ? fail_call(host, r, NULL, "sd_bus", "process") : r;
}

API int ext_host_wait(ext_host *host, uint64_t timeout_usec) {
    if (!host)
        return -EINVAL;
    /* A failure after something was processed (the connection lost once its Disconnected ran
     * the callbacks) is left to the next call, which meets it again: the caller sees what the
     * callbacks did first. */
    int processed = 0, r;
    while ((r = ext_host_process(host)) > 0)
        processed = 1;
    if (processed)
        return 1;
    if (r < 0)
        return r;
    r = sd_bus_wait(host->bus, timeout_usec);
    if (r < 0)
        return fail_call(host, r, NULL, "sd_bus", "wait");
    if (r == 0)
        return 0;
    while ((r = ext_host_process(host)) > 0)
        processed = 1;
    return r < 0 && !processed ? r : 1;
}

/* The decimal at the end of a request path, or 0. */
static uint64_t request_id(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash || !slash[1])
        return 0;
    uint64_t id = 0;
    for (const char *p = slash + 1; *p; p++) {
        if (*p < '0' || *p > '9' || id > (UINT64_MAX - 9) / 10)
            return 0;
        id = id * 10 + (uint64_t)(*p - '0');
    }
    return id;
}

/* Dismisses the request at `path` on the daemon (a Begin whose answer could not be kept). */
static void dismiss_path(ext_host *host, const char *path) {
    sd_bus_message *m = NULL;
    char saved[ERROR_MAX];
    memcpy(saved, host->error, sizeof saved); /* the Begin failure's text stays */
    if (new_call(host, path, REQUEST_INTERFACE, "Dismiss", &m) >= 0)
        send_call(host, m, CALL_TIMEOUT_USEC, NULL, NULL);
    memcpy(host->error, saved, sizeof saved);
}

API int ext_host_begin(ext_host *host, const char *extension_id, ext_host_request_callback callback, void *context,
                       ext_host_request **out) {
    if (!host)
        return -EINVAL;
    if (out)
        *out = NULL;
    if (!extension_id)
        return fail_argument(host, "ext_host_begin", "extension_id");
    if (!out)
        return fail_argument(host, "ext_host_begin", "request");
    sd_bus_message *m = NULL, *reply = NULL;
    int r = new_call(host, MANAGER_PATH, MANAGER_INTERFACE, "Begin", &m);
    if (r < 0)
        return r;
    r = sd_bus_message_append(m, "s", extension_id);
    if (r >= 0)
        r = sd_bus_message_open_container(m, 'a', "{sv}"); /* options: none defined yet */
    if (r >= 0)
        r = sd_bus_message_close_container(m);
    if (r < 0)
        return fail_arguments(host, m, r, MANAGER_INTERFACE, "Begin");
    r = send_call(host, m, BEGIN_TIMEOUT_USEC, &reply, NULL);
    if (r < 0)
        return r;
    const char *path = NULL;
    int fd = -1;
    if (!sd_bus_message_has_signature(reply, "oh") || sd_bus_message_read(reply, "oh", &path, &fd) < 0) {
        sd_bus_message_unref(reply);
        return fail(host, -EBADMSG, SD_BUS_ERROR_INCONSISTENT_MESSAGE ": the answer of " MANAGER_INTERFACE ".Begin is not (oh)");
    }
    ext_host_request *request = calloc(1, sizeof *request);
    const char *sender = sd_bus_message_get_sender(reply);
    if (request) {
        request->fd = -1;
        request->path = strdup(path);
        request->sender = sender ? strdup(sender) : NULL;
    }
    if (!request || !request->path || (sender && !request->sender)) {
        if (request)
            free_request(request);
        fail(host, -ENOMEM, SD_BUS_ERROR_NO_MEMORY ": ext_host_begin: out of memory");
        dismiss_path(host, path);
        sd_bus_message_unref(reply);
        return -ENOMEM;
    }
    /* The received descriptor belongs to the message. */
    request->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (request->fd < 0) {
        r = -errno;
        fail(host, r, "%s: ext_host_begin: cannot keep the request's channel: %s", SD_BUS_ERROR_LIMITS_EXCEEDED,
             strerror(-r));
        dismiss_path(host, path);
        free_request(request);
        sd_bus_message_unref(reply);
        return r;
    }
    sd_bus_message_unref(reply);
    request->host = host;
    request->id = request_id(request->path);
    request->callback = callback;
    request->context = context;
    request->deferred = take_pending(host, request->path, request->sender);
    request->next = host->requests;
    if (host->requests)
        host->requests->previous = request;
    host->requests = request;
    *out = request;
    return 0;
}

API int ext_host_request_channel(const ext_host_request *request) {
    return request ? request->fd : -EINVAL;
}

API uint64_t ext_host_request_id(const ext_host_request *request) {
    return request ? request->id : 0;
}

API const char *ext_host_request_path(const ext_host_request *request) {
    return request ? request->path : NULL;
}

API int ext_host_request_is_over(const ext_host_request *request) {
    return request && request->over ? 1 : 0;
}

API int ext_host_dismiss(ext_host_request *request) {
    if (!request)
        return -EINVAL;
    ext_host *host = request->host;
    int r = 0;
    if (!request->over) {
        /* The request ended meanwhile (its end signal still on its way): not a failure. */
        static const char *const ended[] = {"org.extensiond1.Error.UnknownRequest", SD_BUS_ERROR_UNKNOWN_OBJECT, NULL};
        sd_bus_message *m = NULL;
        r = new_call(host, request->path, REQUEST_INTERFACE, "Dismiss", &m);
        if (r >= 0)
            r = send_call(host, m, CALL_TIMEOUT_USEC, NULL, ended);
    }
    if (request->previous)
        request->previous->next = request->next;
    else
        host->requests = request->next;
    if (request->next)
        request->next->previous = request->previous;
    struct end_signal *end;
    while ((end = take_pending(host, request->path, NULL)))
        free_end(end);
    free_request(request);
    return r;
}

API int ext_host_list(ext_host *host, ext_host_extension **list, size_t *count) {
    if (!host)
        return -EINVAL;
    if (list)
        *list = NULL;
    if (count)
        *count = 0;
    if (!list)
        return fail_argument(host, "ext_host_list", "list");
    if (!count)
        return fail_argument(host, "ext_host_list", "count");
    sd_bus_message *m = NULL, *reply = NULL;
    int r = new_call(host, MANAGER_PATH, MANAGER_INTERFACE, "ListExtensions", &m);
    if (r < 0)
        return r;
    r = send_call(host, m, CALL_TIMEOUT_USEC, &reply, NULL);
    if (r < 0)
        return r;
    ext_host_extension *entries = NULL;
    size_t n = 0, capacity = 0;
    if (!sd_bus_message_has_signature(reply, "a(ssssuo)") || sd_bus_message_enter_container(reply, 'a', "(ssssuo)") < 0) {
        r = fail(host, -EBADMSG, SD_BUS_ERROR_INCONSISTENT_MESSAGE ": the answer of " MANAGER_INTERFACE ".ListExtensions is not a(ssssuo)");
        goto done;
    }
    for (;;) {
        const char *id, *point, *state, *app, *path;
        uint32_t pid;
        r = sd_bus_message_read(reply, "(ssssuo)", &id, &point, &state, &app, &pid, &path);
        if (r < 0) {
            fail(host, -EBADMSG, SD_BUS_ERROR_INCONSISTENT_MESSAGE ": the answer of " MANAGER_INTERFACE ".ListExtensions cannot be read: %s", strerror(-r));
            r = -EBADMSG;
            goto done;
        }
        if (r == 0)
            break;
        if (n == capacity) {
            size_t more = capacity ? capacity * 2 : 16;
            ext_host_extension *grown = realloc(entries, more * sizeof *grown);
            if (!grown)
                goto nomem;
            entries = grown;
            capacity = more;
        }
        /* One block per entry: its strings, id first (ext_host_list_free frees the block at id). */
        size_t lengths[5] = {strlen(id) + 1, strlen(point) + 1, strlen(state) + 1, strlen(app) + 1, strlen(path) + 1};
        char *block = malloc(lengths[0] + lengths[1] + lengths[2] + lengths[3] + lengths[4]);
        if (!block)
            goto nomem;
        const char *sources[5] = {id, point, state, app, path};
        const char *copies[5];
        char *at = block;
        for (int i = 0; i < 5; i++) {
            memcpy(at, sources[i], lengths[i]);
            copies[i] = at;
            at += lengths[i];
        }
        entries[n++] = (ext_host_extension){.id = copies[0], .point = copies[1], .state = copies[2],
                                            .app = copies[3], .object_path = copies[4], .pid = pid};
    }
    r = 0;
    if (n == 0) {
        free(entries);
        entries = NULL;
    }
    *list = entries;
    *count = n;
    entries = NULL;
    n = 0;
    goto done;
nomem:
    r = fail(host, -ENOMEM, SD_BUS_ERROR_NO_MEMORY ": ext_host_list: out of memory");
done:
    ext_host_list_free(entries, n);
    sd_bus_message_unref(reply);
    return r;
}

API void ext_host_list_free(ext_host_extension *list, size_t count) {
    if (!list)
        return;
    for (size_t i = 0; i < count; i++)
        free((char *)list[i].id);
    free(list);
}

API int ext_host_monitor(ext_host *host, ext_host_event_callback callback, void *context) {
    if (!host)
        return -EINVAL;
    host->monitor_match = sd_bus_slot_unref(host->monitor_match);
    host->monitor_callback = NULL;
    host->monitor_context = NULL;
    if (!callback)
        return 0;
    int r = sd_bus_add_match(host->bus, &host->monitor_match, MONITOR_MATCH, on_properties_changed, host);
    if (r < 0) {
        host->monitor_match = NULL;
        return fail_call(host, r, NULL, "org.freedesktop.DBus", "AddMatch");
    }
    host->monitor_callback = callback;
    host->monitor_context = context;
    return 0;
}

API int ext_host_prewarm(ext_host *host, const char *const *extension_ids) {
    if (!host)
        return -EINVAL;
    if (!extension_ids)
        return fail_argument(host, "ext_host_prewarm", "extension_ids");
    sd_bus_message *m = NULL;
    int r = new_call(host, MANAGER_PATH, MANAGER_INTERFACE, "Prewarm", &m);
    if (r < 0)
        return r;
    r = sd_bus_message_append_strv(m, (char **)extension_ids);
    if (r < 0)
        return fail_arguments(host, m, r, MANAGER_INTERFACE, "Prewarm");
    return send_call(host, m, CALL_TIMEOUT_USEC, NULL, NULL);
}

API int ext_host_post_hint(ext_host *host, const char *name) {
    if (!host)
        return -EINVAL;
    if (!name)
        return fail_argument(host, "ext_host_post_hint", "name");
    sd_bus_message *m = NULL;
    int r = new_call(host, MANAGER_PATH, MANAGER_INTERFACE, "PostHint", &m);
    if (r < 0)
        return r;
    r = sd_bus_message_append(m, "s", name);
    if (r < 0)
        return fail_arguments(host, m, r, MANAGER_INTERFACE, "PostHint");
    return send_call(host, m, CALL_TIMEOUT_USEC, NULL, NULL);
}
