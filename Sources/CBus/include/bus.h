#ifndef EXTENSIOND_BUS_H
#define EXTENSIOND_BUS_H

#include <stddef.h>
#include <sys/types.h>

// The D-Bus interface's server side (a module's umbrella directory gains a header without its
// cached module noticing: naming it here, in a header the cache knows, makes it rebuild).
#include "service.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The D-Bus calls the daemon makes to open a URL (docs/extension-model.md, "Opening a URL"),
/// with sd-bus, each on a connection of its own made for it (so any thread may call these), each
/// call bounded by `timeout_usec`. Each returns 0 or -errno, and on failure writes why (the
/// D-Bus error's name and message, or the step) into `why` (NUL-terminated, cut to `why_size`).

/// Whether the logind session of `pid` is locked: `*locked` is set from the `LockedHint` of the
/// session `org.freedesktop.login1.Manager.GetSessionByPID(pid)` names, on the system bus
/// ($DBUS_SYSTEM_BUS_ADDRESS, else the standard socket). -ENXIO: `pid` is in no session;
/// -ESRCH: no logind on the bus; -ENOENT or -ECONNREFUSED: no system bus.
int bus_session_locked(pid_t pid, unsigned long long timeout_usec, int *locked, char *why, size_t why_size);

/// Calls `org.freedesktop.Application.Open([uri], {})` on the bus name `app_id`, at the object
/// path the Desktop Entry specification derives from it ('.' to '/', '-' to '_'), which
/// activates the app if it is not running. `system` 1: on the system bus, 0: on the session bus
/// ($DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus).
int bus_application_open(int system, const char *app_id, const char *uri, unsigned long long timeout_usec, char *why, size_t why_size);

/// Calls `org.freedesktop.Application.ActivateAction(action, [<parameter>], {})` on the bus name
/// `app_id` (the path and buses as `bus_application_open`), which activates the app if it is not
/// running: how an app is brought up in the background for its transfers' events.
int bus_application_activate_action(int system, const char *app_id, const char *action, const char *parameter,
                                    unsigned long long timeout_usec, char *why, size_t why_size);
/// Whether the network is metered (NetworkManager's `Metered`: yes or guess-yes) and whether the
/// machine runs on battery (UPower's `OnBattery`), on the system bus: each 1 or 0, or -1 where
/// the service is not there (or does not answer). -errno only when there is no system bus.
int bus_power_and_network(unsigned long long timeout_usec, int *metered, int *on_battery, char *why, size_t why_size);
/// Starts `argv` (NULL-terminated; argv[0] an absolute path) as the transient service `unit` of
/// the service manager (`org.freedesktop.systemd1.Manager.StartTransientUnit`, mode "fail"):
/// the system manager when `system` is 1, running as `user` (a name or a number; NULL: root),
/// or the calling user's manager when 0. Reached at its private socket (/run/systemd/private,
/// $XDG_RUNTIME_DIR/systemd/private), else through the bus. Returns once the job is queued.
int bus_start_transient_service(int system, const char *unit, const char *description, const char *const *argv, const char *user,
                                unsigned long long timeout_usec, char *why, size_t why_size);

#ifdef __cplusplus
}
#endif
#endif
