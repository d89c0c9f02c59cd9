/* c-wire: the C runtime's codec (runtime-c/wire.c) as a filter, for the cross test against the
 * Swift reference (Tests/IntegrationTests/CRuntimeTests.swift).
 *
 * Each line of standard input is one datagram in hexadecimal (an empty line: no bytes). For
 * each, one line of output: "refused" when ext_wire_decode refuses it, else the datagram
 * ext_wire_encode makes of the decoded message, in hexadecimal. */
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int nibble(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int main(void) {
    size_t capacity = 2 * (EXT_WIRE_MAX_MESSAGE + 16) + 2;
    char *line = malloc(capacity * 2);
    uint8_t *datagram = malloc(capacity), *encoded = malloc(EXT_WIRE_MAX_MESSAGE);
    if (!line || !datagram || !encoded) return 1;
    while (fgets(line, (int)(capacity * 2), stdin)) {
        size_t n = strcspn(line, "\n"), size = 0;
        for (size_t i = 0; i + 1 < n; i += 2) datagram[size++] = (uint8_t)(nibble(line[i]) << 4 | nibble(line[i + 1]));
        struct ext_wire_message m;
        long length;
        if (ext_wire_decode(datagram, size, &m) != 0 || (length = ext_wire_encode(&m, encoded, EXT_WIRE_MAX_MESSAGE)) < 0) {
            puts("refused");
            continue;
        }
        for (long i = 0; i < length; i++) printf("%02x", encoded[i]);
        putchar('\n');
    }
    return 0;
}
