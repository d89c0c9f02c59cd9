/* c-runtime-probe: calls the C runtime's functions that need no extensiond and prints what they
 * return, one line each, for Tests/IntegrationTests/CRuntimeTests.swift.
 *
 *   c-runtime-probe container GROUP   ext_shared_container_path(GROUP), or "(none)"
 *   c-runtime-probe unsupervised      the results of every call without extensiond
 */
#include <extension_runtime.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "container") == 0) {
        const char *path = ext_shared_container_path(argv[2]);
        printf("%s\n", path ? path : "(none)");
        return 0;
    }
    if (argc != 2 || strcmp(argv[1], "unsupervised") != 0) return 2;
    printf("supervised %d\n", ext_runtime_is_supervised());
    printf("start %d\n", ext_runtime_start(NULL, NULL) == -ENOTCONN);
    printf("activity-null-reason %d\n", ext_perform_expiring_activity(NULL, block, NULL) == -EINVAL);
    printf("activity-empty-reason %d\n", ext_perform_expiring_activity("", block, NULL) == -EINVAL);
    printf("activity-null-block %d\n", ext_perform_expiring_activity("x", NULL, NULL) == -EINVAL);
    printf("activity %d\n", ext_perform_expiring_activity_with_cleanup("x", block, cleanup, NULL));
    pthread_mutex_lock(&lock);
    while (!cleaned) pthread_cond_wait(&changed, &lock);
    printf("denied calls %d expired %d cleanups %d\n", calls, saw_expired, cleaned);
    pthread_mutex_unlock(&lock);
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
    return 0;
}
