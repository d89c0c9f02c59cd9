/*
 * defaults.h: the reading side of shared defaults suites (docs/defaults.md), private to
 * libExtensionRuntimeC: the suite mapping's lock-free reader and the value decoder
 * (defaults.c), with no system call and no dependency on the runtime channel, so that
 * Tests/Fixtures/c-defaults-check tests them over mappings built in memory. Opening, writing
 * and change handlers are the runtime's (runtime.c).
 */
#ifndef EXTENSION_RUNTIME_DEFAULTS_H
#define EXTENSION_RUNTIME_DEFAULTS_H

#include "extension_runtime.h"

#include <stddef.h>
#include <stdint.h>

#ifndef API
#define API __attribute__((visibility("default")))
#endif

/* The mapping (docs/defaults.md, "The mapping"). */
#define EXTD_MAGIC "EXTDFLT1"
#define EXTD_SEQUENCE 8 /* u64, odd while the daemon rewrites the suite */
#define EXTD_USED 16    /* u32, bytes of the area in use */
#define EXTD_COUNT 20   /* u32, entries */
#define EXTD_HEADER 64  /* where the area starts */
#define EXTD_MAPPING_SIZE (EXTD_HEADER + EXT_DEFAULTS_MAX_SUITE)
#define EXTD_MAX_DEPTH 32
/* Torn or odd reads tried before a read gives up with -EIO (a writer that never finishes). */
#define EXTD_MAX_RETRIES 1000000

struct extd_handler;

/* An open suite. `map` and `size` are set before the handle is shared and never change until
 * ext_defaults_close; `map` is 8-byte aligned (the sequence is loaded atomically). The other
 * fields are the runtime's, under its lock. */
struct ext_defaults {
    const uint8_t *map;
    size_t size;
    char suite[EXT_DEFAULTS_MAX_KEY + 1]; /* a suite name is at most 255 bytes, as a key */
    struct extd_handler *handlers;        /* ext_defaults_on_change, in the order added */
    struct ext_defaults *next;            /* in the runtime's list of open suites */
    unsigned refs;                        /* 1 while open, plus 1 per change call due */
    unsigned calling;                     /* handler calls running */
    int closed;
};

/* Whether `size` bytes at `map` can be read as a suite: at least the header, at most
 * EXTD_MAPPING_SIZE, with the magic. 0 or -EIO. */
int extd_mapping_check(const uint8_t *map, size_t size);

/* Finds `key` (`key_length` bytes) under the seqlock and copies its value's encoding out:
 * 0 with the value's length in *length, its bytes in `out` when *length <= capacity (else
 * nothing is copied: call again with room for *length), -ENOENT when there is no such key,
 * -EIO when the suite is malformed (as of a consistent read) or kept changing. */
int extd_find(const uint8_t *map, size_t size, const uint8_t *key, size_t key_length, uint8_t *out, size_t capacity,
              size_t *length);

/* Whether `length` bytes at `value` are one well-formed defaults value (the encoding rules:
 * types, lengths, UTF-8, sorted unique dictionary keys, depth, no trailing byte). 0 or -1. */
int extd_value_check(const uint8_t *value, size_t length);

/* Whether `key` may name an entry: 1 to EXT_DEFAULTS_MAX_KEY bytes of UTF-8 (a C string holds
 * no NUL). Its length in *length (also when it is refused). 1 or 0. */
int extd_valid_key(const char *key, size_t *length);

#endif
