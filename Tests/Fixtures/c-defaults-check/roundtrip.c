/* roundtrip: libExtensionRuntimeC's open URL and shared defaults round trips against a fake
 * extensiond on a socketpair (the runtime channel), in one process. Run by run.sh, linked with
 * the built library and runtime-c/wire.c (the fake daemon's codec):
 *
 *   cc -std=c11 -I include -I runtime-c roundtrip.c runtime-c/wire.c -L DIR -lExtensionRuntimeC
 *
 * The fake daemon answers openURL by the URL ("…/ok" opened, "…/no" notPermitted, "…/hang"
 * never), suiteOpen by the suite ("group.ok" with a memory file it writes under the seqlock,
 * "group.none" unknownExtension, "group.denied" notPermitted), and suiteWrite by the key ("bad"
 * badRequest, "full" limitReached, "hang" never, else it writes the mapping first, then answers
 * 0; "poke" also sends suiteChanged). "close" as a URL makes it shut the channel.
 * Prints "ok: N checks" and exits 0, or names the first failure and exits 1. */
#define _GNU_SOURCE
#include "extension_runtime.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

/* --- the fake daemon --------------------------------------------------------------------- */

#define MAPPING (64 + EXT_DEFAULTS_MAX_SUITE)
#define MAX_ENTRIES 64

static int daemon_fd;
static int memory_fd = -1;
static uint8_t *memory;
static struct {
    char key[256];
    uint8_t *value;
    size_t length;
} entries[MAX_ENTRIES];
static size_t entry_count;

static void set32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static int by_key(const void *a, const void *b) { return strcmp(a, b); } /* entries start with the key */

/* Rewrites the memory under the seqlock, as extensiond does. */
static void publish(void) {
    qsort(entries, entry_count, sizeof entries[0], by_key);
    static uint8_t area[EXT_DEFAULTS_MAX_SUITE];
    size_t at = entry_count * 4;
    for (size_t i = 0; i < entry_count; i++) {
        size_t kl = strlen(entries[i].key);
        set32(area + i * 4, (uint32_t)at);
        set32(area + at, (uint32_t)kl), memcpy(area + at + 4, entries[i].key, kl), at += 4 + kl;
        set32(area + at, (uint32_t)entries[i].length), memcpy(area + at + 4, entries[i].value, entries[i].length), at += 4 + entries[i].length;
    }
    uint64_t *sequence = (uint64_t *)(void *)(memory + 8);
    uint64_t s = __atomic_load_n(sequence, __ATOMIC_RELAXED);
    __atomic_store_n(sequence, s + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(memory + 64, area, at);
    set32(memory + 16, (uint32_t)at);
    set32(memory + 20, (uint32_t)entry_count);
    __atomic_store_n(sequence, s + 2, __ATOMIC_RELEASE);
}

static void write_entry(const uint8_t *key, size_t kl, const uint8_t *value, size_t length, int has_value) {
    size_t i = 0;
    while (i < entry_count && !(strlen(entries[i].key) == kl && memcmp(entries[i].key, key, kl) == 0)) i++;
    if (i == entry_count) {
        if (!has_value) return;
        if (entry_count == MAX_ENTRIES) abort();
        memcpy(entries[i].key, key, kl);
        entries[i].key[kl] = 0;
        entry_count++;
    }
    free(entries[i].value);
    if (has_value) {
        entries[i].value = malloc(length);
        memcpy(entries[i].value, value, length);
        entries[i].length = length;
    } else {
        entries[i] = entries[--entry_count];
        memset(&entries[entry_count], 0, sizeof entries[0]);
    }
    publish();
}

static void send_to_runtime(const struct ext_wire_message *m, int fd) {
    uint8_t buffer[EXT_WIRE_MAX_MESSAGE];
    long n = ext_wire_encode(m, buffer, sizeof buffer);
    if (n < 0) abort();
    struct iovec iov = {buffer, (size_t)n};
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        msg.msg_control = &control;
        msg.msg_controllen = sizeof control;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    if (sendmsg(daemon_fd, &msg, MSG_NOSIGNAL) != n) abort();
}

static void answer(uint32_t tag, uint16_t code, int fd) {
    struct ext_wire_message a = {.kind = EXT_WIRE_ANSWER, .tag = tag, .code = code, .data = (const uint8_t *)"why", .length = 3};
    send_to_runtime(&a, fd);
}

static int equals(const struct ext_wire_message *m, const char *text) { return m->length == strlen(text) && memcmp(m->data, text, m->length) == 0; }

static int ends_with(const struct ext_wire_message *m, const char *tail) {
    size_t n = strlen(tail);
    return m->length >= n && memcmp(m->data + m->length - n, tail, n) == 0;
}

static long writes_seen; /* suiteWrite messages, read by the tests */

static void *fake_daemon(void *unused) {
    (void)unused;
    static uint8_t datagram[EXT_WIRE_MAX_MESSAGE];
    for (;;) {
        ssize_t n = recv(daemon_fd, datagram, sizeof datagram, 0);
        if (n <= 0) return NULL;
        struct ext_wire_message m;
        if (ext_wire_decode(datagram, (size_t)n, &m) != 0) {
            fprintf(stderr, "fake daemon: a datagram the codec refuses\n");
            exit(1);
        }
        switch (m.kind) {
        case EXT_WIRE_OPEN_URL:
            if (ends_with(&m, "/ok") || m.length == EXT_URL_MAX) answer(m.tag, 0, -1);
            else if (ends_with(&m, "/no")) answer(m.tag, 5, -1);
            else if (equals(&m, "close")) {
                shutdown(daemon_fd, SHUT_RDWR);
                return NULL;
            }
            break; /* "…/hang": never answered */
        case EXT_WIRE_SUITE_OPEN:
            if (equals(&m, "group.ok")) {
                char path[64];
                snprintf(path, sizeof path, "/proc/self/fd/%d", memory_fd);
                int ro = open(path, O_RDONLY | O_CLOEXEC);
                if (ro < 0) abort();
                answer(m.tag, 0, ro);
                close(ro);
            } else answer(m.tag, equals(&m, "group.none") ? 1 : 5, -1);
            break;
        case EXT_WIRE_SUITE_WRITE: {
            __atomic_add_fetch(&writes_seen, 1, __ATOMIC_RELAXED);
            if (!equals(&m, "group.ok")) {
                answer(m.tag, 5, -1);
                break;
            }
            if (m.key_length == 4 && memcmp(m.key, "hang", 4) == 0) break; /* never answered */
            if (m.key_length == 3 && memcmp(m.key, "bad", 3) == 0) answer(m.tag, 6, -1);
            else if (m.key_length == 4 && memcmp(m.key, "full", 4) == 0) answer(m.tag, 8, -1);
            else {
                write_entry(m.key, m.key_length, m.value, m.value_length, m.has_value);
                answer(m.tag, 0, -1);
                if (m.key_length == 4 && memcmp(m.key, "poke", 4) == 0) {
                    struct ext_wire_message changed = {.kind = EXT_WIRE_SUITE_CHANGED, .data = (const uint8_t *)"group.ok", .length = 8};
                    send_to_runtime(&changed, -1);
                }
            }
            break;
        }
        default: break;
        }
    }
}

/* --- waiting ----------------------------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

/* Waits up to 5 s for *counter to reach `value`; returns whether it did. */
static int wait_for(const int *counter, int value) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&lock);
    while (*counter < value)
        if (pthread_cond_timedwait(&changed, &lock, &deadline) == ETIMEDOUT) break;
    int reached = *counter >= value;
    pthread_mutex_unlock(&lock);
    return reached;
}

static void bump(int *counter) {
    pthread_mutex_lock(&lock);
    (*counter)++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

/* --- open URL ---------------------------------------------------------------------------- */

static int opened_true, opened_false, nested_done;
static ext_defaults *shared;

static void on_opened(bool opened, void *context) {
    (void)context;
    bump(opened ? &opened_true : &opened_false);
}

/* An open URL callback that makes a blocking round trip: it must not wait for itself. */
static void on_opened_then_write(bool opened, void *context) {
    (void)context;
    EQ(opened, 1);
    EQ(ext_defaults_set_int64(shared, "from.open.callback", 5), 0);
    bump(&nested_done);
}

static void check_open_url(void) {
    EQ(ext_open_url("https://example.com/ok", on_opened, NULL), 0);
    CHECK(wait_for(&opened_true, 1));
    EQ(ext_open_url("https://example.com/no", on_opened, NULL), 0);
    CHECK(wait_for(&opened_false, 1));
    static char longest[EXT_URL_MAX + 2];
    memset(longest, 'u', EXT_URL_MAX);
    EQ(ext_open_url(longest, on_opened, NULL), 0);
    CHECK(wait_for(&opened_true, 2));
    longest[EXT_URL_MAX] = 'u';
    EQ(ext_open_url(longest, on_opened, NULL), -EMSGSIZE);
    EQ(ext_open_url(NULL, on_opened, NULL), -EINVAL);
    EQ(ext_open_url("", on_opened, NULL), -EINVAL);
    EQ(ext_open_url("https://example.com/ok", NULL, NULL), -EINVAL);
    EQ(ext_open_url("https://example.com/a b\n", on_opened, NULL), -EINVAL);
    EQ(ext_open_url("https://example.com/\x7f", on_opened, NULL), -EINVAL);
    EQ(ext_open_url("https://example.com/\x1f", on_opened, NULL), -EINVAL);
    EQ(ext_open_url("https://example.com/\xc3", on_opened, NULL), -EINVAL);         /* not UTF-8 */
    EQ(ext_open_url("https://example.com/\xc3\xa9/ok", on_opened, NULL), 0);        /* UTF-8 is fine */
    CHECK(wait_for(&opened_true, 3));
    EQ(opened_true, 3), EQ(opened_false, 1); /* each callback once */
}

/* --- shared defaults --------------------------------------------------------------------- */

static int h1_calls, h2_calls, h3_calls, h1_nested;

static void h1(const char *suite, void *context) {
    CHECK(strcmp(suite, "group.ok") == 0 && context == &h1_calls);
    /* A blocking round trip from a change handler. */
    if (h1_calls == 0) {
        EQ(ext_defaults_set_string(shared, "from.handler", "yes"), 0);
        char *s;
        EQ(ext_defaults_get_string(shared, "from.handler", &s), 0), CHECK(strcmp(s, "yes") == 0), free(s);
        bump(&h1_nested);
    }
    bump(&h1_calls);
}

static void h2(const char *suite, void *context) {
    (void)suite, (void)context;
    bump(&h2_calls);
}

static void h3(const char *suite, void *context) {
    (void)suite;
    ext_defaults_close(context); /* a handler closes its own suite */
    bump(&h3_calls);
}

static void check_defaults(void) {
    ext_defaults *d = NULL, *d2 = NULL, *d3 = NULL;
    EQ(ext_defaults_open("group.none", &d), -ENOENT);
    EQ(ext_defaults_open("group.denied", &d), -EPERM);
    EQ(ext_defaults_open(".group", &d), -EINVAL);
    EQ(ext_defaults_open("group/x", &d), -EINVAL);
    EQ(ext_defaults_open(NULL, &d), -EINVAL);
    EQ(ext_defaults_open("group.ok", NULL), -EINVAL);
    CHECK(d == NULL);
    EQ(ext_defaults_open("group.ok", &d), 0);
    CHECK(d != NULL);
    shared = d;

    /* Every setter, visible when it returns. */
    EQ(ext_defaults_set_bool(d, "b", true), 0);
    EQ(ext_defaults_set_int64(d, "i", -1234567890123LL), 0);
    EQ(ext_defaults_set_double(d, "f", 0.1), 0);
    EQ(ext_defaults_set_string(d, "s", "caf\xc3\xa9"), 0);
    EQ(ext_defaults_set_bytes(d, "y", "\0\1\2", 3), 0);
    EQ(ext_defaults_set_bytes(d, "y0", NULL, 0), 0);
    static const uint8_t dict[] = {7, 1, 0, 0, 0, 1, 0, 0, 0, 'k', 6, 1, 0, 0, 0, 1, 1}; /* {"k": [true]} */
    EQ(ext_defaults_set_encoded(d, "dict", dict, sizeof dict), 0);
    bool b;
    int64_t i;
    double f;
    char *s;
    void *p;
    size_t n;
    EQ(ext_defaults_get_bool(d, "b", &b), 0), CHECK(b);
    EQ(ext_defaults_get_int64(d, "i", &i), 0), EQ(i, -1234567890123LL);
    EQ(ext_defaults_get_double(d, "f", &f), 0), CHECK(f == 0.1);
    EQ(ext_defaults_get_string(d, "s", &s), 0), CHECK(strcmp(s, "caf\xc3\xa9") == 0), free(s);
    EQ(ext_defaults_get_bytes(d, "y", &p, &n), 0), EQ(n, 3), CHECK(memcmp(p, "\0\1\2", 3) == 0), free(p);
    EQ(ext_defaults_get_bytes(d, "y0", &p, &n), 0), EQ(n, 0), free(p);
    EQ(ext_defaults_get_encoded(d, "dict", &p, &n), 0), EQ(n, sizeof dict), CHECK(memcmp(p, dict, n) == 0), free(p);
    EQ(ext_defaults_type(d, "dict"), EXT_DEFAULTS_DICTIONARY);
    EQ(ext_defaults_set_int64(d, "b", 3), 0); /* another type replaces it */
    EQ(ext_defaults_get_bool(d, "b", &b), -EDOM);
    char **keys;
    EQ(ext_defaults_keys(d, &keys, &n), 0), EQ(n, 7);
    CHECK(strcmp(keys[0], "b") == 0 && strcmp(keys[1], "dict") == 0 && strcmp(keys[6], "y0") == 0);
    ext_defaults_free_keys(keys, n);
    EQ(ext_defaults_remove(d, "y0"), 0);
    EQ(ext_defaults_type(d, "y0"), -ENOENT);
    EQ(ext_defaults_remove(d, "never.set"), 0);

    /* Refused before sending, then by the daemon. */
    long before = __atomic_load_n(&writes_seen, __ATOMIC_RELAXED);
    static const uint8_t unsorted[] = {7, 2, 0, 0, 0, 1, 0, 0, 0, 'b', 1, 1, 1, 0, 0, 0, 'a', 1, 1};
    EQ(ext_defaults_set_encoded(d, "k", unsorted, sizeof unsorted), -EINVAL);
    EQ(ext_defaults_set_encoded(d, "k", "\x01\x02", 2), -EINVAL);
    EQ(ext_defaults_set_encoded(d, "k", NULL, 0), -EINVAL);
    EQ(ext_defaults_set_string(d, "k", "\xff"), -EINVAL);
    EQ(ext_defaults_set_string(d, "k", NULL), -EINVAL);
    EQ(ext_defaults_set_bytes(d, "k", NULL, 1), -EINVAL);
    EQ(ext_defaults_set_int64(d, "", 1), -EINVAL);
    EQ(ext_defaults_set_int64(NULL, "k", 1), -EINVAL);
    EQ(ext_defaults_set_int64(d, "\xc3", 1), -EINVAL);
    char key[257];
    memset(key, 'k', 256), key[256] = 0;
    EQ(ext_defaults_set_int64(d, key, 1), -EINVAL);
    key[255] = 0;
    EQ(ext_defaults_set_int64(d, key, 1), 0); /* 255 bytes: the longest key */
    static char big[EXT_DEFAULTS_MAX_VALUE];
    memset(big, 'x', sizeof big - 5);
    big[sizeof big - 5] = 0;
    EQ(ext_defaults_set_string(d, "big", big), 0); /* 60,000 bytes encoded */
    EQ(ext_defaults_get_string(d, "big", &s), 0), EQ(strlen(s), EXT_DEFAULTS_MAX_VALUE - 5), free(s);
    big[sizeof big - 5] = 'x', big[sizeof big - 4] = 0;
    EQ(ext_defaults_set_string(d, "big", big), -EMSGSIZE);
    EQ(ext_defaults_set_bytes(d, "big", big, EXT_DEFAULTS_MAX_VALUE - 4), -EMSGSIZE);
    EQ(__atomic_load_n(&writes_seen, __ATOMIC_RELAXED), before + 2); /* only the two valid writes went out */
    EQ(ext_defaults_set_int64(d, "bad", 1), -EINVAL);
    EQ(ext_defaults_set_int64(d, "full", 1), -ENOSPC);

    /* Change handlers: two handles of the suite; the first handler makes a round trip. */
    EQ(ext_defaults_open("group.ok", &d2), 0);
    EQ(ext_defaults_on_change(d, h1, &h1_calls), 0);
    EQ(ext_defaults_on_change(d2, h2, NULL), 0);
    EQ(ext_defaults_on_change(d2, h2, NULL), 0);
    EQ(ext_defaults_on_change(NULL, h2, NULL), -EINVAL);
    EQ(ext_defaults_on_change(d2, NULL, NULL), -EINVAL);
    int64_t pokes = 0;
    EQ(ext_defaults_set_int64(d, "poke", ++pokes), 0);
    CHECK(wait_for(&h1_calls, 1) && wait_for(&h2_calls, 2) && wait_for(&h1_nested, 1));
    ext_defaults_close(d2); /* its handlers go with it */
    EQ(ext_defaults_set_int64(d, "poke", ++pokes), 0);
    CHECK(wait_for(&h1_calls, 2));
    EQ(h2_calls, 2);
    /* A handler that closes its own suite. */
    EQ(ext_defaults_open("group.ok", &d3), 0);
    EQ(ext_defaults_on_change(d3, h3, d3), 0);
    EQ(ext_defaults_set_int64(d, "poke", ++pokes), 0);
    CHECK(wait_for(&h3_calls, 1) && wait_for(&h1_calls, 3));
    EQ(ext_defaults_set_int64(d, "poke", ++pokes), 0);
    CHECK(wait_for(&h1_calls, 4));
    EQ(h3_calls, 1);
    ext_defaults_close(NULL);

    /* A round trip from an open URL callback. */
    EQ(ext_open_url("https://example.com/ok", on_opened_then_write, NULL), 0);
    CHECK(wait_for(&nested_done, 1));
    EQ(ext_defaults_get_int64(d, "from.open.callback", &i), 0), EQ(i, 5);
}

/* --- the channel closes ------------------------------------------------------------------ */

static int blocked_result = 1, blocked_done;

/* A write the daemon never answers ("hang"): it is waiting when the channel closes. */
static void *blocked_write(void *unused) {
    (void)unused;
    blocked_result = ext_defaults_set_int64(shared, "hang", 1);
    bump(&blocked_done);
    return NULL;
}

static void check_close(void) {
    EQ(ext_open_url("https://example.com/hang", on_opened, NULL), 0);
    long before = __atomic_load_n(&writes_seen, __ATOMIC_RELAXED);
    pthread_t t;
    pthread_create(&t, NULL, blocked_write, NULL);
    for (int k = 0; k < 5000 && __atomic_load_n(&writes_seen, __ATOMIC_RELAXED) == before; k++) usleep(1000);
    EQ(opened_false, 1), EQ(blocked_done, 0);
    EQ(ext_open_url("close", on_opened, NULL), 0); /* the daemon shuts the channel */
    CHECK(wait_for(&opened_false, 3));             /* "hang" and "close": false, once each */
    CHECK(wait_for(&blocked_done, 1));
    pthread_join(t, NULL);
    EQ(blocked_result, -ENOTCONN);
    EQ(opened_false, 3);
    EQ(ext_open_url("https://example.com/ok", on_opened, NULL), -ENOTCONN);
    ext_defaults *d;
    EQ(ext_defaults_open("group.ok", &d), -ENOTCONN);
    EQ(ext_defaults_remove(shared, "b"), -ENOTCONN);
    int64_t i;
    EQ(ext_defaults_get_int64(shared, "from.open.callback", &i), 0), EQ(i, 5); /* the mapping stays readable */
    ext_defaults_close(shared);
}

int main(void) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return 2;
    char value[16];
    snprintf(value, sizeof value, "%d", pair[0]);
    setenv("EXTENSIOND_CHANNEL_FD", value, 1);
    daemon_fd = pair[1];
    memory_fd = memfd_create("suite", MFD_CLOEXEC);
    if (memory_fd < 0 || ftruncate(memory_fd, MAPPING) != 0) return 2;
    memory = mmap(NULL, MAPPING, PROT_READ | PROT_WRITE, MAP_SHARED, memory_fd, 0);
    if (memory == MAP_FAILED) return 2;
    memcpy(memory, "EXTDFLT1", 8);
    pthread_t daemon;
    pthread_create(&daemon, NULL, fake_daemon, NULL);

    EQ(ext_runtime_is_supervised(), 1);
    check_open_url();
    check_defaults();
    check_close();
    pthread_join(daemon, NULL);
    printf("ok: %ld checks\n", checks);
    return 0;
}
