/* fake-logind: a stand-in for systemd-logind on a private bus, for the integration tests
 * that ask whether the host's session is locked (Tests/IntegrationTests/Harness/PrivateBus.swift).
 *
 *   fake-logind ADDRESS
 *
 * Connects to the bus at ADDRESS as a client, owns org.freedesktop.login1 and serves:
 *
 *   /org/freedesktop/login1  org.freedesktop.login1.Manager
 *     GetSessionByPID(u pid) -> o   /org/freedesktop/login1/session/c1 for any live pid; the
 *                                   error org.freedesktop.login1.NoSessionForPID for pid 0 or
 *                                   a pid that does not exist (kill(pid, 0) fails with ESRCH)
 *     GetSession(s id) -> o         the same path for "c1" (and "self", "auto"); otherwise
 *                                   org.freedesktop.login1.NoSuchSession
 *   /org/freedesktop/login1/session/c1  org.freedesktop.login1.Session
 *     Id s "c1" (const), Active b true (const), LockedHint b (emits PropertiesChanged)
 *     SetLockedHint(b), Lock(), Unlock()  set LockedHint (true, false) and emit
 *                                         PropertiesChanged; Lock()/Unlock() also emit the
 *                                         Lock/Unlock signals, as logind does
 *
 * Prints "READY" on stdout once it owns the name. Exits 0 when the bus connection ends or on
 * SIGTERM; 1 on a setup failure (the name already owned, for one).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#define MANAGER_PATH "/org/freedesktop/login1"
#define SESSION_PATH "/org/freedesktop/login1/session/c1"
#define SESSION_INTERFACE "org.freedesktop.login1.Session"

static int locked_hint;
static volatile sig_atomic_t terminated;

static void on_term(int signal) {
    (void)signal;
    terminated = 1;
}

static int method_get_session_by_pid(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    uint32_t pid;
    int r = sd_bus_message_read(m, "u", &pid);
    if (r < 0) return r;
    if (pid == 0 || pid > INT32_MAX || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
        return sd_bus_error_setf(error, "org.freedesktop.login1.NoSessionForPID", "PID %u does not belong to any known session", pid);
    return sd_bus_reply_method_return(m, "o", SESSION_PATH);
}

static int method_get_session(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    const char *id;
    int r = sd_bus_message_read(m, "s", &id);
    if (r < 0) return r;
    if (strcmp(id, "c1") != 0 && strcmp(id, "self") != 0 && strcmp(id, "auto") != 0)
        return sd_bus_error_setf(error, "org.freedesktop.login1.NoSuchSession", "No session '%s' known", id);
    return sd_bus_reply_method_return(m, "o", SESSION_PATH);
}

static int set_locked(sd_bus_message *m, int locked) {
    sd_bus *bus = sd_bus_message_get_bus(m);
    if (locked_hint != locked) {
        locked_hint = locked;
        int r = sd_bus_emit_properties_changed(bus, SESSION_PATH, SESSION_INTERFACE, "LockedHint", NULL);
        if (r < 0) return r;
    }
    return sd_bus_reply_method_return(m, NULL);
}

static int method_set_locked_hint(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    int locked;
    int r = sd_bus_message_read(m, "b", &locked);
    if (r < 0) return r;
    return set_locked(m, !!locked);
}

static int method_lock(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    int r = sd_bus_emit_signal(sd_bus_message_get_bus(m), SESSION_PATH, SESSION_INTERFACE, "Lock", NULL);
    return r < 0 ? r : set_locked(m, 1);
}

static int method_unlock(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    int r = sd_bus_emit_signal(sd_bus_message_get_bus(m), SESSION_PATH, SESSION_INTERFACE, "Unlock", NULL);
    return r < 0 ? r : set_locked(m, 0);
}

static int property_locked_hint(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply,
                                void *userdata, sd_bus_error *error) {
    (void)bus, (void)path, (void)interface, (void)property, (void)userdata, (void)error;
    return sd_bus_message_append(reply, "b", locked_hint);
}

static int property_true(sd_bus *bus, const char *path, const char *interface, const char *property, sd_bus_message *reply,
                         void *userdata, sd_bus_error *error) {
    (void)bus, (void)path, (void)interface, (void)property, (void)userdata, (void)error;
    return sd_bus_message_append(reply, "b", 1);
}

static const sd_bus_vtable manager_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD_WITH_ARGS("GetSessionByPID", SD_BUS_ARGS("u", pid), SD_BUS_RESULT("o", object_path), method_get_session_by_pid,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_ARGS("GetSession", SD_BUS_ARGS("s", session_id), SD_BUS_RESULT("o", object_path), method_get_session,
                            SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

static const sd_bus_vtable session_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("Id", "s", NULL, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Active", "b", property_true, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("LockedHint", "b", property_locked_hint, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
    SD_BUS_METHOD_WITH_ARGS("SetLockedHint", SD_BUS_ARGS("b", locked), SD_BUS_NO_RESULT, method_set_locked_hint, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Lock", NULL, NULL, method_lock, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Unlock", NULL, NULL, method_unlock, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL("Lock", NULL, 0),
    SD_BUS_SIGNAL("Unlock", NULL, 0),
    SD_BUS_VTABLE_END,
};

static int fail(const char *what, int r) {
    fprintf(stderr, "fake-logind: %s: %s\n", what, strerror(-r));
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fake-logind ADDRESS\n");
        return 2;
    }
    /* SIGTERM is blocked except while waiting in ppoll, so its arrival cannot be missed; a
     * handler (not SIG_DFL), so that ppoll returns EINTR and the process exits 0. */
    sigset_t term, waiting;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &waiting);
    sigdelset(&waiting, SIGTERM);
    struct sigaction action = {.sa_handler = on_term};
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);

    /* Id is a constant string property read from userdata by sd-bus's default getter. */
    static const char *id = "c1";
    sd_bus *bus = NULL;
    int r = sd_bus_new(&bus);
    if (r < 0) return fail("sd_bus_new", r);
    if ((r = sd_bus_set_address(bus, argv[1])) < 0) return fail("sd_bus_set_address", r);
    if ((r = sd_bus_set_bus_client(bus, 1)) < 0) return fail("sd_bus_set_bus_client", r);
    if ((r = sd_bus_start(bus)) < 0) return fail("sd_bus_start", r);
    if ((r = sd_bus_add_object_vtable(bus, NULL, MANAGER_PATH, "org.freedesktop.login1.Manager", manager_vtable, NULL)) < 0)
        return fail("sd_bus_add_object_vtable (Manager)", r);
    if ((r = sd_bus_add_object_vtable(bus, NULL, SESSION_PATH, SESSION_INTERFACE, session_vtable, &id)) < 0)
        return fail("sd_bus_add_object_vtable (Session)", r);
    if ((r = sd_bus_request_name(bus, "org.freedesktop.login1", 0)) < 0) return fail("sd_bus_request_name org.freedesktop.login1", r);
    if (r == 0) return fail("sd_bus_request_name org.freedesktop.login1 (queued: another owner)", -EEXIST);
    printf("READY\n");
    fflush(stdout);

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
    return 0;
}
