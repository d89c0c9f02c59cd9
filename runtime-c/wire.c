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

/* A flag: u8, 0 or 1. */
static int flag(struct reader *r, uint8_t *v) { return u8(r, v) || *v > 1 ? -1 : 0; }

static int span(struct reader *r, size_t limit, struct ext_wire_span *s) { return text_field(r, limit, &s->data, &s->length); }

/* Secret attributes (wire.h). */
static int attributes(struct reader *r, struct ext_wire_secret_attributes *a) {
    if (u8(r, &a->item_class) || a->item_class > 2 || span(r, EXT_WIRE_MAX_IDENTIFIER, &a->group)) return -1;
    if (u8(r, &a->fields) || (a->fields & 0x80)) return -1;
    uint8_t f = a->fields;
    if ((f & EXT_WIRE_SECRET_SERVICE) && span(r, EXT_WIRE_MAX_IDENTIFIER, &a->service)) return -1;
    if ((f & EXT_WIRE_SECRET_ACCOUNT) && span(r, EXT_WIRE_MAX_IDENTIFIER, &a->account)) return -1;
    if ((f & EXT_WIRE_SECRET_SERVER) && span(r, EXT_WIRE_MAX_IDENTIFIER, &a->server)) return -1;
    if ((f & EXT_WIRE_SECRET_PROTOCOL) && span(r, EXT_WIRE_MAX_SECRET_PROTOCOL, &a->protocol)) return -1;
    if ((f & EXT_WIRE_SECRET_PORT) && u16(r, &a->port)) return -1;
    if ((f & EXT_WIRE_SECRET_PATH) && span(r, EXT_WIRE_MAX_SECRET_PATH, &a->path)) return -1;
    if ((f & EXT_WIRE_SECRET_LABEL) && span(r, EXT_WIRE_MAX_IDENTIFIER, &a->label)) return -1;
    return 0;
}

static int secret_data(struct reader *r, const uint8_t **data, size_t *length) {
    return bytes_field(r, EXT_WIRE_MAX_SECRET, data, length);
}

static int item(struct reader *r, struct ext_wire_secret_item *it) {
    memset(it, 0, sizeof *it);
    if (attributes(r, &it->attributes) || flag(r, &it->has_data)) return -1;
    return it->has_data ? secret_data(r, &it->data.data, &it->data.length) : 0;
}

int ext_wire_secret_item(const uint8_t **cursor, size_t *left, struct ext_wire_secret_item *out) {
    struct reader r = {*cursor, *left};
    if (item(&r, out)) return -1;
    *cursor = r.p;
    *left = r.left;
    return 0;
}

/* secretItems after its tag: count (1...EXT_WIRE_MAX_SECRET_ITEMS), then that many items. */
static int secret_items(struct reader *r, struct ext_wire_message *m) {
    if (u16(r, &m->count) || m->count == 0 || m->count > EXT_WIRE_MAX_SECRET_ITEMS) return -1;
    m->items = r->p;
    for (uint16_t i = 0; i < m->count; i++) {
        struct ext_wire_secret_item it;
        if (item(r, &it)) return -1;
    }
    m->items_length = (size_t)(r->p - m->items);
    return 0;
}

/* secretUpdate after its tag and query: hasLabel, the label, hasData, the data. */
static int secret_update(struct reader *r, struct ext_wire_message *m) {
    if (flag(r, &m->has_label)) return -1;
    if (m->has_label && text_field(r, EXT_WIRE_MAX_IDENTIFIER, &m->label, &m->label_length)) return -1;
    if (flag(r, &m->has_value)) return -1;
    return m->has_value ? secret_data(r, &m->value, &m->value_length) : 0;
}

/* A transfer kind's session and group. */
static int transfer_names(struct reader *r, struct ext_wire_transfer *t) {
    return span(r, EXT_WIRE_MAX_IDENTIFIER, &t->session) || span(r, EXT_WIRE_MAX_IDENTIFIER, &t->group);
}

/* transferCreate after its tag: the names, method (1...3), url, path, discretionary. */
static int transfer_create(struct reader *r, struct ext_wire_transfer *t) {
    if (transfer_names(r, t) || u8(r, &t->method) || t->method < 1 || t->method > 3) return -1;
    return span(r, EXT_WIRE_MAX_TRANSFER_URL, &t->url) || span(r, EXT_WIRE_MAX_TRANSFER_PATH, &t->path) || flag(r, &t->discretionary);
}

static int transfer_event(struct reader *r, struct ext_wire_transfer_event *e) {
    memset(e, 0, sizeof *e);
    uint64_t total;
    uint32_t code;
    if (u64(r, &e->sequence) || u64(r, &e->task) || u8(r, &e->kind) || e->kind < 1 || e->kind > 3) return -1;
    if (u64(r, &e->bytes) || u64(r, &total) || u16(r, &e->status)) return -1;
    e->total = (int64_t)total;
    if (span(r, EXT_WIRE_MAX_TRANSFER_EVENT_PATH, &e->path) || span(r, EXT_WIRE_MAX_IDENTIFIER, &e->domain) || u32(r, &code)) return -1;
    e->code = (int32_t)code;
    return span(r, EXT_WIRE_MAX_TRANSFER_TEXT, &e->text);
}

int ext_wire_transfer_event(const uint8_t **cursor, size_t *left, struct ext_wire_transfer_event *out) {
    struct reader r = {*cursor, *left};
    if (transfer_event(&r, out)) return -1;
    *cursor = r.p;
    *left = r.left;
    return 0;
}

/* transferEvents: the names, count (1...EXT_WIRE_MAX_TRANSFER_EVENTS), then that many events. */
static int transfer_events(struct reader *r, struct ext_wire_message *m) {
    if (transfer_names(r, &m->transfer)) return -1;
    if (u16(r, &m->count) || m->count == 0 || m->count > EXT_WIRE_MAX_TRANSFER_EVENTS) return -1;
    m->items = r->p;
    for (uint16_t i = 0; i < m->count; i++) {
        struct ext_wire_transfer_event e;
        if (transfer_event(r, &e)) return -1;
    }
    m->items_length = (size_t)(r->p - m->items);
    return 0;
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
    case EXT_WIRE_SECRET_ADD:
        m->has_value = 1;
        bad = u32(&r, &m->tag) || attributes(&r, &m->attributes) || secret_data(&r, &m->value, &m->value_length);
        break;
    case EXT_WIRE_SECRET_COPY:
        bad = u32(&r, &m->tag) || attributes(&r, &m->attributes) || flag(&r, &m->return_data) || flag(&r, &m->all);
        break;
    case EXT_WIRE_SECRET_UPDATE: bad = u32(&r, &m->tag) || attributes(&r, &m->attributes) || secret_update(&r, m); break;
    case EXT_WIRE_SECRET_DELETE: bad = u32(&r, &m->tag) || attributes(&r, &m->attributes); break;
    case EXT_WIRE_SECRET_ITEMS: bad = u32(&r, &m->tag) || secret_items(&r, m); break;
    case EXT_WIRE_TRANSFER_CREATE: bad = u32(&r, &m->tag) || transfer_create(&r, &m->transfer); break;
    case EXT_WIRE_TRANSFER_CANCEL:
    case EXT_WIRE_TRANSFER_CREATED: bad = u32(&r, &m->tag) || u64(&r, &m->id); break;
    case EXT_WIRE_TRANSFER_CLAIM: bad = u32(&r, &m->tag) || transfer_names(&r, &m->transfer); break;
    case EXT_WIRE_TRANSFER_HANDLED: bad = u32(&r, &m->tag) || transfer_names(&r, &m->transfer) || u64(&r, &m->id); break;
    case EXT_WIRE_TRANSFER_EVENTS: bad = transfer_events(&r, m); break;
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

static int put_span(struct writer *w, const struct ext_wire_span *s, size_t limit) { return put_text(w, s->data, s->length, limit); }

static int put_attributes(struct writer *w, const struct ext_wire_secret_attributes *a) {
    uint8_t f = a->fields;
    if (a->item_class > 2 || (f & 0x80) || put(w, &a->item_class, 1) || put_span(w, &a->group, EXT_WIRE_MAX_IDENTIFIER)) return -1;
    if (put(w, &f, 1)) return -1;
    if ((f & EXT_WIRE_SECRET_SERVICE) && put_span(w, &a->service, EXT_WIRE_MAX_IDENTIFIER)) return -1;
    if ((f & EXT_WIRE_SECRET_ACCOUNT) && put_span(w, &a->account, EXT_WIRE_MAX_IDENTIFIER)) return -1;
    if ((f & EXT_WIRE_SECRET_SERVER) && put_span(w, &a->server, EXT_WIRE_MAX_IDENTIFIER)) return -1;
    if ((f & EXT_WIRE_SECRET_PROTOCOL) && put_span(w, &a->protocol, EXT_WIRE_MAX_SECRET_PROTOCOL)) return -1;
    if ((f & EXT_WIRE_SECRET_PORT) && put_u16(w, a->port)) return -1;
    if ((f & EXT_WIRE_SECRET_PATH) && put_span(w, &a->path, EXT_WIRE_MAX_SECRET_PATH)) return -1;
    if ((f & EXT_WIRE_SECRET_LABEL) && put_span(w, &a->label, EXT_WIRE_MAX_IDENTIFIER)) return -1;
    return 0;
}

static int put_secret_update(struct writer *w, const struct ext_wire_message *m) {
    if (m->has_label > 1 || m->has_value > 1 || put(w, &m->has_label, 1)) return -1;
    if (m->has_label && put_text(w, m->label, m->label_length, EXT_WIRE_MAX_IDENTIFIER)) return -1;
    if (put(w, &m->has_value, 1)) return -1;
    return m->has_value ? put_bytes_field(w, m->value, m->value_length, EXT_WIRE_MAX_SECRET) : 0;
}

/* secretItems after its tag: the count, then the items, checked as the decoder reads them. */
static int put_secret_items(struct writer *w, const struct ext_wire_message *m) {
    if (m->count == 0 || m->count > EXT_WIRE_MAX_SECRET_ITEMS || (m->items_length && !m->items)) return -1;
    const uint8_t *cursor = m->items;
    size_t left = m->items_length;
    for (uint16_t i = 0; i < m->count; i++) {
        struct ext_wire_secret_item it;
        if (ext_wire_secret_item(&cursor, &left, &it)) return -1;
    }
    return left != 0 || put_u16(w, m->count) || put(w, m->items, m->items_length);
}

static int put_transfer_names(struct writer *w, const struct ext_wire_transfer *t) {
    return put_span(w, &t->session, EXT_WIRE_MAX_IDENTIFIER) || put_span(w, &t->group, EXT_WIRE_MAX_IDENTIFIER);
}

static int put_transfer_create(struct writer *w, const struct ext_wire_transfer *t) {
    if (t->method < 1 || t->method > 3 || t->discretionary > 1 || put_transfer_names(w, t) || put(w, &t->method, 1)) return -1;
    return put_span(w, &t->url, EXT_WIRE_MAX_TRANSFER_URL) || put_span(w, &t->path, EXT_WIRE_MAX_TRANSFER_PATH) ||
           put(w, &t->discretionary, 1);
}

/* transferEvents: the names, the count, then the events, checked as the decoder reads them. */
static int put_transfer_events(struct writer *w, const struct ext_wire_message *m) {
    if (m->count == 0 || m->count > EXT_WIRE_MAX_TRANSFER_EVENTS || (m->items_length && !m->items)) return -1;
    const uint8_t *cursor = m->items;
    size_t left = m->items_length;
    for (uint16_t i = 0; i < m->count; i++) {
        struct ext_wire_transfer_event e;
        if (ext_wire_transfer_event(&cursor, &left, &e)) return -1;
    }
    return left != 0 || put_transfer_names(w, &m->transfer) || put_u16(w, m->count) || put(w, m->items, m->items_length);
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
    case EXT_WIRE_SECRET_ADD:
        bad = put_u32(&w, m->tag) || put_attributes(&w, &m->attributes) ||
              put_bytes_field(&w, m->value, m->value_length, EXT_WIRE_MAX_SECRET);
        break;
    case EXT_WIRE_SECRET_COPY:
        bad = m->return_data > 1 || m->all > 1 || put_u32(&w, m->tag) || put_attributes(&w, &m->attributes) ||
              put(&w, &m->return_data, 1) || put(&w, &m->all, 1);
        break;
    case EXT_WIRE_SECRET_UPDATE: bad = put_u32(&w, m->tag) || put_attributes(&w, &m->attributes) || put_secret_update(&w, m); break;
    case EXT_WIRE_SECRET_DELETE: bad = put_u32(&w, m->tag) || put_attributes(&w, &m->attributes); break;
    case EXT_WIRE_SECRET_ITEMS: bad = put_u32(&w, m->tag) || put_secret_items(&w, m); break;
    case EXT_WIRE_TRANSFER_CREATE: bad = put_u32(&w, m->tag) || put_transfer_create(&w, &m->transfer); break;
    case EXT_WIRE_TRANSFER_CANCEL:
    case EXT_WIRE_TRANSFER_CREATED: bad = put_u32(&w, m->tag) || put_u64(&w, m->id); break;
    case EXT_WIRE_TRANSFER_CLAIM: bad = put_u32(&w, m->tag) || put_transfer_names(&w, &m->transfer); break;
    case EXT_WIRE_TRANSFER_HANDLED: bad = put_u32(&w, m->tag) || put_transfer_names(&w, &m->transfer) || put_u64(&w, m->id); break;
    case EXT_WIRE_TRANSFER_EVENTS: bad = put_transfer_events(&w, m); break;
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
