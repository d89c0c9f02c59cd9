/* secrets.c: the secrets API of libExtensionRuntimeC (include/extension_runtime.h, ext_secret_*;
 * the wire messages: wire.h). Each call checks its arguments before anything is sent, then makes
 * one round trip (runtime.c, exts_round_trip). */
#define _GNU_SOURCE
#include "secrets.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

_Static_assert(EXT_SECRET_MAX_DATA == EXT_WIRE_MAX_SECRET, "the header's data limit is the wire's");
_Static_assert(EXT_SECRET_MAX_NAME == EXT_WIRE_MAX_IDENTIFIER, "the header's name limit is the wire's");
_Static_assert(EXT_SECRET_MAX_PROTOCOL == EXT_WIRE_MAX_SECRET_PROTOCOL, "the header's protocol limit is the wire's");
_Static_assert(EXT_SECRET_MAX_PATH == EXT_WIRE_MAX_SECRET_PATH, "the header's path limit is the wire's");

/* A C string as a field: absent when NULL; else it must be UTF-8 of at most `limit` bytes.
 * Sets `bit` in *fields when present. 0 or -EINVAL. */
static int field(const char *text, size_t limit, uint8_t bit, uint8_t *fields, struct ext_wire_span *out) {
    if (!text) return 0;
    size_t n = strlen(text);
    if (n > limit || !ext_wire_valid_utf8((const uint8_t *)text, n)) return -EINVAL;
    out->data = (const uint8_t *)text;
    out->length = n;
    *fields |= bit;
    return 0;
}

/* The wire form of `a` (its strings are pointed to, not copied). `add`: an item's description
 * (class 1 or 2) rather than a query (class 0 too). 0 or -EINVAL. */
static int wire_attributes(const ext_secret_attributes *a, int add, struct ext_wire_secret_attributes *w) {
    memset(w, 0, sizeof *w);
    if (!a) return -EINVAL;
    if (a->item_class != EXT_SECRET_GENERIC_PASSWORD && a->item_class != EXT_SECRET_INTERNET_PASSWORD && (add || a->item_class != 0))
        return -EINVAL;
    if (a->port < 0 || a->port > 65535) return -EINVAL;
    w->item_class = (uint8_t)a->item_class;
    uint8_t group_bit = 0;
    if (field(a->group, EXT_SECRET_MAX_NAME, 0, &group_bit, &w->group) ||
        field(a->service, EXT_SECRET_MAX_NAME, EXT_WIRE_SECRET_SERVICE, &w->fields, &w->service) ||
        field(a->account, EXT_SECRET_MAX_NAME, EXT_WIRE_SECRET_ACCOUNT, &w->fields, &w->account) ||
        field(a->server, EXT_SECRET_MAX_NAME, EXT_WIRE_SECRET_SERVER, &w->fields, &w->server) ||
        field(a->protocol, EXT_SECRET_MAX_PROTOCOL, EXT_WIRE_SECRET_PROTOCOL, &w->fields, &w->protocol) ||
        field(a->path, EXT_SECRET_MAX_PATH, EXT_WIRE_SECRET_PATH, &w->fields, &w->path) ||
        field(a->label, EXT_SECRET_MAX_NAME, EXT_WIRE_SECRET_LABEL, &w->fields, &w->label))
        return -EINVAL;
    if (a->port) {
        w->fields |= EXT_WIRE_SECRET_PORT;
        w->port = (uint16_t)a->port;
    }
    return 0;
}

/* Secret data: 1...EXT_SECRET_MAX_DATA bytes. 0, -EINVAL or -EMSGSIZE. */
static int check_data(const void *data, size_t length) {
    if (!data || length == 0) return -EINVAL;
    return length > EXT_SECRET_MAX_DATA ? -EMSGSIZE : 0;
}

API int ext_secret_add(const ext_secret_attributes *attributes, const void *data, size_t length) {
    struct ext_wire_message m = {.kind = EXT_WIRE_SECRET_ADD};
    int rc = wire_attributes(attributes, 1, &m.attributes);
    if (!rc) rc = check_data(data, length);
    if (rc) return rc;
    m.has_value = 1;
    m.value = data;
    m.value_length = length;
    return exts_round_trip(&m, 0, NULL, NULL);
}

API int ext_secret_copy(const ext_secret_attributes *query, int return_data, ext_secret_item **items, size_t *count) {
    if (items) *items = NULL;
    if (count) *count = 0;
    if (!items || !count) return -EINVAL;
    struct ext_wire_message m = {.kind = EXT_WIRE_SECRET_COPY};
    int rc = wire_attributes(query, 0, &m.attributes);
    if (rc) return rc;
    m.return_data = return_data != 0;
    m.all = return_data == 0; /* with data, the daemon returns the first match only */
    return exts_round_trip(&m, m.return_data, items, count);
}

API int ext_secret_update(const ext_secret_attributes *query, const char *new_label, const void *data, size_t length) {
    struct ext_wire_message m = {.kind = EXT_WIRE_SECRET_UPDATE};
    int rc = wire_attributes(query, 0, &m.attributes);
    if (rc) return rc;
    if (!new_label && !data) return -EINVAL; /* nothing to change */
    if (new_label) {
        size_t n = strlen(new_label);
        if (n > EXT_SECRET_MAX_NAME || !ext_wire_valid_utf8((const uint8_t *)new_label, n)) return -EINVAL;
        m.has_label = 1;
        m.label = (const uint8_t *)new_label;
        m.label_length = n;
    }
    if (data) {
        if ((rc = check_data(data, length))) return rc;
        m.has_value = 1;
        m.value = data;
        m.value_length = length;
    }
    return exts_round_trip(&m, 0, NULL, NULL);
}

API int ext_secret_delete(const ext_secret_attributes *query) {
    struct ext_wire_message m = {.kind = EXT_WIRE_SECRET_DELETE};
    int rc = wire_attributes(query, 0, &m.attributes);
    return rc ? rc : exts_round_trip(&m, 0, NULL, NULL);
}

API void ext_secret_free(ext_secret_item *items, size_t count) {
    if (!items) return;
    for (size_t i = 0; i < count; i++) {
        ext_secret_item *it = &items[i];
        free(it->group), free(it->service), free(it->account), free(it->server);
        free(it->protocol), free(it->path), free(it->label);
        if (it->data) {
            explicit_bzero(it->data, it->length);
            free(it->data);
        }
    }
    explicit_bzero(items, count * sizeof *items);
    free(items);
}

/* A malloc'ed C string of the field, or NULL when it is absent (`bit` clear in `fields`).
 * 0, or -ENOMEM. */
static int copy_field(uint8_t fields, uint8_t bit, const struct ext_wire_span *s, char **out) {
    *out = NULL;
    if (!(fields & bit)) return 0;
    char *copy = malloc(s->length + 1);
    if (!copy) return -ENOMEM;
    if (s->length) memcpy(copy, s->data, s->length);
    copy[s->length] = 0;
    *out = copy;
    return 0;
}

int exts_items(const struct ext_wire_message *m, int with_data, ext_secret_item **items, size_t *count) {
    *items = NULL;
    *count = 0;
    size_t n = with_data ? 1 : m->count;
    ext_secret_item *out = calloc(n, sizeof *out);
    if (!out) return -ENOMEM;
    const uint8_t *cursor = m->items;
    size_t left = m->items_length;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        struct ext_wire_secret_item w;
        if (ext_wire_secret_item(&cursor, &left, &w)) {
            rc = -EIO;
            break;
        }
        const struct ext_wire_secret_attributes *a = &w.attributes;
        ext_secret_item *it = &out[i];
        it->item_class = a->item_class;
        it->port = (a->fields & EXT_WIRE_SECRET_PORT) ? a->port : 0;
        rc = copy_field(1, 1, &a->group, &it->group); /* the group is always there */
        if (!rc) rc = copy_field(a->fields, EXT_WIRE_SECRET_SERVICE, &a->service, &it->service);
        if (!rc) rc = copy_field(a->fields, EXT_WIRE_SECRET_ACCOUNT, &a->account, &it->account);
        if (!rc) rc = copy_field(a->fields, EXT_WIRE_SECRET_SERVER, &a->server, &it->server);
        if (!rc) rc = copy_field(a->fields, EXT_WIRE_SECRET_PROTOCOL, &a->protocol, &it->protocol);
        if (!rc) rc = copy_field(a->fields, EXT_WIRE_SECRET_PATH, &a->path, &it->path);
        if (!rc) rc = copy_field(a->fields, EXT_WIRE_SECRET_LABEL, &a->label, &it->label);
        if (!rc && with_data && w.has_data) {
            /* Data is never empty when extensiond sends it; a byte is allocated all the same, so
             * that `data` is not NULL when the item has data. */
            it->data = malloc(w.data.length ? w.data.length : 1);
            if (!it->data) rc = -ENOMEM;
            else {
                if (w.data.length) memcpy(it->data, w.data.data, w.data.length);
                it->length = w.data.length;
            }
        }
    }
    if (rc) {
        ext_secret_free(out, n);
        return rc;
    }
    *items = out;
    *count = n;
    return 0;
}
