/* roundtrip: libExtensionRuntimeC's background transfers (ext_transfer_*) against a fake
 * extensiond on a socketpair (the runtime channel), in one process. Run by run.sh, linked with the
 * built library and runtime-c/wire.c (to check the C codec on every datagram the fake daemon
 * sees):
 *
 *   cc -std=c11 -I include -I runtime-c roundtrip.c runtime-c/wire.c -L DIR -lExtensionRuntimeC
 *
 * The fake daemon answers by the spec, with datagrams built by hand, byte by byte (not with
 * wire.c's encoder): transferCreate with transferCreated (tasks from FIRST_TASK up), cancel and
 * claim with answer 0, transferHandled with answer 0 (none in group "group.b": the runtime must
 * not wait for it), and records every transferHandled with the number of callbacks returned by
 * then. What steers it: a url ending in "/code-N" answers code N, "/hang" never answers,
 * "/answer-0" answers code 0 (out of protocol for a create), "/malformed" answers a
 * transferCreated the decoder refuses; a cancel of task 900 + N answers code N, of task 950 a
 * transferCreated (out of protocol); a claim of session "code-N" answers code N, of session
 * "close" shuts the channel. The events are sent by the test itself (transferEvents, by hand).
 *
 * Prints "ok: N checks" and exits 0, or names the first failure and exits 1. */
#define _GNU_SOURCE
#include "extension_runtime.h"
#include "wire.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

#define FIRST_TASK 0x100000001ULL

/* --- what the test saw: events delivered, transferHandled received -------------------------- */

struct record {
    char group[256], session[256];
    ext_transfer_event event; /* its strings: the copies below */
    char *path, domain[256], text[513];
    void *context;
    int on_main; /* delivered on the main thread (never expected) */
};

struct handled {
    char session[256], group[256];
    uint64_t through;
    long returned; /* callbacks returned when it arrived */
};

#define RECORDS 1024
static pthread_mutex_t seen = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_changed = PTHREAD_COND_INITIALIZER;
static struct record records[RECORDS];
static long recorded, returned;
static struct handled handled[256];
static long handled_count;
static pthread_t main_thread;
static unsigned slow_sequence; /* the callback of this sequence sleeps 100 ms before returning */

static void on_event(const char *group, const char *session, const ext_transfer_event *event, void *context) {
    if (slow_sequence && event->sequence == slow_sequence) usleep(100000);
    pthread_mutex_lock(&seen);
    if (recorded < RECORDS) {
        struct record *r = &records[recorded++];
        snprintf(r->group, sizeof r->group, "%s", group);
        snprintf(r->session, sizeof r->session, "%s", session);
        r->event = *event;
        r->path = strdup(event->path);
        snprintf(r->domain, sizeof r->domain, "%s", event->domain);
        snprintf(r->text, sizeof r->text, "%s", event->text);
        r->event.path = r->path, r->event.domain = r->domain, r->event.text = r->text;
        r->context = context;
        r->on_main = pthread_equal(pthread_self(), main_thread);
    }
    returned++;
    pthread_cond_broadcast(&seen_changed);
    pthread_mutex_unlock(&seen);
}

static long count_of(const long *counter) {
    pthread_mutex_lock(&seen);
    long n = *counter;
    pthread_mutex_unlock(&seen);
    return n;
}

/* Waits up to 5 s for *counter to reach `at_least`. */
static int reached(const long *counter, long at_least) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&seen);
    while (*counter < at_least)
        if (pthread_cond_timedwait(&seen_changed, &seen, &deadline) == ETIMEDOUT) break;
    int ok = *counter >= at_least;
    pthread_mutex_unlock(&seen);
    return ok;
}

/* --- the fake daemon --------------------------------------------------------------------- */

static int daemon_fd;
static pthread_mutex_t sent_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t last[EXT_WIRE_MAX_MESSAGE]; /* the last datagram the daemon read */
static size_t last_size;
static long received;                      /* datagrams read */
static uint64_t next_task = FIRST_TASK;

static long received_count(void) {
    pthread_mutex_lock(&sent_lock);
    long n = received;
    pthread_mutex_unlock(&sent_lock);
    return n;
}

static size_t last_datagram(uint8_t *out) {
    pthread_mutex_lock(&sent_lock);
    size_t n = last_size;
    memcpy(out, last, n);
    pthread_mutex_unlock(&sent_lock);
    return n;
}

struct out {
    uint8_t b[EXT_WIRE_MAX_MESSAGE + 64];
    size_t n;
};

static void o8(struct out *o, uint8_t v) { o->b[o->n++] = v; }
static void o16(struct out *o, uint16_t v) { o8(o, (uint8_t)v), o8(o, (uint8_t)(v >> 8)); }
static void o32(struct out *o, uint32_t v) { o16(o, (uint16_t)v), o16(o, (uint16_t)(v >> 16)); }
static void o64(struct out *o, uint64_t v) { o32(o, (uint32_t)v), o32(o, (uint32_t)(v >> 32)); }
static void ostr(struct out *o, const char *s) {
    size_t n = strlen(s);
    o16(o, (uint16_t)n);
    memcpy(o->b + o->n, s, n);
    o->n += n;
}
static void header(struct out *o, uint8_t kind) {
    o->n = 0;
    o8(o, 1), o8(o, kind), o16(o, 0), o32(o, 0);
}
static void begin(struct out *o, uint8_t kind, uint32_t tag) { header(o, kind), o32(o, tag); }
static void seal(struct out *o) {
    uint32_t payload = (uint32_t)(o->n - 8);
    for (int i = 0; i < 4; i++) o->b[4 + i] = (uint8_t)(payload >> (8 * i));
}
static void finish(struct out *o) {
    seal(o);
    if (send(daemon_fd, o->b, o->n, MSG_NOSIGNAL) != (ssize_t)o->n) abort();
}

static void answer(uint32_t tag, uint16_t code) {
    static struct out o;
    begin(&o, EXT_WIRE_ANSWER, tag);
    o16(&o, code), ostr(&o, code ? "why" : "");
    finish(&o);
}

static void created(uint32_t tag, uint64_t task) {
    static struct out o;
    begin(&o, EXT_WIRE_TRANSFER_CREATED, tag), o64(&o, task), finish(&o);
}

static int span_is(const struct ext_wire_span *s, const char *text) {
    return s->length == strlen(text) && memcmp(s->data, text, s->length) == 0;
}

static int span_ends(const struct ext_wire_span *s, const char *suffix, const char **rest) {
    size_t k = strlen(suffix);
    for (size_t i = 0; i + k <= s->length; i++)
        if (memcmp(s->data + i, suffix, k) == 0) {
            if (rest) *rest = (const char *)s->data + i + k;
            return 1;
        }
    return 0;
}

static void copy_span(char *to, size_t capacity, const struct ext_wire_span *s) {
    size_t n = s->length < capacity - 1 ? s->length : capacity - 1;
    memcpy(to, s->data, n);
    to[n] = 0;
}

static void transfer_create(const struct ext_wire_message *m) {
    const struct ext_wire_span *url = &m->transfer.url;
    const char *rest;
    if (span_ends(url, "/hang", NULL)) return;
    if (span_ends(url, "/answer-0", NULL)) return answer(m->tag, 0);
    if (span_ends(url, "/malformed", NULL)) {
        static struct out o;
        begin(&o, EXT_WIRE_TRANSFER_CREATED, m->tag), o32(&o, 7), finish(&o); /* a task of 4 bytes: refused */
        return;
    }
    if (span_ends(url, "/code-", &rest)) return answer(m->tag, (uint16_t)atoi(rest));
    created(m->tag, next_task++);
}

static void *fake_daemon(void *unused) {
    (void)unused;
    static uint8_t datagram[EXT_WIRE_MAX_MESSAGE], again[EXT_WIRE_MAX_MESSAGE];
    for (;;) {
        ssize_t n = recv(daemon_fd, datagram, sizeof datagram, 0);
        if (n <= 0) return NULL;
        struct ext_wire_message m;
        if (ext_wire_decode(datagram, (size_t)n, &m) != 0) {
            fprintf(stderr, "fake daemon: a datagram the codec refuses\n");
            exit(1);
        }
        /* The C codec gives back the same bytes. */
        long k = ext_wire_encode(&m, again, sizeof again);
        if (k != n || memcmp(again, datagram, (size_t)n) != 0) {
            fprintf(stderr, "fake daemon: the codec does not give back kind %d's bytes\n", m.kind);
            exit(1);
        }
        pthread_mutex_lock(&sent_lock);
        memcpy(last, datagram, (size_t)n);
        last_size = (size_t)n;
        received++;
        pthread_mutex_unlock(&sent_lock);
        if (m.kind == EXT_WIRE_TRANSFER_HANDLED) { /* recorded once it is the last datagram */
            pthread_mutex_lock(&seen);
            struct handled *h = &handled[handled_count % 256];
            copy_span(h->session, sizeof h->session, &m.transfer.session);
            copy_span(h->group, sizeof h->group, &m.transfer.group);
            h->through = m.id;
            h->returned = returned;
            handled_count++;
            pthread_cond_broadcast(&seen_changed);
            pthread_mutex_unlock(&seen);
        }
        switch (m.kind) {
        case EXT_WIRE_TRANSFER_CREATE: transfer_create(&m); break;
        case EXT_WIRE_TRANSFER_CANCEL:
            if (m.id >= 900 && m.id < 916) answer(m.tag, (uint16_t)(m.id - 900));
            else if (m.id == 950) created(m.tag, 1);
            else answer(m.tag, 0);
            break;
        case EXT_WIRE_TRANSFER_CLAIM: {
            const struct ext_wire_span *s = &m.transfer.session;
            if (span_is(s, "close")) {
                shutdown(daemon_fd, SHUT_RDWR);
                return NULL;
            }
            char name[256];
            copy_span(name, sizeof name, s);
            answer(m.tag, strncmp(name, "code-", 5) == 0 ? (uint16_t)atoi(name + 5) : 0);
            break;
        }
        case EXT_WIRE_TRANSFER_HANDLED:
            if (!span_is(&m.transfer.group, "group.b")) answer(m.tag, 0);
            break;
        default: break;
        }
    }
}

/* --- helpers ----------------------------------------------------------------------------- */

static size_t unhex(const char *hex, uint8_t *out) {
    size_t n = 0;
    for (const char *p = hex; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        unsigned v;
        sscanf(p, "%2x", &v);
        out[n++] = (uint8_t)v;
        p += 2;
    }
    return n;
}

/* The last datagram is `kind`, with a nonzero tag, and then exactly the payload `hex` (spaces
 * ignored) after the tag; the header's length is right. */
static void expect_sent_(uint8_t kind, const char *hex, int line) {
    static uint8_t got[EXT_WIRE_MAX_MESSAGE], want[EXT_WIRE_MAX_MESSAGE];
    size_t n = last_datagram(got), w = unhex(hex, want);
    uint32_t declared = (uint32_t)got[4] | (uint32_t)got[5] << 8 | (uint32_t)got[6] << 16 | (uint32_t)got[7] << 24;
    uint32_t tag = (uint32_t)got[8] | (uint32_t)got[9] << 8 | (uint32_t)got[10] << 16 | (uint32_t)got[11] << 24;
    int ok = n == 12 + w && got[0] == 1 && got[1] == kind && got[2] == 0 && got[3] == 0 && declared == n - 8 && tag != 0 &&
             memcmp(got + 12, want, w) == 0;
    if (!ok) {
        fprintf(stderr, "roundtrip.c:%d: sent ", line);
        for (size_t i = 0; i < n; i++) fprintf(stderr, "%02x", got[i]);
        fprintf(stderr, "\n  expected kind %d, a tag, then %s\n", kind, hex);
    }
    check_(ok, __FILE__, line, "the datagram sent");
}
#define EXPECT_SENT(kind, hex) expect_sent_(kind, hex, __LINE__)

/* One event as the test sends it. */
struct ev {
    uint64_t sequence, task;
    uint8_t kind;
    uint64_t bytes;
    int64_t total;
    uint16_t status;
    const char *path, *domain;
    int32_t code;
    const char *text;
};

static void put_event(struct out *o, const struct ev *e) {
    o64(o, e->sequence), o64(o, e->task), o8(o, e->kind), o64(o, e->bytes), o64(o, (uint64_t)e->total), o16(o, e->status);
    ostr(o, e->path ? e->path : ""), ostr(o, e->domain ? e->domain : ""), o32(o, (uint32_t)e->code), ostr(o, e->text ? e->text : "");
}

/* Sends a transferEvents of `count` events of the session (group, session). */
static void send_events(const char *group, const char *session, const struct ev *events, int count) {
    static struct out o;
    static pthread_mutex_t o_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&o_lock);
    header(&o, EXT_WIRE_TRANSFER_EVENTS);
    ostr(&o, session), ostr(&o, group), o16(&o, (uint16_t)count);
    for (int i = 0; i < count; i++) put_event(&o, &events[i]);
    finish(&o);
    pthread_mutex_unlock(&o_lock);
}

/* A completion of `sequence` (task 7). */
static struct ev completion(uint64_t sequence) {
    return (struct ev){.sequence = sequence, .task = 7, .kind = EXT_TRANSFER_COMPLETED, .bytes = 1, .total = 1, .status = 200};
}

static void send_one(const char *group, const char *session, uint64_t sequence) {
    struct ev e = completion(sequence);
    send_events(group, session, &e, 1);
}

/* A sentinel: a progress event of the session ("group.s", "sentinel") whose delivery shows the
 * reader has handled every message sent before it. */
static int sentinel_context;
static void sentinel(void) {
    long before = count_of(&recorded);
    struct ev e = {.sequence = 0, .task = 1, .kind = EXT_TRANSFER_PROGRESS, .total = -1};
    send_events("group.s", "sentinel", &e, 1);
    CHECK(reached(&recorded, before + 1));
    pthread_mutex_lock(&seen);
    struct record *r = &records[recorded - 1];
    int ok = r->context == &sentinel_context;
    pthread_mutex_unlock(&seen);
    CHECK(ok);
    /* the deliverer of the sentinel's session is done when its callback has returned */
}

static struct record record_at(long k) {
    pthread_mutex_lock(&seen);
    struct record r = records[k];
    pthread_mutex_unlock(&seen);
    return r;
}

static struct handled handled_at(long k) {
    pthread_mutex_lock(&seen);
    struct handled h = handled[k % 256];
    pthread_mutex_unlock(&seen);
    return h;
}

/* --- the checks -------------------------------------------------------------------------- */

/* The encoding of each message, byte for byte (the spec's layout: session before group). */
static void check_encoding(void) {
    uint64_t task = 99;
    EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, "https://e.com/f", NULL, 0, &task), 0);
    EQ(task, FIRST_TASK);
    EXPECT_SENT(79, "0200 7331 0700 67726f75702e61 01 0f00 68747470733a2f2f652e636f6d2f66 0000 00");
    EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, "http://e.com/f", "", 0, &task), 0);
    EQ(task, FIRST_TASK + 1);
    EXPECT_SENT(79, "0200 7331 0700 67726f75702e61 01 0e00 687474703a2f2f652e636f6d2f66 0000 00");
    EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, "https://e.com/f", "d/\xc3\xa9.json", 1, &task), 0);
    EXPECT_SENT(79, "0200 7331 0700 67726f75702e61 01 0f00 68747470733a2f2f652e636f6d2f66 0900 642fc3a92e6a736f6e 01");
    EQ(ext_transfer_create("group.b", "up", EXT_TRANSFER_UPLOAD_PUT, "https://e.com/u", "out/a.txt", 5, &task), 0);
    EXPECT_SENT(79, "0200 7570 0700 67726f75702e62 02 0f00 68747470733a2f2f652e636f6d2f75 0900 6f75742f612e747874 01");
    EQ(ext_transfer_create("group.b", "up", EXT_TRANSFER_UPLOAD_POST, "https://e.com/u", "out/a.txt", 0, &task), 0);
    EQ(task, FIRST_TASK + 4);
    EXPECT_SENT(79, "0200 7570 0700 67726f75702e62 03 0f00 68747470733a2f2f652e636f6d2f75 0900 6f75742f612e747874 00");
    EQ(ext_transfer_cancel(0x0102030405060708ULL), 0);
    EXPECT_SENT(80, "0807060504030201");
    EQ(ext_transfer_cancel(UINT64_MAX), 0);
    EXPECT_SENT(80, "ffffffffffffffff");
    EQ(ext_transfer_claim("group.a", "s1"), 0);
    EXPECT_SENT(81, "0200 7331 0700 67726f75702e61");
}

/* Each answer code's errno, for each function; answers out of protocol. */
static void check_codes(void) {
    static const struct {
        int code, error;
    } codes[] = {{5, -EPERM}, {6, -EINVAL}, {7, -ENOENT}, {8, -ENOSPC}, {11, -EIO},
                 {1, -EIO},   {2, -EIO},    {10, -EIO},   {12, -EIO},   {13, -EIO}, {14, -EIO}};
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++) {
        char url[64], session[16];
        snprintf(url, sizeof url, "https://e.com/code-%d", codes[k].code);
        snprintf(session, sizeof session, "code-%d", codes[k].code);
        uint64_t task = 5;
        EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, url, NULL, 0, &task), codes[k].error), EQ(task, 0);
        EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_UPLOAD_PUT, url, "f", 0, &task), codes[k].error);
        EQ(ext_transfer_cancel(900 + (uint64_t)codes[k].code), codes[k].error);
        EQ(ext_transfer_claim("group.a", session), codes[k].error);
    }
    /* Out of protocol: an answer 0 to a create, a transferCreated the decoder refuses, a
     * transferCreated to a cancel: -EIO, none waits forever. */
    uint64_t task = 5;
    EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, "https://e.com/answer-0", NULL, 0, &task), -EIO), EQ(task, 0);
    EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, "https://e.com/malformed", NULL, 0, &task), -EIO), EQ(task, 0);
    EQ(ext_transfer_cancel(950), -EIO);
    /* And the next calls are answered as usual. */
    EQ(ext_transfer_cancel(1), 0);
    EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, "https://e.com/ok", NULL, 0, &task), 0), CHECK(task >= FIRST_TASK);
}

/* Arguments refused before anything is sent; the limits themselves accepted. */
static void check_refused(void) {
    long before = received_count();
    static char name256[257], url8193[EXT_TRANSFER_MAX_URL + 2], path1025[EXT_TRANSFER_MAX_PATH + 2];
    memset(name256, 'n', 256);
    memcpy(url8193, "https://e.com/", 14), memset(url8193 + 14, 'u', EXT_TRANSFER_MAX_URL + 1 - 14);
    memset(path1025, 'p', EXT_TRANSFER_MAX_PATH + 1);
    const char *bad_names[] = {NULL, "", name256, "\xc3(", "a\xff", "\xed\xa0\x80" /* a surrogate */};
    uint64_t task = 5;
    for (size_t k = 0; k < sizeof bad_names / sizeof bad_names[0]; k++) {
        const char *bad = bad_names[k];
        EQ(ext_transfer_set_handler(bad, "s", on_event, NULL), -EINVAL);
        EQ(ext_transfer_set_handler("group.a", bad, on_event, NULL), -EINVAL);
        EQ(ext_transfer_set_handler(bad, "s", NULL, NULL), -EINVAL);
        EQ(ext_transfer_create(bad, "s", EXT_TRANSFER_DOWNLOAD, "https://e.com/f", NULL, 0, &task), -EINVAL), EQ(task, 0);
        task = 5;
        EQ(ext_transfer_create("group.a", bad, EXT_TRANSFER_DOWNLOAD, "https://e.com/f", NULL, 0, &task), -EINVAL), EQ(task, 0);
        EQ(ext_transfer_claim(bad, "s"), -EINVAL);
        EQ(ext_transfer_claim("group.a", bad), -EINVAL);
    }
    int methods[] = {0, 4, -1, 255, 257};
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++)
        EQ(ext_transfer_create("group.a", "s", methods[k], "https://e.com/f", "f", 0, &task), -EINVAL);
    EQ(ext_transfer_create("group.a", "s", EXT_TRANSFER_DOWNLOAD, "https://e.com/f", NULL, 0, NULL), -EINVAL);
    const char *bad_urls[] = {NULL, "", url8193, "https://e.com/\xc3(", "https://e.com/\xc0\x80"};
    for (size_t k = 0; k < sizeof bad_urls / sizeof bad_urls[0]; k++) {
        EQ(ext_transfer_create("group.a", "s", EXT_TRANSFER_DOWNLOAD, bad_urls[k], NULL, 0, &task), -EINVAL);
        EQ(ext_transfer_create("group.a", "s", EXT_TRANSFER_UPLOAD_PUT, bad_urls[k], "f", 0, &task), -EINVAL);
    }
    const char *bad_paths[] = {path1025, "f\xff", "\xf4\x90\x80\x80" /* above U+10FFFF */};
    for (size_t k = 0; k < sizeof bad_paths / sizeof bad_paths[0]; k++) {
        EQ(ext_transfer_create("group.a", "s", EXT_TRANSFER_DOWNLOAD, "https://e.com/f", bad_paths[k], 0, &task), -EINVAL);
        EQ(ext_transfer_create("group.a", "s", EXT_TRANSFER_UPLOAD_POST, "https://e.com/f", bad_paths[k], 0, &task), -EINVAL);
    }
    /* An upload needs its file. */
    EQ(ext_transfer_create("group.a", "s", EXT_TRANSFER_UPLOAD_PUT, "https://e.com/f", NULL, 0, &task), -EINVAL);
    EQ(ext_transfer_create("group.a", "s", EXT_TRANSFER_UPLOAD_PUT, "https://e.com/f", "", 0, &task), -EINVAL);
    EQ(ext_transfer_create("group.a", "s", EXT_TRANSFER_UPLOAD_POST, "https://e.com/f", "", 1, &task), -EINVAL);
    EQ(received_count(), before); /* nothing was sent */

    /* The limits themselves are accepted (and sent). */
    name256[255] = 0;
    url8193[EXT_TRANSFER_MAX_URL] = 0;
    path1025[EXT_TRANSFER_MAX_PATH] = 0;
    EQ(ext_transfer_create(name256, name256, EXT_TRANSFER_UPLOAD_PUT, url8193, path1025, 0, &task), 0), CHECK(task >= FIRST_TASK);
    EQ(received_count(), before + 1);
    uint8_t got[EXT_WIRE_MAX_MESSAGE];
    EQ(last_datagram(got), 12 + 2 + 255 + 2 + 255 + 1 + 2 + 8192 + 2 + 1024 + 1);
    EQ(ext_transfer_claim(name256, name256), 0);
    EQ(ext_transfer_set_handler(name256, name256, on_event, NULL), 0);
    EQ(ext_transfer_set_handler(name256, name256, NULL, NULL), 0);
    EQ(ext_transfer_set_handler("group.never", "set", NULL, NULL), 0); /* removing what was never set */
    EQ(received_count(), before + 2);
}

static int context_a, context_b, context_c;

/* Events: delivered with their fields, in order, on a runtime thread; transferHandled after the
 * callbacks, with the highest sequence; duplicates skipped; progress never acknowledged. */
static void check_events(void) {
    EQ(ext_transfer_set_handler("group.s", "sentinel", on_event, &sentinel_context), 0);
    EQ(ext_transfer_set_handler("group.a", "s1", on_event, &context_a), 0);

    /* 1. Progress, a completion (slow callback), two failures. */
    static char long_path[EXT_WIRE_MAX_TRANSFER_EVENT_PATH + 1], long_text[EXT_WIRE_MAX_TRANSFER_TEXT + 1], long_domain[256];
    memset(long_path, '/', EXT_WIRE_MAX_TRANSFER_EVENT_PATH);
    memset(long_text, 't', EXT_WIRE_MAX_TRANSFER_TEXT);
    memset(long_domain, 'd', 255);
    struct ev first[] = {
        {.sequence = 0, .task = 0x8000000000000005ULL, .kind = EXT_TRANSFER_PROGRESS, .bytes = 10, .total = -1},
        {.sequence = 1, .task = 0x8000000000000005ULL, .kind = EXT_TRANSFER_COMPLETED, .bytes = 1ULL << 40, .total = 1LL << 40,
         .status = 200, .path = "/srv/shared/group.a/quotes/\xc3\xa9t\xc3\xa9.json"},
        {.sequence = 2, .task = 6, .kind = EXT_TRANSFER_FAILED, .bytes = 5, .total = 50, .status = 503, .domain = "http", .code = 503,
         .text = "too many 5xx answers"},
        {.sequence = 3, .task = UINT64_MAX, .kind = EXT_TRANSFER_FAILED, .total = INT64_MIN, .domain = "posix", .code = -2, .text = ""},
    };
    slow_sequence = 1;
    long base = count_of(&recorded), handled_base = count_of(&handled_count);
    send_events("group.a", "s1", first, 4);
    CHECK(reached(&handled_count, handled_base + 1));
    EQ(count_of(&recorded), base + 4);
    struct handled h = handled_at(handled_base);
    STREQ(h.session, "s1"), STREQ(h.group, "group.a"), EQ(h.through, 3);
    EQ(h.returned, count_of(&returned)); /* sent once every callback had returned */
    EXPECT_SENT(82, "0200 7331 0700 67726f75702e61 0300000000000000");
    slow_sequence = 0;
    for (int k = 0; k < 4; k++) {
        struct record r = record_at(base + k);
        STREQ(r.group, "group.a"), STREQ(r.session, "s1"), CHECK(r.context == &context_a), EQ(r.on_main, 0);
        EQ(r.event.sequence, first[k].sequence), EQ(r.event.task, first[k].task), EQ(r.event.kind, first[k].kind);
        EQ(r.event.bytes, first[k].bytes), EQ(r.event.total, first[k].total), EQ(r.event.status, first[k].status);
        STREQ(r.event.path, first[k].path ? first[k].path : ""), STREQ(r.event.domain, first[k].domain ? first[k].domain : "");
        EQ(r.event.code, first[k].code), STREQ(r.event.text, first[k].text ? first[k].text : "");
    }
    CHECK(record_at(base).event.total == -1 && record_at(base + 3).event.code == -2 && record_at(base + 3).event.total == INT64_MIN);

    /* 2. A duplicate (2) skipped, a new one (4) delivered; transferHandled through 4. */
    struct ev second[] = {completion(2), completion(4)};
    base = count_of(&recorded);
    send_events("group.a", "s1", second, 2);
    CHECK(reached(&handled_count, handled_base + 2));
    EQ(count_of(&recorded), base + 1), EQ(record_at(base).event.sequence, 4);
    h = handled_at(handled_base + 1);
    EQ(h.through, 4), STREQ(h.session, "s1");

    /* 3. Only duplicates: none delivered; the message's highest sequence acknowledged again. */
    struct ev third[] = {completion(1), completion(3)};
    send_events("group.a", "s1", third, 2);
    CHECK(reached(&handled_count, handled_base + 3));
    EQ(count_of(&recorded), base + 1);
    EQ(handled_at(handled_base + 2).through, 3);

    /* 4. Progress only: delivered, never acknowledged; the next completion is (through 5). */
    struct ev progress[] = {{.kind = EXT_TRANSFER_PROGRESS, .task = 7, .bytes = 1, .total = 9},
                            {.kind = EXT_TRANSFER_PROGRESS, .task = 7, .bytes = 2, .total = 9}};
    base = count_of(&recorded);
    send_events("group.a", "s1", progress, 2);
    send_one("group.a", "s1", 5);
    CHECK(reached(&handled_count, handled_base + 4));
    CHECK(reached(&recorded, base + 3));
    EQ(record_at(base).event.bytes, 1), EQ(record_at(base + 1).event.bytes, 2), EQ(record_at(base + 2).event.sequence, 5);
    EQ(count_of(&handled_count), handled_base + 4);
    EQ(handled_at(handled_base + 3).through, 5);

    /* 5. In order: 30 messages in a row, each acknowledged, through 10...39, the first one's
     * callback slow (the next messages wait for it). */
    slow_sequence = 10;
    base = count_of(&recorded);
    for (uint64_t s = 10; s < 40; s++) send_one("group.a", "s1", s);
    CHECK(reached(&handled_count, handled_base + 34));
    CHECK(reached(&recorded, base + 30));
    slow_sequence = 0;
    for (int k = 0; k < 30; k++) {
        EQ(record_at(base + k).event.sequence, 10 + k);
        EQ(handled_at(handled_base + 4 + k).through, 10 + k);
    }
    handled_base += 34;

    /* 6. A session without a callback: its events are dropped, never acknowledged. Sequences
     * are per session: another session (or the same name in another group) starts again at 1. */
    base = count_of(&recorded);
    send_one("group.a", "s2", 1);
    sentinel();
    EQ(count_of(&recorded), base + 1), EQ(count_of(&handled_count), handled_base);
    EQ(ext_transfer_set_handler("group.a", "s2", on_event, &context_b), 0);
    send_one("group.a", "s2", 1);
    CHECK(reached(&handled_count, handled_base + 1));
    struct record r = record_at(base + 1);
    STREQ(r.session, "s2"), EQ(r.event.sequence, 1), CHECK(r.context == &context_b);
    h = handled_at(handled_base);
    STREQ(h.session, "s2"), STREQ(h.group, "group.a"), EQ(h.through, 1);
    /* group.b: its transferHandled is never answered; the runtime does not wait for it. */
    EQ(ext_transfer_set_handler("group.b", "s1", on_event, &context_c), 0);
    send_one("group.b", "s1", 1);
    send_one("group.b", "s1", 2);
    CHECK(reached(&handled_count, handled_base + 3));
    EQ(handled_at(handled_base + 1).through, 1), EQ(handled_at(handled_base + 2).through, 2);
    STREQ(handled_at(handled_base + 2).group, "group.b");
    CHECK(record_at(base + 3).context == &context_c);
    handled_base += 3;

    /* 7. A callback removed: dropped, not acknowledged, and not counted as delivered (set again,
     * the same sequence arrives); what was delivered before is still skipped. */
    EQ(ext_transfer_set_handler("group.a", "s1", NULL, NULL), 0);
    base = count_of(&recorded);
    send_one("group.a", "s1", 50);
    sentinel();
    EQ(count_of(&recorded), base + 1), EQ(count_of(&handled_count), handled_base);
    EQ(ext_transfer_set_handler("group.a", "s1", on_event, &context_c), 0); /* replaced context */
    struct ev again[] = {completion(39), completion(50)};
    send_events("group.a", "s1", again, 2);
    CHECK(reached(&handled_count, handled_base + 1));
    EQ(count_of(&recorded), base + 2);
    r = record_at(base + 1);
    EQ(r.event.sequence, 50), CHECK(r.context == &context_c);
    EQ(handled_at(handled_base).through, 50);
    handled_base++;
    /* The highest sequence of the message is acknowledged, wherever it is in it. */
    struct ev unordered[] = {completion(52), completion(51)};
    base = count_of(&recorded);
    send_events("group.a", "s1", unordered, 2);
    CHECK(reached(&handled_count, handled_base + 1));
    EQ(count_of(&recorded), base + 1), EQ(record_at(base).event.sequence, 52); /* 51: not above 52 */
    EQ(handled_at(handled_base).through, 52);
    handled_base++;

    /* 8. The largest event: path, domain and text at their limits; 64 events in one message. */
    static struct ev many[EXT_WIRE_MAX_TRANSFER_EVENTS];
    for (int k = 0; k < EXT_WIRE_MAX_TRANSFER_EVENTS; k++)
        many[k] = (struct ev){.sequence = 100 + (uint64_t)k, .task = 8, .kind = EXT_TRANSFER_FAILED, .total = -1, .domain = "curl", .code = 28};
    many[0].path = long_path, many[0].domain = long_domain, many[0].text = long_text;
    base = count_of(&recorded);
    send_events("group.a", "s1", many, EXT_WIRE_MAX_TRANSFER_EVENTS);
    CHECK(reached(&handled_count, handled_base + 1));
    EQ(count_of(&recorded), base + EXT_WIRE_MAX_TRANSFER_EVENTS);
    r = record_at(base);
    EQ(strlen(r.event.path), EXT_WIRE_MAX_TRANSFER_EVENT_PATH), EQ(strlen(r.event.domain), 255), EQ(strlen(r.event.text), 512);
    EQ(record_at(base + 63).event.sequence, 163), EQ(handled_at(handled_base).through, 163);
    handled_base++;
}

/* Round trips from an event's callback. */
static pthread_mutex_t from_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t from_changed = PTHREAD_COND_INITIALIZER;
static int from_done, from_create, from_claim, from_cancel;
static uint64_t from_task;

static void on_event_calling(const char *group, const char *session, const ext_transfer_event *event, void *context) {
    (void)event, (void)context;
    uint64_t task = 0;
    int create = ext_transfer_create(group, session, EXT_TRANSFER_DOWNLOAD, "https://e.com/next", NULL, 0, &task);
    int claim = ext_transfer_claim(group, session);
    int cancel = ext_transfer_cancel(904);
    pthread_mutex_lock(&from_lock);
    from_create = create, from_claim = claim, from_cancel = cancel, from_task = task, from_done = 1;
    pthread_cond_broadcast(&from_changed);
    pthread_mutex_unlock(&from_lock);
}

static void check_callback_calls(void) {
    EQ(ext_transfer_set_handler("group.a", "calling", on_event_calling, NULL), 0);
    send_one("group.a", "calling", 1);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&from_lock);
    while (!from_done)
        if (pthread_cond_timedwait(&from_changed, &from_lock, &deadline) == ETIMEDOUT) break;
    int done = from_done;
    pthread_mutex_unlock(&from_lock);
    CHECK(done);
    EQ(from_create, 0), CHECK(from_task >= FIRST_TASK), EQ(from_claim, 0), EQ(from_cancel, -EIO);
}

/* Calls from several threads at once. */
static void *worker(void *arg) {
    char session[32];
    snprintf(session, sizeof session, "worker-%ld", (long)(intptr_t)arg);
    for (int k = 0; k < 50; k++) {
        uint64_t task = 0;
        EQ(ext_transfer_create("group.a", session, EXT_TRANSFER_DOWNLOAD, "https://e.com/w", NULL, k & 1, &task), 0);
        CHECK(task >= FIRST_TASK);
        EQ(ext_transfer_cancel(task), 0);
        EQ(ext_transfer_claim("group.a", session), 0);
        EQ(ext_transfer_cancel(908), -ENOSPC);
    }
    return NULL;
}

static void check_threads(void) {
    pthread_t threads[6];
    for (long k = 0; k < 6; k++) pthread_create(&threads[k], NULL, worker, (void *)(intptr_t)k);
    for (int k = 0; k < 6; k++) pthread_join(threads[k], NULL);
}

/* The channel closes while a call waits; then every call is -ENOTCONN. */
static int hung_result = 1;

static void *hung(void *unused) {
    (void)unused;
    uint64_t task;
    hung_result = ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, "https://e.com/hang", NULL, 0, &task);
    return NULL;
}

static void check_close(void) {
    long before = received_count();
    pthread_t t;
    pthread_create(&t, NULL, hung, NULL);
    for (int k = 0; k < 5000 && received_count() == before; k++) usleep(1000);
    EQ(hung_result, 1); /* still waiting */
    EQ(ext_transfer_claim("group.a", "close"), -ENOTCONN);
    pthread_join(t, NULL);
    EQ(hung_result, -ENOTCONN);
    uint64_t task = 5;
    EQ(ext_transfer_create("group.a", "s1", EXT_TRANSFER_DOWNLOAD, "https://e.com/f", NULL, 0, &task), -ENOTCONN), EQ(task, 0);
    EQ(ext_transfer_cancel(1), -ENOTCONN);
    EQ(ext_transfer_claim("group.a", "s1"), -ENOTCONN);
    EQ(ext_transfer_set_handler("group.a", "s9", on_event, NULL), 0); /* needs no channel */
}

/* The C codec: the transfer messages over their limits, as the decoder refuses and the encoder
 * checks. */
static void check_codec(void) {
    static struct out o;
    struct ext_wire_message m;
    static uint8_t again[EXT_WIRE_MAX_MESSAGE];
    /* transferEvents: 1 and 64 events accepted, 0 and 65 refused; the fields read. */
    struct ev e = {.sequence = 9, .task = 3, .kind = 3, .bytes = 4, .total = -1, .status = 404, .path = "/p", .domain = "http",
                   .code = -7, .text = "gone"};
    for (int count = 0; count <= 65; count++) {
        header(&o, EXT_WIRE_TRANSFER_EVENTS), ostr(&o, "s"), ostr(&o, "g"), o16(&o, (uint16_t)count);
        for (int k = 0; k < count; k++) put_event(&o, &e);
        seal(&o);
        int ok = count >= 1 && count <= 64;
        EQ(ext_wire_decode(o.b, o.n, &m), ok ? 0 : -1);
        if (!ok) continue;
        EQ(m.count, count), EQ(m.transfer.session.length, 1), EQ(m.transfer.group.length, 1);
        EQ(ext_wire_encode(&m, again, sizeof again), o.n), CHECK(memcmp(again, o.b, o.n) == 0);
        if (count != 2) continue;
        const uint8_t *cursor = m.items;
        size_t left = m.items_length;
        struct ext_wire_transfer_event w;
        EQ(ext_wire_transfer_event(&cursor, &left, &w), 0);
        EQ(w.sequence, 9), EQ(w.task, 3), EQ(w.kind, 3), EQ(w.bytes, 4), EQ(w.total, -1), EQ(w.status, 404), EQ(w.code, -7);
        EQ(w.path.length, 2), EQ(w.domain.length, 4), EQ(w.text.length, 4);
        EQ(ext_wire_transfer_event(&cursor, &left, &w), 0), EQ(left, 0);
        EQ(ext_wire_transfer_event(&cursor, &left, &w), -1);
        m.count = 3; /* fewer events than counted */
        EQ(ext_wire_encode(&m, again, sizeof again), -1);
    }
    /* An event's kind 0 or 4; path, domain, text over their limits; the same at them. */
    static char path[EXT_WIRE_MAX_TRANSFER_EVENT_PATH + 2], text[EXT_WIRE_MAX_TRANSFER_TEXT + 2], domain[257];
    struct {
        struct ev e;
        int ok;
    } cases[] = {
        {{.kind = 0}, 0}, {{.kind = 4}, 0}, {{.kind = 1}, 1}, {{.kind = 2, .path = path}, 0},
        {{.kind = 2, .domain = domain}, 0}, {{.kind = 3, .text = text}, 0}, {{.kind = 3, .text = "\xc3("}, 0},
    };
    memset(path, 'p', sizeof path - 1), memset(text, 't', sizeof text - 1), memset(domain, 'd', sizeof domain - 1);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        header(&o, EXT_WIRE_TRANSFER_EVENTS), ostr(&o, "s"), ostr(&o, "g"), o16(&o, 1), put_event(&o, &cases[k].e), seal(&o);
        EQ(ext_wire_decode(o.b, o.n, &m), cases[k].ok ? 0 : -1);
    }
    path[EXT_WIRE_MAX_TRANSFER_EVENT_PATH] = 0, text[EXT_WIRE_MAX_TRANSFER_TEXT] = 0, domain[255] = 0;
    struct ev at = {.kind = 2, .path = path, .domain = domain, .text = text};
    header(&o, EXT_WIRE_TRANSFER_EVENTS), ostr(&o, "s"), ostr(&o, "g"), o16(&o, 1), put_event(&o, &at), seal(&o);
    EQ(ext_wire_decode(o.b, o.n, &m), 0);
    /* transferCreate: methods 1...3, discretionary 0 or 1, url and path limits. */
    static char url[EXT_WIRE_MAX_TRANSFER_URL + 2];
    memset(url, 'u', sizeof url - 1);
    for (int method = 0; method <= 4; method++)
        for (int discretionary = 0; discretionary <= 2; discretionary++) {
            begin(&o, EXT_WIRE_TRANSFER_CREATE, 1), ostr(&o, "s"), ostr(&o, "g"), o8(&o, (uint8_t)method), ostr(&o, "u"), ostr(&o, "");
            o8(&o, (uint8_t)discretionary), seal(&o);
            int ok = method >= 1 && method <= 3 && discretionary <= 1;
            EQ(ext_wire_decode(o.b, o.n, &m), ok ? 0 : -1);
            if (ok) EQ(m.transfer.method, method), EQ(m.transfer.discretionary, discretionary);
        }
    begin(&o, EXT_WIRE_TRANSFER_CREATE, 1), ostr(&o, "s"), ostr(&o, "g"), o8(&o, 1), ostr(&o, url), ostr(&o, ""), o8(&o, 0), seal(&o);
    EQ(ext_wire_decode(o.b, o.n, &m), -1);
    url[EXT_WIRE_MAX_TRANSFER_URL] = 0;
    path[EXT_WIRE_MAX_TRANSFER_PATH] = 0;
    begin(&o, EXT_WIRE_TRANSFER_CREATE, 1), ostr(&o, "s"), ostr(&o, "g"), o8(&o, 1), ostr(&o, url), ostr(&o, path), o8(&o, 0), seal(&o);
    EQ(ext_wire_decode(o.b, o.n, &m), 0), EQ(m.transfer.url.length, 8192), EQ(m.transfer.path.length, 1024);
    path[EXT_WIRE_MAX_TRANSFER_PATH] = 'p';
    path[EXT_WIRE_MAX_TRANSFER_PATH + 1] = 0;
    begin(&o, EXT_WIRE_TRANSFER_CREATE, 1), ostr(&o, "s"), ostr(&o, "g"), o8(&o, 1), ostr(&o, url), ostr(&o, path), o8(&o, 0), seal(&o);
    EQ(ext_wire_decode(o.b, o.n, &m), -1);
    /* The encoder checks the same. */
    struct ext_wire_message c = {.kind = EXT_WIRE_TRANSFER_CREATE, .tag = 1};
    c.transfer.session = (struct ext_wire_span){(const uint8_t *)"s", 1};
    c.transfer.group = (struct ext_wire_span){(const uint8_t *)"g", 1};
    c.transfer.url = (struct ext_wire_span){(const uint8_t *)"u", 1};
    c.transfer.method = 1;
    CHECK(ext_wire_encode(&c, again, sizeof again) > 0);
    c.transfer.method = 4;
    EQ(ext_wire_encode(&c, again, sizeof again), -1);
    c.transfer.method = 2, c.transfer.discretionary = 2;
    EQ(ext_wire_encode(&c, again, sizeof again), -1);
    /* The other kinds, by hand; a trailing byte refused. */
    static const char *accepted[] = {
        "01 50 0000 0c000000 01000000 0807060504030201",           /* transferCancel */
        "01 6a 0000 0c000000 01000000 0807060504030201",           /* transferCreated */
        "01 51 0000 0a000000 01000000 0100 73 0100 67",            /* transferClaim */
        "01 52 0000 12000000 01000000 0100 73 0100 67 0500000000000000", /* transferHandled */
    };
    for (size_t k = 0; k < sizeof accepted / sizeof accepted[0]; k++) {
        uint8_t d[64];
        size_t n = unhex(accepted[k], d);
        EQ(ext_wire_decode(d, n, &m), 0);
        EQ(ext_wire_encode(&m, again, sizeof again), n), CHECK(memcmp(again, d, n) == 0);
        d[n] = 0;
        d[4]++;
        EQ(ext_wire_decode(d, n + 1, &m), -1);
    }
    uint8_t d[64];
    size_t n = unhex(accepted[3], d);
    EQ(ext_wire_decode(d, n, &m), 0), EQ(m.id, 5), EQ(m.tag, 1), EQ(m.transfer.session.data[0], 's'), EQ(m.transfer.group.data[0], 'g');
}

int main(void) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return 2;
    char value[16];
    snprintf(value, sizeof value, "%d", pair[0]);
    setenv("EXTENSIOND_CHANNEL_FD", value, 1);
    daemon_fd = pair[1];
    main_thread = pthread_self();
    pthread_t daemon;
    pthread_create(&daemon, NULL, fake_daemon, NULL);

    EQ(ext_runtime_is_supervised(), 1);
    check_codec();
    check_encoding();
    check_codes();
    check_refused();
    check_events();
    check_callback_calls();
    check_threads();
    check_close();
    pthread_join(daemon, NULL);
    printf("ok: %ld checks\n", checks);
    return 0;
}
