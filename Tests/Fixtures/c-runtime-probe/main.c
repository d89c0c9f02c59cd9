/* c-runtime-probe: calls the C runtime's functions and prints what they return, one line each,
 * for Tests/IntegrationTests/CRuntimeTests.swift.
 *
 *   c-runtime-probe container GROUP   ext_shared_container_path(GROUP), or "(none)"
 *   c-runtime-probe unsupervised      the results of every call without extensiond, then
 *                                     whether $EXTENSIOND_CHANNEL_FD is still set
 *   c-runtime-probe serve             an extension; each request channel takes line commands:
 *     ping        "pong"
 *     start-again ext_runtime_start again, with this handler then with NULL: "again ERRNO, null
 *                 ERRNO" (or 0 for a call that returned 0)
 *     reason N    ext_perform_expiring_activity with a reason of N bytes ('r'): "granted" (the
 *                 block returns at once) or "denied" from the block, or "refused ERRNO"
 *     observe-many N PREFIX
 *                 ext_observe of PREFIX.1 to PREFIX.N, stopping at the first error: "observed N",
 *                 or "observed K, then refused ERRNO"; each post is then reported on this
 *                 channel as "notified NAME"
 */
#define _POSIX_C_SOURCE 200809L
#include <extension_runtime.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int calls, cleaned;
static bool saw_expired;

static void block(bool expired, void *context) {
    (void)context;
    pthread_mutex_lock(&lock);
    calls++;
    saw_expired = expired;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void cleanup(void *context) {
    (void)context;
    pthread_mutex_lock(&lock);
    cleaned++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void hint(const char *name, void *context) { (void)name, (void)context; }
static void refresh(uint64_t id, void *context) { (void)id, (void)context; }

/* The name of the error a call returned (-errno). */
static const char *error_name(int result) {
    switch (-result) {
    case EINVAL: return "EINVAL";
    case EMSGSIZE: return "EMSGSIZE";
    case ENOSPC: return "ENOSPC";
    case ENOENT: return "ENOENT";
    case EEXIST: return "EEXIST";
    case EPERM: return "EPERM";
    case EALREADY: return "EALREADY";
    case ENOTCONN: return "ENOTCONN";
    case ENOMEM: return "ENOMEM";
    default: return "another error";
    }
}

/* Writes `line` and a newline to request channel `fd`, ignoring a host that is gone. */
static void say(int fd, const char *line) {
    char buffer[600];
    int n = snprintf(buffer, sizeof buffer, "%s\n", line);
    (void)!send(fd, buffer, (size_t)n, MSG_NOSIGNAL);
}

static void answer_activity(bool expired, void *context) { say((int)(intptr_t)context, expired ? "denied" : "granted"); }

static void report_hint(const char *name, void *context) {
    char line[300];
    snprintf(line, sizeof line, "notified %s", name);
    say((int)(intptr_t)context, line);
}

static void serve(uint64_t request_id, int fd, void *context);

static void report_opened(bool opened, void *context) { say((int)(intptr_t)context, opened ? "opened true" : "opened false"); }

static void report_change(const char *suite, void *context) {
    char line[300];
    snprintf(line, sizeof line, "changed %s", suite);
    say((int)(intptr_t)context, line);
}

/* The suite opened last by `defaults-open`. */
static ext_defaults *opened_suite;

/* The name of the error a call returned, or "0". */
static const char *result_name(int result) { return result == 0 ? "0" : error_name(result); }

/* The commands of one request channel (`serve`). */
static void serve(uint64_t request_id, int fd, void *context) {
    (void)request_id, (void)context;
    FILE *in = fdopen(dup(fd), "r");
    char line[512], reply[600];
    while (in && fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = 0;
        if (strcmp(line, "ping") == 0) {
            say(fd, "pong");
        } else if (strcmp(line, "start-again") == 0) {
            const char *again = result_name(ext_runtime_start(serve, NULL));
            snprintf(reply, sizeof reply, "again %s, null %s", again, result_name(ext_runtime_start(NULL, NULL)));
            say(fd, reply);
        } else if (strncmp(line, "reason ", 7) == 0) {
            size_t n = strtoul(line + 7, NULL, 10);
            char *reason = malloc(n + 1);
            memset(reason, 'r', n);
            reason[n] = 0;
            int result = ext_perform_expiring_activity(reason, answer_activity, (void *)(intptr_t)fd);
            free(reason);
            if (result != 0) {
                snprintf(reply, sizeof reply, "refused %s", error_name(result));
                say(fd, reply);
            }
        } else if (strncmp(line, "open-url ", 9) == 0) {
            int result = ext_open_url(line + 9, report_opened, (void *)(intptr_t)fd);
            if (result != 0) {
                snprintf(reply, sizeof reply, "refused %s", error_name(result));
                say(fd, reply);
            }
        } else if (strncmp(line, "defaults-open ", 14) == 0) {
            int result = ext_defaults_open(line + 14, &opened_suite);
            if (result == 0) result = ext_defaults_on_change(opened_suite, report_change, (void *)(intptr_t)fd);
            snprintf(reply, sizeof reply, "open %s", result_name(result));
            say(fd, reply);
        } else if (strncmp(line, "defaults-get ", 13) == 0) {
            char *value = NULL;
            int result = ext_defaults_get_string(opened_suite, line + 13, &value);
            snprintf(reply, sizeof reply, "value %s", result == 0 ? value : result_name(result));
            free(value);
            say(fd, reply);
        } else if (strncmp(line, "defaults-set ", 13) == 0) {
            char *key = line + 13, *value = strchr(key, ' ');
            if (value) *value++ = 0;
            snprintf(reply, sizeof reply, "set %s", result_name(ext_defaults_set_string(opened_suite, key, value ? value : "")));
            say(fd, reply);
        } else if (strncmp(line, "secret-add ", 11) == 0 || strncmp(line, "secret-copy ", 12) == 0) {
            /* secret-add SERVICE ACCOUNT DATA, secret-copy SERVICE ACCOUNT: generic passwords */
            char *service = strchr(line, ' ') + 1, *account = strchr(service, ' '), *data = NULL;
            if (account) *account++ = 0;
            if (account && (data = strchr(account, ' '))) *data++ = 0;
            ext_secret_attributes a = {.item_class = EXT_SECRET_GENERIC_PASSWORD, .service = service, .account = account};
            if (line[7] == 'a') {
                snprintf(reply, sizeof reply, "add %s", result_name(ext_secret_add(&a, data, data ? strlen(data) : 0)));
            } else {
                ext_secret_item *items = NULL;
                size_t count = 0;
                int result = ext_secret_copy(&a, 1, &items, &count);
                if (result == 0) snprintf(reply, sizeof reply, "found %.*s in %s", (int)items[0].length, (const char *)items[0].data, items[0].group);
                else snprintf(reply, sizeof reply, "copy %s", result_name(result));
                ext_secret_free(items, count);
            }
            say(fd, reply);
        } else if (strncmp(line, "observe-many ", 13) == 0) {
            char *prefix;
            unsigned long n = strtoul(line + 13, &prefix, 10), k = 0;
            int result = 0;
            while (*prefix == ' ') prefix++;
            while (k < n) {
                char name[300];
                snprintf(name, sizeof name, "%s.%lu", prefix, k + 1);
                if ((result = ext_observe(name, report_hint, (void *)(intptr_t)fd)) != 0) break;
                k++;
            }
            if (result == 0) snprintf(reply, sizeof reply, "observed %lu", k);
            else snprintf(reply, sizeof reply, "observed %lu, then refused %s", k, error_name(result));
            say(fd, reply);
        }
    }
    if (in) fclose(in);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "container") == 0) {
        const char *path = ext_shared_container_path(argv[2]);
        printf("%s\n", path ? path : "(none)");
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "serve") == 0) {
        if (ext_runtime_start(serve, NULL) != 0) return 1;
        for (;;) pause();
    }
    if (argc != 2 || strcmp(argv[1], "unsupervised") != 0) return 2;
    printf("supervised %d\n", ext_runtime_is_supervised());
    printf("start-null %d\n", ext_runtime_start(NULL, NULL) == -EINVAL);
    printf("start %d\n", ext_runtime_start(serve, NULL) == -ENOTCONN);
    printf("activity-null-reason %d\n", ext_perform_expiring_activity(NULL, block, NULL) == -EINVAL);
    printf("activity-empty-reason %d\n", ext_perform_expiring_activity("", block, NULL) == -EINVAL);
    printf("activity-null-block %d\n", ext_perform_expiring_activity("x", NULL, NULL) == -EINVAL);
    printf("activity %d\n", ext_perform_expiring_activity_with_cleanup("x", block, cleanup, NULL));
    pthread_mutex_lock(&lock);
    while (!cleaned) pthread_cond_wait(&changed, &lock);
    printf("denied calls %d expired %d cleanups %d\n", calls, saw_expired, cleaned);
    pthread_mutex_unlock(&lock);
    char reason[EXT_ACTIVITY_MAX_REASON + 2] = {0};
    memset(reason, 'r', EXT_ACTIVITY_MAX_REASON + 1);
    printf("activity-long-reason %d\n", ext_perform_expiring_activity(reason, block, NULL) == -EMSGSIZE);
    memset(reason, 0xFF, EXT_ACTIVITY_MAX_REASON / 3 + 1); /* each is sent as U+FFFD, 3 bytes */
    reason[EXT_ACTIVITY_MAX_REASON / 3 + 1] = 0;
    printf("activity-invalid-utf8-reason %d\n", ext_perform_expiring_activity(reason, block, NULL) == -EMSGSIZE);
    printf("observe-bad-name %d\n", ext_observe("a..b", hint, NULL) == -EINVAL);
    printf("observe %d\n", ext_observe("a.b", hint, NULL) == -ENOTCONN);
    printf("on-refresh-null %d\n", ext_runtime_on_refresh(NULL, NULL) == -EINVAL);
    printf("on-refresh %d\n", ext_runtime_on_refresh(refresh, NULL) == -ENOTCONN);
    printf("refresh-complete-bad %d\n", ext_refresh_complete(1, 3) == -EINVAL);
    printf("refresh-complete %d\n", ext_refresh_complete(1, EXT_REFRESH_NO_DATA) == -ENOTCONN);
    char big[EXT_REQUEST_MAX_PAYLOAD + 1] = {0};
    printf("complete-null %d\n", ext_request_complete(1, NULL, 1) == -EINVAL);
    printf("complete-too-large %d\n", ext_request_complete(1, big, sizeof big) == -EMSGSIZE);
    printf("complete %d\n", ext_request_complete(1, big, 0) == -ENOTCONN);
    printf("cancel-null %d\n", ext_request_cancel(1, NULL) == -EINVAL);
    printf("cancel %d\n", ext_request_cancel(1, "no") == -ENOTCONN);
    printf("channel-variable %s\n", getenv("EXTENSIOND_CHANNEL_FD") ? "set" : "unset");
    return 0;
}
