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
 * Round trips (openURL, suiteOpen, suiteWrite, the secrets, the transfers) are answered by
 * *answer* (or, for secretCopy, *secretItems*; for transferCreate, *transferCreated*) with their
 * tag: the reader completes the call and signals `answered`, on which a blocking caller waits,
 * or runs the call's callback (openURL). A blocking caller is never the reader: callbacks run
 * on threads that no longer hold the read role (in the one case where a callback must run on the
 * reading thread, no thread could be created, a round trip it makes returns -EAGAIN). The send
 * and receive buffers of the secrets' messages are zeroed once used (secrets.c has the rest of
 * the secrets API). *transferEvents* go to the hook transfers.c sets (transfers.h), which returns
 * the work of delivering them; a *transferHandled* is sent without waiting: its answer is read
 * and dropped.
 *
 * One mutex guards all state; no callback runs under it.
 */
#define _GNU_SOURCE
#include "extension_runtime.h"
#include "defaults.h"
#include "secrets.h"
#include "transfers.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))


_Static_assert(EXT_ACTIVITY_MAX_REASON == EXT_WIRE_MAX_REASON, "the header's reason limit is the wire's");
_Static_assert(EXT_REQUEST_MAX_PAYLOAD == EXT_WIRE_MAX_PAYLOAD, "the header's payload limit is the wire's");
_Static_assert(EXT_OBSERVE_MAX_NAMES == 256, "NotificationHints.maxObserved, the daemon's limit");
_Static_assert(EXT_URL_MAX == EXT_WIRE_MAX_URL, "the header's URL limit is the wire's");
_Static_assert(EXT_DEFAULTS_MAX_KEY == EXT_WIRE_MAX_DEFAULTS_KEY, "the header's key limit is the wire's");
_Static_assert(EXT_DEFAULTS_MAX_VALUE == EXT_WIRE_MAX_DEFAULTS_VALUE, "the header's value limit is the wire's");
_Static_assert(EXT_DEFAULTS_MAX_KEY >= EXT_WIRE_MAX_IDENTIFIER, "ext_defaults.suite holds a suite name");

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

/* One round trip awaiting its *answer* (openURL, suiteOpen, suiteWrite, the secrets, the
 * transfers), *secretItems* (secretCopy) or *transferCreated* (transferCreate). Guarded by
 * `lock`. */
struct call {
    uint32_t tag;
    ext_open_url_callback callback; /* openURL: called with the outcome; else a caller waits */
    void *context;
    int done;   /* a waiting caller's answer arrived, or the channel closed */
    int result; /* then: 0, or a negative errno */
    int fd;     /* the descriptor attached to a successful answer, or -1 */
    int wants_items;       /* secretCopy: answered by secretItems (an answer is a failure) */
    int with_data;         /* secretCopy: the first item with its data */
    ext_secret_item *items; /* secretCopy's result, `count` of them, when `result` is 0 */
    size_t count;
    int transfer;          /* a transfer kind: its failure codes' errnos are transfer_error's */
    int wants_task;        /* transferCreate: answered by transferCreated (an answer is a failure) */
    uint64_t task;         /* transferCreate's result, when `result` is 0 */
    int discard;           /* transferHandled: nobody waits; the call is freed once answered */
    struct call *next;
};

/* A change handler of an open suite (ext_defaults_on_change). */
struct extd_handler {
    ext_defaults_handler handler;
    void *context;
    struct extd_handler *next;
};

/* One change handler call due (suiteChanged): the suite is kept (`refs`) until it is made. */
struct change {
    ext_defaults *suite;
    ext_defaults_handler handler;
    void *context;
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
static struct call *calls;
static pthread_cond_t answered = PTHREAD_COND_INITIALIZER; /* a waiting call is done */
static pthread_cond_t settled = PTHREAD_COND_INITIALIZER;  /* a change handler returned */
static ext_defaults *suites;                               /* open, in the order opened */
static _Thread_local int reading;                          /* this thread holds the read role */
static _Thread_local ext_defaults *changing;               /* whose change handler this thread runs */
static extt_events_hook transfer_events;                   /* transfers.c's, once a callback is set */

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

static int is_secret(uint8_t kind) { return kind >= EXT_WIRE_SECRET_ADD && kind <= EXT_WIRE_SECRET_DELETE; }

/* Sends one message; 0, or -1 when it cannot be encoded or the channel is closed. The buffer of
 * a secret kind is zeroed once sent. */
static int send_message(const struct ext_wire_message *m) {
    uint8_t small[512];
    const struct ext_wire_secret_attributes *a = &m->attributes;
    const struct ext_wire_transfer *t = &m->transfer;
    size_t capacity = EXT_WIRE_HEADER + 64 + m->length + m->key_length + m->value_length + m->label_length + m->items_length +
                      a->group.length + a->service.length + a->account.length + a->server.length + a->protocol.length +
                      a->path.length + a->label.length + t->session.length + t->group.length + t->url.length + t->path.length;
    uint8_t *buffer = capacity <= sizeof small ? small : malloc(capacity);
    if (!buffer) return -1;
    long n = ext_wire_encode(m, buffer, capacity);
    ssize_t sent;
    if (n < 0) sent = -1;
    else
        do sent = send(channel, buffer, (size_t)n, MSG_NOSIGNAL);
        while (sent < 0 && errno == EINTR);
    if (is_secret(m->kind)) explicit_bzero(buffer, capacity);
    if (buffer != small) free(buffer);
    return n >= 0 && sent == n ? 0 : -1;
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

enum work_kind { WORK_GRANTED, WORK_EXPIRED, WORK_DENIED, WORK_REQUEST, WORK_REFRESH, WORK_NOTIFY, WORK_OPENED, WORK_CHANGED, WORK_JOB };

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
    ext_open_url_callback opened_callback;
    int opened;
    struct change *changes; /* `handlers` calls of the suite `name` */
    struct extt_job job;    /* WORK_JOB: transfers.c's */
    char name[EXT_WIRE_MAX_IDENTIFIER + 1];
};

static void finished(struct activity *a, int main);
static void changed(struct work *w);

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
    case WORK_OPENED: w->opened_callback(w->opened != 0, w->context); break;
    case WORK_CHANGED: changed(w); break;
    case WORK_JOB: w->job.run(w->job.arg); break;
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
    /* Every call is over: a waiting caller gets -ENOTCONN, an openURL callback `false`. */
    struct call *unanswered = NULL;
    while (calls) {
        struct call *c = calls;
        calls = c->next;
        if (c->discard) free(c);
        else if (c->callback) {
            c->next = unanswered;
            unanswered = c;
        } else {
            c->result = -ENOTCONN;
            c->done = 1;
        }
    }
    pthread_cond_broadcast(&answered);
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
    while (unanswered) {
        struct call *c = unanswered;
        unanswered = c->next;
        struct work *w = new_work(WORK_OPENED, NULL);
        w->opened_callback = c->callback;
        w->context = c->context;
        free(c);
        dispatch(w);
    }
}

/* The errno of an *answer*'s failure code (docs/protocol.md, "Failure codes"). */
static int answer_error(uint16_t code) {
    switch (code) {
    case 0: return 0;
    case 1: return -ENOENT;  /* unknownExtension: no such suite */
    case 5: return -EPERM;   /* notPermitted */
    case 6: return -EINVAL;  /* badRequest */
    case 8: return -ENOSPC;  /* limitReached */
    case 13: return -EEXIST; /* duplicateItem */
    case 14: return -ENOENT; /* itemNotFound */
    default: return -EIO;
    }
}

/* The errno of an *answer*'s failure code to a transfer kind (include/extension_runtime.h). */
static int transfer_error(uint16_t code) {
    switch (code) {
    case 0: return 0;
    case 5: return -EPERM;  /* notPermitted */
    case 6: return -EINVAL; /* badRequest */
    case 7: return -ENOENT; /* unknownRequest: no such task */
    case 8: return -ENOSPC; /* limitReached */
    default: return -EIO;   /* internalError (11), and any other */
    }
}

/* Under `lock`: removes the call with `tag` from `calls`. */
static struct call *unlink_call(uint32_t tag) {
    for (struct call **p = &calls; *p; p = &(*p)->next) {
        struct call *c = *p;
        if (c->tag == tag) {
            *p = c->next;
            c->next = NULL;
            return c;
        }
    }
    return NULL;
}

/* *answer*: completes its call (a descriptor goes only with a successful answer to a waiting
 * caller); an openURL callback is returned as work. */
static struct work *answer(const struct ext_wire_message *m, int fd) {
    struct work *w = NULL;
    pthread_mutex_lock(&lock);
    struct call *c = unlink_call(m->tag);
    if (c && c->discard) free(c);
    else if (c && c->callback) {
        w = new_work(WORK_OPENED, NULL);
        w->opened_callback = c->callback;
        w->context = c->context;
        w->opened = m->code == 0;
        free(c);
    } else if (c) { /* the waiter's, on its stack: not touched once `lock` is released */
        c->result = c->transfer ? transfer_error(m->code) : answer_error(m->code);
        /* secretCopy, transferCreate: an answer 0 is out of protocol */
        if (m->code == 0 && (c->wants_items || c->wants_task)) c->result = -EIO;
        else if (m->code == 0) {
            c->fd = fd;
            fd = -1;
        }
        c->done = 1;
        pthread_cond_broadcast(&answered);
    }
    pthread_mutex_unlock(&lock);
    if (fd >= 0) close(fd);
    return w;
}

/* *secretItems*: completes a secretCopy with the items (their copies: the datagram is zeroed
 * once handled). Any other call it would answer fails (an openURL callback gets false). */
static struct work *secret_items(const struct ext_wire_message *m) {
    struct work *w = NULL;
    pthread_mutex_lock(&lock);
    struct call *c = unlink_call(m->tag);
    if (c && c->discard) free(c);
    else if (c && c->callback) {
        w = new_work(WORK_OPENED, NULL);
        w->opened_callback = c->callback;
        w->context = c->context;
        free(c);
    } else if (c) {
        c->result = c->wants_items ? exts_items(m, c->with_data, &c->items, &c->count) : -EIO;
        c->done = 1;
        pthread_cond_broadcast(&answered);
    }
    pthread_mutex_unlock(&lock);
    return w;
}

/* *transferCreated*: completes a transferCreate with its task. Any other call it would answer
 * fails (an openURL callback gets false). */
static struct work *transfer_created(const struct ext_wire_message *m) {
    struct work *w = NULL;
    pthread_mutex_lock(&lock);
    struct call *c = unlink_call(m->tag);
    if (c && c->discard) free(c);
    else if (c && c->callback) {
        w = new_work(WORK_OPENED, NULL);
        w->opened_callback = c->callback;
        w->context = c->context;
        free(c);
    } else if (c) {
        c->result = c->wants_task ? 0 : -EIO;
        c->task = m->id;
        c->done = 1;
        pthread_cond_broadcast(&answered);
    }
    pthread_mutex_unlock(&lock);
    return w;
}

/* *transferEvents*: the work transfers.c's hook returns, if any (none before a callback is
 * set: the events are dropped, not acknowledged). */
static struct work *transfer_events_work(const struct ext_wire_message *m) {
    pthread_mutex_lock(&lock);
    extt_events_hook hook = transfer_events;
    pthread_mutex_unlock(&lock);
    struct extt_job job;
    if (!hook || !hook(m, &job)) return NULL;
    struct work *w = new_work(WORK_JOB, NULL);
    w->job = job;
    return w;
}

/* A datagram of an answering kind (*answer*, *secretItems*, *transferCreated*) that the decoder
 * refused: its call, when the tag can be read, fails with -EIO (an openURL callback gets false)
 * instead of waiting for an answer that will not come. */
static struct work *refused_answer(const uint8_t *datagram, size_t size) {
    uint8_t kind = size > 1 ? datagram[1] : 0;
    if (size < EXT_WIRE_HEADER + 4 || (kind != EXT_WIRE_ANSWER && kind != EXT_WIRE_SECRET_ITEMS && kind != EXT_WIRE_TRANSFER_CREATED))
        return NULL;
    const uint8_t *t = datagram + EXT_WIRE_HEADER;
    struct ext_wire_message m = {
        .kind = EXT_WIRE_ANSWER,
        .tag = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24,
        .code = 11, /* internalError: -EIO */
    };
    return answer(&m, -1);
}

/* *suiteChanged*: a call of each change handler of each open handle of the suite, in order. */
static struct work *suite_changed(const struct ext_wire_message *m) {
    struct work *w = new_work(WORK_CHANGED, NULL);
    memcpy(w->name, m->data, m->length);
    w->name[m->length] = 0;
    pthread_mutex_lock(&lock);
    size_t count = 0;
    for (ext_defaults *d = suites; d; d = d->next)
        if (strcmp(d->suite, w->name) == 0)
            for (struct extd_handler *h = d->handlers; h; h = h->next) count++;
    w->changes = count ? calloc(count, sizeof *w->changes) : NULL;
    for (ext_defaults *d = suites; d && w->changes; d = d->next)
        if (strcmp(d->suite, w->name) == 0)
            for (struct extd_handler *h = d->handlers; h; h = h->next) {
                w->changes[w->handlers++] = (struct change){d, h->handler, h->context};
                d->refs++;
            }
    pthread_mutex_unlock(&lock);
    if (w->handlers) return w;
    free(w->changes);
    free(w);
    return NULL;
}

/* Runs the change handlers of WORK_CHANGED, each unless its suite was closed meanwhile; a
 * suite's memory goes with the last reference to it. */
static void changed(struct work *w) {
    for (size_t i = 0; i < w->handlers; i++) {
        struct change *c = &w->changes[i];
        ext_defaults *d = c->suite;
        pthread_mutex_lock(&lock);
        int call = !d->closed;
        d->calling += call;
        pthread_mutex_unlock(&lock);
        if (call) {
            ext_defaults *outer = changing;
            changing = d;
            c->handler(w->name, c->context);
            changing = outer;
        }
        pthread_mutex_lock(&lock);
        if (call) {
            d->calling--;
            pthread_cond_broadcast(&settled);
        }
        int last = --d->refs == 0;
        pthread_mutex_unlock(&lock);
        if (last) free(d);
    }
    free(w->changes);
}

/* Handles one message on the reading thread: bookkeeping and acknowledgements here, in order;
 * a callback to run is returned as work (NULL when there is none). */
static struct work *handle(const struct ext_wire_message *m, int fd) {
    if (fd >= 0 && m->kind != EXT_WIRE_DELIVER && m->kind != EXT_WIRE_ANSWER) {
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
    case EXT_WIRE_ANSWER: return answer(m, fd);
    case EXT_WIRE_SECRET_ITEMS: return secret_items(m);
    case EXT_WIRE_TRANSFER_CREATED: return transfer_created(m);
    case EXT_WIRE_TRANSFER_EVENTS: return transfer_events_work(m);
    case EXT_WIRE_SUITE_CHANGED: return suite_changed(m);
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
    reading = 1;
    for (;;) {
        int fd;
        ssize_t n = receive(datagram, sizeof datagram, &fd);
        if (n == -2) { /* over the size limit: refused, as the decoder would */
            explicit_bzero(datagram, sizeof datagram);
            continue;
        }
        if (n <= 0) break;
        /* A secretItems may carry secret data: zeroed once handled (what a call keeps is copied
         * out), before the read role, and the buffer, are handed on. */
        int secret = n > 1 && datagram[1] == EXT_WIRE_SECRET_ITEMS;
        struct ext_wire_message m;
        struct work *w;
        if (ext_wire_decode(datagram, (size_t)n, &m) != 0) {
            if (fd >= 0) close(fd);
            w = refused_answer(datagram, (size_t)n);
        } else w = handle(&m, fd);
        if (secret) explicit_bzero(datagram, (size_t)n);
        if (!w) continue;
        if (start_reader() == 0) {
            reading = 0;
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

/* Under `lock`: a tag for an acquire or a call, nonzero and unique among those outstanding. */
static uint32_t fresh_tag(void) {
    for (;;) {
        uint32_t tag = next_tag++;
        int used = tag == 0;
        for (struct activity *a = pending; a && !used; a = a->next) used = a->tag == tag;
        for (struct call *c = calls; c && !used; c = c->next) used = c->tag == tag;
        if (!used) return tag;
    }
}

/* Registers `c` under a fresh tag, which `m` gets, and sends `m`. 0 when the call is under way
 * (it will be completed by its answer or the channel's closing), -ENOTCONN when it was not
 * sent (it is not registered then). */
static int start_call(struct call *c, struct ext_wire_message *m) {
    ensure_reader();
    pthread_mutex_lock(&lock);
    if (closed) {
        pthread_mutex_unlock(&lock);
        return -ENOTCONN;
    }
    uint32_t tag = fresh_tag();
    c->tag = m->tag = tag;
    c->fd = -1;
    c->next = calls;
    calls = c;
    pthread_mutex_unlock(&lock);
    if (send_message(m) == 0) return 0;
    pthread_mutex_lock(&lock);
    int mine = unlink_call(tag) != NULL; /* else close_down completed it already */
    pthread_mutex_unlock(&lock);
    return mine ? -ENOTCONN : 0;
}

/* Sends `m` as the call `c` (a caller's, on its stack) and waits for its answer: c->result. */
static int wait_call(struct call *c, struct ext_wire_message *m) {
    if (!supervised()) return -ENOTCONN;
    if (reading) { /* only this thread could read the answer */
        pthread_mutex_lock(&lock);
        int gone = closed;
        pthread_mutex_unlock(&lock);
        return gone ? -ENOTCONN : -EAGAIN;
    }
    int rc = start_call(c, m);
    if (rc) return rc;
    pthread_mutex_lock(&lock);
    while (!c->done) pthread_cond_wait(&answered, &lock);
    pthread_mutex_unlock(&lock);
    return c->result;
}

/* A blocking round trip: sends `m` and waits for its answer. 0 (the descriptor attached to it
 * in *fd when `fd` is not NULL, else closed; -1 when there is none), or a negative errno. */
static int round_trip(struct ext_wire_message *m, int *fd) {
    if (fd) *fd = -1;
    struct call c = {.callback = NULL, .fd = -1};
    int rc = wait_call(&c, m);
    if (c.fd >= 0) {
        if (fd) *fd = c.fd;
        else close(c.fd);
    }
    return rc;
}

int extt_round_trip(struct ext_wire_message *m, uint64_t *task) {
    struct call c = {.callback = NULL, .fd = -1, .transfer = 1, .wants_task = task != NULL};
    int rc = wait_call(&c, m);
    if (c.fd >= 0) close(c.fd);
    if (rc == 0 && task) *task = c.task;
    return rc;
}

int extt_send(struct ext_wire_message *m) {
    if (!supervised()) return -ENOTCONN;
    struct call *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->transfer = 1;
    c->discard = 1;
    int rc = start_call(c, m);
    if (rc) free(c); /* not registered (start_call's -ENOTCONN) */
    return rc;
}

void extt_set_events_hook(extt_events_hook hook) {
    pthread_mutex_lock(&lock);
    transfer_events = hook;
    pthread_mutex_unlock(&lock);
    if (supervised()) ensure_reader();
}

int exts_round_trip(struct ext_wire_message *m, int with_data, ext_secret_item **items, size_t *count) {
    struct call c = {.callback = NULL, .fd = -1, .wants_items = items != NULL, .with_data = with_data};
    int rc = wait_call(&c, m);
    if (c.fd >= 0) close(c.fd);
    if (rc == 0 && items) {
        *items = c.items;
        *count = c.count;
    }
    return rc;
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
        a->tag = fresh_tag();
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

/* --- open URL ----------------------------------------------------------------------------- */

API int ext_open_url(const char *url, ext_open_url_callback callback, void *context) {
    if (!url || !*url || !callback) return -EINVAL;
    size_t n = strlen(url);
    if (n > EXT_URL_MAX) return -EMSGSIZE;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)url[i] < 0x20 || url[i] == 0x7f) return -EINVAL;
    if (!ext_wire_valid_utf8((const uint8_t *)url, n)) return -EINVAL;
    if (!supervised()) return -ENOTCONN;
    struct call *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->callback = callback;
    c->context = context;
    struct ext_wire_message m = {.kind = EXT_WIRE_OPEN_URL, .data = (const uint8_t *)url, .length = n};
    int rc = start_call(c, &m);
    if (rc) free(c);
    return rc;
}

/* --- shared defaults: opening, writing, change handlers (reading: defaults.c) -------------- */

/* Maps the suite open at `fd` (which stays the caller's) into `d`: its whole size, read-only. */
static int map_suite(int fd, ext_defaults *d) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -EIO;
    if (st.st_size < EXTD_HEADER || st.st_size > EXTD_MAPPING_SIZE) return -EIO;
    size_t size = (size_t)st.st_size;
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return errno == ENOMEM ? -ENOMEM : -EIO;
    if (extd_mapping_check(p, size) != 0) {
        munmap(p, size);
        return -EIO;
    }
    d->map = p;
    d->size = size;
    return 0;
}

API int ext_defaults_open(const char *suite, ext_defaults **out) {
    if (!suite || !out || !valid_name(suite)) return -EINVAL;
    if (!supervised()) return -ENOTCONN;
    ext_defaults *d = calloc(1, sizeof *d);
    if (!d) return -ENOMEM;
    size_t n = strlen(suite);
    memcpy(d->suite, suite, n + 1);
    struct ext_wire_message m = {.kind = EXT_WIRE_SUITE_OPEN, .data = (const uint8_t *)suite, .length = n};
    int fd;
    int rc = round_trip(&m, &fd);
    if (rc == 0 && fd < 0) rc = -EIO; /* answered without the mapping */
    if (rc == 0) rc = map_suite(fd, d);
    if (fd >= 0) close(fd);
    if (rc) {
        free(d);
        return rc;
    }
    d->refs = 1;
    pthread_mutex_lock(&lock);
    ext_defaults **tail = &suites;
    while (*tail) tail = &(*tail)->next;
    *tail = d;
    pthread_mutex_unlock(&lock);
    *out = d;
    return 0;
}

API void ext_defaults_close(ext_defaults *d) {
    if (!d) return;
    pthread_mutex_lock(&lock);
    d->closed = 1;
    for (ext_defaults **p = &suites; *p; p = &(*p)->next)
        if (*p == d) {
            *p = d->next;
            break;
        }
    d->next = NULL;
    struct extd_handler *handlers = d->handlers;
    d->handlers = NULL;
    /* No handler starts from now on; wait for those running elsewhere (not for this thread's
     * own, when a handler closes its suite). */
    unsigned own = changing == d;
    while (d->calling > own) pthread_cond_wait(&settled, &lock);
    void *map = (void *)d->map;
    size_t size = d->size;
    int last = --d->refs == 0; /* else the last change call due frees it (changed) */
    pthread_mutex_unlock(&lock);
    while (handlers) {
        struct extd_handler *h = handlers;
        handlers = h->next;
        free(h);
    }
    munmap(map, size);
    if (last) free(d);
}

API int ext_defaults_on_change(ext_defaults *d, ext_defaults_handler handler, void *context) {
    if (!d || !handler) return -EINVAL;
    struct extd_handler *h = calloc(1, sizeof *h);
    if (!h) return -ENOMEM;
    h->handler = handler;
    h->context = context;
    pthread_mutex_lock(&lock);
    int gone = d->closed;
    if (!gone) {
        struct extd_handler **tail = &d->handlers;
        while (*tail) tail = &(*tail)->next;
        *tail = h;
    }
    pthread_mutex_unlock(&lock);
    if (gone) free(h);
    return gone ? -EINVAL : 0;
}

/* suiteWrite: sets `key` to the encoded value (`has_value`), or removes it; a round trip. */
static int write_key(ext_defaults *d, const char *key, const uint8_t *value, size_t length, int has_value) {
    size_t key_length;
    if (!d || !key || !extd_valid_key(key, &key_length)) return -EINVAL;
    if (has_value && length > EXT_DEFAULTS_MAX_VALUE) return -EMSGSIZE;
    struct ext_wire_message m = {
        .kind = EXT_WIRE_SUITE_WRITE,
        .data = (const uint8_t *)d->suite,
        .length = strlen(d->suite),
        .key = (const uint8_t *)key,
        .key_length = key_length,
        .has_value = (uint8_t)(has_value != 0),
        .value = value,
        .value_length = has_value ? length : 0,
    };
    return round_trip(&m, NULL);
}

/* A scalar: the type byte, then `width` bytes of `bits`, little-endian. */
static int write_scalar(ext_defaults *d, const char *key, uint8_t type, uint64_t bits, size_t width) {
    uint8_t v[9] = {type};
    for (size_t i = 0; i < width; i++) v[1 + i] = (uint8_t)(bits >> (8 * i));
    return write_key(d, key, v, 1 + width, 1);
}

/* A string or bytes: the type byte, the u32 length, the bytes. */
static int write_run(ext_defaults *d, const char *key, uint8_t type, const void *bytes, size_t length) {
    size_t key_length;
    if (!d || !key || !extd_valid_key(key, &key_length)) return -EINVAL;
    if (length > EXT_DEFAULTS_MAX_VALUE - 5) return -EMSGSIZE;
    uint8_t *v = malloc(5 + length);
    if (!v) return -ENOMEM;
    v[0] = type;
    for (size_t i = 0; i < 4; i++) v[1 + i] = (uint8_t)(length >> (8 * i));
    if (length) memcpy(v + 5, bytes, length);
    int rc = write_key(d, key, v, 5 + length, 1);
    free(v);
    return rc;
}

API int ext_defaults_set_bool(ext_defaults *d, const char *key, bool value) {
    return write_scalar(d, key, EXT_DEFAULTS_BOOL, value ? 1 : 0, 1);
}

API int ext_defaults_set_int64(ext_defaults *d, const char *key, int64_t value) {
    return write_scalar(d, key, EXT_DEFAULTS_INTEGER, (uint64_t)value, 8);
}

API int ext_defaults_set_double(ext_defaults *d, const char *key, double value) {
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return write_scalar(d, key, EXT_DEFAULTS_DOUBLE, bits, 8);
}

API int ext_defaults_set_string(ext_defaults *d, const char *key, const char *value) {
    if (!value) return -EINVAL;
    size_t n = strlen(value);
    if (!ext_wire_valid_utf8((const uint8_t *)value, n)) return -EINVAL;
    return write_run(d, key, EXT_DEFAULTS_STRING, value, n);
}

API int ext_defaults_set_bytes(ext_defaults *d, const char *key, const void *value, size_t length) {
    if (!value && length) return -EINVAL;
    return write_run(d, key, EXT_DEFAULTS_BYTES, value, length);
}

API int ext_defaults_set_encoded(ext_defaults *d, const char *key, const void *value, size_t length) {
    size_t key_length;
    if (!d || !key || !value || !extd_valid_key(key, &key_length)) return -EINVAL;
    if (length > EXT_DEFAULTS_MAX_VALUE) return -EMSGSIZE;
    if (extd_value_check(value, length) != 0) return -EINVAL;
    return write_key(d, key, value, length, 1);
}

API int ext_defaults_remove(ext_defaults *d, const char *key) { return write_key(d, key, NULL, 0, 0); }
