/* roundtrip: libExtensionRuntimeC's secrets (ext_secret_*) against a fake extensiond on a
 * socketpair (the runtime channel), in one process. Run by run.sh, linked with the built library
 * and runtime-c/wire.c (to check the C codec on every datagram the fake daemon sees):
 *
 *   cc -std=c11 -I include -I runtime-c roundtrip.c runtime-c/wire.c -L DIR -lExtensionRuntimeC
 *
 * The fake daemon keeps a small keychain (groups "group.a", the first, and "group.b" may be
 * used; at most STORE items) with the semantics of the spec: duplicates by identity (absent =
 * empty, port 0), matches by every attribute the query gives, secretItems with every field of
 * the class and the label, data only with returnData (the first match). Its answers are built
 * by hand, byte by byte, from the spec (not with wire.c's encoder). Services that steer it:
 * "code-N" answers code N; "hang" never answers; "close" shuts the channel; "answer-0" answers a
 * copy with code 0; "items" answers an add with a secretItems; "malformed" answers a copy with a
 * secretItems of count 0; "extra-data" sends data with an attributes-only copy.
 *
 * explicit_bzero (and __explicit_bzero_chk, its _FORTIFY_SOURCE form) is interposed: the
 * library's calls resolve to the definitions below, which record the zeroed regions, so that the
 * test sees which buffers holding secret bytes were cleared.
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

/* --- explicit_bzero, interposed ---------------------------------------------------------- */

static pthread_mutex_t zero_lock = PTHREAD_MUTEX_INITIALIZER;
static char watched[64];      /* bytes whose zeroing is counted */
static size_t watched_length;
static int watched_hits;      /* zeroed regions that held `watched` */
static const void *exact;     /* a region whose zeroing is looked for, exactly */
static size_t exact_length;
static int exact_hits;

void explicit_bzero(void *p, size_t n);
void __explicit_bzero_chk(void *p, size_t n, size_t destination);

void explicit_bzero(void *p, size_t n) {
    pthread_mutex_lock(&zero_lock);
    if (watched_length && n >= watched_length && memmem(p, n, watched, watched_length)) watched_hits++;
    if (exact && p == exact && n == exact_length) exact_hits++;
    pthread_mutex_unlock(&zero_lock);
    volatile unsigned char *v = p;
    while (n--) *v++ = 0;
}

void __explicit_bzero_chk(void *p, size_t n, size_t destination) {
    (void)destination;
    explicit_bzero(p, n);
}

static void watch(const char *bytes) {
    pthread_mutex_lock(&zero_lock);
    watched_length = strlen(bytes);
    memcpy(watched, bytes, watched_length);
    watched_hits = 0;
    pthread_mutex_unlock(&zero_lock);
}

static int hits(void) {
    pthread_mutex_lock(&zero_lock);
    int n = watched_hits;
    pthread_mutex_unlock(&zero_lock);
    return n;
}

/* Waits up to 2 s for a zeroed region holding the watched bytes (the reader zeroes its
 * datagram just after it wakes the caller). */
static int zeroed_soon(int at_least) {
    for (int i = 0; i < 2000 && hits() < at_least; i++) usleep(1000);
    return hits() >= at_least;
}

/* --- the fake daemon --------------------------------------------------------------------- */

#define STORE 8

struct item {
    int used;
    uint8_t cls;
    char group[256], service[256], account[256], server[256], protocol[33], path[1025], label[256];
    uint16_t port;
    uint8_t *data;
    size_t length;
};

static struct item store[STORE];
static int daemon_fd;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t last[EXT_WIRE_MAX_MESSAGE]; /* the last datagram the daemon read */
static size_t last_size;
static long received;                      /* datagrams read */

static long received_count(void) {
    pthread_mutex_lock(&seen_lock);
    long n = received;
    pthread_mutex_unlock(&seen_lock);
    return n;
}

/* The last datagram read, copied into `out` (capacity EXT_WIRE_MAX_MESSAGE); its size. */
static size_t last_datagram(uint8_t *out) {
    pthread_mutex_lock(&seen_lock);
    size_t n = last_size;
    memcpy(out, last, n);
    pthread_mutex_unlock(&seen_lock);
    return n;
}

struct out {
    uint8_t b[EXT_WIRE_MAX_MESSAGE + 64];
    size_t n;
};

static void o8(struct out *o, uint8_t v) { o->b[o->n++] = v; }
static void o16(struct out *o, uint16_t v) { o8(o, (uint8_t)v), o8(o, (uint8_t)(v >> 8)); }
static void o32(struct out *o, uint32_t v) { o16(o, (uint16_t)v), o16(o, (uint16_t)(v >> 16)); }
static void ostr(struct out *o, const char *s) {
    size_t n = strlen(s);
    o16(o, (uint16_t)n);
    memcpy(o->b + o->n, s, n);
    o->n += n;
}
static void obytes(struct out *o, const uint8_t *p, size_t n) {
    o32(o, (uint32_t)n);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void begin(struct out *o, uint8_t kind, uint32_t tag) {
    o->n = 0;
    o8(o, 1), o8(o, kind), o16(o, 0), o32(o, 0), o32(o, tag);
}
static void finish(struct out *o) {
    uint32_t payload = (uint32_t)(o->n - 8);
    for (int i = 0; i < 4; i++) o->b[4 + i] = (uint8_t)(payload >> (8 * i));
    if (send(daemon_fd, o->b, o->n, MSG_NOSIGNAL) != (ssize_t)o->n) abort();
}

static void answer(uint32_t tag, uint16_t code) {
    static struct out o;
    begin(&o, EXT_WIRE_ANSWER, tag);
    o16(&o, code), ostr(&o, code ? "why" : "");
    finish(&o);
}

static void copy_span(char *to, size_t capacity, const struct ext_wire_span *s) {
    size_t n = s->length < capacity - 1 ? s->length : capacity - 1;
    memcpy(to, s->data, n);
    to[n] = 0;
}

static int span_is(const struct ext_wire_span *s, const char *text) {
    return s->length == strlen(text) && memcmp(s->data, text, s->length) == 0;
}

/* Present fields of a query (or an add) as strings: absent is "" (as an empty one). */
struct fields {
    char group[256], service[256], account[256], server[256], protocol[33], path[1025], label[256];
};

static void read_fields(const struct ext_wire_secret_attributes *a, struct fields *f) {
    memset(f, 0, sizeof *f);
    copy_span(f->group, sizeof f->group, &a->group);
    copy_span(f->service, sizeof f->service, &a->service);
    copy_span(f->account, sizeof f->account, &a->account);
    copy_span(f->server, sizeof f->server, &a->server);
    copy_span(f->protocol, sizeof f->protocol, &a->protocol);
    copy_span(f->path, sizeof f->path, &a->path);
    copy_span(f->label, sizeof f->label, &a->label);
}

static int permitted(const char *group) { return strcmp(group, "group.a") == 0 || strcmp(group, "group.b") == 0; }

static int matches(const struct item *it, const struct ext_wire_secret_attributes *q, const struct fields *f) {
    if (!it->used || (q->item_class && q->item_class != it->cls)) return 0;
    if (f->group[0] ? strcmp(f->group, it->group) != 0 : !permitted(it->group)) return 0;
    uint8_t b = q->fields;
    return !((b & EXT_WIRE_SECRET_SERVICE) && strcmp(f->service, it->service)) && !((b & EXT_WIRE_SECRET_ACCOUNT) && strcmp(f->account, it->account)) &&
           !((b & EXT_WIRE_SECRET_SERVER) && strcmp(f->server, it->server)) && !((b & EXT_WIRE_SECRET_PROTOCOL) && strcmp(f->protocol, it->protocol)) &&
           !((b & EXT_WIRE_SECRET_PORT) && q->port != it->port) && !((b & EXT_WIRE_SECRET_PATH) && strcmp(f->path, it->path)) &&
           !((b & EXT_WIRE_SECRET_LABEL) && strcmp(f->label, it->label));
}

static int same_identity(const struct item *a, const struct item *b) {
    if (a->cls != b->cls || strcmp(a->group, b->group) || strcmp(a->account, b->account)) return 0;
    if (a->cls == 1) return strcmp(a->service, b->service) == 0;
    return !strcmp(a->server, b->server) && !strcmp(a->protocol, b->protocol) && a->port == b->port && !strcmp(a->path, b->path);
}

/* The item as secretItems carries it: every field of its class, and the label. */
static void put_item(struct out *o, const struct item *it, int with_data) {
    o8(o, it->cls), ostr(o, it->group);
    if (it->cls == 1) {
        o8(o, 1 | 2 | 64), ostr(o, it->service), ostr(o, it->account);
    } else {
        o8(o, 2 | 4 | 8 | 16 | 32 | 64), ostr(o, it->account), ostr(o, it->server), ostr(o, it->protocol), o16(o, it->port), ostr(o, it->path);
    }
    ostr(o, it->label);
    o8(o, (uint8_t)(with_data != 0));
    if (with_data) obytes(o, it->data, it->length);
}

static void set_data(struct item *it, const uint8_t *data, size_t length) {
    free(it->data);
    it->data = malloc(length);
    memcpy(it->data, data, length);
    it->length = length;
}

static void secret_add(const struct ext_wire_message *m, const struct fields *f) {
    const struct ext_wire_secret_attributes *a = &m->attributes;
    if (a->item_class == 0 || m->value_length == 0) return answer(m->tag, 6);
    const char *group = f->group[0] ? f->group : "group.a";
    if (!permitted(group)) return answer(m->tag, 5);
    struct item it = {.used = 1, .cls = a->item_class, .port = a->port};
    snprintf(it.group, sizeof it.group, "%s", group);
    memcpy(it.service, f->service, sizeof it.service), memcpy(it.account, f->account, sizeof it.account);
    memcpy(it.server, f->server, sizeof it.server), memcpy(it.protocol, f->protocol, sizeof it.protocol);
    memcpy(it.path, f->path, sizeof it.path), memcpy(it.label, f->label, sizeof it.label);
    int free_slot = -1;
    for (int i = 0; i < STORE; i++) {
        if (store[i].used && same_identity(&store[i], &it)) return answer(m->tag, 13);
        if (!store[i].used && free_slot < 0) free_slot = i;
    }
    if (free_slot < 0) return answer(m->tag, 8);
    set_data(&it, m->value, m->value_length);
    store[free_slot] = it;
    answer(m->tag, 0);
}

static void secret_copy(const struct ext_wire_message *m, const struct fields *f) {
    static struct out o;
    int found = 0;
    for (int i = 0; i < STORE; i++) found += matches(&store[i], &m->attributes, f);
    if (!found) return answer(m->tag, 14);
    int extra = span_is(&m->attributes.service, "extra-data");
    begin(&o, EXT_WIRE_SECRET_ITEMS, m->tag);
    int count = m->return_data ? 1 : found;
    o16(&o, (uint16_t)count);
    for (int i = 0, put = 0; i < STORE && put < count; i++)
        if (matches(&store[i], &m->attributes, f)) {
            put_item(&o, &store[i], m->return_data || extra);
            put++;
        }
    finish(&o);
}

static void secret_update(const struct ext_wire_message *m, const struct fields *f) {
    if (m->has_value && m->value_length == 0) return answer(m->tag, 6);
    int found = 0;
    for (int i = 0; i < STORE; i++)
        if (matches(&store[i], &m->attributes, f)) {
            found++;
            if (m->has_label) copy_span(store[i].label, sizeof store[i].label, &(struct ext_wire_span){m->label, m->label_length});
            if (m->has_value) set_data(&store[i], m->value, m->value_length);
        }
    answer(m->tag, found ? 0 : 14);
}

static void secret_delete(const struct ext_wire_message *m, const struct fields *f) {
    int found = 0;
    for (int i = 0; i < STORE; i++)
        if (matches(&store[i], &m->attributes, f)) {
            found++;
            free(store[i].data);
            memset(&store[i], 0, sizeof store[i]);
        }
    answer(m->tag, found ? 0 : 14);
}

static void *fake_daemon(void *unused) {
    (void)unused;
    static uint8_t datagram[EXT_WIRE_MAX_MESSAGE], again[EXT_WIRE_MAX_MESSAGE];
    for (;;) {
        ssize_t n = recv(daemon_fd, datagram, sizeof datagram, 0);
        if (n <= 0) return NULL;
        pthread_mutex_lock(&seen_lock);
        memcpy(last, datagram, (size_t)n);
        last_size = (size_t)n;
        received++;
        pthread_mutex_unlock(&seen_lock);
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
        if (m.kind == EXT_WIRE_OPEN_URL) {
            answer(m.tag, 0);
            continue;
        }
        if (m.kind < EXT_WIRE_SECRET_ADD || m.kind > EXT_WIRE_SECRET_DELETE) continue;
        const struct ext_wire_span *service = &m.attributes.service;
        struct fields f;
        read_fields(&m.attributes, &f);
        if (span_is(service, "hang")) continue;
        if (span_is(service, "close")) {
            shutdown(daemon_fd, SHUT_RDWR);
            return NULL;
        }
        if (service->length > 5 && memcmp(service->data, "code-", 5) == 0) {
            answer(m.tag, (uint16_t)atoi(f.service + 5));
            continue;
        }
        if (m.kind == EXT_WIRE_SECRET_COPY && span_is(service, "answer-0")) {
            answer(m.tag, 0);
            continue;
        }
        if (m.kind == EXT_WIRE_SECRET_ADD && span_is(service, "items")) {
            static struct out o;
            struct item it = {.used = 1, .cls = 1, .group = "group.a"};
            begin(&o, EXT_WIRE_SECRET_ITEMS, m.tag), o16(&o, 1), put_item(&o, &it, 0), finish(&o);
            continue;
        }
        if (m.kind == EXT_WIRE_SECRET_COPY && span_is(service, "malformed")) {
            static struct out o;
            begin(&o, EXT_WIRE_SECRET_ITEMS, m.tag), o16(&o, 0), finish(&o); /* count 0: refused */
            continue;
        }
        switch (m.kind) {
        case EXT_WIRE_SECRET_ADD: secret_add(&m, &f); break;
        case EXT_WIRE_SECRET_COPY: secret_copy(&m, &f); break;
        case EXT_WIRE_SECRET_UPDATE: secret_update(&m, &f); break;
        case EXT_WIRE_SECRET_DELETE: secret_delete(&m, &f); break;
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

static ext_secret_attributes generic(const char *service, const char *account) {
    return (ext_secret_attributes){.item_class = EXT_SECRET_GENERIC_PASSWORD, .service = service, .account = account};
}

static ext_secret_attributes any(void) { return (ext_secret_attributes){.item_class = 0}; }

/* --- the checks -------------------------------------------------------------------------- */

/* The encoding of each message, byte for byte (the spec's layout). */
static void check_encoding(void) {
    /* add, generic: class 1, group "" (NULL), fields service|account|label = 0x43. */
    ext_secret_attributes a = generic("svc", "me");
    a.label = "L";
    EQ(ext_secret_add(&a, "S3CRET", 6), 0);
    EXPECT_SENT(75, "01 0000 43 0300 737663 0200 6d65 0100 4c 06000000 533343524554");
    /* add, internet, every field: group.b, account, server, protocol, port 8443, path, label é. */
    ext_secret_attributes i = {.item_class = EXT_SECRET_INTERNET_PASSWORD, .group = "group.b", .account = "a", .server = "example.com",
                               .protocol = "https", .port = 8443, .path = "/p", .label = "\xc3\xa9"};
    EQ(ext_secret_add(&i, "pw", 2), 0);
    EXPECT_SENT(75, "02 0700 67726f75702e62 7e 0100 61 0b00 6578616d706c652e636f6d 0500 6874747073 fb20 0200 2f70 0200 c3a9 02000000 7077");
    /* A field present and empty: its bit, a zero length. */
    ext_secret_attributes e = generic("", NULL);
    EQ(ext_secret_add(&e, "x", 1), 0);
    EXPECT_SENT(75, "01 0000 01 0000 01000000 78");
    /* copy: class 0, nothing given; returnData 1, all 0 / returnData 0, all 1. */
    ext_secret_attributes q = any();
    ext_secret_item *items;
    size_t count;
    EQ(ext_secret_copy(&q, 1, &items, &count), 0), EQ(count, 1), CHECK(items[0].data != NULL);
    ext_secret_free(items, count);
    EXPECT_SENT(76, "00 0000 00 01 00");
    EQ(ext_secret_copy(&q, 0, &items, &count), 0), EQ(count, 3);
    ext_secret_free(items, count);
    EXPECT_SENT(76, "00 0000 00 00 01");
    /* A port alone (16), and the group. */
    q.port = 8443, q.group = "group.b";
    EQ(ext_secret_copy(&q, 7, &items, &count), 0), EQ(count, 1); /* any nonzero return_data is 1 */
    ext_secret_free(items, count);
    EXPECT_SENT(76, "00 0700 67726f75702e62 10 fb20 01 00");
    /* update: label and data; data only; label only. */
    ext_secret_attributes u = generic("svc", NULL);
    EQ(ext_secret_update(&u, "New", "D2", 2), 0);
    EXPECT_SENT(77, "01 0000 01 0300 737663 01 0300 4e6577 01 02000000 4432");
    EQ(ext_secret_update(&u, NULL, "D3", 2), 0);
    EXPECT_SENT(77, "01 0000 01 0300 737663 00 01 02000000 4433");
    EQ(ext_secret_update(&u, "", NULL, 99), 0); /* length ignored without data */
    EXPECT_SENT(77, "01 0000 01 0300 737663 01 0000 00");
    /* delete: a query by account and label. */
    ext_secret_attributes d = {.item_class = 0, .account = "a", .label = "\xc3\xa9"};
    EQ(ext_secret_delete(&d), 0);
    EXPECT_SENT(78, "00 0000 42 0100 61 0200 c3a9");
    EQ(ext_secret_delete(&u), 0);
    EQ(ext_secret_delete(&e), 0);
    EQ(ext_secret_copy(&q, 0, &items, &count), -ENOENT), CHECK(items == NULL), EQ(count, 0);
}

/* Add, copy (with data, every match's attributes), update, delete: a keychain's life. */
static void check_functions(void) {
    ext_secret_attributes a = generic("mail", "ann");
    a.label = "Ann's mail";
    EQ(ext_secret_add(&a, "hunter2", 7), 0);
    EQ(ext_secret_add(&a, "other", 5), -EEXIST); /* same identity (the label is not in it) */
    a.label = NULL;
    EQ(ext_secret_add(&a, "other", 5), -EEXIST);
    a.group = "group.a"; /* the first group, named: still the same item */
    EQ(ext_secret_add(&a, "other", 5), -EEXIST);
    a.group = "group.b"; /* another group: another item */
    EQ(ext_secret_add(&a, "bob's", 5), 0);
    a.group = "group.c"; /* a group the extension may not use */
    EQ(ext_secret_add(&a, "x", 1), -EPERM);
    ext_secret_attributes net = {.item_class = EXT_SECRET_INTERNET_PASSWORD, .account = "ann", .server = "imap.example.com",
                                 .protocol = "imaps", .port = 993};
    EQ(ext_secret_add(&net, "imap-pw", 7), 0);
    net.port = 0; /* another port: another item */
    EQ(ext_secret_add(&net, "imap-pw0", 8), 0);

    /* The first match, with its data. */
    ext_secret_item *items;
    size_t count;
    ext_secret_attributes q = generic("mail", "ann");
    q.group = "group.a";
    EQ(ext_secret_copy(&q, 1, &items, &count), 0), EQ(count, 1);
    EQ(items[0].item_class, EXT_SECRET_GENERIC_PASSWORD);
    STREQ(items[0].group, "group.a"), STREQ(items[0].service, "mail"), STREQ(items[0].account, "ann"), STREQ(items[0].label, "Ann's mail");
    CHECK(items[0].server == NULL && items[0].protocol == NULL && items[0].path == NULL), EQ(items[0].port, 0);
    EQ(items[0].length, 7), CHECK(memcmp(items[0].data, "hunter2", 7) == 0);
    ext_secret_free(items, count);
    /* Every match's attributes, in both groups, without data. */
    q.group = NULL;
    EQ(ext_secret_copy(&q, 0, &items, &count), 0), EQ(count, 2);
    STREQ(items[0].group, "group.a"), STREQ(items[1].group, "group.b");
    CHECK(items[0].data == NULL && items[0].length == 0 && items[1].data == NULL);
    ext_secret_free(items, count);
    /* With data, more than one match: the first only. */
    EQ(ext_secret_copy(&q, 1, &items, &count), 0), EQ(count, 1), EQ(items[0].length, 7);
    ext_secret_free(items, count);
    /* By class: every internet password (port 993 and the one without). */
    ext_secret_attributes inet = {.item_class = EXT_SECRET_INTERNET_PASSWORD};
    EQ(ext_secret_copy(&inet, 0, &items, &count), 0), EQ(count, 2);
    EQ(items[0].item_class, EXT_SECRET_INTERNET_PASSWORD), STREQ(items[0].server, "imap.example.com"), STREQ(items[0].protocol, "imaps");
    EQ(items[0].port, 993), STREQ(items[0].path, ""), STREQ(items[0].account, "ann"), CHECK(items[0].service == NULL);
    EQ(items[1].port, 0);
    ext_secret_free(items, count);
    inet.port = 993;
    EQ(ext_secret_copy(&inet, 1, &items, &count), 0), EQ(count, 1), EQ(items[0].length, 7), CHECK(memcmp(items[0].data, "imap-pw", 7) == 0);
    ext_secret_free(items, count);
    /* No match; a group the extension may not use is never revealed. */
    ext_secret_attributes none = generic("nothing", NULL);
    EQ(ext_secret_copy(&none, 1, &items, &count), -ENOENT), CHECK(items == NULL), EQ(count, 0);
    q.group = "group.c";
    EQ(ext_secret_copy(&q, 0, &items, &count), -ENOENT);
    q.group = NULL;

    /* Update every match: the label and the data of both "mail"/"ann" items. */
    EQ(ext_secret_update(&q, "renamed", "new-pw", 6), 0);
    EQ(ext_secret_copy(&q, 0, &items, &count), 0), EQ(count, 2);
    STREQ(items[0].label, "renamed"), STREQ(items[1].label, "renamed");
    ext_secret_free(items, count);
    q.group = "group.b";
    EQ(ext_secret_copy(&q, 1, &items, &count), 0), EQ(items[0].length, 6), CHECK(memcmp(items[0].data, "new-pw", 6) == 0);
    ext_secret_free(items, count);
    EQ(ext_secret_update(&none, "x", NULL, 0), -ENOENT);
    /* A query by label. */
    ext_secret_attributes by_label = {.item_class = 0, .label = "renamed"};
    EQ(ext_secret_copy(&by_label, 0, &items, &count), 0), EQ(count, 2);
    ext_secret_free(items, count);

    /* Delete: one group's, then every match, then nothing matches. */
    EQ(ext_secret_delete(&q), 0); /* group.b */
    q.group = NULL;
    EQ(ext_secret_copy(&q, 0, &items, &count), 0), EQ(count, 1), STREQ(items[0].group, "group.a");
    ext_secret_free(items, count);
    EQ(ext_secret_delete(&q), 0);
    EQ(ext_secret_delete(&q), -ENOENT);
    inet.port = 0;
    EQ(ext_secret_delete(&inet), 0);
    EQ(ext_secret_copy(&inet, 0, &items, &count), -ENOENT);

    /* The largest data, there and back. */
    static uint8_t big[EXT_SECRET_MAX_DATA];
    for (size_t k = 0; k < sizeof big; k++) big[k] = (uint8_t)(k * 7 + 3);
    ext_secret_attributes b = generic("big", NULL);
    b.label = "l";
    b.group = "group.b";
    EQ(ext_secret_add(&b, big, sizeof big), 0);
    EQ(ext_secret_copy(&b, 1, &items, &count), 0), EQ(items[0].length, sizeof big), CHECK(memcmp(items[0].data, big, sizeof big) == 0);
    ext_secret_free(items, count);
    EQ(ext_secret_delete(&b), 0);

    /* Too many items: limitReached. */
    char names[STORE + 1][8];
    for (int k = 0; k <= STORE; k++) {
        snprintf(names[k], sizeof names[k], "n%d", k);
        ext_secret_attributes n = generic(names[k], NULL);
        EQ(ext_secret_add(&n, "v", 1), k < STORE ? 0 : -ENOSPC);
    }
    ext_secret_attributes everything = any();
    EQ(ext_secret_delete(&everything), 0);
    ext_secret_free(NULL, 3); /* ignored */
}

/* Each answer code's errno, for each function. */
static void check_codes(void) {
    static const struct {
        int code, error;
    } codes[] = {{1, -ENOENT}, {5, -EPERM}, {6, -EINVAL}, {8, -ENOSPC}, {11, -EIO}, {12, -EIO}, {13, -EEXIST}, {14, -ENOENT}, {2, -EIO}};
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++) {
        char service[16];
        snprintf(service, sizeof service, "code-%d", codes[k].code);
        ext_secret_attributes a = generic(service, NULL);
        ext_secret_item *items = (ext_secret_item *)&a;
        size_t count = 9;
        EQ(ext_secret_add(&a, "x", 1), codes[k].error);
        EQ(ext_secret_copy(&a, k % 2, &items, &count), codes[k].error), CHECK(items == NULL), EQ(count, 0);
        EQ(ext_secret_update(&a, "l", NULL, 0), codes[k].error);
        EQ(ext_secret_delete(&a), codes[k].error);
    }
    /* Out of protocol: an answer 0 to a copy, a secretItems to an add, a secretItems the
     * decoder refuses (count 0): -EIO, none waits forever. */
    ext_secret_item *items;
    size_t count;
    ext_secret_attributes odd = generic("answer-0", NULL);
    EQ(ext_secret_copy(&odd, 1, &items, &count), -EIO);
    odd.service = "items";
    EQ(ext_secret_add(&odd, "x", 1), -EIO);
    odd.service = "malformed";
    EQ(ext_secret_copy(&odd, 0, &items, &count), -EIO), CHECK(items == NULL);
    /* Data the daemon sends with an attributes-only copy is not returned. */
    ext_secret_attributes extra = generic("extra-data", NULL);
    EQ(ext_secret_add(&extra, "zz", 2), 0);
    EQ(ext_secret_copy(&extra, 0, &items, &count), 0), EQ(count, 1), CHECK(items[0].data == NULL), EQ(items[0].length, 0);
    ext_secret_free(items, count);
    EQ(ext_secret_delete(&extra), 0);
}

/* Arguments refused before anything is sent. */
static void check_refused(void) {
    long before = received_count();
    static char text[EXT_SECRET_MAX_PATH + 2];
    ext_secret_item *items = NULL;
    size_t count = 0;
    ext_secret_attributes a = generic("s", NULL);
    EQ(ext_secret_add(NULL, "x", 1), -EINVAL);
    EQ(ext_secret_add(&a, NULL, 1), -EINVAL);
    EQ(ext_secret_add(&a, "x", 0), -EINVAL);
    static uint8_t big[EXT_SECRET_MAX_DATA + 1];
    EQ(ext_secret_add(&a, big, sizeof big), -EMSGSIZE);
    ext_secret_attributes c0 = any();
    EQ(ext_secret_add(&c0, "x", 1), -EINVAL); /* class 0: queries only */
    ext_secret_attributes c3 = {.item_class = 3};
    EQ(ext_secret_add(&c3, "x", 1), -EINVAL);
    EQ(ext_secret_copy(&c3, 0, &items, &count), -EINVAL);
    EQ(ext_secret_delete(&c3), -EINVAL);
    c3.item_class = -1;
    EQ(ext_secret_delete(&c3), -EINVAL);
    /* Each string's limit (+1 refused) and UTF-8; ports. */
    struct {
        const char **field;
        size_t limit;
    } limits[] = {{&a.group, 255}, {&a.service, 255}, {&a.account, 255}, {&a.server, 255}, {&a.protocol, 32}, {&a.path, 1024}, {&a.label, 255}};
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        a = generic("s", NULL);
        memset(text, 'g', limits[k].limit + 1);
        text[limits[k].limit + 1] = 0;
        *limits[k].field = text;
        EQ(ext_secret_add(&a, "x", 1), -EINVAL);
        EQ(ext_secret_copy(&a, 1, &items, &count), -EINVAL);
        EQ(ext_secret_update(&a, "l", NULL, 0), -EINVAL);
        EQ(ext_secret_delete(&a), -EINVAL);
        *limits[k].field = "\xc3(";
        EQ(ext_secret_delete(&a), -EINVAL);
    }
    a = generic("s", NULL);
    a.port = -1;
    EQ(ext_secret_delete(&a), -EINVAL);
    a.port = 65536;
    EQ(ext_secret_delete(&a), -EINVAL);
    a.port = 0;
    EQ(ext_secret_copy(NULL, 0, &items, &count), -EINVAL);
    EQ(ext_secret_copy(&a, 0, NULL, &count), -EINVAL);
    EQ(ext_secret_copy(&a, 0, &items, NULL), -EINVAL);
    EQ(ext_secret_update(NULL, "l", NULL, 0), -EINVAL);
    EQ(ext_secret_update(&a, NULL, NULL, 0), -EINVAL); /* nothing to change */
    EQ(ext_secret_update(&a, NULL, "x", 0), -EINVAL);  /* empty data */
    EQ(ext_secret_update(&a, NULL, big, sizeof big), -EMSGSIZE);
    memset(text, 'l', 256), text[256] = 0;
    EQ(ext_secret_update(&a, text, NULL, 0), -EINVAL);
    EQ(ext_secret_update(&a, "\xff", NULL, 0), -EINVAL);
    EQ(ext_secret_delete(NULL), -EINVAL);
    EQ(received_count(), before); /* nothing was sent */

    /* The limits themselves are accepted (and sent). */
    a = generic("s", NULL);
    a.port = 65535;
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        static char at_limit[7][EXT_SECRET_MAX_PATH + 1];
        memset(at_limit[k], k == 0 ? 'g' : 'v', limits[k].limit);
        at_limit[k][limits[k].limit] = 0;
        if (k > 0) *limits[k].field = at_limit[k];
    }
    EQ(ext_secret_delete(&a), -ENOENT);
    EQ(received_count(), before + 1);
    text[255] = 0;
    EQ(ext_secret_update(&a, text, NULL, 0), -ENOENT);
    static char long_group[256];
    memset(long_group, 'g', 255);
    a.group = long_group;
    EQ(ext_secret_add(&a, big, EXT_SECRET_MAX_DATA), -EPERM); /* the largest add: ~62 KB */
    EQ(received_count(), before + 3);
}

/* Secret bytes the library copied are zeroed: the send buffer (small and large), the received
 * datagram, an item's data (at ext_secret_free). */
static void check_zeroing(void) {
    ext_secret_attributes a = generic("zero", NULL);
    watch("ADD-MARKER-0123456789");
    EQ(ext_secret_add(&a, "ADD-MARKER-0123456789", 21), 0);
    EQ(hits(), 1); /* the send buffer, at once */

    /* The copy's datagram holds the data: zeroed by the reader. */
    ext_secret_item *items;
    size_t count;
    watch("ADD-MARKER-0123456789");
    EQ(ext_secret_copy(&a, 1, &items, &count), 0), EQ(items[0].length, 21);
    CHECK(zeroed_soon(1));
    /* ext_secret_free clears exactly the item's data. */
    pthread_mutex_lock(&zero_lock);
    exact = items[0].data, exact_length = items[0].length, exact_hits = 0;
    pthread_mutex_unlock(&zero_lock);
    watch("ADD-MARKER-0123456789");
    ext_secret_free(items, count);
    pthread_mutex_lock(&zero_lock);
    EQ(exact_hits, 1);
    exact = NULL;
    pthread_mutex_unlock(&zero_lock);
    EQ(hits(), 1);

    /* Update's new data: its send buffer. */
    watch("UPDATE-MARKER-abcdef");
    EQ(ext_secret_update(&a, NULL, "UPDATE-MARKER-abcdef", 20), 0);
    EQ(hits(), 1);
    /* Large data: the malloc'ed send buffer, the large datagram. */
    static uint8_t big[EXT_SECRET_MAX_DATA];
    memset(big, 'b', sizeof big);
    memcpy(big + 30000, "BIG-MARKER-xyz", 14);
    watch("BIG-MARKER-xyz");
    ext_secret_attributes b = generic("zero-big", NULL);
    EQ(ext_secret_add(&b, big, sizeof big), 0);
    EQ(hits(), 1);
    watch("BIG-MARKER-xyz");
    EQ(ext_secret_copy(&b, 1, &items, &count), 0);
    CHECK(zeroed_soon(1));
    ext_secret_free(items, count);
    EQ(ext_secret_delete(&b), 0);
    EQ(ext_secret_delete(&a), 0);
    watch("");
}

/* Round trips from a runtime callback, and from several threads at once. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int callback_done;

static void on_opened(bool opened, void *context) {
    (void)context;
    EQ(opened, 1);
    ext_secret_attributes a = generic("from.callback", NULL);
    EQ(ext_secret_add(&a, "cb", 2), 0);
    ext_secret_item *items;
    size_t count;
    EQ(ext_secret_copy(&a, 1, &items, &count), 0), EQ(items[0].length, 2);
    ext_secret_free(items, count);
    EQ(ext_secret_delete(&a), 0);
    pthread_mutex_lock(&lock);
    callback_done = 1;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg) {
    char service[32];
    snprintf(service, sizeof service, "worker-%ld", (long)(intptr_t)arg);
    ext_secret_attributes a = generic(service, NULL);
    for (int k = 0; k < 50; k++) {
        char data[32];
        int n = snprintf(data, sizeof data, "%s/%d", service, k);
        EQ(ext_secret_add(&a, data, (size_t)n), 0);
        ext_secret_item *items;
        size_t count;
        EQ(ext_secret_copy(&a, 1, &items, &count), 0);
        EQ(items[0].length, n), CHECK(memcmp(items[0].data, data, (size_t)n) == 0);
        ext_secret_free(items, count);
        EQ(ext_secret_delete(&a), 0);
    }
    return NULL;
}

static void check_threads(void) {
    EQ(ext_open_url("https://example.com/ok", on_opened, NULL), 0);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&lock);
    while (!callback_done)
        if (pthread_cond_timedwait(&changed, &lock, &deadline) == ETIMEDOUT) break;
    int done = callback_done;
    pthread_mutex_unlock(&lock);
    CHECK(done);
    pthread_t threads[6]; /* STORE is 8: at most 6 items at once */
    for (long k = 0; k < 6; k++) pthread_create(&threads[k], NULL, worker, (void *)(intptr_t)k);
    for (int k = 0; k < 6; k++) pthread_join(threads[k], NULL);
}

/* The channel closes while a call waits; then every call is -ENOTCONN. */
static int hung_result = 1;

static void *hung(void *unused) {
    (void)unused;
    ext_secret_attributes a = generic("hang", NULL);
    ext_secret_item *items;
    size_t count;
    hung_result = ext_secret_copy(&a, 1, &items, &count);
    return NULL;
}

static void check_close(void) {
    long before = received_count();
    pthread_t t;
    pthread_create(&t, NULL, hung, NULL);
    for (int k = 0; k < 5000 && received_count() == before; k++) usleep(1000);
    EQ(hung_result, 1); /* still waiting */
    ext_secret_attributes c = generic("close", NULL);
    EQ(ext_secret_delete(&c), -ENOTCONN);
    pthread_join(t, NULL);
    EQ(hung_result, -ENOTCONN);
    ext_secret_attributes a = generic("s", NULL);
    ext_secret_item *items;
    size_t count;
    EQ(ext_secret_add(&a, "x", 1), -ENOTCONN);
    EQ(ext_secret_copy(&a, 1, &items, &count), -ENOTCONN);
    EQ(ext_secret_update(&a, "l", NULL, 0), -ENOTCONN);
    EQ(ext_secret_delete(&a), -ENOTCONN);
}

/* The C codec: secretItems over its limits, as the decoder refuses and the encoder checks. */
static void check_codec(void) {
    static struct out o;
    struct item it = {.used = 1, .cls = 2, .group = "group.a", .server = "s", .port = 1};
    uint8_t data[] = {1, 2, 3};
    it.data = data, it.length = 3;
    struct ext_wire_message m;
    begin(&o, EXT_WIRE_SECRET_ITEMS, 9), o16(&o, 2), put_item(&o, &it, 1), put_item(&o, &it, 0);
    uint32_t payload = (uint32_t)(o.n - 8);
    for (int i = 0; i < 4; i++) o.b[4 + i] = (uint8_t)(payload >> (8 * i));
    EQ(ext_wire_decode(o.b, o.n, &m), 0), EQ(m.count, 2), EQ(m.tag, 9);
    const uint8_t *cursor = m.items;
    size_t left = m.items_length;
    struct ext_wire_secret_item w;
    EQ(ext_wire_secret_item(&cursor, &left, &w), 0), EQ(w.has_data, 1), EQ(w.data.length, 3), EQ(w.attributes.port, 1);
    EQ(ext_wire_secret_item(&cursor, &left, &w), 0), EQ(w.has_data, 0), EQ(left, 0);
    static uint8_t again[EXT_WIRE_MAX_MESSAGE];
    EQ(ext_wire_encode(&m, again, sizeof again), o.n), CHECK(memcmp(again, o.b, o.n) == 0);
    m.count = 3; /* fewer items than counted */
    EQ(ext_wire_encode(&m, again, sizeof again), -1);
    /* 65 items: over EXT_WIRE_MAX_SECRET_ITEMS; 64: accepted. */
    struct item small = {.used = 1, .cls = 1, .group = "g"};
    begin(&o, EXT_WIRE_SECRET_ITEMS, 9), o16(&o, 65);
    for (int k = 0; k < 65; k++) put_item(&o, &small, 0);
    payload = (uint32_t)(o.n - 8);
    for (int i = 0; i < 4; i++) o.b[4 + i] = (uint8_t)(payload >> (8 * i));
    EQ(ext_wire_decode(o.b, o.n, &m), -1);
    begin(&o, EXT_WIRE_SECRET_ITEMS, 9), o16(&o, 64);
    for (int k = 0; k < 64; k++) put_item(&o, &small, 0);
    payload = (uint32_t)(o.n - 8);
    for (int i = 0; i < 4; i++) o.b[4 + i] = (uint8_t)(payload >> (8 * i));
    EQ(ext_wire_decode(o.b, o.n, &m), 0), EQ(m.count, 64);
    /* Refused: class 3, fields bit 0x80, a flag of 2, an answer code of 15; accepted: 13, 14. */
    static const char *refused[] = {
        "01 4b 0000 0d000000 01000000 03 0000 00 01000000 78", /* secretAdd, class 3 */
        "01 4e 0000 08000000 01000000 00 0000 80",             /* secretDelete, fields 0x80 */
        "01 4c 0000 0a000000 01000000 00 0000 00 02 00",       /* secretCopy, returnData 2 */
        "01 67 0000 08000000 01000000 0f00 0000",              /* answer, code 15 */
        "01 4d 0000 0b000000 01000000 00 0000 00 00 00 ff",    /* secretUpdate, a trailing byte */
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        uint8_t d[64];
        size_t n = unhex(refused[k], d);
        EQ(ext_wire_decode(d, n, &m), -1);
    }
    /* The same, well-formed, are accepted. */
    static const char *accepted[] = {
        "01 4b 0000 0d000000 01000000 02 0000 00 01000000 78",
        "01 4e 0000 08000000 01000000 00 0000 7f 0000 0000 0000 0000 0000 0000 0000",
        "01 4c 0000 0a000000 01000000 00 0000 00 01 01",
        "01 4d 0000 0a000000 01000000 00 0000 00 00 00",
    };
    for (size_t k = 0; k < sizeof accepted / sizeof accepted[0]; k++) {
        uint8_t d[64];
        size_t n = unhex(accepted[k], d);
        d[4] = (uint8_t)(n - 8); /* the payload's length */
        EQ(ext_wire_decode(d, n, &m), 0);
    }
    uint8_t d[64];
    size_t n = unhex("01 67 0000 08000000 01000000 0e00 0000", d);
    EQ(ext_wire_decode(d, n, &m), 0), EQ(m.code, 14);
    n = unhex("01 4d 0000 0a000000 01000000 00 0000 00 00 00", d);
    EQ(ext_wire_decode(d, n, &m), 0), EQ(m.has_label, 0), EQ(m.has_value, 0);
}

int main(void) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return 2;
    char value[16];
    snprintf(value, sizeof value, "%d", pair[0]);
    setenv("EXTENSIOND_CHANNEL_FD", value, 1);
    daemon_fd = pair[1];
    pthread_t daemon;
    pthread_create(&daemon, NULL, fake_daemon, NULL);

    EQ(ext_runtime_is_supervised(), 1);
    check_codec();
    check_encoding();
    check_functions();
    check_codes();
    check_refused();
    check_zeroing();
    check_threads();
    check_close();
    pthread_join(daemon, NULL);
    printf("ok: %ld checks\n", checks);
    return 0;
}
