#define _GNU_SOURCE
#include "service.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#define EXTENSION_PREFIX BUS_SERVICE_PATH "/extension"
#define REQUEST_PREFIX BUS_SERVICE_PATH "/request"

struct bus_service {
    sd_bus *bus;
    sd_bus_slot *slots[6];
    bus_service_handlers handlers;
    void *context;
    // Whether the name was granted (released at close).
    int owns_name;
    // Numbers the polkit questions' cancellation ids.
    unsigned long long polkit_questions;
};

struct bus_call {
    sd_bus_message *message;
    sd_bus_message *reply;
};

struct bus_watch {
    sd_bus_slot *slot;
    bus_service *service;
    char *name;
    // Set once `gone` was called: it is called once, by the leave or by a match that failed.
    int ended;
};

struct bus_query {
    sd_bus_slot *slot;
    // A reference of its own: a question outlives nothing, but may be freed after the service.
    sd_bus *bus;
    void (*done)(void *userdata, int rc, int allowed, const char *why);
    void *userdata;
    // Set once an answer (or an error) came: a question freed before that is cancelled.
    int answered;
    // The question's cancellation id, unique on this connection.
    char cancellation[48];
};

// Tells polkit to give up question `q` (CancelCheckAuthorization, no reply wanted): polkit then
// ends it (and its authentication dialog), and the bus's count of replies this connection waits
// for (max_replies_per_connection) goes down at once rather than at the bus's own timeout.
static void cancel_polkit_question(bus_query *q) {
    if (sd_bus_is_open(q->bus) <= 0) return;
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_method_call(q->bus, &m, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                           "org.freedesktop.PolicyKit1.Authority", "CancelCheckAuthorization");
    if (r >= 0) r = sd_bus_message_append(m, "s", q->cancellation);
    if (r >= 0) r = sd_bus_message_set_expect_reply(m, 0);
    if (r >= 0) (void)sd_bus_send(q->bus, m, NULL);
    sd_bus_message_unref(m);
}

static int failed(int rc, const char *step, char *why, size_t why_size) {
    if (why && why_size > 0) snprintf(why, why_size, "%s: %s", step, strerror(rc < 0 ? -rc : rc));
    return rc < 0 ? rc : -EIO;
}

// The object an incoming message is for: its kind, and its key decoded from the path.
static int object_of(const char *path, int *object, char **key) {
    *key = NULL;
    if (strcmp(path, BUS_SERVICE_PATH) == 0) {
        *object = BUS_OBJECT_MANAGER;
        *key = strdup("");
        return *key ? 1 : -ENOMEM;
    }
    int r = sd_bus_path_decode(path, EXTENSION_PREFIX, key);
    if (r < 0) return r;
    if (r > 0) {
        *object = BUS_OBJECT_EXTENSION;
        return 1;
    }
    // Requests are named by their number, unescaped: /org/extensiond1/request/42.
    const char *prefix = REQUEST_PREFIX "/";
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) != 0 || path[n] == 0 || strspn(path + n, "0123456789") != strlen(path + n)) return 0;
    *key = strdup(path + n);
    if (!*key) return -ENOMEM;
    *object = BUS_OBJECT_REQUEST;
    return 1;
}

static int on_method(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    bus_service *s = userdata;
    int object;
    char *key;
    int r = object_of(sd_bus_message_get_path(m), &object, &key);
    if (r <= 0) return sd_bus_error_set(error, SD_BUS_ERROR_UNKNOWN_OBJECT, "no such object");
    bus_call *call = calloc(1, sizeof *call);
    if (!call) {
        free(key);
        return -ENOMEM;
    }
    call->message = sd_bus_message_ref(m);
    const char *sender = sd_bus_message_get_sender(m);
    s->handlers.call(s->context, call, object, key, sd_bus_message_get_member(m), sender ? sender : "");
    free(key);
    return 1;
}

static int on_property(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply, void *userdata,
                       sd_bus_error *error) {
    (void)bus;
    (void)interface;
    bus_service *s = userdata;
    int object;
    char *key;
    int r = object_of(path, &object, &key);
    if (r <= 0) return sd_bus_error_set(error, SD_BUS_ERROR_UNKNOWN_OBJECT, "no such object");
    r = s->handlers.property(s->context, object, key, property, (bus_writer *)reply);
    free(key);
    return r;
}

static int find_object(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found, sd_bus_error *error) {
    (void)bus;
    (void)interface;
    (void)error;
    bus_service *s = userdata;
    int object;
    char *key;
    int r = object_of(path, &object, &key);
    if (r <= 0) return 0;
    r = object == BUS_OBJECT_MANAGER ? 0 : s->handlers.exists(s->context, object, key);
    free(key);
    if (r <= 0) return 0;
    *found = s;
    return 1;
}

static int enumerate(bus_service *s, int object, const char *prefix, char ***nodes) {
    char **keys = s->handlers.children(s->context, object);
    size_t n = 0;
    while (keys && keys[n]) n++;
    char **paths = calloc(n + 1, sizeof *paths);
    int r = paths ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (object == BUS_OBJECT_REQUEST)
            r = asprintf(&paths[i], "%s/%s", prefix, keys[i]) < 0 ? -ENOMEM : 0;
        else
            r = sd_bus_path_encode(prefix, keys[i], &paths[i]);
    }
    bus_strv_free(keys);
    if (r < 0) {
        bus_strv_free(paths);
        return r;
    }
    *nodes = paths;
    return 0;
}

static int enumerate_extensions(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *error) {
    (void)bus;
    (void)prefix;
    (void)error;
    return enumerate(userdata, BUS_OBJECT_EXTENSION, EXTENSION_PREFIX, nodes);
}

static int enumerate_requests(sd_bus *bus, const char *prefix, void *userdata, char ***nodes, sd_bus_error *error) {
    (void)bus;
    (void)prefix;
    (void)error;
    return enumerate(userdata, BUS_OBJECT_REQUEST, REQUEST_PREFIX, nodes);
}

static int manager_property(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply, void *userdata,
                            sd_bus_error *error) {
    return on_property(bus, path, interface, property, reply, userdata, error);
}

static const sd_bus_vtable manager_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Version", "s", manager_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Bus", "s", manager_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD_WITH_ARGS("ListExtensions", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssuo)", extensions), on_method,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("ListApps", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sssas)", apps), on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("GetExtension", SD_BUS_ARGS("s", id), SD_BUS_RESULT("o", path), on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Status", SD_BUS_ARGS("as", ids), SD_BUS_RESULT("s", json), on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Begin", SD_BUS_ARGS("s", id, "a{sv}", options), SD_BUS_RESULT("o", request, "h", channel), on_method,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Prewarm", SD_BUS_ARGS("as", ids), SD_BUS_NO_RESULT, on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("PostHint", SD_BUS_ARGS("s", name), SD_BUS_NO_RESULT, on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Kill", SD_BUS_ARGS("s", id, "i", signal), SD_BUS_NO_RESULT, on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Reload", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", json), on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Reset", SD_BUS_ARGS("s", id), SD_BUS_NO_RESULT, on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Reexec", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_ARGS("Reexecuted", SD_BUS_ARGS("b", succeeded, "s", version, "s", previous_version, "s", detail), 0),
    SD_BUS_VTABLE_END,
};

// The seven properties a lifecycle event changes are sent in PropertiesChanged; the others
// change only at a reload and say so (EmitsChangedSignal false): read them again after one.
static const sd_bus_vtable extension_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Id", "s", on_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Point", "s", on_property, 0, 0),
    SD_BUS_PROPERTY("App", "s", on_property, 0, 0),
    SD_BUS_PROPERTY("State", "s", on_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Pid", "u", on_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Since", "s", on_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Requests", "u", on_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Assertions", "u", on_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("Sandbox", "s", on_property, 0, 0),
    SD_BUS_PROPERTY("Container", "s", on_property, 0, 0),
    SD_BUS_PROPERTY("Limits", "a{st}", on_property, 0, 0),
    SD_BUS_PROPERTY("LastEvent", "s", on_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_PROPERTY("LastEventDetail", "s", on_property, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_VTABLE_END,
};

static const sd_bus_vtable request_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("ExtensionId", "s", on_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Pid", "u", on_property, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_METHOD_WITH_ARGS("Dismiss", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, on_method, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL_WITH_ARGS("Completed", SD_BUS_ARGS("ay", payload), 0),
    SD_BUS_SIGNAL_WITH_ARGS("Cancelled", SD_BUS_ARGS("s", reason), 0),
    SD_BUS_SIGNAL_WITH_ARGS("Interrupted", SD_BUS_ARGS("s", reason), 0),
    SD_BUS_VTABLE_END,
};

// The connection to the bus is gone (the bus daemon restarted or closed it): sd-bus delivers
// this local signal once; the daemon closes the service and connects again later.
static int on_disconnected(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)m;
    (void)error;
    bus_service *s = userdata;
    if (s->handlers.lost) s->handlers.lost(s->context);
    return 0;
}

int bus_service_open(int system, void *event, const bus_service_handlers *handlers, void *context, bus_service **service, char *why,
                     size_t why_size) {
    bus_service *s = calloc(1, sizeof *s);
    if (!s) return failed(-ENOMEM, "allocate", why, why_size);
    s->handlers = *handlers;
    s->context = context;
    int r = system ? sd_bus_open_system(&s->bus) : sd_bus_open_user(&s->bus);
    if (r < 0) {
        failed(r, system ? "connect to the system bus" : "connect to the session bus", why, why_size);
        goto fail;
    }
    (void)sd_bus_set_description(s->bus, "extensiond");
    // The calls this connection waits for on the loop (the name at start, a new caller's
    // credentials) are bounded by this, not sd-bus's 25 s default: a bus that does not answer
    // holds the loop at most this long, and the call that needed it is refused.
    (void)sd_bus_set_method_call_timeout(s->bus, 2 * 1000 * 1000);
    // Descriptors pass over this connection (Begin's channel).
    (void)sd_bus_negotiate_fds(s->bus, 1);
    if ((r = sd_bus_add_object_vtable(s->bus, &s->slots[0], BUS_SERVICE_PATH, "org.extensiond1.Manager", manager_vtable, s)) < 0 ||
        (r = sd_bus_add_fallback_vtable(s->bus, &s->slots[1], EXTENSION_PREFIX, "org.extensiond1.Extension", extension_vtable, find_object, s)) <
            0 ||
        (r = sd_bus_add_node_enumerator(s->bus, &s->slots[2], EXTENSION_PREFIX, enumerate_extensions, s)) < 0 ||
        (r = sd_bus_add_fallback_vtable(s->bus, &s->slots[3], REQUEST_PREFIX, "org.extensiond1.Request", request_vtable, find_object, s)) < 0 ||
        (r = sd_bus_add_node_enumerator(s->bus, &s->slots[4], REQUEST_PREFIX, enumerate_requests, s)) < 0 ||
        // A local match: sd-bus dispatches it itself, nothing is asked of the bus.
        (r = sd_bus_match_signal(s->bus, &s->slots[5], "org.freedesktop.DBus.Local", NULL, "org.freedesktop.DBus.Local", "Disconnected",
                                 on_disconnected, s)) < 0) {
        failed(r, "register the objects", why, why_size);
        goto fail;
    }
    if ((r = sd_bus_attach_event(s->bus, (sd_event *)event, SD_EVENT_PRIORITY_NORMAL)) < 0) {
        failed(r, "attach the bus to the event loop", why, why_size);
        goto fail;
    }
    r = sd_bus_request_name(s->bus, BUS_SERVICE_NAME, 0);
    if (r < 0) {
        if (r == -EEXIST && why && why_size > 0)
            snprintf(why, why_size, "the name %s is owned by another connection", BUS_SERVICE_NAME);
        else
            failed(r, "request the name " BUS_SERVICE_NAME, why, why_size);
        goto fail;
    }
    s->owns_name = 1;
    *service = s;
    return 0;
fail:
    bus_service_close(s);
    return r;
}

void bus_service_close(bus_service *s) {
    if (!s) return;
    for (size_t i = 0; i < sizeof s->slots / sizeof s->slots[0]; i++) s->slots[i] = sd_bus_slot_unref(s->slots[i]);
    if (s->bus) {
        (void)sd_bus_detach_event(s->bus);
        // The name is released with a reply waited for (bounded by the connection's 2 s): a
        // program that asks for it next (the re-executed daemon, on a connection of its own)
        // finds it free. Closing alone would leave the release to whenever the bus reads the
        // hang-up, which may come after that program's request.
        if (s->owns_name && sd_bus_is_open(s->bus) > 0) (void)sd_bus_release_name(s->bus, BUS_SERVICE_NAME);
        sd_bus_flush_close_unref(s->bus);
    }
    free(s);
}

const char *bus_service_unique_name(bus_service *s) {
    const char *name = NULL;
    return sd_bus_get_unique_name(s->bus, &name) < 0 ? "" : name;
}

static int on_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    bus_watch *w = userdata;
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    if (w->ended || sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || !name || strcmp(name, w->name) != 0) return 0;
    if (new_owner && *new_owner) return 0;
    w->ended = 1;
    w->service->handlers.gone(w->service->context, w->name, NULL);
    return 0;
}

// The bus's answer to the AddMatch: an error (the bus's limit of match rules per connection,
// say) means the leave would never be seen, so the caller is treated as gone now.
static int on_match_installed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    bus_watch *w = userdata;
    const sd_bus_error *e = sd_bus_message_get_error(m);
    if (w->ended || !e) return 0;
    // A match pending when the connection was lost fails with it: not a refusal, and the
    // service is being closed (its lost handler runs), which ends this watch.
    if (sd_bus_is_open(sd_bus_message_get_bus(m)) <= 0) return 0;
    w->ended = 1;
    char why[256];
    snprintf(why, sizeof why, "the bus refused to report its leaving (AddMatch: %s)", e->message ? e->message : e->name);
    w->service->handlers.gone(w->service->context, w->name, why);
    return 0;
}

int bus_service_watch(bus_service *s, const char *name, bus_watch **watch) {
    bus_watch *w = calloc(1, sizeof *w);
    if (!w) return -ENOMEM;
    w->service = s;
    w->name = strdup(name);
    if (!w->name) {
        free(w);
        return -ENOMEM;
    }
    char rule[512];
    int n = snprintf(rule, sizeof rule,
                     "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus',"
                     "member='NameOwnerChanged',arg0='%s'",
                     name);
    int r = n < 0 || (size_t)n >= sizeof rule ? -ENAMETOOLONG : sd_bus_add_match_async(s->bus, &w->slot, rule, on_owner_changed, on_match_installed, w);
    if (r < 0) {
        free(w->name);
        free(w);
        return r;
    }
    *watch = w;
    return 0;
}

void bus_watch_free(bus_watch *w) {
    if (!w) return;
    sd_bus_slot_unref(w->slot);
    free(w->name);
    free(w);
}

int bus_call_credentials(bus_call *call, uint32_t *uid, int32_t *pid, uint32_t *gid, uint32_t *groups, int *group_count, char *why,
                         size_t why_size) {
    sd_bus_creds *creds = NULL;
    int r = sd_bus_query_sender_creds(call->message, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID | SD_BUS_CREDS_EGID | SD_BUS_CREDS_SUPPLEMENTARY_GIDS,
                                      &creds);
    if (r < 0) return failed(r, "ask the bus for the caller's credentials", why, why_size);
    uid_t u;
    pid_t p;
    if ((r = sd_bus_creds_get_euid(creds, &u)) < 0 || (r = sd_bus_creds_get_pid(creds, &p)) < 0) {
        sd_bus_creds_unref(creds);
        return failed(r, "read the caller's uid and pid", why, why_size);
    }
    const gid_t *list = NULL;
    int count = sd_bus_creds_get_supplementary_gids(creds, &list);
    if (count < 0) count = 0;
    gid_t g;
    if (sd_bus_creds_get_egid(creds, &g) < 0) g = count > 0 ? list[0] : (gid_t)-1;
    *uid = u;
    *pid = p;
    *gid = g;
    for (int i = 0; i < count && i < *group_count; i++) groups[i] = list[i];
    *group_count = count;
    sd_bus_creds_unref(creds);
    return 0;
}

int bus_call_read_string(bus_call *call, const char **value) { return sd_bus_message_read_basic(call->message, 's', value); }

int bus_call_read_int32(bus_call *call, int32_t *value) { return sd_bus_message_read_basic(call->message, 'i', value); }

int bus_call_read_strv(bus_call *call, char ***value) { return sd_bus_message_read_strv(call->message, value); }

int bus_call_read_option_keys(bus_call *call, char ***keys) {
    sd_bus_message *m = call->message;
    size_t n = 0, capacity = 4;
    char **list = calloc(capacity + 1, sizeof *list);
    if (!list) return -ENOMEM;
    int r = sd_bus_message_enter_container(m, 'a', "{sv}");
    while (r >= 0 && (r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key = NULL;
        if ((r = sd_bus_message_read_basic(m, 's', &key)) < 0 || (r = sd_bus_message_skip(m, "v")) < 0 ||
            (r = sd_bus_message_exit_container(m)) < 0)
            break;
        if (n == capacity) {
            char **bigger = realloc(list, (capacity * 2 + 1) * sizeof *list);
            if (!bigger) {
                r = -ENOMEM;
                break;
            }
            list = bigger;
            capacity *= 2;
        }
        if (!(list[n] = strdup(key))) {
            r = -ENOMEM;
            break;
        }
        list[++n] = NULL;
    }
    if (r >= 0) r = sd_bus_message_exit_container(m);
    if (r < 0) {
        bus_strv_free(list);
        return r;
    }
    *keys = list;
    return 0;
}

void bus_strv_free(char **strv) {
    if (!strv) return;
    for (char **p = strv; *p; p++) free(*p);
    free(strv);
}

void bus_call_free(bus_call *call) {
    if (!call) return;
    sd_bus_message_unref(call->reply);
    sd_bus_message_unref(call->message);
    free(call);
}

static int finish(bus_call *call, int r) {
    bus_call_free(call);
    return r;
}

int bus_call_reply(bus_call *call) { return finish(call, sd_bus_reply_method_return(call->message, NULL)); }

int bus_call_reply_string(bus_call *call, const char *value) { return finish(call, sd_bus_reply_method_return(call->message, "s", value)); }

int bus_call_reply_path(bus_call *call, const char *path) { return finish(call, sd_bus_reply_method_return(call->message, "o", path)); }

int bus_call_reply_path_fd(bus_call *call, const char *path, int fd) {
    // A caller that expects no reply would never get the descriptor: that is a failure here
    // (sd-bus skips such a reply and says success).
    if (!sd_bus_message_get_expect_reply(call->message)) return finish(call, -ENOMSG);
    return finish(call, sd_bus_reply_method_return(call->message, "oh", path, fd));
}

int bus_call_reply_error(bus_call *call, const char *name, const char *message) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int r = sd_bus_error_set(&error, name, message);
    r = sd_bus_reply_method_error(call->message, &error);
    sd_bus_error_free(&error);
    return finish(call, r);
}

bus_writer *bus_call_writer(bus_call *call) {
    if (!call->reply && sd_bus_message_new_method_return(call->message, &call->reply) < 0) return NULL;
    return (bus_writer *)call->reply;
}

int bus_call_reply_written(bus_call *call) {
    if (!call->reply) return finish(call, -EINVAL);
    return finish(call, sd_bus_send(NULL, call->reply, NULL));
}

int bus_writer_open(bus_writer *w, char type, const char *contents) {
    return sd_bus_message_open_container((sd_bus_message *)w, type, contents);
}
int bus_writer_close(bus_writer *w) { return sd_bus_message_close_container((sd_bus_message *)w); }
int bus_writer_string(bus_writer *w, const char *value) { return sd_bus_message_append_basic((sd_bus_message *)w, 's', value); }
int bus_writer_path(bus_writer *w, const char *value) { return sd_bus_message_append_basic((sd_bus_message *)w, 'o', value); }
int bus_writer_uint32(bus_writer *w, uint32_t value) { return sd_bus_message_append_basic((sd_bus_message *)w, 'u', &value); }
int bus_writer_uint64(bus_writer *w, uint64_t value) { return sd_bus_message_append_basic((sd_bus_message *)w, 't', &value); }
int bus_writer_strv(bus_writer *w, char **strv) { return sd_bus_message_append_strv((sd_bus_message *)w, strv); }

char *bus_extension_path(const char *id) {
    char *path = NULL;
    return sd_bus_path_encode(EXTENSION_PREFIX, id, &path) < 0 ? NULL : path;
}

int bus_service_extension_changed(bus_service *s, const char *id, const char *state, uint32_t pid, const char *since, uint32_t requests,
                                  uint32_t assertions, const char *event, const char *detail) {
    char *path = bus_extension_path(id);
    if (!path) return -ENOMEM;
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_signal(s->bus, &m, path, "org.freedesktop.DBus.Properties", "PropertiesChanged");
    if (r >= 0)
        r = sd_bus_message_append(m, "sa{sv}as", "org.extensiond1.Extension", 7, "State", "s", state, "Pid", "u", pid, "Since", "s", since,
                                  "Requests", "u", requests, "Assertions", "u", assertions, "LastEvent", "s", event, "LastEventDetail", "s",
                                  detail, 0);
    if (r >= 0) r = sd_bus_send(s->bus, m, NULL);
    sd_bus_message_unref(m);
    free(path);
    return r;
}

int bus_service_request_signal(bus_service *s, uint64_t request, const char *destination, const char *signal, const void *payload,
                               size_t size, const char *reason) {
    char path[64];
    snprintf(path, sizeof path, REQUEST_PREFIX "/%llu", (unsigned long long)request);
    sd_bus_message *m = NULL;
    int r = sd_bus_message_new_signal(s->bus, &m, path, "org.extensiond1.Request", signal);
    if (r >= 0) r = sd_bus_message_set_destination(m, destination);
    if (r >= 0) r = strcmp(signal, "Completed") == 0 ? sd_bus_message_append_array(m, 'y', payload, size) : sd_bus_message_append(m, "s", reason);
    if (r >= 0) r = sd_bus_send(s->bus, m, NULL);
    sd_bus_message_unref(m);
    return r;
}

int bus_service_emit_reexecuted(bus_service *s, int succeeded, const char *version, const char *previous, const char *detail) {
    return sd_bus_emit_signal(s->bus, "/org/extensiond1", "org.extensiond1.Manager", "Reexecuted", "bsss", succeeded ? 1 : 0, version, previous,
                              detail);
}

static int on_polkit_answer(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
    (void)ret_error;
    bus_query *q = userdata;
    q->answered = 1;
    const sd_bus_error *e = sd_bus_message_get_error(m);
    int rc = 0, authorized = 0, challenge = 0;
    char why[256] = "";
    if (e) {
        if (sd_bus_error_has_name(e, SD_BUS_ERROR_SERVICE_UNKNOWN) || sd_bus_error_has_name(e, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
            rc = -ESRCH;
        else if (sd_bus_error_has_name(e, SD_BUS_ERROR_LIMITS_EXCEEDED))
            rc = -ENOBUFS;  // the bus's cap on replies waited for: a limit, not a refusal
        else
            rc = -sd_bus_error_get_errno(e);
        if (rc == 0) rc = -EIO;
        // Our timeout (sd-bus's NoReply): polkit may still be asking the user.
        if (sd_bus_error_has_name(e, SD_BUS_ERROR_NO_REPLY) || rc == -ETIMEDOUT) cancel_polkit_question(q);
        snprintf(why, sizeof why, "CheckAuthorization: %s", e->message ? e->message : e->name);
    } else {
        rc = sd_bus_message_enter_container(m, 'r', "bba{ss}");
        if (rc >= 0) rc = sd_bus_message_read(m, "bb", &authorized, &challenge);
        if (rc < 0)
            failed(rc, "read CheckAuthorization's answer", why, sizeof why);
        else
            rc = 0;
    }
    q->done(q->userdata, rc, authorized ? 1 : 0, why);
    return 0;
}

int bus_service_check_polkit(bus_service *s, const char *sender, const char *action, unsigned long long timeout_usec,
                             void (*done)(void *userdata, int rc, int allowed, const char *why), void *userdata, bus_query **query) {
    bus_query *q = calloc(1, sizeof *q);
    if (!q) return -ENOMEM;
    q->done = done;
    q->userdata = userdata;
    q->bus = sd_bus_ref(s->bus);
    snprintf(q->cancellation, sizeof q->cancellation, "extensiond-%llu", ++s->polkit_questions);
    sd_bus_message *call = NULL;
    int r = sd_bus_message_new_method_call(s->bus, &call, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                           "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization");
    // subject (system-bus-name), action, details {}, flags 1 (AllowUserInteraction), the
    // cancellation id (CancelCheckAuthorization takes it from this connection only).
    if (r >= 0)
        r = sd_bus_message_append(call, "(sa{sv})sa{ss}us", "system-bus-name", 1, "name", "s", sender, action, 0, 1u, q->cancellation);
    if (r >= 0) r = sd_bus_call_async(s->bus, &q->slot, call, on_polkit_answer, q, timeout_usec);
    sd_bus_message_unref(call);
    if (r < 0) {
        sd_bus_unref(q->bus);
        free(q);
        return r;
    }
    *query = q;
    return 0;
}

void bus_query_free(bus_query *q) {
    if (!q) return;
    sd_bus_slot_unref(q->slot);
    if (!q->answered) cancel_polkit_question(q);
    sd_bus_unref(q->bus);
    free(q);
}
