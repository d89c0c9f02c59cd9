#include "bus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

static int fail(int rc, const sd_bus_error *error, const char *step, char *why, size_t why_size) {
    if (why && why_size > 0) {
        if (error && sd_bus_error_is_set(error))
            snprintf(why, why_size, "%s: %s: %s", step, error->name, error->message ? error->message : "");
        else
            snprintf(why, why_size, "%s: %s", step, strerror(rc < 0 ? -rc : rc));
    }
    return rc < 0 ? rc : -EIO;
}

static int open_bus(int system, unsigned long long timeout_usec, sd_bus **bus) {
    int rc = system ? sd_bus_open_system(bus) : sd_bus_open_user(bus);
    if (rc < 0) return rc;
    sd_bus_set_method_call_timeout(*bus, timeout_usec);
    return 0;
}

int bus_session_locked(pid_t pid, unsigned long long timeout_usec, int *locked, char *why, size_t why_size) {
    sd_bus *bus = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    const char *path = NULL;
    int value = 0;
    int rc = open_bus(1, timeout_usec, &bus);
    if (rc < 0) { rc = fail(rc, NULL, "connect to the system bus", why, why_size); goto done; }
    rc = sd_bus_call_method(bus, "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                            "GetSessionByPID", &error, &reply, "u", (uint32_t)pid);
    if (rc < 0) {
        if (sd_bus_error_has_name(&error, "org.freedesktop.login1.NoSessionForPID")) rc = -ENXIO;
        else if (sd_bus_error_has_name(&error, "org.freedesktop.DBus.Error.ServiceUnknown") ||
                 sd_bus_error_has_name(&error, "org.freedesktop.DBus.Error.NameHasNoOwner"))
            rc = -ESRCH;
        rc = fail(rc, &error, "GetSessionByPID", why, why_size);
        goto done;
    }
    rc = sd_bus_message_read(reply, "o", &path);
    if (rc < 0) { rc = fail(rc, NULL, "read GetSessionByPID's answer", why, why_size); goto done; }
    rc = sd_bus_get_property_trivial(bus, "org.freedesktop.login1", path, "org.freedesktop.login1.Session", "LockedHint", &error, 'b', &value);
    if (rc < 0) { rc = fail(rc, &error, "LockedHint", why, why_size); goto done; }
    *locked = value ? 1 : 0;
    rc = 0;
done:
    sd_bus_error_free(&error);
    sd_bus_message_unref(reply);
    sd_bus_flush_close_unref(bus);
    return rc;
}

// The object path the Desktop Entry specification derives from an app id ('.' to '/', '-' to
// '_'), allocated; NULL when out of memory.
static char *application_path(const char *app_id) {
    size_t n = strlen(app_id);
    char *path = malloc(n + 2);
    if (!path) return NULL;
    path[0] = '/';
    for (size_t i = 0; i < n; i++) path[i + 1] = app_id[i] == '.' ? '/' : app_id[i] == '-' ? '_' : app_id[i];
    path[n + 1] = 0;
    return path;
}

// One call of org.freedesktop.Application: Open([uri], {}) when `action` is NULL, else
// ActivateAction(action, [<parameter>], {}) with a string parameter.
static int application_call(int system, const char *app_id, const char *uri, const char *action, const char *parameter,
                            unsigned long long timeout_usec, char *why, size_t why_size) {
    sd_bus *bus = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *call = NULL, *reply = NULL;
    const char *method = action ? "ActivateAction" : "Open";
    char *path = application_path(app_id);
    int rc;
    if (!path) return fail(-ENOMEM, NULL, "allocate", why, why_size);
    rc = open_bus(system, timeout_usec, &bus);
    if (rc < 0) { rc = fail(rc, NULL, system ? "connect to the system bus" : "connect to the session bus", why, why_size); goto done; }
    rc = sd_bus_message_new_method_call(bus, &call, app_id, path, "org.freedesktop.Application", method);
    if (action) {
        if (rc >= 0) rc = sd_bus_message_append(call, "s", action);
        if (rc >= 0) rc = sd_bus_message_append(call, "av", 1, "s", parameter);
    } else if (rc >= 0) {
        rc = sd_bus_message_append_strv(call, (char *[]){(char *)uri, NULL});
    }
    if (rc >= 0) rc = sd_bus_message_append(call, "a{sv}", 0);
    if (rc < 0) { rc = fail(rc, NULL, action ? "build ActivateAction" : "build Open", why, why_size); goto done; }
    rc = sd_bus_call(bus, call, 0, &error, &reply);
    if (rc < 0) {
        rc = fail(rc, &error, action ? "org.freedesktop.Application.ActivateAction" : "org.freedesktop.Application.Open", why, why_size);
        goto done;
    }
    rc = 0;
done:
    free(path);
    sd_bus_error_free(&error);
    sd_bus_message_unref(call);
    sd_bus_message_unref(reply);
    sd_bus_flush_close_unref(bus);
    return rc;
}

int bus_application_open(int system, const char *app_id, const char *uri, unsigned long long timeout_usec, char *why, size_t why_size) {
    return application_call(system, app_id, uri, NULL, NULL, timeout_usec, why, why_size);
}

int bus_application_activate_action(int system, const char *app_id, const char *action, const char *parameter,
                                    unsigned long long timeout_usec, char *why, size_t why_size) {
    return application_call(system, app_id, NULL, action, parameter, timeout_usec, why, why_size);
}

static int open_manager(int system, unsigned long long timeout_usec, sd_bus **bus) {
    char address[512];
    const char *runtime = getenv("XDG_RUNTIME_DIR");
    if (system)
        snprintf(address, sizeof address, "unix:path=/run/systemd/private");
    else if (runtime && *runtime)
        snprintf(address, sizeof address, "unix:path=%s/systemd/private", runtime);
    else
        address[0] = 0;
    if (address[0]) {
        int rc = sd_bus_new(bus);
        if (rc < 0) return rc;
        if (sd_bus_set_address(*bus, address) >= 0 && sd_bus_start(*bus) >= 0) {
            sd_bus_set_method_call_timeout(*bus, timeout_usec);
            return 0;
        }
        sd_bus_flush_close_unref(*bus);
        *bus = NULL;
    }
    return open_bus(system, timeout_usec, bus);
}

int bus_start_transient_service(int system, const char *unit, const char *description, const char *const *argv, const char *user,
                                unsigned long long timeout_usec, char *why, size_t why_size) {
    sd_bus *bus = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message *call = NULL, *reply = NULL;
    int rc = open_manager(system, timeout_usec, &bus);
    if (rc < 0) { rc = fail(rc, NULL, "connect to the service manager", why, why_size); goto done; }
    rc = sd_bus_message_new_method_call(bus, &call, "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                        "StartTransientUnit");
    if (rc >= 0) rc = sd_bus_message_append(call, "ss", unit, "fail");
    if (rc >= 0) rc = sd_bus_message_open_container(call, 'a', "(sv)");
    if (rc >= 0) rc = sd_bus_message_append(call, "(sv)", "Description", "s", description);
    if (rc >= 0) rc = sd_bus_message_append(call, "(sv)", "CollectMode", "s", "inactive-or-failed");
    if (rc >= 0 && user) rc = sd_bus_message_append(call, "(sv)", "User", "s", user);
    if (rc >= 0) rc = sd_bus_message_open_container(call, 'r', "sv");
    if (rc >= 0) rc = sd_bus_message_append(call, "s", "ExecStart");
    if (rc >= 0) rc = sd_bus_message_open_container(call, 'v', "a(sasb)");
    if (rc >= 0) rc = sd_bus_message_open_container(call, 'a', "(sasb)");
    if (rc >= 0) rc = sd_bus_message_open_container(call, 'r', "sasb");
    if (rc >= 0) rc = sd_bus_message_append(call, "s", argv[0]);
    if (rc >= 0) rc = sd_bus_message_append_strv(call, (char **)argv);
    if (rc >= 0) rc = sd_bus_message_append(call, "b", 0);
    for (int i = 0; i < 4 && rc >= 0; i++) rc = sd_bus_message_close_container(call);
    if (rc >= 0) rc = sd_bus_message_close_container(call);
    if (rc >= 0) rc = sd_bus_message_append(call, "a(sa(sv))", 0);
    if (rc < 0) { rc = fail(rc, NULL, "build StartTransientUnit", why, why_size); goto done; }
    rc = sd_bus_call(bus, call, 0, &error, &reply);
    if (rc < 0) { rc = fail(rc, &error, "StartTransientUnit", why, why_size); goto done; }
    rc = 0;
done:
    sd_bus_error_free(&error);
    sd_bus_message_unref(call);
    sd_bus_message_unref(reply);
    sd_bus_flush_close_unref(bus);
    return rc;
}

int bus_power_and_network(unsigned long long timeout_usec, int *metered, int *on_battery, char *why, size_t why_size) {
    sd_bus *bus = NULL;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int rc = open_bus(1, timeout_usec, &bus);
    *metered = -1;
    *on_battery = -1;
    if (rc < 0) return fail(rc, NULL, "connect to the system bus", why, why_size);
    uint32_t m = 0;
    rc = sd_bus_get_property_trivial(bus, "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.NetworkManager",
                                     "Metered", &error, 'u', &m);
    /* NM_METERED_YES (1) and NM_METERED_GUESS_YES (3) are metered. */
    if (rc >= 0) *metered = (m == 1 || m == 3);
    sd_bus_error_free(&error);
    int b = 0;
    rc = sd_bus_get_property_trivial(bus, "org.freedesktop.UPower", "/org/freedesktop/UPower", "org.freedesktop.UPower", "OnBattery", &error, 'b', &b);
    if (rc >= 0) *on_battery = b != 0;
    sd_bus_error_free(&error);
    sd_bus_flush_close_unref(bus);
    return 0;
}
