/* dbus-app: a D-Bus-activatable application for the open-URL integration tests
 * (Tests/IntegrationTests/Harness/PrivateBus.swift).
 *
 *   dbus-app BUS_NAME RECORD_FILE
 *
 * Connects to DBUS_STARTER_ADDRESS (set by the bus when it activates the service), else
 * DBUS_SESSION_BUS_ADDRESS; serves org.freedesktop.Application (freedesktop Desktop Entry
 * specification, DBusActivatable) at "/" + BUS_NAME with '.' -> '/' and '-' -> '_', and then
 * requests BUS_NAME. Every call appends its lines to RECORD_FILE in one write(2):
 *
 *   open <uri>              one per URI, for Open(as, a{sv})
 *   activate                for Activate(a{sv})
 *   action <name>           for ActivateAction(s, av, a{sv})
 *   parameter <value>       each string parameter of that ActivateAction, after its action line
 *   platform <key>=<value>  desktop-startup-id / activation-token of the platform data
 *                           (string values only), after the lines above
 *
 * A backslash in a value is written as "\\" and a newline as "\n", so that one value stays
 * on one line. Exits 0 when the bus connection ends or on SIGTERM; 1 on a setup failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

static const char *record_path;
static volatile sig_atomic_t terminated;

static void on_term(int signal) {
    (void)signal;
    terminated = 1;
}

/* A growable buffer holding one call's lines. */
struct text {
    char *data;
    size_t length, capacity;
};

static int text_append(struct text *t, const char *s, size_t n) {
    if (t->length + n + 1 > t->capacity) {
        size_t capacity = (t->length + n + 1) * 2;
        char *data = realloc(t->data, capacity);
        if (!data) return -ENOMEM;
        t->data = data;
        t->capacity = capacity;
    }
    memcpy(t->data + t->length, s, n);
    t->length += n;
    t->data[t->length] = '\0';
    return 0;
}

static int text_add(struct text *t, const char *s) { return text_append(t, s, strlen(s)); }

/* Appends `value` with '\\' and '\n' escaped. */
static int text_add_value(struct text *t, const char *value) {
    for (const char *p = value; *p; p++) {
        int r = *p == '\\' ? text_add(t, "\\\\") : *p == '\n' ? text_add(t, "\\n") : text_append(t, p, 1);
        if (r < 0) return r;
    }
    return 0;
}

/* Appends the whole of `t` to the record file (opened, written, closed). */
static int record(const struct text *t) {
    int fd = open(record_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    size_t done = 0;
    while (done < t->length) {
        ssize_t n = write(fd, t->data + done, t->length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            return -e;
        }
        done += (size_t)n;
    }
    return close(fd) < 0 ? -errno : 0;
}

/* Reads the platform data (a{sv}) and adds a `platform key=value` line for each string
 * desktop-startup-id or activation-token. */
static int read_platform_data(sd_bus_message *m, struct text *t) {
    int r = sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key, *contents;
        char type;
        r = sd_bus_message_read(m, "s", &key);
        if (r < 0) return r;
        r = sd_bus_message_peek_type(m, &type, &contents);
        if (r < 0) return r;
        int wanted = strcmp(key, "desktop-startup-id") == 0 || strcmp(key, "activation-token") == 0;
        if (wanted && type == 'v' && strcmp(contents, "s") == 0) {
            const char *value;
            r = sd_bus_message_read(m, "v", "s", &value);
            if (r < 0) return r;
            if ((r = text_add(t, "platform ")) < 0 || (r = text_add_value(t, key)) < 0 || (r = text_add(t, "=")) < 0 ||
                (r = text_add_value(t, value)) < 0 || (r = text_add(t, "\n")) < 0)
                return r;
        } else {
            r = sd_bus_message_skip(m, "v");
            if (r < 0) return r;
        }
        r = sd_bus_message_exit_container(m);
        if (r < 0) return r;
    }
    if (r < 0) return r;
    return sd_bus_message_exit_container(m);
}

/* Records `t` and replies (an error reply when reading or recording failed). */
static int finish(sd_bus_message *m, struct text *t, int r, sd_bus_error *error) {
    if (r >= 0) r = record(t);
    free(t->data);
    if (r < 0) return sd_bus_error_set_errnof(error, -r, "dbus-app: %s", strerror(-r));
    return sd_bus_reply_method_return(m, NULL);
}

static int method_activate(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    struct text t = {0};
    int r = text_add(&t, "activate\n");
    if (r >= 0) r = read_platform_data(m, &t);
    return finish(m, &t, r, error);
}

static int method_open(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    struct text t = {0};
    int r = sd_bus_message_enter_container(m, 'a', "s");
    if (r >= 0) {
        const char *uri;
        while ((r = sd_bus_message_read(m, "s", &uri)) > 0) {
            if ((r = text_add(&t, "open ")) < 0 || (r = text_add_value(&t, uri)) < 0 || (r = text_add(&t, "\n")) < 0) break;
        }
        if (r >= 0) r = sd_bus_message_exit_container(m);
    }
    if (r >= 0) r = read_platform_data(m, &t);
    return finish(m, &t, r, error);
}

static int method_activate_action(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    struct text t = {0};
    const char *name;
    int r = sd_bus_message_read(m, "s", &name);
    if (r >= 0 && ((r = text_add(&t, "action ")) >= 0 && (r = text_add_value(&t, name)) >= 0)) r = text_add(&t, "\n");
    if (r >= 0) r = sd_bus_message_enter_container(m, 'a', "v");
    while (r >= 0) {
        const char *contents;
        r = sd_bus_message_peek_type(m, NULL, &contents);
        if (r <= 0) break;
        if (strcmp(contents, "s") == 0) {
            const char *value;
            r = sd_bus_message_read(m, "v", "s", &value);
            if (r >= 0 && (r = text_add(&t, "parameter ")) >= 0 && (r = text_add_value(&t, value)) >= 0) r = text_add(&t, "\n");
        } else {
            r = sd_bus_message_skip(m, "v");
        }
    }
    if (r >= 0) r = sd_bus_message_exit_container(m);
    if (r >= 0) r = read_platform_data(m, &t);
    return finish(m, &t, r, error);
}

static const sd_bus_vtable application_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD_WITH_ARGS("Activate", SD_BUS_ARGS("a{sv}", platform_data), SD_BUS_NO_RESULT, method_activate, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("Open", SD_BUS_ARGS("as", uris, "a{sv}", platform_data), SD_BUS_NO_RESULT, method_open, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("ActivateAction", SD_BUS_ARGS("s", action_name, "av", parameter, "a{sv}", platform_data), SD_BUS_NO_RESULT,
                            method_activate_action, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

static int fail(const char *what, int r) {
    fprintf(stderr, "dbus-app: %s: %s\n", what, strerror(-r));
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dbus-app BUS_NAME RECORD_FILE\n");
        return 2;
    }
    const char *name = argv[1];
    record_path = argv[2];
    const char *address = getenv("DBUS_STARTER_ADDRESS");
    if (!address || !*address) address = getenv("DBUS_SESSION_BUS_ADDRESS");
    if (!address || !*address) {
        fprintf(stderr, "dbus-app: neither DBUS_STARTER_ADDRESS nor DBUS_SESSION_BUS_ADDRESS is set\n");
        return 1;
    }

    /* The object path: "/" + the name with '.' -> '/' and '-' -> '_'. */
    size_t length = strlen(name);
    char *path = malloc(length + 2);
    if (!path) return fail("malloc", -ENOMEM);
    path[0] = '/';
    for (size_t i = 0; i <= length; i++) path[i + 1] = name[i] == '.' ? '/' : name[i] == '-' ? '_' : name[i];
    if (!sd_bus_object_path_is_valid(path)) {
        fprintf(stderr, "dbus-app: %s gives no valid object path (%s)\n", name, path);
        return 1;
    }

    /* SIGTERM is blocked except while waiting in ppoll, so its arrival cannot be missed. */
    sigset_t term, waiting;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &waiting);
    sigdelset(&waiting, SIGTERM);
    /* A handler (not SIG_DFL), so that ppoll returns EINTR and the process exits 0. */
    struct sigaction action = {.sa_handler = on_term};
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);

    sd_bus *bus = NULL;
    int r = sd_bus_new(&bus);
    if (r < 0) return fail("sd_bus_new", r);
    if ((r = sd_bus_set_address(bus, address)) < 0) return fail("sd_bus_set_address", r);
    if ((r = sd_bus_set_bus_client(bus, 1)) < 0) return fail("sd_bus_set_bus_client", r);
    if ((r = sd_bus_start(bus)) < 0) return fail("sd_bus_start", r);
    if ((r = sd_bus_add_object_vtable(bus, NULL, path, "org.freedesktop.Application", application_vtable, NULL)) < 0)
        return fail("sd_bus_add_object_vtable", r);
    if ((r = sd_bus_request_name(bus, name, 0)) < 0) return fail("sd_bus_request_name", r);

    for (;;) {
        r = sd_bus_process(bus, NULL);
        if (r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE) break;
        if (r < 0) return fail("sd_bus_process", r);
        if (!sd_bus_is_open(bus)) break;
        if (r > 0) continue;
        struct pollfd pfd = {.fd = sd_bus_get_fd(bus), .events = (short)sd_bus_get_events(bus)};
        uint64_t until = UINT64_MAX;
        struct timespec timeout, *t = NULL;
        if (sd_bus_get_timeout(bus, &until) >= 0 && until != UINT64_MAX) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            uint64_t now_us = (uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000;
            uint64_t left = until > now_us ? until - now_us : 0;
            timeout.tv_sec = (time_t)(left / 1000000);
            timeout.tv_nsec = (long)(left % 1000000) * 1000;
            t = &timeout;
        }
        if (ppoll(&pfd, 1, t, &waiting) < 0 && errno != EINTR) return fail("ppoll", -errno);
        if (terminated) break;
    }
    sd_bus_flush_close_unref(bus);
    free(path);
    return 0;
}
