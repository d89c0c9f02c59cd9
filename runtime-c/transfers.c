/* transfers.c: the background transfers API of libExtensionRuntimeC (include/extension_runtime.h,
 * ext_transfer_*; the wire messages: wire.h). Each call checks its arguments before anything is
 * sent, then makes one round trip (runtime.c, extt_round_trip). The sessions' callbacks are kept
 * here; runtime.c hands each *transferEvents* to on_events (on its reading thread), which queues
 * the message's events on their session; one job at a time per session delivers them, in order,
 * then acknowledges them (*transferHandled*, extt_send). */
#define _GNU_SOURCE
#include "transfers.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

_Static_assert(EXT_TRANSFER_MAX_URL == EXT_WIRE_MAX_TRANSFER_URL, "the header's URL limit is the wire's");
_Static_assert(EXT_TRANSFER_MAX_PATH == EXT_WIRE_MAX_TRANSFER_PATH, "the header's path limit is the wire's");

/* The events of one *transferEvents*, as they were encoded (read with ext_wire_transfer_event). */
struct batch {
    struct batch *next;
    uint16_t count;
    size_t length;
    uint8_t events[];
};

/* A session (group, name) given a callback in this process. Never freed: `delivered` is kept
 * for the life of the process, the callback removed or not. Guarded by `sessions_lock`. */
struct session {
    char *group, *name;
    size_t group_length, name_length;
    ext_transfer_callback callback; /* NULL: removed (its events are dropped, not acknowledged) */
    void *context;
    uint64_t delivered;             /* the highest sequence handed to a callback */
    struct batch *head, **tail;     /* messages waiting for delivery, in the order read */
    int delivering;                 /* a job is delivering `head` (at most one per session) */
    struct session *next;
};

static pthread_mutex_t sessions_lock = PTHREAD_MUTEX_INITIALIZER;
static struct session *sessions;

/* A C string as a wire string: not NULL, at most `limit` bytes of UTF-8 (empty when `empty` is
 * nonzero, else 1 or more). 0 or -EINVAL. */
static int text(const char *s, size_t limit, int empty, struct ext_wire_span *out) {
    if (!s) return -EINVAL;
    size_t n = strlen(s);
    if ((n == 0 && !empty) || n > limit || !ext_wire_valid_utf8((const uint8_t *)s, n)) return -EINVAL;
    out->data = (const uint8_t *)s;
    out->length = n;
    return 0;
}

/* A session's group and name: each 1 to 255 bytes of UTF-8. 0 or -EINVAL. */
static int names(const char *group, const char *session, struct ext_wire_transfer *t) {
    return text(group, EXT_WIRE_MAX_IDENTIFIER, 0, &t->group) || text(session, EXT_WIRE_MAX_IDENTIFIER, 0, &t->session) ? -EINVAL : 0;
}

/* Under `sessions_lock`: the session (group, name), or NULL. */
static struct session *find(const struct ext_wire_span *group, const struct ext_wire_span *name) {
    for (struct session *s = sessions; s; s = s->next)
        if (s->group_length == group->length && s->name_length == name->length && memcmp(s->group, group->data, group->length) == 0 &&
            memcmp(s->name, name->data, name->length) == 0)
            return s;
    return NULL;
}

/* A span as a C string, in `buffer` (`capacity` bytes, more than the span's limit). */
static const char *c_string(const struct ext_wire_span *s, char *buffer, size_t capacity) {
    size_t n = s->length < capacity - 1 ? s->length : capacity - 1;
    if (n) memcpy(buffer, s->data, n);
    buffer[n] = 0;
    return buffer;
}

/* Hands the events of `b` to `callback`, each whose sequence is 0 (progress) or above the
 * session's highest delivered, then acknowledges the message's highest nonzero sequence. */
static void deliver_batch(struct session *s, const struct batch *b, ext_transfer_callback callback, void *context) {
    static const size_t path_capacity = EXT_WIRE_MAX_TRANSFER_EVENT_PATH + 1;
    char *path = malloc(path_capacity);
    char domain[EXT_WIRE_MAX_IDENTIFIER + 1], message[EXT_WIRE_MAX_TRANSFER_TEXT + 1];
    const uint8_t *cursor = b->events;
    size_t left = b->length;
    uint64_t last = 0;
    for (uint16_t i = 0; i < b->count; i++) {
        struct ext_wire_transfer_event w;
        if (ext_wire_transfer_event(&cursor, &left, &w)) break; /* never: the decoder read them */
        if (w.sequence != 0) {
            pthread_mutex_lock(&sessions_lock);
            int fresh = w.sequence > s->delivered;
            if (fresh) s->delivered = w.sequence;
            pthread_mutex_unlock(&sessions_lock);
            if (w.sequence > last) last = w.sequence;
            if (!fresh) continue; /* delivered already, in this process */
        }
        ext_transfer_event event = {
            .sequence = w.sequence,
            .task = w.task,
            .kind = w.kind,
            .bytes = w.bytes,
            .total = w.total,
            .status = w.status,
            .path = path ? c_string(&w.path, path, path_capacity) : "",
            .domain = c_string(&w.domain, domain, sizeof domain),
            .code = w.code,
            .text = c_string(&w.text, message, sizeof message),
        };
        callback(s->group, s->name, &event, context);
    }
    free(path);
    if (last == 0) return; /* progress only: never acknowledged */
    struct ext_wire_message m = {.kind = EXT_WIRE_TRANSFER_HANDLED, .id = last};
    m.transfer.session = (struct ext_wire_span){(const uint8_t *)s->name, s->name_length};
    m.transfer.group = (struct ext_wire_span){(const uint8_t *)s->group, s->group_length};
    (void)extt_send(&m); /* without waiting for its answer; lost when the channel is closed */
}

/* The job of a session: delivers its queued messages, in order, until none is left. The
 * callback is the session's as each message starts. */
static void deliver(void *arg) {
    struct session *s = arg;
    for (;;) {
        pthread_mutex_lock(&sessions_lock);
        struct batch *b = s->head;
        if (!b) {
            s->delivering = 0;
            pthread_mutex_unlock(&sessions_lock);
            return;
        }
        s->head = b->next;
        if (!s->head) s->tail = &s->head;
        ext_transfer_callback callback = s->callback;
        void *context = s->context;
        pthread_mutex_unlock(&sessions_lock);
        if (callback) deliver_batch(s, b, callback, context);
        free(b);
    }
}

/* The events hook (transfers.h): queues the message's events on their session, when it has a
 * callback; a job is due when none is delivering that session's events already. */
static int on_events(const struct ext_wire_message *m, struct extt_job *job) {
    struct batch *b = malloc(sizeof *b + m->items_length);
    if (!b) return 0; /* dropped, not acknowledged: extensiond keeps the completions */
    b->next = NULL;
    b->count = m->count;
    b->length = m->items_length;
    if (m->items_length) memcpy(b->events, m->items, m->items_length);
    pthread_mutex_lock(&sessions_lock);
    struct session *s = find(&m->transfer.group, &m->transfer.session);
    int queued = s && s->callback, due = 0;
    if (queued) {
        *s->tail = b;
        s->tail = &b->next;
        due = !s->delivering;
        s->delivering = 1;
    }
    pthread_mutex_unlock(&sessions_lock);
    if (!queued) free(b);
    if (!due) return 0;
    job->run = deliver;
    job->arg = s;
    return 1;
}

API int ext_transfer_set_handler(const char *group, const char *session, ext_transfer_callback callback, void *context) {
    struct ext_wire_transfer t;
    if (names(group, session, &t)) return -EINVAL;
    pthread_mutex_lock(&sessions_lock);
    struct session *s = find(&t.group, &t.session);
    if (!s && callback) {
        s = calloc(1, sizeof *s);
        if (s && (!(s->group = strndup(group, t.group.length)) || !(s->name = strndup(session, t.session.length)))) {
            free(s->group);
            free(s);
            s = NULL;
        }
        if (!s) {
            pthread_mutex_unlock(&sessions_lock);
            return -ENOMEM;
        }
        s->group_length = t.group.length;
        s->name_length = t.session.length;
        s->tail = &s->head;
        s->next = sessions;
        sessions = s;
    }
    if (s) {
        s->callback = callback;
        s->context = context;
    }
    pthread_mutex_unlock(&sessions_lock);
    if (callback) extt_set_events_hook(on_events);
    return 0;
}

API int ext_transfer_create(const char *group, const char *session, int method, const char *url, const char *path, int discretionary,
                            uint64_t *task) {
    if (task) *task = 0;
    struct ext_wire_message m = {.kind = EXT_WIRE_TRANSFER_CREATE};
    struct ext_wire_transfer *t = &m.transfer;
    if (!task || names(group, session, t)) return -EINVAL;
    if (method != EXT_TRANSFER_DOWNLOAD && method != EXT_TRANSFER_UPLOAD_PUT && method != EXT_TRANSFER_UPLOAD_POST) return -EINVAL;
    if (text(url, EXT_TRANSFER_MAX_URL, 0, &t->url)) return -EINVAL;
    if (path && text(path, EXT_TRANSFER_MAX_PATH, 1, &t->path)) return -EINVAL;
    if (method != EXT_TRANSFER_DOWNLOAD && t->path.length == 0) return -EINVAL; /* an upload's source */
    t->method = (uint8_t)method;
    t->discretionary = discretionary != 0;
    return extt_round_trip(&m, task);
}

API int ext_transfer_cancel(uint64_t task) {
    struct ext_wire_message m = {.kind = EXT_WIRE_TRANSFER_CANCEL, .id = task};
    return extt_round_trip(&m, NULL);
}

API int ext_transfer_claim(const char *group, const char *session) {
    struct ext_wire_message m = {.kind = EXT_WIRE_TRANSFER_CLAIM};
    if (names(group, session, &m.transfer)) return -EINVAL;
    return extt_round_trip(&m, NULL);
}
