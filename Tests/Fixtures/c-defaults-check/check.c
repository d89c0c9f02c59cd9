/* check: the C runtime's shared defaults reader (runtime-c/defaults.c) over suite mappings built
 * in memory, as docs/defaults.md lays them out; no extensiond. Run by run.sh:
 *
 *   cc -std=c11 -I include -I runtime-c check.c runtime-c/defaults.c runtime-c/wire.c -lpthread
 *
 * Checks every getter on every type (nested arrays and dictionaries included), -ENOENT, -EDOM,
 * -EINVAL, keys(), the encoding rules (extd_value_check), malformed mappings (offsets and lengths
 * out of range, a bad header, random garbage: -EIO, never a fault: the mapping ends at a
 * PROT_NONE page), a sequence stuck odd, and readers racing a writer that keeps rewriting the
 * suite under the seqlock (each value self-consistent: a torn value is never returned).
 * Prints "ok: N checks" and exits 0, or names the first failure and exits 1. */
#define _GNU_SOURCE
#include "defaults.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"

/* --- encoding values --------------------------------------------------------------------- */

struct buf {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct buf *b, const void *bytes, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, bytes, n);
    b->n += n;
}

static void put8(struct buf *b, uint8_t v) { put(b, &v, 1); }

static void put32(struct buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

static void put64(struct buf *b, uint64_t v) {
    put32(b, (uint32_t)v);
    put32(b, (uint32_t)(v >> 32));
}

static void v_bool(struct buf *b, int v) { put8(b, 1), put8(b, (uint8_t)v); }
static void v_int(struct buf *b, int64_t v) { put8(b, 2), put64(b, (uint64_t)v); }
static void v_double(struct buf *b, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    put8(b, 3), put64(b, bits);
}
static void v_run(struct buf *b, uint8_t type, const void *bytes, size_t n) { put8(b, type), put32(b, (uint32_t)n), put(b, bytes, n); }
static void v_string(struct buf *b, const char *s) { v_run(b, 4, s, strlen(s)); }
static void v_array(struct buf *b, uint32_t count) { put8(b, 6), put32(b, count); }
static void v_dict(struct buf *b, uint32_t count) { put8(b, 7), put32(b, count); }
static void v_key(struct buf *b, const char *k) { put32(b, (uint32_t)strlen(k)), put(b, k, strlen(k)); }

/* --- building suites --------------------------------------------------------------------- */

struct entry {
    const char *key;
    struct buf value;
};

static int by_key(const void *a, const void *b) {
    return strcmp(((const struct entry *)a)->key, ((const struct entry *)b)->key); /* bytewise */
}

/* Writes the area of `n` entries (sorted here) at `area`; returns `used`. */
static size_t build_area(uint8_t *area, struct entry *e, size_t n) {
    if (n) qsort(e, n, sizeof *e, by_key);
    struct buf body = {0};
    uint8_t *table = area;
    for (size_t i = 0; i < n; i++) {
        uint32_t at = (uint32_t)(n * 4 + body.n);
        memcpy(table + i * 4, (uint8_t[]){(uint8_t)at, (uint8_t)(at >> 8), (uint8_t)(at >> 16), (uint8_t)(at >> 24)}, 4);
        put32(&body, (uint32_t)strlen(e[i].key));
        put(&body, e[i].key, strlen(e[i].key));
        put32(&body, (uint32_t)e[i].value.n);
        put(&body, e[i].value.p, e[i].value.n);
    }
    if (n * 4 + body.n > EXT_DEFAULTS_MAX_SUITE) abort();
    if (body.n) memcpy(area + n * 4, body.p, body.n);
    free(body.p);
    return n * 4 + body.n;
}

static void set32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

/* The whole suite at `map` (EXTD_MAPPING_SIZE bytes): header and area, sequence even. */
static void install(uint8_t *map, struct entry *e, size_t n) {
    memset(map, 0, EXTD_MAPPING_SIZE);
    memcpy(map, EXTD_MAGIC, 8);
    size_t used = build_area(map + EXTD_HEADER, e, n);
    set32(map + EXTD_USED, (uint32_t)used);
    set32(map + EXTD_COUNT, (uint32_t)n);
}

/* A mapping whose last byte is followed by a PROT_NONE page: reading past it faults. */
static uint8_t *guarded_mapping(void) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (EXTD_MAPPING_SIZE + page - 1) / page * page;
    uint8_t *region = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) abort();
    if (mprotect(region + span, page, PROT_NONE) != 0) abort();
    return region + span - EXTD_MAPPING_SIZE; /* 8-aligned: EXTD_MAPPING_SIZE is a multiple of 8 */
}

/* --- the getters over a suite of every type ---------------------------------------------- */

static uint8_t *map;
static ext_defaults suite;

static void check_getters(void) {
    static char big[EXT_DEFAULTS_MAX_VALUE - 5 + 1];
    memset(big, 'z', sizeof big - 1);
    struct entry e[14] = {{.key = "bool.true"}, {.key = "bool.false"}, {.key = "int.min"}, {.key = "int.max"}, {.key = "double"}, {.key = "string"}, {.key = "string.empty"}, {.key = "bytes"},
                          {.key = "array"}, {.key = "dict"}, {.key = "big"}, {.key = "\xc3\xa9t\xc3\xa9"}, {.key = "deep"}, {.key = "z"}};
    v_bool(&e[0].value, 1);
    v_bool(&e[1].value, 0);
    v_int(&e[2].value, INT64_MIN);
    v_int(&e[3].value, INT64_MAX);
    v_double(&e[4].value, -2.5e-300);
    v_string(&e[5].value, "h\xc3\xa9llo \xf0\x9d\x84\x9e");
    v_string(&e[6].value, "");
    v_run(&e[7].value, 5, "\x00\x01\xff\x00", 4);
    v_array(&e[8].value, 4); /* [1, "two", [true, 3.0], {}] */
    v_int(&e[8].value, 1), v_string(&e[8].value, "two"), v_array(&e[8].value, 2), v_bool(&e[8].value, 1), v_double(&e[8].value, 3.0);
    v_dict(&e[8].value, 0);
    v_dict(&e[9].value, 3); /* {"": 0, "a": [], "b": {"c": b"x"}}, keys sorted bytewise */
    v_key(&e[9].value, ""), v_int(&e[9].value, 0), v_key(&e[9].value, "a"), v_array(&e[9].value, 0);
    v_key(&e[9].value, "b"), v_dict(&e[9].value, 1), v_key(&e[9].value, "c"), v_run(&e[9].value, 5, "x", 1);
    v_string(&e[10].value, big); /* the largest value: 60,000 bytes encoded */
    v_int(&e[11].value, 7);
    for (int i = 0; i < EXTD_MAX_DEPTH - 1; i++) v_array(&e[12].value, 1); /* 32 levels: the deepest allowed */
    v_bool(&e[12].value, 0);
    v_int(&e[13].value, 42);
    install(map, e, 14);

    bool b;
    int64_t i;
    double d;
    char *s;
    void *p;
    size_t n;
    EQ(ext_defaults_get_bool(&suite, "bool.true", &b), 0), CHECK(b);
    EQ(ext_defaults_get_bool(&suite, "bool.false", &b), 0), CHECK(!b);
    EQ(ext_defaults_get_int64(&suite, "int.min", &i), 0), CHECK(i == INT64_MIN);
    EQ(ext_defaults_get_int64(&suite, "int.max", &i), 0), CHECK(i == INT64_MAX);
    EQ(ext_defaults_get_double(&suite, "double", &d), 0), CHECK(d == -2.5e-300);
    EQ(ext_defaults_get_double(&suite, "int.max", &d), 0), CHECK(d == (double)INT64_MAX); /* an integer converts */
    EQ(ext_defaults_get_double(&suite, "z", &d), 0), CHECK(d == 42.0);
    EQ(ext_defaults_get_string(&suite, "string", &s), 0), CHECK(strcmp(s, "h\xc3\xa9llo \xf0\x9d\x84\x9e") == 0), free(s);
    EQ(ext_defaults_get_string(&suite, "string.empty", &s), 0), CHECK(strcmp(s, "") == 0), free(s);
    EQ(ext_defaults_get_string(&suite, "big", &s), 0), CHECK(strcmp(s, big) == 0), free(s);
    EQ(ext_defaults_get_bytes(&suite, "bytes", &p, &n), 0), EQ(n, 4), CHECK(memcmp(p, "\x00\x01\xff\x00", 4) == 0), free(p);
    EQ(ext_defaults_get_int64(&suite, "\xc3\xa9t\xc3\xa9", &i), 0), EQ(i, 7);
    for (int k = 0; k < 14; k++) {
        int expected_type = e[k].value.p[0];
        EQ(ext_defaults_type(&suite, e[k].key), expected_type);
        EQ(ext_defaults_get_encoded(&suite, e[k].key, &p, &n), 0);
        EQ(n, e[k].value.n);
        CHECK(memcmp(p, e[k].value.p, n) == 0);
        free(p);
    }
    /* Missing keys, of every length the search meets. */
    const char *missing[] = {"", "a", "bool", "bool.trues", "int.mid", "zz", "\xff", "~"};
    for (size_t k = 0; k < sizeof missing / sizeof *missing; k++) {
        EQ(ext_defaults_type(&suite, missing[k]), -ENOENT);
        EQ(ext_defaults_get_bool(&suite, missing[k], &b), -ENOENT);
        EQ(ext_defaults_get_string(&suite, missing[k], &s), -ENOENT);
        EQ(ext_defaults_get_encoded(&suite, missing[k], &p, &n), -ENOENT);
    }
    /* Another type: -EDOM, nothing stored. */
    i = 99;
    EQ(ext_defaults_get_int64(&suite, "double", &i), -EDOM), EQ(i, 99);
    EQ(ext_defaults_get_bool(&suite, "int.max", &b), -EDOM);
    EQ(ext_defaults_get_double(&suite, "string", &d), -EDOM);
    s = NULL;
    EQ(ext_defaults_get_string(&suite, "bytes", &s), -EDOM), CHECK(s == NULL);
    EQ(ext_defaults_get_bytes(&suite, "string", &p, &n), -EDOM);
    EQ(ext_defaults_get_string(&suite, "array", &s), -EDOM);
    EQ(ext_defaults_get_int64(&suite, "dict", &i), -EDOM);
    /* NULL arguments. */
    EQ(ext_defaults_get_bool(NULL, "bool.true", &b), -EINVAL);
    EQ(ext_defaults_get_bool(&suite, NULL, &b), -EINVAL);
    EQ(ext_defaults_get_bool(&suite, "bool.true", NULL), -EINVAL);
    EQ(ext_defaults_get_int64(&suite, "int.max", NULL), -EINVAL);
    EQ(ext_defaults_get_double(&suite, "double", NULL), -EINVAL);
    EQ(ext_defaults_get_string(&suite, "string", NULL), -EINVAL);
    EQ(ext_defaults_get_bytes(&suite, "bytes", &p, NULL), -EINVAL);
    EQ(ext_defaults_get_encoded(&suite, "bytes", NULL, &n), -EINVAL);
    EQ(ext_defaults_type(&suite, NULL), -EINVAL);
    EQ(ext_defaults_keys(&suite, NULL, &n), -EINVAL);

    /* keys(): sorted bytewise, NULL-terminated. */
    char **keys;
    EQ(ext_defaults_keys(&suite, &keys, &n), 0);
    EQ(n, 14);
    for (size_t k = 0; k < n; k++) CHECK(strcmp(keys[k], e[k].key) == 0); /* install sorted e */
    CHECK(keys[n] == NULL);
    CHECK(strcmp(keys[n - 1], "\xc3\xa9t\xc3\xa9") == 0); /* 0xC3 sorts after 'z' */
    ext_defaults_free_keys(keys, n);
    ext_defaults_free_keys(NULL, 0);

    for (int k = 0; k < 14; k++) free(e[k].value.p);

    /* An empty suite. */
    install(map, NULL, 0);
    EQ(ext_defaults_keys(&suite, &keys, &n), 0), EQ(n, 0), CHECK(keys && keys[0] == NULL);
    ext_defaults_free_keys(keys, n);
    EQ(ext_defaults_type(&suite, "a"), -ENOENT);
}

/* --- the encoding rules ------------------------------------------------------------------ */

static int valid(const char *hex) {
    uint8_t bytes[256];
    size_t n = 0;
    for (const char *c = hex; *c; c++) {
        if (*c == ' ') continue;
        unsigned v;
        sscanf(c, "%2x", &v);
        bytes[n++] = (uint8_t)v;
        c++;
    }
    return extd_value_check(bytes, n) == 0;
}

static void check_encoding_rules(void) {
    CHECK(valid("01 00") && valid("01 01") && !valid("01 02") && !valid("01") && !valid("01 01 00"));
    CHECK(valid("02 0000000000000080") && !valid("02 00000000000000") && valid("03 000000000000f87f")); /* NaN is a double */
    CHECK(valid("04 00000000") && valid("04 02000000 c3a9") && !valid("04 01000000 c3") && !valid("04 02000000 c0af"));
    CHECK(!valid("04 03000000 eda080") && !valid("04 05000000 61") && !valid("04 ffffffff 61"));
    CHECK(valid("05 02000000 ff00") && !valid("05 03000000 ff00"));
    CHECK(valid("06 00000000") && valid("06 02000000 0101 0100") && !valid("06 03000000 0101 0100") && !valid("06 ffffffff 0101"));
    CHECK(valid("07 02000000 01000000 61 0101 01000000 62 0100"));                       /* {"a": true, "b": false} */
    CHECK(!valid("07 02000000 01000000 62 0101 01000000 61 0100"));                      /* out of order */
    CHECK(!valid("07 02000000 01000000 61 0101 01000000 61 0100"));                      /* repeated */
    CHECK(valid("07 02000000 01000000 61 0101 02000000 6161 0100"));                     /* a prefix sorts first */
    CHECK(!valid("07 02000000 02000000 6161 0101 01000000 61 0100"));
    CHECK(valid("07 01000000 00000000 0101") && !valid("07 01000000 01000000 ff 0101")); /* "" is a key; keys are UTF-8 */
    CHECK(!valid("") && !valid("00") && !valid("08 00") && !valid("ff"));
    /* Depth: 32 levels, not 33. */
    struct buf b = {0};
    for (int i = 0; i < 31; i++) v_array(&b, 1);
    v_int(&b, 1);
    CHECK(extd_value_check(b.p, b.n) == 0);
    b.n = 0;
    for (int i = 0; i < 32; i++) v_array(&b, 1);
    v_int(&b, 1);
    CHECK(extd_value_check(b.p, b.n) != 0);
    b.n = 0;
    for (int i = 0; i < 31; i++) v_dict(&b, 1), v_key(&b, "k");
    v_dict(&b, 0); /* an empty dictionary at level 32 */
    CHECK(extd_value_check(b.p, b.n) == 0);
    free(b.p);

    size_t n;
    CHECK(extd_valid_key("k", &n) && n == 1);
    CHECK(!extd_valid_key("", &n) && !extd_valid_key("\xff", &n));
    char key[300];
    memset(key, 'k', sizeof key);
    key[255] = 0;
    CHECK(extd_valid_key(key, &n));
    key[255] = 'k', key[256] = 0;
    CHECK(!extd_valid_key(key, &n) && n == 256);
}

/* --- malformed suites -------------------------------------------------------------------- */

/* Every reading call over the suite as it is; each must return what `expect` allows. */
static void read_everything(int allow_ok) {
    const char *keys[] = {"a", "b", "c", "m", "zz", ""};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        bool b;
        int64_t i;
        double d;
        char *s;
        void *p;
        size_t n;
        int rc[] = {ext_defaults_type(&suite, keys[k]), ext_defaults_get_bool(&suite, keys[k], &b), ext_defaults_get_int64(&suite, keys[k], &i),
                    ext_defaults_get_double(&suite, keys[k], &d), ext_defaults_get_string(&suite, keys[k], &s),
                    ext_defaults_get_bytes(&suite, keys[k], &p, &n)};
        for (size_t r = 0; r < sizeof rc / sizeof *rc; r++) {
            if (rc[r] == 0 && r == 4) free(s);
            if (rc[r] == 0 && r == 5) free(p);
            CHECK(rc[r] == -EIO || rc[r] == -ENOENT || rc[r] == -EDOM || (allow_ok && rc[r] >= 0));
        }
        if (ext_defaults_get_encoded(&suite, keys[k], &p, &n) == 0) {
            CHECK(allow_ok && extd_value_check(p, n) == 0);
            free(p);
        }
    }
    char **list;
    size_t count;
    int rc = ext_defaults_keys(&suite, &list, &count);
    CHECK(rc == -EIO || (allow_ok && rc == 0));
    if (rc == 0) ext_defaults_free_keys(list, count);
}

static void check_malformed(void) {
    struct entry e[3] = {{.key = "a"}, {.key = "b"}, {.key = "c"}};
    for (int k = 0; k < 3; k++) v_int(&e[k].value, k);
    uint8_t *area = map + EXTD_HEADER;
    char **list;
    size_t count;
    int64_t i;

    install(map, e, 3);
    EQ(ext_defaults_get_int64(&suite, "b", &i), 0), EQ(i, 1);
    /* The table: an offset past `used`, at its end, into the middle of a length. */
    uint32_t used = 3 * 4 + 3 * (4 + 1 + 4 + 9);
    uint32_t offsets[] = {used, used - 3, used + 1000, 0xFFFFFFFF, 0xFFFFFFF0};
    for (size_t k = 0; k < sizeof offsets / sizeof *offsets; k++) {
        install(map, e, 3);
        set32(area + 4, offsets[k]); /* "b", the binary search's first probe */
        EQ(ext_defaults_get_int64(&suite, "b", &i), -EIO);
        EQ(ext_defaults_keys(&suite, &list, &count), -EIO);
        read_everything(1);
    }
    /* A key length and a value length that leave the area. */
    install(map, e, 3);
    set32(area + 12 + 18, 0xFFFFFFFF);
    EQ(ext_defaults_type(&suite, "b"), -EIO);
    install(map, e, 3);
    set32(area + 12 + 18 + 4 + 1, used); /* b's value length */
    EQ(ext_defaults_type(&suite, "b"), -EIO);
    install(map, e, 3);
    set32(area + 12 + 36 + 4 + 1, 10); /* c's value length: one byte past the end */
    EQ(ext_defaults_type(&suite, "c"), -EIO);
    EQ(ext_defaults_type(&suite, "a"), EXT_DEFAULTS_INTEGER); /* others still read */
    /* The header: `used` past the mapping, `count` more than `used` can hold. */
    install(map, e, 3);
    set32(map + EXTD_USED, EXT_DEFAULTS_MAX_SUITE + 1);
    EQ(ext_defaults_type(&suite, "a"), -EIO), EQ(ext_defaults_keys(&suite, &list, &count), -EIO);
    install(map, e, 3);
    set32(map + EXTD_COUNT, used / 12 + 1);
    EQ(ext_defaults_type(&suite, "a"), -EIO), EQ(ext_defaults_keys(&suite, &list, &count), -EIO);
    install(map, e, 3);
    set32(map + EXTD_USED, 20); /* the area cut short: the entries leave it */
    EQ(ext_defaults_type(&suite, "a"), -EIO);
    /* A malformed value reads -EIO; the keys still list. */
    install(map, e, 3);
    area[12 + 18 + 4 + 1 + 4] = 9; /* b's type byte */
    EQ(ext_defaults_type(&suite, "b"), -EIO), EQ(ext_defaults_get_int64(&suite, "b", &i), -EIO);
    EQ(ext_defaults_keys(&suite, &list, &count), 0), EQ(count, 3), ext_defaults_free_keys(list, count);
    /* Keys out of order, empty, holding a NUL, not UTF-8: keys() refuses them. */
    install(map, e, 3);
    area[12 + 4] = 'c'; /* "c", "b", "c" */
    EQ(ext_defaults_keys(&suite, &list, &count), -EIO);
    install(map, e, 3);
    area[12 + 18 + 4] = 0;
    EQ(ext_defaults_keys(&suite, &list, &count), -EIO);
    install(map, e, 3);
    area[12 + 36 + 4] = 0xff;
    EQ(ext_defaults_keys(&suite, &list, &count), -EIO);
    install(map, e, 3);
    set32(area + 12, 0); /* a's key length 0: its "key" then reads its value length */
    read_everything(1);
    EQ(ext_defaults_keys(&suite, &list, &count), -EIO);
    /* The mapping itself. */
    CHECK(extd_mapping_check(map, EXTD_MAPPING_SIZE) == 0);
    CHECK(extd_mapping_check(map, EXTD_HEADER - 1) == -EIO && extd_mapping_check(map, EXTD_MAPPING_SIZE + 8) == -EIO);
    map[7] = '2';
    CHECK(extd_mapping_check(map, EXTD_MAPPING_SIZE) == -EIO);
    map[7] = '1';
    /* A smaller mapping (header only): every offset is checked against it, not the largest. */
    uint8_t *small = map + EXTD_MAPPING_SIZE - EXTD_HEADER; /* its last byte ends at the guard page */
    memcpy(small, EXTD_MAGIC, 8);
    memset(small + 8, 0, EXTD_HEADER - 8);
    ext_defaults tiny = {.map = small, .size = EXTD_HEADER};
    EQ(ext_defaults_type(&tiny, "a"), -ENOENT);
    set32(small + EXTD_USED, 12), set32(small + EXTD_COUNT, 1);
    EQ(ext_defaults_type(&tiny, "a"), -EIO), EQ(ext_defaults_keys(&tiny, &list, &count), -EIO);

    /* Random garbage in the header and the area: never a fault. */
    srand(12345);
    for (int round = 0; round < 20000; round++) {
        install(map, e, 3);
        int edits = 1 + rand() % 6;
        for (int k = 0; k < edits; k++) {
            switch (rand() % 4) {
            case 0: set32(map + EXTD_USED, (uint32_t)rand() % (used * 2)); break;
            case 1: set32(map + EXTD_COUNT, (uint32_t)rand() % 8); break;
            case 2: set32(area + (rand() % used & ~3), (uint32_t)rand() % (used + 16)); break;
            default: area[rand() % used] = (uint8_t)rand(); break;
            }
        }
        read_everything(1);
    }
    /* The end of the mapping: a suite whose area fills it, the last value ending at its last
     * byte (which the guard page follows). */
    static char filler[EXT_DEFAULTS_MAX_VALUE];
    memset(filler, 'f', sizeof filler);
    struct entry full[5] = {{.key = "k1"}, {.key = "k2"}, {.key = "k3"}, {.key = "k4"}, {.key = "k5"}};
    size_t total = 5 * 4;
    for (int k = 0; k < 4; k++) {
        v_run(&full[k].value, 5, filler, EXT_DEFAULTS_MAX_VALUE - 5);
        total += 4 + 2 + 4 + full[k].value.n;
    }
    v_run(&full[4].value, 5, filler, EXT_DEFAULTS_MAX_SUITE - total - (4 + 2 + 4) - 5);
    install(map, full, 5);
    EQ(ext_defaults_type(&suite, "k5"), EXT_DEFAULTS_BYTES);
    EQ(ext_defaults_keys(&suite, &list, &count), 0), EQ(count, 5), ext_defaults_free_keys(list, count);
    set32(map + EXTD_USED, EXT_DEFAULTS_MAX_SUITE - 1); /* k5 now leaves the area by one byte */
    EQ(ext_defaults_type(&suite, "k5"), -EIO);
    for (int k = 0; k < 5; k++) free(full[k].value.p);
    for (int k = 0; k < 3; k++) free(e[k].value.p);
}

/* A sequence that stays odd (a writer that died mid-write): a read gives up, -EIO. */
static void check_stuck(void) {
    install(map, NULL, 0);
    set32(map + EXTD_SEQUENCE, 7);
    char **list;
    size_t count;
    EQ(ext_defaults_type(&suite, "a"), -EIO);
    EQ(ext_defaults_keys(&suite, &list, &count), -EIO);
    set32(map + EXTD_SEQUENCE, 8);
    EQ(ext_defaults_type(&suite, "a"), -ENOENT);
}

/* --- readers against a writer ------------------------------------------------------------ */

static volatile int stop;
static long generations, reads[4];

/* Generation g of the suite: "n" an integer g; "s" a string of (g % 700) + 1 copies of the letter
 * 'a' + g % 26; "b" bytes of (g * 7) % 400 bytes, each that length's low byte; "d" a dictionary
 * {"neg": -g, "pos": g}; "o", present in even generations only, a bool; "p" + (g % 5) filler
 * keys, to move the table. Every value is checkable alone. */
static size_t generation(uint8_t *area, long g, uint32_t *count) {
    struct entry e[10] = {{.key = "n"}, {.key = "s"}, {.key = "b"}, {.key = "d"}};
    size_t n = 4;
    v_int(&e[0].value, g);
    size_t sl = (size_t)(g % 700) + 1;
    char *s = malloc(sl + 1);
    memset(s, 'a' + (int)(g % 26), sl);
    s[sl] = 0;
    v_string(&e[1].value, s);
    free(s);
    size_t bl = (size_t)(g * 7 % 400);
    uint8_t bytes[400];
    memset(bytes, (int)(bl & 0xff), bl);
    v_run(&e[2].value, 5, bytes, bl);
    v_dict(&e[3].value, 2), v_key(&e[3].value, "neg"), v_int(&e[3].value, -g), v_key(&e[3].value, "pos"), v_int(&e[3].value, g);
    if (g % 2 == 0) e[n].key = "o", v_bool(&e[n++].value, 1);
    static const char *fill[] = {"p0", "p1", "p2", "p3", "p4"};
    for (long k = 0; k < g % 5; k++) e[n].key = fill[k], v_string(&e[n++].value, "filler");
    size_t used = build_area(area, e, n);
    for (size_t k = 0; k < n; k++) free(e[k].value.p);
    *count = (uint32_t)n;
    return used;
}

/* The daemon's write: sequence odd (relaxed store, release fence), the area rewritten (first
 * scribbled over, so that a torn read meets garbage offsets), then even (release store). */
static void *writer(void *unused) {
    (void)unused;
    static uint8_t area[EXT_DEFAULTS_MAX_SUITE];
    uint64_t *sequence = (uint64_t *)(void *)(map + EXTD_SEQUENCE);
    for (long g = 1; !stop; g++) {
        uint32_t count;
        size_t used = generation(area, g, &count);
        uint64_t s = __atomic_load_n(sequence, __ATOMIC_RELAXED);
        __atomic_store_n(sequence, s + 1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        memset(map + EXTD_HEADER, (int)(g * 37 & 0xff), used + 64);
        set32(map + EXTD_USED, (uint32_t)(g * 131 % EXT_DEFAULTS_MAX_SUITE));
        set32(map + EXTD_COUNT, (uint32_t)g);
        memcpy(map + EXTD_HEADER, area, used);
        set32(map + EXTD_USED, (uint32_t)used);
        set32(map + EXTD_COUNT, count);
        __atomic_store_n(sequence, s + 2, __ATOMIC_RELEASE);
        generations = g;
    }
    return NULL;
}

static int64_t decode_int(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return (int64_t)v;
}

static void *reader_thread(void *arg) {
    long which = (long)arg, count = 0;
    while (!stop) {
        switch ((which + count) % 4) {
        case 0: {
            char *s;
            int rc = ext_defaults_get_string(&suite, "s", &s);
            CHECK(rc == 0);
            size_t n = strlen(s);
            CHECK(n >= 1 && n <= 700);
            for (size_t i = 1; i < n; i++) CHECK(s[i] == s[0]);
            free(s);
            break;
        }
        case 1: {
            void *p;
            size_t n;
            CHECK(ext_defaults_get_bytes(&suite, "b", &p, &n) == 0);
            for (size_t i = 0; i < n; i++) CHECK(((uint8_t *)p)[i] == (uint8_t)(n & 0xff));
            free(p);
            int64_t g;
            CHECK(ext_defaults_get_int64(&suite, "n", &g) == 0 && g >= 0);
            bool o;
            int rc = ext_defaults_get_bool(&suite, "o", &o);
            CHECK(rc == -ENOENT || (rc == 0 && o));
            break;
        }
        case 2: {
            void *p;
            size_t n;
            CHECK(ext_defaults_get_encoded(&suite, "d", &p, &n) == 0);
            const uint8_t *v = p; /* 07 02000000 03000000 "neg" 02 -g 03000000 "pos" 02 g */
            CHECK(n == 5 + 7 + 9 + 7 + 9 && v[0] == 7 && memcmp(v + 5, "\x03\x00\x00\x00neg\x02", 8) == 0);
            CHECK(decode_int(v + 13) == -decode_int(v + 13 + 9 + 7));
            free(p);
            break;
        }
        default: {
            char **keys;
            size_t n;
            CHECK(ext_defaults_keys(&suite, &keys, &n) == 0);
            /* b, d, n, [o], [p0..p3], s: "o" and the fillers as one generation has them */
            CHECK(n >= 4 && strcmp(keys[0], "b") == 0 && strcmp(keys[1], "d") == 0 && strcmp(keys[2], "n") == 0);
            CHECK(strcmp(keys[n - 1], "s") == 0);
            size_t fillers = n - 4 - (strcmp(keys[3], "o") == 0);
            CHECK(fillers <= 4);
            for (size_t k = 0; k < fillers; k++) CHECK(keys[n - 1 - fillers + k][0] == 'p' && keys[n - 1 - fillers + k][1] == '0' + (char)k);
            ext_defaults_free_keys(keys, n);
            break;
        }
        }
        count++;
    }
    reads[which] = count;
    return NULL;
}

static void check_concurrent(double seconds) {
    static uint8_t area[EXT_DEFAULTS_MAX_SUITE];
    uint32_t count;
    install(map, NULL, 0);
    size_t used = generation(area, 0, &count);
    memcpy(map + EXTD_HEADER, area, used);
    set32(map + EXTD_USED, (uint32_t)used), set32(map + EXTD_COUNT, count);
    pthread_t w, r[4];
    stop = 0;
    pthread_create(&w, NULL, writer, NULL);
    for (long k = 0; k < 4; k++) pthread_create(&r[k], NULL, reader_thread, (void *)k);
    struct timespec pause = {(time_t)seconds, (long)((seconds - (long)seconds) * 1e9)};
    nanosleep(&pause, NULL);
    stop = 1;
    pthread_join(w, NULL);
    for (int k = 0; k < 4; k++) pthread_join(r[k], NULL);
    long total = reads[0] + reads[1] + reads[2] + reads[3];
    printf("concurrent: %ld generations written, %ld reads checked\n", generations, total);
    CHECK(generations > 1000 && total > 1000);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    map = guarded_mapping();
    suite = (ext_defaults){.map = map, .size = EXTD_MAPPING_SIZE};
    check_getters();
    check_encoding_rules();
    check_malformed();
    check_stuck();
    check_concurrent(seconds);
    printf("ok: %ld checks\n", checks);
    return 0;
}
