/*
 * defaults.c: reading shared defaults suites (defaults.h, docs/defaults.md): the seqlock
 * reader of a suite's mapping, the value decoder, and the getters of
 * include/extension_runtime.h.
 *
 * A read makes no system call and never waits for the writer (the daemon): it loads the
 * sequence (acquire), copies what it needs, then after an acquire fence loads the sequence
 * again and keeps the copy only when both loads are equal and even. Every offset and length
 * read from the mapping is loaded once into a local (byte by byte, with relaxed atomic loads, so
 * that the compiler cannot load it again after its check) and checked against `used` and the
 * mapping's size before use: a read torn by a concurrent rewrite sees garbage, never memory
 * outside the mapping, and is retried. Decoding happens on the private copy only.
 *
 * Compiled into runtime.c's translation unit (see there), and alone by the tests.
 */
#include "defaults.h"
#include "wire.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* --- the mapping ------------------------------------------------------------------------- */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static inline uint64_t seq_begin(const uint8_t *map) {
    return __atomic_load_n((const uint64_t *)(const void *)(map + EXTD_SEQUENCE), __ATOMIC_ACQUIRE);
}

/* Whether the copy made since seq_begin returned `before` is consistent. */
static inline int seq_same(const uint8_t *map, uint64_t before) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n((const uint64_t *)(const void *)(map + EXTD_SEQUENCE), __ATOMIC_RELAXED) == before;
}

/* A little-endian u32 of shared memory, loaded once. */
static inline uint32_t load32(const uint8_t *p) {
    return (uint32_t)__atomic_load_n(p, __ATOMIC_RELAXED) | (uint32_t)__atomic_load_n(p + 1, __ATOMIC_RELAXED) << 8 |
           (uint32_t)__atomic_load_n(p + 2, __ATOMIC_RELAXED) << 16 | (uint32_t)__atomic_load_n(p + 3, __ATOMIC_RELAXED) << 24;
}

int extd_mapping_check(const uint8_t *map, size_t size) {
    if (!map || size < EXTD_HEADER || size > EXTD_MAPPING_SIZE) return -EIO;
    return memcmp(map, EXTD_MAGIC, 8) == 0 ? 0 : -EIO;
}

/* The area's extent as the header says: 0, or -1 when `used` leaves the mapping or `count`
 * cannot fit in it (each entry takes at least 12 bytes with its offset). */
static int area_extent(const uint8_t *map, size_t size, size_t *used, size_t *count) {
    *used = load32(map + EXTD_USED);
    *count = load32(map + EXTD_COUNT);
    return *used <= size - EXTD_HEADER && *count <= *used / 12 ? 0 : -1;
}

/* Entry `index` of the area (`used` bytes): where its key and value are. 0, or -1 when an
 * offset or length leaves the area. */
static int entry(const uint8_t *area, size_t used, size_t index, size_t *key_at, size_t *key_length, size_t *value_at,
                 size_t *value_length) {
    if (index >= used / 4) return -1;
    size_t start = load32(area + index * 4);
    if (start > used || used - start < 8) return -1; /* the key's and the value's lengths */
    size_t kl = load32(area + start);
    if (kl > used - start - 8) return -1;
    size_t vl_at = start + 4 + kl;
    size_t vl = load32(area + vl_at);
    if (vl > used - vl_at - 4) return -1;
    *key_at = start + 4;
    *key_length = kl;
    *value_at = vl_at + 4;
    *value_length = vl;
    return 0;
}

/* Bytewise order, a prefix first: <0, 0, >0. */
static int compare_bytes(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c) return c;
    return an < bn ? -1 : an > bn;
}

int extd_find(const uint8_t *map, size_t size, const uint8_t *key, size_t key_length, uint8_t *out, size_t capacity,
              size_t *length) {
    const uint8_t *area = map + EXTD_HEADER;
    for (long attempt = 0; attempt < EXTD_MAX_RETRIES; attempt++) {
        uint64_t before = seq_begin(map);
        if (before & 1) {
            cpu_relax();
            continue;
        }
        int rc = -ENOENT;
        size_t used, count, found = 0;
        if (area_extent(map, size, &used, &count) != 0) rc = -EIO;
        size_t low = 0, high = rc == -EIO ? 0 : count;
        while (low < high) {
            size_t mid = low + (high - low) / 2, key_at, kl, value_at, vl;
            if (entry(area, used, mid, &key_at, &kl, &value_at, &vl) != 0) {
                rc = -EIO;
                break;
            }
            int c = compare_bytes(area + key_at, kl, key, key_length);
            if (c == 0) {
                if (vl <= capacity && vl) memcpy(out, area + value_at, vl);
                found = vl;
                rc = 0;
                break;
            }
            if (c < 0) low = mid + 1;
            else high = mid;
        }
        if (!seq_same(map, before)) continue;
        if (rc == 0) *length = found;
        return rc;
    }
    return -EIO;
}

/* --- values ------------------------------------------------------------------------------ */

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

/* Checks the value at *at (advanced past it), `depth` levels deep. 0 or -1. */
static int check_value(const uint8_t *v, size_t n, size_t *at, int depth) {
    if (depth > EXTD_MAX_DEPTH || *at >= n) return -1;
    uint8_t type = v[(*at)++];
    size_t left = n - *at;
    switch (type) {
    case EXT_DEFAULTS_BOOL:
        if (left < 1 || v[*at] > 1) return -1;
        *at += 1;
        return 0;
    case EXT_DEFAULTS_INTEGER:
    case EXT_DEFAULTS_DOUBLE:
        if (left < 8) return -1;
        *at += 8;
        return 0;
    case EXT_DEFAULTS_STRING:
    case EXT_DEFAULTS_BYTES: {
        if (left < 4) return -1;
        size_t length = get32(v + *at);
        *at += 4;
        if (length > left - 4) return -1;
        if (type == EXT_DEFAULTS_STRING && !ext_wire_valid_utf8(v + *at, length)) return -1;
        *at += length;
        return 0;
    }
    case EXT_DEFAULTS_ARRAY: {
        if (left < 4) return -1;
        size_t count = get32(v + *at);
        *at += 4;
        if (count > (left - 4) / 2) return -1; /* each value takes at least 2 bytes */
        for (size_t i = 0; i < count; i++)
            if (check_value(v, n, at, depth + 1) != 0) return -1;
        return 0;
    }
    case EXT_DEFAULTS_DICTIONARY: {
        if (left < 4) return -1;
        size_t count = get32(v + *at);
        *at += 4;
        if (count > (left - 4) / 6) return -1; /* a key's length and a value at least */
        const uint8_t *previous = NULL;
        size_t previous_length = 0;
        for (size_t i = 0; i < count; i++) {
            if (n - *at < 4) return -1;
            size_t kl = get32(v + *at);
            *at += 4;
            if (kl > n - *at || !ext_wire_valid_utf8(v + *at, kl)) return -1;
            const uint8_t *key = v + *at;
            if (previous && compare_bytes(previous, previous_length, key, kl) >= 0) return -1; /* sorted, unique */
            previous = key;
            previous_length = kl;
            *at += kl;
            if (check_value(v, n, at, depth + 1) != 0) return -1;
        }
        return 0;
    }
    default: return -1;
    }
}

int extd_value_check(const uint8_t *value, size_t length) {
    size_t at = 0;
    return value && check_value(value, length, &at, 1) == 0 && at == length ? 0 : -1;
}

int extd_valid_key(const char *key, size_t *length) {
    *length = strlen(key);
    return *length >= 1 && *length <= EXT_DEFAULTS_MAX_KEY && ext_wire_valid_utf8((const uint8_t *)key, *length);
}

/* --- the getters ------------------------------------------------------------------------- */

/* The checked value of `key`: in `small` (`room` bytes) when it fits, else in a malloc'ed
 * buffer (*copy != small: the caller frees it). 0, -EINVAL, -ENOENT, -EIO, -ENOMEM. */
static int read_value(ext_defaults *d, const char *key, uint8_t *small, size_t room, uint8_t **copy, size_t *length) {
    if (!d || !key) return -EINVAL;
    uint8_t *buffer = small;
    size_t capacity = room;
    for (;;) {
        size_t n = 0;
        int rc = extd_find(d->map, d->size, (const uint8_t *)key, strlen(key), buffer, capacity, &n);
        if (rc == 0 && n <= capacity) {
            if (extd_value_check(buffer, n) != 0) rc = -EIO;
            else {
                *copy = buffer;
                *length = n;
                return 0;
            }
        }
        if (buffer != small) free(buffer);
        if (rc != 0) return rc;
        /* Larger than the room: again, with room for it (the value may change meanwhile). */
        if (!(buffer = malloc(n))) return -ENOMEM;
        capacity = n;
    }
}

#define SMALL 256

API int ext_defaults_type(ext_defaults *d, const char *key) {
    uint8_t small[SMALL], *v;
    size_t n;
    int rc = read_value(d, key, small, sizeof small, &v, &n);
    if (rc) return rc;
    int type = v[0];
    if (v != small) free(v);
    return type;
}

/* A scalar of type `type` (its `width` bytes after the type byte) into `out`. */
static int read_scalar(ext_defaults *d, const char *key, int type, uint8_t *out, size_t width) {
    uint8_t small[SMALL], *v;
    size_t n;
    int rc = read_value(d, key, small, sizeof small, &v, &n);
    if (rc) return rc;
    if (v[0] == type) memcpy(out, v + 1, width);
    else rc = -EDOM;
    if (v != small) free(v);
    return rc;
}

API int ext_defaults_get_bool(ext_defaults *d, const char *key, bool *out) {
    uint8_t b;
    if (!out) return -EINVAL;
    int rc = read_scalar(d, key, EXT_DEFAULTS_BOOL, &b, 1);
    if (rc == 0) *out = b != 0;
    return rc;
}

API int ext_defaults_get_int64(ext_defaults *d, const char *key, int64_t *out) {
    uint8_t b[8];
    if (!out) return -EINVAL;
    int rc = read_scalar(d, key, EXT_DEFAULTS_INTEGER, b, 8);
    if (rc == 0) *out = (int64_t)get64(b);
    return rc;
}

API int ext_defaults_get_double(ext_defaults *d, const char *key, double *out) {
    uint8_t small[SMALL], *v;
    size_t n;
    if (!out) return -EINVAL;
    int rc = read_value(d, key, small, sizeof small, &v, &n);
    if (rc) return rc;
    uint64_t bits = get64(v + 1); /* both types are 9 bytes long */
    if (v[0] == EXT_DEFAULTS_DOUBLE) memcpy(out, &bits, sizeof *out);
    else if (v[0] == EXT_DEFAULTS_INTEGER) *out = (double)(int64_t)bits;
    else rc = -EDOM;
    if (v != small) free(v);
    return rc;
}

/* The string or bytes of `key`, of type `type`, as a malloc'ed copy with a NUL after it. */
static int read_run(ext_defaults *d, const char *key, int type, void **out, size_t *length) {
    uint8_t small[SMALL], *v;
    size_t n;
    int rc = read_value(d, key, small, sizeof small, &v, &n);
    if (rc) return rc;
    if (v[0] != type) rc = -EDOM;
    else {
        size_t count = get32(v + 1);
        uint8_t *copy = malloc(count + 1);
        if (!copy) rc = -ENOMEM;
        else {
            if (count) memcpy(copy, v + 5, count);
            copy[count] = 0;
            *out = copy;
            if (length) *length = count;
        }
    }
    if (v != small) free(v);
    return rc;
}

API int ext_defaults_get_string(ext_defaults *d, const char *key, char **out) {
    if (!out) return -EINVAL;
    return read_run(d, key, EXT_DEFAULTS_STRING, (void **)out, NULL);
}

API int ext_defaults_get_bytes(ext_defaults *d, const char *key, void **out, size_t *length) {
    if (!out || !length) return -EINVAL;
    return read_run(d, key, EXT_DEFAULTS_BYTES, out, length);
}

API int ext_defaults_get_encoded(ext_defaults *d, const char *key, void **out, size_t *length) {
    uint8_t small[SMALL], *v;
    size_t n;
    if (!out || !length) return -EINVAL;
    int rc = read_value(d, key, small, sizeof small, &v, &n);
    if (rc) return rc;
    if (v == small) {
        if (!(v = malloc(n))) return -ENOMEM;
        memcpy(v, small, n);
    }
    *out = v;
    *length = n;
    return 0;
}

/* Copies every key under the seqlock into `block` (`capacity` bytes): `count` pointers, a NULL,
 * then the keys, each NUL-terminated. 0 with *count and *needed (the bytes it takes; nothing is
 * copied when that is over `capacity`), or -EIO when the suite is malformed (an offset out of
 * range, a key that is not 1 to 255 bytes of UTF-8 or out of order) or kept changing. */
static int copy_keys(const uint8_t *map, size_t size, char *block, size_t capacity, size_t *count, size_t *needed) {
    const uint8_t *area = map + EXTD_HEADER;
    for (long attempt = 0; attempt < EXTD_MAX_RETRIES; attempt++) {
        uint64_t before = seq_begin(map);
        if (before & 1) {
            cpu_relax();
            continue;
        }
        size_t used, n, total = 0;
        int rc = area_extent(map, size, &used, &n) == 0 ? 0 : -EIO;
        if (rc == 0) {
            total = (n + 1) * sizeof(char *);
            for (size_t i = 0; i < n && rc == 0; i++) {
                size_t key_at, kl, value_at, vl;
                if (entry(area, used, i, &key_at, &kl, &value_at, &vl) != 0) rc = -EIO;
                total += kl + 1;
            }
        }
        if (rc == 0 && total <= capacity) {
            char **slots = (char **)(void *)block;
            char *text = block + (n + 1) * sizeof(char *);
            for (size_t i = 0; i < n && rc == 0; i++) {
                size_t key_at, kl, value_at, vl;
                if (entry(area, used, i, &key_at, &kl, &value_at, &vl) != 0 || text + kl + 1 > block + total) {
                    rc = -EIO; /* torn between the passes: the sequence check below retries */
                    break;
                }
                memcpy(text, area + key_at, kl);
                text[kl] = 0;
                if (memchr(text, 0, kl)) rc = -EIO; /* checked on the copy: a key holds no NUL */
                slots[i] = text;
                text += kl + 1;
            }
            if (rc == 0) slots[n] = NULL;
        }
        if (!seq_same(map, before)) continue;
        if (rc) return rc;
        *count = n;
        *needed = total;
        return 0;
    }
    return -EIO;
}

API int ext_defaults_keys(ext_defaults *d, char ***keys, size_t *count) {
    if (!d || !keys || !count) return -EINVAL;
    char *block = NULL;
    size_t capacity = 0;
    for (;;) {
        size_t n = 0, needed = 0;
        int rc = copy_keys(d->map, d->size, block, capacity, &n, &needed);
        if (rc == 0 && needed <= capacity) {
            /* A consistent copy: check it is what the daemon writes (keys valid and sorted). */
            char **slots = (char **)(void *)block;
            for (size_t i = 0; i < n && rc == 0; i++) {
                size_t length;
                if (!extd_valid_key(slots[i], &length)) rc = -EIO;
                else if (i > 0 && strcmp(slots[i - 1], slots[i]) >= 0) rc = -EIO;
            }
            if (rc == 0) {
                *keys = slots;
                *count = n;
                return 0;
            }
        }
        free(block);
        if (rc) return rc;
        if (!(block = malloc(needed))) return -ENOMEM;
        capacity = needed;
    }
}

API void ext_defaults_free_keys(char **keys, size_t count) {
    (void)count; /* one block: the pointers and the keys */
    free(keys);
}
