/*
 * runtime.c: libExtensionRuntimeC, the C runtime of extensiond (include/extension_runtime.h).
 *
 * It speaks the runtime channel's wire protocol itself (wire.c) over the SOCK_SEQPACKET socket
 * inherited from extensiond (fd named by $EXTENSIOND_CHANNEL_FD), with libc and pthreads only.
 *
 * Threads: one thread at a time holds the read role (started on the first call that needs the
 * channel): it blocks in recvmsg and handles every message in order, bookkeeping and
 * acknowledgements (expireReceived is sent the moment *expire* is read) included. When a
 * message calls for a user callback, the reader starts a new reader and runs the callback
 * itself, then ends. An idle extension thus has one runtime thread, and a callback that blocks
 * never delays the reading of *expire*.
 *
 * One mutex guards all state; no callback runs under it.
 */
#define _GNU_SOURCE
#include "extension_runtime.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

_Static_assert(EXT_ACTIVITY_MAX_REASON == EXT_WIRE_MAX_REASON, "the header's reason limit is the wire's");
_Static_assert(EXT_REQUEST_MAX_PAYLOAD == EXT_WIRE_MAX_PAYLOAD, "the header's payload limit is the wire's");
_Static_assert(EXT_OBSERVE_MAX_NAMES == 256, "NotificationHints.maxObserved, the daemon's limit");

/* One ext_perform_expiring_activity call. Guarded by `lock`. */
struct activity {
    ext_activity_block block;
    ext_activity_cleanup cleanup;
    void *context;
    uint32_t tag;
    uint64_t assertion_id;
    int granted;        /* assertion_id is valid */
    int running;        /* calls of block in progress or due */
    int main_returned;  /* block(false) returned */
    int expired_called; /* block(true) was due, at most once */
    int released;
    struct activity *next; /* in `pending` (by tag) or `live` (by assertion id) */
};

struct observer {
    char *name;
    ext_hint_handler handler;
    void *context;
    struct observer *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int channel = -1; /* set once by setup(), then read-only */
static int reader_started, closed, started;
static uint32_t next_tag = 1;
static struct activity *pending, *live;
static struct observer *observers;
static size_t observed_names; /* distinct names in `observers` */
static ext_request_handler on_request;
static void *request_context;
static ext_refresh_handler on_refresh;
static void *refresh_context;

/* Whether `fd` is an open AF_UNIX SOCK_SEQPACKET socket, as the channel extensiond passes is. */
static int is_channel(int fd) {
    int value;
    socklen_t size = sizeof value;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &size) != 0 || value != SOCK_SEQPACKET) return 0;
    size = sizeof value;
    return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &size) == 0 && value == AF_UNIX;
}

/* Reads $EXTENSIOND_CHANNEL_FD (a decimal descriptor) and removes the variable. The descriptor
 * is the channel only when it is an AF_UNIX SOCK_SEQPACKET socket (a variable inherited without
 * its socket, or naming another file, leaves the process unsupervised); the channel is kept
 * out of programs the extension executes. */
static void setup(void) {
    const char *raw = getenv("EXTENSIOND_CHANNEL_FD");
    if (!raw || !*raw) return;
    char *end;
    errno = 0;
    long fd = strtol(raw, &end, 10);
    int valid = !errno && !*end && fd >= 0 && fd <= 0x7fffffff && raw[0] != ' ';
    unsetenv("EXTENSIOND_CHANNEL_FD");
    if (!valid || !is_channel((int)fd)) return;
    (void)fcntl((int)fd, F_SETFD, FD_CLOEXEC);
    channel = (int)fd;
}

static int supervised(void) {
    pthread_once(&once, setup);
    return channel >= 0;
}

/* Sends one message; 0, or -1 when it cannot be encoded or the channel is closed. */
static int send_message(const struct ext_wire_message *m) {
    uint8_t small[512];
    size_t capacity = EXT_WIRE_HEADER + 12 + m->length;
    uint8_t *buffer = capacity <= sizeof small ? small : malloc(capacity);
    if (!buffer) return -1;
    long n = ext_wire_encode(m, buffer, capacity);
    ssize_t sent;
    if (n < 0) sent = -1;
    else
        do sent = send(channel, buffer, (size_t)n, MSG_NOSIGNAL);
        while (sent < 0 && errno == EINTR);
    if (buffer != small) free(buffer);
    return sent == n ? 0 : -1;
}

static int send_id(uint8_t kind, uint64_t id) {
    struct ext_wire_message m = {.kind = kind, .id = id};
    return send_message(&m);
}

/* Copies `text` as UTF-8 of at most `limit` bytes: invalid sequences become U+FFFD (as Swift's
 * String(cString:)), and the text is cut at a code point boundary. Returns a malloc'ed string
 * and its length in *length, or NULL when out of memory. With `cut` 0, returns NULL (and
 * *length over `limit`) instead of cutting; *length is 0 when out of memory. */
static char *utf8_copy(const char *text, size_t limit, int cut, size_t *length) {
    size_t n = strlen(text);
    char *out = malloc(n * 3 + 1);
    *length = 0;
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        size_t width = 1;
        const uint8_t *s = (const uint8_t *)text + i;
        if (s[0] >= 0x80) {
            width = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
            if (width > n - i || !ext_wire_valid_utf8(s, width)) width = 0;
        }
        const char *piece = width ? (const char *)s : "\xEF\xBF\xBD";
        size_t size = width ? width : 3;
        if (o + size > limit) {
            if (!cut) {
                free(out);
                *length = limit + 1;
                return NULL;
            }
            break;
        }
        memcpy(out + o, piece, size);
        o += size;
        i += width ? width : 1;
    }
    out[o] = 0;
    *length = o;
    return out;
}

/* --- threads ------------------------------------------------------------------------------ */

enum work_kind { WORK_GRANTED, WORK_EXPIRED, WORK_DENIED, WORK_REQUEST, WORK_REFRESH, WORK_NOTIFY };

struct work {
    enum work_kind kind;
    struct activity *activity;
    uint64_t id;
    int fd;
    ext_request_handler request;
    ext_refresh_handler refresh;
    void *context;
    size_t handlers;
    struct observer *notify; /* copies of the observers of `name`, handlers only */
    char name[EXT_WIRE_MAX_IDENTIFIER + 1];
};

static void finished(struct activity *a, int main);

static void perform(struct work *w) {
    switch (w->kind) {
    case WORK_GRANTED:
        w->activity->block(false, w->activity->context);
        finished(w->activity, 1);
        break;
    case WORK_EXPIRED:
        w->activity->block(true, w->activity->context);
        finished(w->activity, 0);
        break;
    case WORK_DENIED:
        w->activity->block(true, w->activity->context);
        if (w->activity->cleanup) w->activity->cleanup(w->activity->context);
        free(w->activity);
        break;
    case WORK_REQUEST: w->request(w->id, w->fd, w->context); break;
    case WORK_REFRESH: w->refresh(w->id, w->context); break;
    case WORK_NOTIFY:
        for (size_t i = 0; i < w->handlers; i++) w->notify[i].handler(w->name, w->notify[i].context);
        free(w->notify);
        break;
    }
    free(w);
}

static void *work_thread(void *arg) {
    perform(arg);
    return NULL;
}

/* Runs `w` on a detached thread of its own (on the calling thread if none can be created). */
static void dispatch(struct work *w) {
    pthread_attr_t attributes;
    pthread_t thread;
    int created = pthread_attr_init(&attributes) == 0;
    if (created) {
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        created = pthread_create(&thread, &attributes, work_thread, w) == 0;
        pthread_attr_destroy(&attributes);
    }
    if (!created) perform(w);
}

static struct work *new_work(enum work_kind kind, struct activity *a) {
    struct work *w = calloc(1, sizeof *w);
    if (!w) abort();
    w->kind = kind;
    w->activity = a;
    w->fd = -1;
    return w;
}

/* --- activities --------------------------------------------------------------------------- */

static struct activity *unlink_activity(struct activity **list, int by_tag, uint64_t key) {
    for (struct activity **p = list; *p; p = &(*p)->next) {
        struct activity *a = *p;
        if (by_tag ? a->tag == key : a->assertion_id == key) {
            *p = a->next;
            a->next = NULL;
            return a;
        }
    }
    return NULL;
}

/* After a call of the block returned: once the first call and any expired call have returned,
 * the assertion is released, then cleanup runs and the activity is freed. */
static void finished(struct activity *a, int main) {
    pthread_mutex_lock(&lock);
    a->running--;
    if (main) a->main_returned = 1;
    int done = a->running == 0 && a->main_returned && !a->released;
    if (done) {
        a->released = 1;
        unlink_activity(&live, 0, a->assertion_id);
    }
    pthread_mutex_unlock(&lock);
    if (!done) return;
    send_id(EXT_WIRE_RELEASE, a->assertion_id);
    if (a->cleanup) a->cleanup(a->context);
    free(a);
}

/* Under `lock`: whether the expired call is due (at most once, never after the first call
 * returned); when it is, it is counted as running. */
static int expire_due(struct activity *a) {
    if (a->main_returned || a->expired_called) return 0;
    a->expired_called = 1;
    a->running++;
    return 1;
}

/* --- the reader --------------------------------------------------------------------------- */

/* The supervisor is gone: every waiting acquire is denied, every live assertion expires. */
static void close_down(void) {
    pthread_mutex_lock(&lock);
    closed = 1;
    struct activity *denied = pending, *expiring = live;
    pending = live = NULL;
    struct activity *due = NULL;
    while (expiring) {
        struct activity *a = expiring;
        expiring = a->next;
        a->next = NULL;
        if (expire_due(a)) {
            a->next = due;
            due = a;
        }
    }
    pthread_mutex_unlock(&lock);
    while (denied) {
        struct activity *a = denied;
        denied = a->next;
        dispatch(new_work(WORK_DENIED, a));
    }
    while (due) {
        struct activity *a = due;
        due = a->next;
        a->next = NULL;
        dispatch(new_work(WORK_EXPIRED, a));
    }
}

/* Handles one message on the reading thread: bookkeeping and acknowledgements here, in order;
 * a callback to run is returned as work (NULL when there is none). */
static struct work *handle(const struct ext_wire_message *m, int fd) {
    if (fd >= 0 && m->kind != EXT_WIRE_DELIVER) {
        close(fd);
        fd = -1;
    }
    switch (m->kind) {
    case EXT_WIRE_DELIVER: {
        if (fd < 0) return NULL;
        pthread_mutex_lock(&lock);
        ext_request_handler handler = on_request;
        void *context = request_context;
        pthread_mutex_unlock(&lock);
        if (!handler) {
            close(fd);
            return NULL;
        }
        struct work *w = new_work(WORK_REQUEST, NULL);
        w->request = handler;
        w->context = context;
        w->id = m->id;
        w->fd = fd;
        return w;
    }
    case EXT_WIRE_REFRESH: {
        pthread_mutex_lock(&lock);
        ext_refresh_handler handler = on_refresh;
        void *context = refresh_context;
        pthread_mutex_unlock(&lock);
        if (!handler) {
            struct ext_wire_message done = {.kind = EXT_WIRE_REFRESH_DONE, .id = m->id, .answer = 3};
            send_message(&done);
            return NULL;
        }
        struct work *w = new_work(WORK_REFRESH, NULL);
        w->refresh = handler;
        w->context = context;
        w->id = m->id;
        return w;
    }
    case EXT_WIRE_NOTIFY: {
        struct work *w = new_work(WORK_NOTIFY, NULL);
        memcpy(w->name, m->data, m->length);
        w->name[m->length] = 0;
        pthread_mutex_lock(&lock);
        size_t count = 0;
        for (struct observer *o = observers; o; o = o->next) count += strcmp(o->name, w->name) == 0;
        w->notify = count ? calloc(count, sizeof *w->notify) : NULL;
        for (struct observer *o = observers; o && w->notify; o = o->next)
            if (strcmp(o->name, w->name) == 0) w->notify[w->handlers++] = *o;
        pthread_mutex_unlock(&lock);
        /* Observers are kept in the order they were added (appended at the tail). */
        if (w->handlers) return w;
        free(w->notify);
        free(w);
        return NULL;
    }
    case EXT_WIRE_GRANTED: {
        pthread_mutex_lock(&lock);
        struct activity *a = unlink_activity(&pending, 1, m->tag);
        if (a) {
            a->assertion_id = m->id;
            a->granted = 1;
            a->running++;
            a->next = live;
            live = a;
        }
        pthread_mutex_unlock(&lock);
        return a ? new_work(WORK_GRANTED, a) : NULL;
    }
    case EXT_WIRE_DENIED: {
        pthread_mutex_lock(&lock);
        struct activity *a = unlink_activity(&pending, 1, m->tag);
        pthread_mutex_unlock(&lock);
        return a ? new_work(WORK_DENIED, a) : NULL;
    }
    case EXT_WIRE_EXPIRE: {
        /* Acknowledge first: the supervisor checks the message was read before it stops us. */
        send_id(EXT_WIRE_EXPIRE_RECEIVED, m->id);
        pthread_mutex_lock(&lock);
        struct activity *a = unlink_activity(&live, 0, m->id);
        int due = a && expire_due(a);
        pthread_mutex_unlock(&lock);
        return due ? new_work(WORK_EXPIRED, a) : NULL;
    }
    default: return NULL;
    }
}

/* Receives one datagram and at most one descriptor. Returns its size, 0 at end of file, or -1
 * on an error. */
static ssize_t receive(uint8_t *buffer, size_t capacity, int *fd) {
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int) * 4)];
    } control;
    struct iovec iov = {buffer, capacity};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
    ssize_t n;
    do n = recvmsg(channel, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    *fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *fds = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < count; i++) {
            if (*fd < 0) *fd = fds[i];
            else close(fds[i]); /* at most one descriptor travels with a message */
        }
    }
    if (n >= 0 && (msg.msg_flags & MSG_TRUNC)) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return -2;
    }
    return n;
}

/* The datagram being read. Only the thread holding the read role uses it, and what a work
 * item needs is copied out of it before the role is handed on. */
static uint8_t datagram[EXT_WIRE_MAX_MESSAGE];

static void *reader(void *unused);

/* Starts a detached thread holding the read role; 0, or an error number. */
static int start_reader(void) {
    pthread_attr_t attributes;
    pthread_t thread;
    int rc = pthread_attr_init(&attributes);
    if (rc) return rc;
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&thread, &attributes, reader, NULL);
    pthread_attr_destroy(&attributes);
    return rc;
}

/* The read role: read and handle messages until one asks for a callback; then hand the role to
 * a new thread and run the callback here, on the thread that read the message (it starts
 * without waiting for another thread to be scheduled, and *expire* keeps being read while it
 * runs), then end. Without a new thread, the callback goes to a thread of its own and this
 * one keeps reading. When the channel closes, close_down. */
static void *reader(void *unused) {
    (void)unused;
    for (;;) {
        int fd;
        ssize_t n = receive(datagram, sizeof datagram, &fd);
        if (n == -2) continue; /* over the size limit: refused, as the decoder would */
        if (n <= 0) break;
        struct ext_wire_message m;
        if (ext_wire_decode(datagram, (size_t)n, &m) != 0) {
            if (fd >= 0) close(fd);
            continue;
        }
        struct work *w = handle(&m, fd);
        if (!w) continue;
        if (start_reader() == 0) {
            perform(w);
            return NULL;
        }
        dispatch(w);
    }
    close_down();
    return NULL;
}

/* Starts the reader once. Aborts if it cannot be created: without it no request or expiry
 * could ever be delivered. */
static void ensure_reader(void) {
    pthread_mutex_lock(&lock);
    int start = !reader_started;
    reader_started = 1;
    pthread_mutex_unlock(&lock);
    if (start && start_reader() != 0) {
        static const char text[] = "extensiond runtime: cannot create the channel's reader thread\n";
        (void)!write(2, text, sizeof text - 1);
        abort();
    }
}

/* --- the C interface ---------------------------------------------------------------------- */

API int ext_runtime_is_supervised(void) { return supervised(); }

API int ext_runtime_start(ext_request_handler handler, void *context) {
    if (!handler) return -EINVAL;
    if (!supervised()) return -ENOTCONN;
    pthread_mutex_lock(&lock);
    int again = started;
    if (!again) {
        started = 1;
        on_request = handler;
        request_context = context;
    }
    pthread_mutex_unlock(&lock);
    if (again) return -EALREADY;
    /* `ready` first: the reader's creation overlaps with extensiond's answer, which waits in
     * the socket until it is read. */
    send_id(EXT_WIRE_READY, 0);
    ensure_reader();
    return 0;
}

static void deny(struct activity *a) { dispatch(new_work(WORK_DENIED, a)); }

API int ext_perform_expiring_activity_with_cleanup(const char *reason, ext_activity_block block,
                                                   ext_activity_cleanup cleanup, void *context) {
    if (!reason || !*reason || !block) return -EINVAL;
    if (strlen(reason) > EXT_ACTIVITY_MAX_REASON) return -EMSGSIZE; /* each byte is 1 to 3 bytes of UTF-8 */
    size_t length;
    char *text = utf8_copy(reason, EXT_ACTIVITY_MAX_REASON, 0, &length);
    if (!text) return length > EXT_ACTIVITY_MAX_REASON ? -EMSGSIZE : -ENOMEM;
    struct activity *a = calloc(1, sizeof *a);
    if (!a) {
        free(text);
        return -ENOMEM;
    }
    a->block = block;
    a->cleanup = cleanup;
    a->context = context;
    if (!supervised()) {
        free(text);
        deny(a);
        return 0;
    }
    ensure_reader();
    pthread_mutex_lock(&lock);
    int gone = closed;
    if (!gone) {
        a->tag = next_tag++;
        a->next = pending;
        pending = a;
    }
    pthread_mutex_unlock(&lock);
    if (gone) {
        free(text);
        deny(a);
        return 0;
    }
    struct ext_wire_message m = {.kind = EXT_WIRE_ACQUIRE, .tag = a->tag, .data = (const uint8_t *)text, .length = length};
    int failed = send_message(&m);
    free(text);
    if (failed) {
        pthread_mutex_lock(&lock);
        struct activity *still = unlink_activity(&pending, 1, m.tag);
        pthread_mutex_unlock(&lock);
        if (still) deny(still); /* else the reader already denied it (the channel closed) */
    }
    return 0;
}

API int ext_perform_expiring_activity(const char *reason, ext_activity_block block, void *context) {
    return ext_perform_expiring_activity_with_cleanup(reason, block, NULL, context);
}

/* The naming rule of extension ids and hint names (ExtensionProtocol's Identifier). */
static int valid_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > EXT_WIRE_MAX_IDENTIFIER) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '.' || c == '-' || c == '_';
        if (!ok) return 0;
    }
    return name[0] != '.' && name[n - 1] != '.' && !strstr(name, "..");
}

API int ext_observe(const char *name, ext_hint_handler handler, void *context) {
    if (!name || !handler || !valid_name(name)) return -EINVAL;
    if (!supervised()) return -ENOTCONN;
    struct observer *o = calloc(1, sizeof *o);
    if (!o || !(o->name = strdup(name))) {
        free(o);
        return -ENOMEM;
    }
    o->handler = handler;
    o->context = context;
    ensure_reader();
    pthread_mutex_lock(&lock);
    int refused = closed ? -ENOTCONN : 0, first = 1;
    struct observer **tail = &observers;
    if (!refused) {
        for (; *tail; tail = &(*tail)->next) first &= strcmp((*tail)->name, name) != 0;
        if (first && observed_names == EXT_OBSERVE_MAX_NAMES) refused = -ENOSPC;
    }
    if (!refused) {
        *tail = o;
        observed_names += first;
    }
    pthread_mutex_unlock(&lock);
    if (refused) {
        free(o->name);
        free(o);
        return refused;
    }
    if (!first) return 0;
    struct ext_wire_message m = {.kind = EXT_WIRE_OBSERVE, .data = (const uint8_t *)name, .length = strlen(name)};
    return send_message(&m) == 0 ? 0 : -ENOTCONN;
}

API int ext_runtime_on_refresh(ext_refresh_handler handler, void *context) {
    if (!handler) return -EINVAL;
    if (!supervised()) return -ENOTCONN;
    pthread_mutex_lock(&lock);
    on_refresh = handler;
    refresh_context = context;
    pthread_mutex_unlock(&lock);
    ensure_reader();
    return 0;
}

API int ext_refresh_complete(uint64_t refresh_id, int result) {
    if (result != EXT_REFRESH_NEW_DATA && result != EXT_REFRESH_NO_DATA && result != EXT_REFRESH_FAILED) return -EINVAL;
    if (!supervised()) return -ENOTCONN;
    struct ext_wire_message m = {.kind = EXT_WIRE_REFRESH_DONE, .id = refresh_id, .answer = (uint8_t)result};
    return send_message(&m) == 0 ? 0 : -ENOTCONN;
}

API int ext_request_complete(uint64_t request_id, const void *payload, size_t length) {
    if (length != 0 && !payload) return -EINVAL;
    if (length > EXT_REQUEST_MAX_PAYLOAD) return -EMSGSIZE;
    if (!supervised()) return -ENOTCONN;
    struct ext_wire_message m = {.kind = EXT_WIRE_COMPLETE, .id = request_id, .data = payload, .length = length};
    return send_message(&m) == 0 ? 0 : -ENOTCONN;
}

API int ext_request_cancel(uint64_t request_id, const char *reason) {
    if (!reason) return -EINVAL;
    if (!supervised()) return -ENOTCONN;
    size_t length;
    char *text = utf8_copy(reason, EXT_WIRE_MAX_TEXT, 1, &length);
    if (!text) return -ENOMEM;
    struct ext_wire_message m = {.kind = EXT_WIRE_CANCEL, .id = request_id, .data = (const uint8_t *)text, .length = length};
    int failed = send_message(&m);
    free(text);
    return failed ? -ENOTCONN : 0;
}

API const char *ext_container_path(void) {
    const char *value = getenv("EXTENSIOND_CONTAINER");
    return value && *value ? value : NULL;
}

API const char *ext_shared_container_path(const char *group) {
    static const char prefix[] = "EXTENSION_SHARED_CONTAINER_";
    if (!group) return NULL;
    size_t n = strlen(group);
    char *name = malloc(sizeof prefix + n);
    if (!name) return NULL;
    memcpy(name, prefix, sizeof prefix - 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)group[i];
        if (c >= 'a' && c <= 'z') c = (unsigned char)(c - 'a' + 'A');
        else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) c = '_';
        name[sizeof prefix - 1 + i] = (char)c;
    }
    name[sizeof prefix - 1 + n] = 0;
    const char *value = getenv(name);
    free(name);
    return value && *value ? value : NULL;
}
