/* wire.c: the runtime channel's codec (see wire.h and docs/protocol.md). */
#include "wire.h"

#include <string.h>

int ext_wire_valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t need;
        uint32_t min, cp;
        if (c >= 0xC2 && c <= 0xDF) { need = 1; min = 0x80; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; min = 0x800; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; min = 0x10000; cp = c & 0x07; }
        else return 0;
        if (n - i <= need) return 0;
        for (size_t k = 1; k <= need; k++) {
            uint8_t d = s[i + k];
            if ((d & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (d & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += need + 1;
    }
    return 1;
}

struct reader {
    const uint8_t *p;
    size_t left;
};

static int take(struct reader *r, size_t n, const uint8_t **out) {
    if (r->left < n) return -1;
    *out = r->p;
    r->p += n;
    r->left -= n;
    return 0;
}

static int u8(struct reader *r, uint8_t *v) {
    const uint8_t *b;
    if (take(r, 1, &b)) return -1;
    *v = b[0];
    return 0;
}

static int u16(struct reader *r, uint16_t *v) {
    const uint8_t *b;
    if (take(r, 2, &b)) return -1;
    *v = (uint16_t)(b[0] | b[1] << 8);
    return 0;
}

static int u32(struct reader *r, uint32_t *v) {
    const uint8_t *b;
    if (take(r, 4, &b)) return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int u64(struct reader *r, uint64_t *v) {
    uint32_t lo, hi;
    if (u32(r, &lo) || u32(r, &hi)) return -1;
    *v = (uint64_t)hi << 32 | lo;
    return 0;
}

/* A string(limit): u16 length, UTF-8. */
static int text_field(struct reader *r, size_t limit, const uint8_t **data, size_t *length) {
    uint16_t n;
    if (u16(r, &n) || n > limit || take(r, n, data)) return -1;
    *length = n;
    return ext_wire_valid_utf8(*data, n) ? 0 : -1;
}

/* A bytes(limit): u32 length, bytes. */
static int bytes_field(struct reader *r, size_t limit, const uint8_t **data, size_t *length) {
    uint32_t n;
    if (u32(r, &n) || n > limit || take(r, n, data)) return -1;
    *length = n;
    return 0;
}

static int string(struct reader *r, size_t limit, struct ext_wire_message *m) {
    return text_field(r, limit, &m->data, &m->length);
}

static int bytes(struct reader *r, size_t limit, struct ext_wire_message *m) {
    return bytes_field(r, limit, &m->data, &m->length);
}

/* suiteWrite after its tag: suite, key, hasValue (0 or 1), the value when hasValue is 1. */
static int suite_write(struct reader *r, struct ext_wire_message *m) {
    if (string(r, EXT_WIRE_MAX_IDENTIFIER, m)) return -1;
    if (text_field(r, EXT_WIRE_MAX_DEFAULTS_KEY, &m->key, &m->key_length)) return -1;
    if (u8(r, &m->has_value) || m->has_value > 1) return -1;
    return m->has_value ? bytes_field(r, EXT_WIRE_MAX_DEFAULTS_VALUE, &m->value, &m->value_length) : 0;
}

int ext_wire_decode(const uint8_t *datagram, size_t size, struct ext_wire_message *m) {
    memset(m, 0, sizeof *m);
    if (size < EXT_WIRE_HEADER || size > EXT_WIRE_MAX_MESSAGE) return -1;
    struct reader r = {datagram, size};
    uint8_t version, kind;
    uint16_t reserved;
    uint32_t declared;
    if (u8(&r, &version) || u8(&r, &kind) || u16(&r, &reserved) || u32(&r, &declared)) return -1;
    if (version != EXT_WIRE_VERSION || reserved != 0 || declared != size - EXT_WIRE_HEADER) return -1;
    m->kind = kind;
    int bad;
    switch (kind) {
    case EXT_WIRE_READY: bad = 0; break;
    case EXT_WIRE_ACQUIRE: bad = u32(&r, &m->tag) || string(&r, EXT_WIRE_MAX_REASON, m); break;
    case EXT_WIRE_RELEASE:
    case EXT_WIRE_EXPIRE_RECEIVED:
    case EXT_WIRE_DELIVER:
    case EXT_WIRE_ENDED:
    case EXT_WIRE_EXPIRE:
    case EXT_WIRE_REFRESH: bad = u64(&r, &m->id); break;
    case EXT_WIRE_COMPLETE: bad = u64(&r, &m->id) || bytes(&r, EXT_WIRE_MAX_PAYLOAD, m); break;
    case EXT_WIRE_CANCEL: bad = u64(&r, &m->id) || string(&r, EXT_WIRE_MAX_TEXT, m); break;
    case EXT_WIRE_OBSERVE:
    case EXT_WIRE_NOTIFY: bad = string(&r, EXT_WIRE_MAX_IDENTIFIER, m); break;
    case EXT_WIRE_REFRESH_DONE: bad = u64(&r, &m->id) || u8(&r, &m->answer) || m->answer > 3; break;
    case EXT_WIRE_GRANTED: bad = u32(&r, &m->tag) || u64(&r, &m->id); break;
    case EXT_WIRE_DENIED: bad = u32(&r, &m->tag) || string(&r, EXT_WIRE_MAX_TEXT, m); break;
    case EXT_WIRE_OPEN_URL: bad = u32(&r, &m->tag) || string(&r, EXT_WIRE_MAX_URL, m); break;
    case EXT_WIRE_SUITE_OPEN: bad = u32(&r, &m->tag) || string(&r, EXT_WIRE_MAX_IDENTIFIER, m); break;
    case EXT_WIRE_SUITE_WRITE: bad = u32(&r, &m->tag) || suite_write(&r, m); break;
    case EXT_WIRE_ANSWER:
        bad = u32(&r, &m->tag) || u16(&r, &m->code) || m->code > EXT_WIRE_MAX_FAILURE_CODE || string(&r, EXT_WIRE_MAX_TEXT, m);
        break;
    case EXT_WIRE_SUITE_CHANGED: bad = string(&r, EXT_WIRE_MAX_IDENTIFIER, m); break;
    default: return -1;
    }
    if (bad || r.left != 0) return -1;
    return 0;
}

struct writer {
    uint8_t *p;
    size_t used, capacity;
};

static int put(struct writer *w, const void *b, size_t n) {
    if (w->capacity - w->used < n) return -1;
    if (n) memcpy(w->p + w->used, b, n);
    w->used += n;
    return 0;
}

static int put_u32(struct writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(w, b, 4);
}

static int put_u64(struct writer *w, uint64_t v) {
    return put_u32(w, (uint32_t)v) || put_u32(w, (uint32_t)(v >> 32));
}

static int put_u16(struct writer *w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    return put(w, b, 2);
}

static int put_text(struct writer *w, const uint8_t *data, size_t length, size_t limit) {
    if (length > limit || (length && !data) || !ext_wire_valid_utf8(data, length)) return -1;
    return put_u16(w, (uint16_t)length) || put(w, data, length);
}

static int put_bytes_field(struct writer *w, const uint8_t *data, size_t length, size_t limit) {
    if (length > limit || (length && !data)) return -1;
    return put_u32(w, (uint32_t)length) || put(w, data, length);
}

static int put_string(struct writer *w, const struct ext_wire_message *m, size_t limit) {
    return put_text(w, m->data, m->length, limit);
}

static int put_bytes(struct writer *w, const struct ext_wire_message *m, size_t limit) {
    return put_bytes_field(w, m->data, m->length, limit);
}

static int put_suite_write(struct writer *w, const struct ext_wire_message *m) {
    if (m->has_value > 1 || put_string(w, m, EXT_WIRE_MAX_IDENTIFIER)) return -1;
    if (put_text(w, m->key, m->key_length, EXT_WIRE_MAX_DEFAULTS_KEY)) return -1;
    if (put(w, &m->has_value, 1)) return -1;
    return m->has_value ? put_bytes_field(w, m->value, m->value_length, EXT_WIRE_MAX_DEFAULTS_VALUE) : 0;
}

long ext_wire_encode(const struct ext_wire_message *m, uint8_t *buffer, size_t capacity) {
    struct writer w = {buffer, 0, capacity};
    uint8_t header[EXT_WIRE_HEADER] = {EXT_WIRE_VERSION, m->kind, 0, 0, 0, 0, 0, 0};
    if (put(&w, header, sizeof header)) return -1;
    int bad;
    switch (m->kind) {
    case EXT_WIRE_READY: bad = 0; break;
    case EXT_WIRE_ACQUIRE: bad = put_u32(&w, m->tag) || put_string(&w, m, EXT_WIRE_MAX_REASON); break;
    case EXT_WIRE_RELEASE:
    case EXT_WIRE_EXPIRE_RECEIVED:
    case EXT_WIRE_DELIVER:
    case EXT_WIRE_ENDED:
    case EXT_WIRE_EXPIRE:
    case EXT_WIRE_REFRESH: bad = put_u64(&w, m->id); break;
    case EXT_WIRE_COMPLETE: bad = put_u64(&w, m->id) || put_bytes(&w, m, EXT_WIRE_MAX_PAYLOAD); break;
    case EXT_WIRE_CANCEL: bad = put_u64(&w, m->id) || put_string(&w, m, EXT_WIRE_MAX_TEXT); break;
    case EXT_WIRE_OBSERVE:
    case EXT_WIRE_NOTIFY: bad = put_string(&w, m, EXT_WIRE_MAX_IDENTIFIER); break;
    case EXT_WIRE_REFRESH_DONE: bad = m->answer > 3 || put_u64(&w, m->id) || put(&w, &m->answer, 1); break;
    case EXT_WIRE_GRANTED: bad = put_u32(&w, m->tag) || put_u64(&w, m->id); break;
    case EXT_WIRE_DENIED: bad = put_u32(&w, m->tag) || put_string(&w, m, EXT_WIRE_MAX_TEXT); break;
    case EXT_WIRE_OPEN_URL: bad = put_u32(&w, m->tag) || put_string(&w, m, EXT_WIRE_MAX_URL); break;
    case EXT_WIRE_SUITE_OPEN: bad = put_u32(&w, m->tag) || put_string(&w, m, EXT_WIRE_MAX_IDENTIFIER); break;
    case EXT_WIRE_SUITE_WRITE: bad = put_u32(&w, m->tag) || put_suite_write(&w, m); break;
    case EXT_WIRE_ANSWER:
        bad = m->code > EXT_WIRE_MAX_FAILURE_CODE || put_u32(&w, m->tag) || put_u16(&w, m->code) ||
              put_string(&w, m, EXT_WIRE_MAX_TEXT);
        break;
    case EXT_WIRE_SUITE_CHANGED: bad = put_string(&w, m, EXT_WIRE_MAX_IDENTIFIER); break;
    default: return -1;
    }
    if (bad || w.used > EXT_WIRE_MAX_MESSAGE) return -1;
    uint32_t payload = (uint32_t)(w.used - EXT_WIRE_HEADER);
    buffer[4] = (uint8_t)payload;
    buffer[5] = (uint8_t)(payload >> 8);
    buffer[6] = (uint8_t)(payload >> 16);
    buffer[7] = (uint8_t)(payload >> 24);
    return (long)w.used;
}
