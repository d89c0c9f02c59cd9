/*
 * wire.h: the runtime channel's messages (docs/protocol.md), encoded and decoded by the C
 * runtime. Private to libExtensionRuntimeC; the Swift codec (Sources/ExtensionProtocol) is the
 * reference, and the cross test (`CRuntimeTests.theCCodecAgreesWithTheSwiftReference`,
 * Tests/IntegrationTests/CRuntimeTests.swift) checks that both
 * accept the same datagrams and produce the same bytes.
 */
#ifndef EXTENSION_RUNTIME_WIRE_H
#define EXTENSION_RUNTIME_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define EXT_WIRE_VERSION 1
#define EXT_WIRE_HEADER 8
#define EXT_WIRE_MAX_MESSAGE 65536
#define EXT_WIRE_MAX_IDENTIFIER 255
#define EXT_WIRE_MAX_REASON 1024
#define EXT_WIRE_MAX_TEXT 4096
#define EXT_WIRE_MAX_PAYLOAD 60000
#define EXT_WIRE_MAX_URL 2048
#define EXT_WIRE_MAX_DEFAULTS_KEY 255
#define EXT_WIRE_MAX_DEFAULTS_VALUE 60000
#define EXT_WIRE_MAX_SECRET 60000          /* a secret item's data */
#define EXT_WIRE_MAX_SECRET_PROTOCOL 32    /* an internet password's protocol */
#define EXT_WIRE_MAX_SECRET_PATH 1024      /* an internet password's path */
#define EXT_WIRE_MAX_SECRET_ITEMS 64       /* items in one secretItems (WireLimits.maxSecretItems) */
#define EXT_WIRE_MAX_FAILURE_CODE 14 /* FailureCode.itemNotFound, the last code */
#define EXT_WIRE_MAX_TRANSFER_URL 8192     /* a transfer's URL (WireLimits.maxTransferURL) */
#define EXT_WIRE_MAX_TRANSFER_PATH 1024    /* a transfer's path in its shared container */
#define EXT_WIRE_MAX_TRANSFER_EVENT_PATH (1024 + 4096) /* an event's path: absolute */
#define EXT_WIRE_MAX_TRANSFER_TEXT 512     /* an event's text */
#define EXT_WIRE_MAX_TRANSFER_EVENTS 64    /* events in one transferEvents (WireLimits.maxTransferEvents) */

/* The message kinds of the runtime channel: runtime -> daemon, then daemon -> runtime. */
enum ext_wire_kind {
    EXT_WIRE_READY = 64,
    EXT_WIRE_ACQUIRE = 65,
    EXT_WIRE_RELEASE = 66,
    EXT_WIRE_EXPIRE_RECEIVED = 67,
    EXT_WIRE_COMPLETE = 68,
    EXT_WIRE_CANCEL = 69,
    EXT_WIRE_OBSERVE = 70,
    EXT_WIRE_REFRESH_DONE = 71,
    EXT_WIRE_OPEN_URL = 72,
    EXT_WIRE_SUITE_OPEN = 73,
    EXT_WIRE_SUITE_WRITE = 74,
    EXT_WIRE_SECRET_ADD = 75,
    EXT_WIRE_SECRET_COPY = 76,
    EXT_WIRE_SECRET_UPDATE = 77,
    EXT_WIRE_SECRET_DELETE = 78,
    EXT_WIRE_TRANSFER_CREATE = 79,
    EXT_WIRE_TRANSFER_CANCEL = 80,
    EXT_WIRE_TRANSFER_CLAIM = 81,
    EXT_WIRE_TRANSFER_HANDLED = 82,
    EXT_WIRE_DELIVER = 96,
    EXT_WIRE_ENDED = 97,
    EXT_WIRE_GRANTED = 98,
    EXT_WIRE_DENIED = 99,
    EXT_WIRE_EXPIRE = 100,
    EXT_WIRE_NOTIFY = 101,
    EXT_WIRE_REFRESH = 102,
    EXT_WIRE_ANSWER = 103,
    EXT_WIRE_SUITE_CHANGED = 104,
    EXT_WIRE_SECRET_ITEMS = 105,
    EXT_WIRE_TRANSFER_CREATED = 106,
    EXT_WIRE_TRANSFER_EVENTS = 107,
};

/* The bits of a secret attributes' `fields`: which attributes are present. */
enum ext_wire_secret_field {
    EXT_WIRE_SECRET_SERVICE = 1,
    EXT_WIRE_SECRET_ACCOUNT = 2,
    EXT_WIRE_SECRET_SERVER = 4,
    EXT_WIRE_SECRET_PROTOCOL = 8,
    EXT_WIRE_SECRET_PORT = 16,
    EXT_WIRE_SECRET_PATH = 32,
    EXT_WIRE_SECRET_LABEL = 64,
};

/* Bytes of a field (when decoding, they point into the datagram). */
struct ext_wire_span {
    const uint8_t *data;
    size_t length;
};

/* A secret item's attributes, or a query: class u8 (0 any, 1 generic password, 2 internet
 * password), group string(255), fields u8 (the bits above; 0x80 is refused), then each field
 * present, in this order: service string(255), account string(255), server string(255),
 * protocol string(32), port u16, path string(1024), label string(255). A field whose bit is
 * clear is neither encoded nor set when decoding (its span is then empty, its port 0). */
struct ext_wire_secret_attributes {
    uint8_t item_class;
    uint8_t fields;
    uint16_t port;
    struct ext_wire_span group, service, account, server, protocol, path, label;
};

/* One item of a secretItems: its attributes, then hasData u8 and data bytes(60000) when 1. */
struct ext_wire_secret_item {
    struct ext_wire_secret_attributes attributes;
    uint8_t has_data;
    struct ext_wire_span data;
};
/* A background transfer's names and request: session string(255), group string(255) (every
 * transfer kind but transferCancel and transferCreated); transferCreate then: method u8 (1
 * download, 2 upload PUT, 3 upload POST), url string(8192), path string(1024), discretionary u8
 * (0 or 1). */
struct ext_wire_transfer {
    struct ext_wire_span session, group, url, path;
    uint8_t method, discretionary;
};

/* One event of a transferEvents: sequence u64, task u64, kind u8 (1 progress, 2 completed, 3
 * failed), bytes u64, total u64 (an int64, -1 unknown), status u16, path string(1024 + 4096),
 * domain string(255), code u32 (an int32), text string(512). */
struct ext_wire_transfer_event {
    uint64_t sequence, task, bytes;
    int64_t total;
    uint8_t kind;
    uint16_t status;
    int32_t code;
    struct ext_wire_span path, domain, text;
};

/* One decoded (or to-be-encoded) message. Fields a kind does not carry are 0.
 *   tag:    acquire, granted, denied, openURL, suiteOpen, suiteWrite, answer, the secret kinds,
 *           the transfer kinds but transferEvents
 *   id:     the assertion, request or refresh id (release, expireReceived, complete, cancel,
 *           refreshDone, deliver, ended, granted, expire, refresh); the task (transferCancel,
 *           transferCreated); `through` (transferHandled)
 *   answer: refreshDone (0 new data, 1 no data, 2 failed, 3 unsupported)
 *   code:   answer (0 success, else a failure code, 1...EXT_WIRE_MAX_FAILURE_CODE)
 *   data, length: the string (acquire, cancel, observe, denied, notify; the url of openURL;
 *           the suite of suiteOpen, suiteWrite and suiteChanged; the text of answer) or the
 *           payload (complete)
 *   key, key_length, has_value, value, value_length: suiteWrite (value only when has_value)
 *   attributes: secretAdd (the item), secretCopy, secretUpdate, secretDelete (the query)
 *   has_value, value, value_length: also the data of secretAdd (has_value is 1 when decoded,
 *           ignored when encoding: the data is always there) and of secretUpdate (hasData)
 *   return_data, all: secretCopy (0 or 1 each)
 *   has_label, label, label_length: secretUpdate (the new label, only when has_label)
 *   count, items, items_length: secretItems: 1...EXT_WIRE_MAX_SECRET_ITEMS items, encoded one
 *           after the other in `items_length` bytes (read them with ext_wire_secret_item; the
 *           encoder checks them the same way, then copies them)
 * When decoding, the pointers point into the datagram. */
struct ext_wire_message {
    uint8_t kind;
    uint32_t tag;
    uint64_t id;
    uint8_t answer;
    uint16_t code;
    const uint8_t *data;
    size_t length;
    const uint8_t *key;
    size_t key_length;
    uint8_t has_value;
    const uint8_t *value;
    size_t value_length;
    struct ext_wire_secret_attributes attributes;
    uint8_t return_data, all, has_label;
    const uint8_t *label;
    size_t label_length;
    uint16_t count;
    const uint8_t *items;
    size_t items_length;
    struct ext_wire_transfer transfer;
};

/* Decodes one datagram of `size` bytes. Returns 0, or -1 when it is refused (short, too large,
 * another version, a kind outside the runtime channel, reserved bits set, a length mismatch, a
 * truncated or over-long field, invalid UTF-8, an invalid value, trailing bytes). */
int ext_wire_decode(const uint8_t *datagram, size_t size, struct ext_wire_message *out);

/* Encodes `message` into `buffer` (`capacity` bytes). Returns the datagram's length, or -1
 * for an unknown kind, a field over its limit, a string that is not UTF-8, or too small a
 * buffer. */
long ext_wire_encode(const struct ext_wire_message *message, uint8_t *buffer, size_t capacity);

/* Reads the next item of a secretItems' `items` (a decoded or to-be-encoded message's), from
 * *cursor (*left bytes remaining), which it advances. 0, or -1 when the bytes there are not one
 * item (what the decoder refuses). */
int ext_wire_secret_item(const uint8_t **cursor, size_t *left, struct ext_wire_secret_item *out);

/* Reads the next event of a transferEvents' `items`, as ext_wire_secret_item reads an item. 0, or
 * -1 when the bytes there are not one event (what the decoder refuses). */
int ext_wire_transfer_event(const uint8_t **cursor, size_t *left, struct ext_wire_transfer_event *out);

/* Whether `length` bytes at `bytes` are well-formed UTF-8 (as Swift's String(validating:)). */
int ext_wire_valid_utf8(const uint8_t *bytes, size_t length);

#endif
