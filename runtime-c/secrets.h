/*
 * secrets.h: the secrets API (include/extension_runtime.h, ext_secret_*), private to
 * libExtensionRuntimeC. secrets.c checks the caller's arguments, builds the messages and turns a
 * secretItems into ext_secret_item; the round trip itself is the runtime's (runtime.c), which
 * also zeroes its send and receive buffers of these messages.
 */
#ifndef EXTENSION_RUNTIME_SECRETS_H
#define EXTENSION_RUNTIME_SECRETS_H

#include "extension_runtime.h"
#include "wire.h"

#include <stddef.h>

/* runtime.c: sends `m` (a secret kind; its tag is set here) and waits for its answer. With
 * `items` NULL, the answer is an *answer*: 0, or its code's errno. Otherwise a secretItems is
 * expected, turned into *items and *count by exts_items (with the items' data when `with_data`);
 * an *answer* then gives its code's errno (-EIO for code 0). -ENOTCONN, -EAGAIN as the other
 * round trips. */
int exts_round_trip(struct ext_wire_message *m, int with_data, ext_secret_item **items, size_t *count);

/* secrets.c: the items of the decoded secretItems `m`, as a malloc'ed array of *count items
 * (with their data when `with_data`, else none: the first item alone when `with_data`, as the
 * daemon sends only it). 0, -ENOMEM, or -EIO for items the decoder would refuse. */
int exts_items(const struct ext_wire_message *m, int with_data, ext_secret_item **items, size_t *count);

#endif
