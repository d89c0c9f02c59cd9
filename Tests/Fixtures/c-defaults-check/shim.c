/* shim: libExtensionRuntimeC's sources plus two functions for check_python.py (run.sh builds
 * it as libshim.so, without the export list): a defaults handle over a mapping built by the
 * test instead of one extensiond handed over, and the C encoding check. */
#define _GNU_SOURCE
#include "defaults.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A handle over a copy of `size` bytes (a whole suite mapping: header and area) in a mapping of
 * its own, as ext_defaults_open makes of extensiond's (ext_defaults_close unmaps it). */
__attribute__((visibility("default"))) ext_defaults *shim_handle(const char *suite, const uint8_t *bytes, size_t size) {
    ext_defaults *d = calloc(1, sizeof *d);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!d || p == MAP_FAILED || extd_mapping_check(bytes, size) != 0) return NULL;
    memcpy(p, bytes, size);
    d->map = p;
    d->size = size;
    d->refs = 1;
    strncpy(d->suite, suite, sizeof d->suite - 1);
    return d;
}

/* extd_value_check: 0 when `length` bytes at `value` are one well-formed value. */
__attribute__((visibility("default"))) int shim_value_check(const uint8_t *value, size_t length) {
    return extd_value_check(value, length);
}
