/* extensiond-transfer: the transfer worker of extensiond (docs/transfers.md, "The worker").
 *
 * It performs the HTTP(S) downloads and uploads of background transfers for the daemon, in a
 * process of its own: under a uid of its own and the extensions' sandbox, with the host's
 * network, and no file but the descriptors the daemon hands it. It is started by the daemon
 * with fd 3 a SOCK_SEQPACKET socket to it, and exits as soon as that socket closes.
 *
 * One sd-event loop drives libcurl's multi interface with curl_multi_socket_action (as
 * systemd's importd does): libcurl's sockets are sd-event I/O sources, its timeout one time
 * source. Bodies are written with pwrite(2) straight from libcurl's buffer: nothing grows with
 * the size of a transfer. Progress is sent at most every 250 ms per task.
 *
 * Messages (little-endian; strings are a u16 length and their bytes), one per datagram:
 *   daemon → worker  START  1: u64 task, u8 method (1 GET, 2 PUT, 3 POST), u64 offset,
 *                              u64 upload_size, u32 stall_seconds, str url, str if_range;
 *                              the file's descriptor attached (SCM_RIGHTS)
 *                    CANCEL 2: u64 task
 *   worker → daemon  HEADERS  10: u64 task, u32 status, u8 restarted, i64 total, str etag,
 *                                 str last_modified (the final answer's)
 *                    PROGRESS 11: u64 task, u64 done, i64 total
 *                    DONE     12: u64 task, u32 status, i32 curl_code (0 completed, -1 refused
 *                                 by the worker), u64 done, str error
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

#define DAEMON_FD 3
#define MAX_URL 8192
#define PROGRESS_USEC 250000ULL
#define BUFFER_SIZE (256 * 1024)
#define WRITEBACK_STEP (8ULL << 20)
#define MAX_VALIDATOR 4096

enum { START = 1, CANCEL = 2, HEADERS = 10, PROGRESS = 11, DONE = 12 };

struct task {
    uint64_t id;
    CURL *easy;
    int fd;
    int method;
    uint64_t offset;      /* where the download was asked to resume */
    uint64_t position;    /* the next byte written (download) or read (upload) */
    uint64_t upload_size;
    struct curl_slist *headers;
    char error[CURL_ERROR_SIZE];
    /* The response being received: its status and validators, until its headers end. */
    long status;
    int redirect;         /* a 3xx with a Location: libcurl follows it */
    char etag[MAX_VALIDATOR + 1], last_modified[256];
    int64_t content_length;
    int64_t range_start, range_total; /* Content-Range: bytes START-END/TOTAL (-1: absent) */
    int final_headers;    /* HEADERS sent: the final answer's body follows */
    int write_body;       /* the final answer is 2xx: its body goes to the file */
    int64_t total;
    /* What the worker itself found wrong (a short write, a wrong range): ends the attempt. */
    int local_code;
    char local_error[256];
    uint64_t synced;      /* the file's bytes whose writeback was started (sync_file_range) */
    uint64_t progress_sent_usec, progress_sent_value;
    int progress_pending;
    struct task *next;
};

static sd_event *event;
static CURLM *multi;
static sd_event_source *curl_timer, *flush_timer;
static struct task *tasks;
static const char *ca_file, *ca_path;
/* Whether connections to loopback and link-local addresses are allowed
 * (EXTENSIOND_TRANSFER_ALLOW_LOOPBACK=1): by default they are refused, so that no extension
 * reaches the host's own services (or a cloud's metadata address) through the worker. */
static int allow_loopback;

static void say(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("extensiond-transfer: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
}

/* ---- Messages ---- */

struct out {
    uint8_t data[8192];
    size_t length;
};

static void put(struct out *o, const void *p, size_t n) {
    if (o->length + n > sizeof o->data) n = sizeof o->data - o->length;
    memcpy(o->data + o->length, p, n);
    o->length += n;
}
static void put8(struct out *o, uint8_t v) { put(o, &v, 1); }
static void put32(struct out *o, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(o, b, 4);
}
static void put64(struct out *o, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(o, b, 8);
}
static void putstr(struct out *o, const char *s) {
    size_t n = strlen(s);
    if (n > 4096) n = 4096;
    uint8_t b[2] = {(uint8_t)n, (uint8_t)(n >> 8)};
    put(o, b, 2);
    put(o, s, n);
}

static void send_to_daemon(const struct out *o) {
    ssize_t n;
    do n = send(DAEMON_FD, o->data, o->length, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0) _exit(0); /* the daemon is gone */
}

static void send_headers(struct task *t, int restarted) {
    struct out o = {.length = 0};
    put8(&o, HEADERS), put64(&o, t->id), put32(&o, (uint32_t)t->status), put8(&o, (uint8_t)restarted), put64(&o, (uint64_t)t->total);
    putstr(&o, t->etag), putstr(&o, t->last_modified);
    send_to_daemon(&o);
}

static void send_progress(struct task *t, uint64_t now) {
    struct out o = {.length = 0};
    put8(&o, PROGRESS), put64(&o, t->id), put64(&o, t->position), put64(&o, (uint64_t)t->total);
    send_to_daemon(&o);
    t->progress_sent_usec = now;
    t->progress_sent_value = t->position;
    t->progress_pending = 0;
}

static void send_done(uint64_t id, long status, int code, uint64_t done, const char *error) {
    struct out o = {.length = 0};
    put8(&o, DONE), put64(&o, id), put32(&o, (uint32_t)status), put32(&o, (uint32_t)code), put64(&o, done), putstr(&o, error);
    send_to_daemon(&o);
}

struct in {
    const uint8_t *data;
    size_t length, at;
    int bad;
};

static uint64_t take(struct in *in, size_t n) {
    uint64_t v = 0;
    if (in->length - in->at < n) {
        in->bad = 1;
        return 0;
    }
    for (size_t i = 0; i < n; i++) v |= (uint64_t)in->data[in->at + i] << (8 * i);
    in->at += n;
    return v;
}

/* A string of the message as a new C string (NULL when short, or when it holds a NUL). */
static char *takestr(struct in *in, size_t limit) {
    size_t n = (size_t)take(in, 2);
    if (in->bad || n > limit || in->length - in->at < n || memchr(in->data + in->at, 0, n)) {
        in->bad = 1;
        return NULL;
    }
    char *s = strndup((const char *)in->data + in->at, n);
    in->at += n;
    if (!s) in->bad = 1;
    return s;
}

/* ---- Progress ---- */

/* The loop's time (for libcurl's timer). */
static uint64_t now_usec(void) {
    uint64_t now = 0;
    sd_event_now(event, CLOCK_MONOTONIC, &now);
    return now;
}

/* The clock's time now (for progress: 250 ms between two sends, measured when they are sent). */
static uint64_t mono_usec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

static int on_flush(sd_event_source *s, uint64_t usec, void *userdata);

/* Sends `t`'s progress now if the last was 250 ms ago, else once the flush timer fires. */
static void progressed(struct task *t) {
    if (t->position == t->progress_sent_value) return;
    uint64_t now = mono_usec();
    if (now - t->progress_sent_usec >= PROGRESS_USEC) return send_progress(t, now);
    if (t->progress_pending) return;
    t->progress_pending = 1;
    uint64_t at = t->progress_sent_usec + PROGRESS_USEC;
    if (!flush_timer) {
        if (sd_event_add_time(event, &flush_timer, CLOCK_MONOTONIC, at, 10000, on_flush, NULL) < 0) flush_timer = NULL;
        return;
    }
    uint64_t armed = 0;
    int enabled = 0;
    sd_event_source_get_enabled(flush_timer, &enabled);
    sd_event_source_get_time(flush_timer, &armed);
    if (!enabled || at < armed) {
        sd_event_source_set_time(flush_timer, at);
        sd_event_source_set_enabled(flush_timer, SD_EVENT_ONESHOT);
    }
}

static int on_flush(sd_event_source *s, uint64_t usec, void *userdata) {
    (void)s, (void)usec, (void)userdata;
    uint64_t now = mono_usec(), next = 0;
    for (struct task *t = tasks; t; t = t->next) {
        if (!t->progress_pending) continue;
        if (now - t->progress_sent_usec >= PROGRESS_USEC) send_progress(t, now);
        else if (!next || t->progress_sent_usec + PROGRESS_USEC < next) next = t->progress_sent_usec + PROGRESS_USEC;
    }
    if (next) {
        sd_event_source_set_time(flush_timer, next);
        sd_event_source_set_enabled(flush_timer, SD_EVENT_ONESHOT);
    }
    return 0;
}

/* ---- libcurl's callbacks ---- */

static void fail_locally(struct task *t, int code, const char *format, ...) {
    if (t->local_code) return;
    t->local_code = code;
    va_list args;
    va_start(args, format);
    vsnprintf(t->local_error, sizeof t->local_error, format, args);
    va_end(args);
}

/* The value of a header line `name: value` (trimmed, NUL-terminated into `out`), or 0. */
static int header_value(const char *line, size_t n, const char *name, char *out, size_t size) {
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':') return 0;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
    size_t m = (size_t)(end - v);
    if (m >= size) m = size - 1;
    memcpy(out, v, m);
    out[m] = 0;
    return 1;
}

/* The end of a response's headers: for the final answer, where its body goes, and HEADERS. */
static void headers_ended(struct task *t) {
    if (t->final_headers || t->status < 200 || t->redirect) return; /* 1xx, or a redirect libcurl follows */
    t->final_headers = 1;
    /* Content-Length as libcurl took it, when this answer has one (never a redirect's). */
    curl_off_t length = -1;
    if (t->content_length >= 0 && curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK && length >= 0)
        t->content_length = (int64_t)length;
    int restarted = 0;
    if (t->method != 1) {
        t->total = (int64_t)t->upload_size;
    } else if (t->status >= 200 && t->status < 300) {
        t->write_body = 1;
        if (t->status == 206) {
            if (t->range_start != (int64_t)t->offset) {
                fail_locally(t, -1, "Content-Range starts at %" PRId64 ", not %" PRIu64, t->range_start, t->offset);
                return;
            }
            t->position = t->offset;
            t->total = t->range_total;
        } else {
            /* The whole resource: a range asked for was not honoured, so the file starts again. */
            if (t->offset > 0) {
                restarted = 1;
                if (ftruncate(t->fd, 0) != 0) {
                    fail_locally(t, CURLE_WRITE_ERROR, "ftruncate: %s", strerror(errno));
                    return;
                }
            }
            t->position = 0;
            t->total = t->content_length;
        }
    } else {
        t->total = t->content_length;
    }
    send_headers(t, restarted);
}

static size_t on_header(char *line, size_t size, size_t count, void *userdata) {
    struct task *t = userdata;
    size_t n = size * count;
    char value[512];
    if (t->final_headers) return n; /* trailers of the final answer */
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new response: its status, and nothing of the previous one's. */
        const char *space = memchr(line, ' ', n);
        t->status = space ? strtol(space + 1, NULL, 10) : 0;
        t->redirect = 0;
        t->etag[0] = t->last_modified[0] = 0;
        t->content_length = -1;
        t->range_start = t->range_total = -1;
    } else if (n <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        headers_ended(t);
        if (t->local_code) return 0; /* aborts the transfer */
    } else if (header_value(line, n, "ETag", t->etag, sizeof t->etag)) {
    } else if (header_value(line, n, "Last-Modified", t->last_modified, sizeof t->last_modified)) {
    } else if (header_value(line, n, "Content-Length", value, sizeof value)) {
        t->content_length = strtoll(value, NULL, 10);
    } else if (header_value(line, n, "Content-Range", value, sizeof value)) {
        unsigned long long start = 0, end = 0;
        char total[32] = "";
        if (sscanf(value, "bytes %llu-%llu/%31s", &start, &end, total) >= 2) {
            t->range_start = (int64_t)start;
            t->range_total = total[0] && total[0] != '*' ? strtoll(total, NULL, 10) : -1;
        }
    } else if ((t->status == 300 || t->status == 301 || t->status == 302 || t->status == 303 || t->status == 307 || t->status == 308) &&
               header_value(line, n, "Location", value, sizeof value)) {
        /* libcurl follows these (CURLOPT_FOLLOWLOCATION): not the final answer */
        t->redirect = 1;
    }
    return n;
}

static size_t on_body(char *data, size_t size, size_t count, void *userdata) {
    struct task *t = userdata;
    size_t n = size * count;
    if (t->local_code) return 0;
    if (!t->final_headers) headers_ended(t); /* an answer with no header block end seen */
    if (t->local_code) return 0;
    if (!t->write_body) return n; /* a non-2xx answer's body: not the file */
    size_t written = 0;
    while (written < n) {
        ssize_t w = pwrite(t->fd, data + written, n - written, (off_t)t->position);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            fail_locally(t, CURLE_WRITE_ERROR, "write: %s", w < 0 ? strerror(errno) : "nothing written");
            return 0;
        }
        written += (size_t)w;
        t->position += (uint64_t)w;
    }
    /* Writeback started as the file grows: the fdatasync at the end (a complete download is
     * durable before the daemon is told) then waits for the last few MB, not the whole file. */
    if (t->position < t->synced) t->synced = 0;
    if (t->position - t->synced >= WRITEBACK_STEP) {
        sync_file_range(t->fd, (off_t)t->synced, (off_t)(t->position - t->synced), SYNC_FILE_RANGE_WRITE);
        t->synced = t->position;
    }
    progressed(t);
    return n;
}

static size_t on_read(char *buffer, size_t size, size_t count, void *userdata) {
    struct task *t = userdata;
    size_t n = size * count;
    if (t->position >= t->upload_size) return 0;
    if (n > t->upload_size - t->position) n = (size_t)(t->upload_size - t->position);
    ssize_t r;
    do r = pread(t->fd, buffer, n, (off_t)t->position);
    while (r < 0 && errno == EINTR);
    if (r <= 0) {
        fail_locally(t, CURLE_READ_ERROR, "read: %s", r < 0 ? strerror(errno) : "end of file before upload_size bytes");
        return CURL_READFUNC_ABORT;
    }
    t->position += (uint64_t)r;
    progressed(t);
    return (size_t)r;
}

static int on_seek(void *userdata, curl_off_t offset, int origin) {
    struct task *t = userdata;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > t->upload_size) return CURL_SEEKFUNC_CANTSEEK;
    t->position = (uint64_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* Whether `address` is a loopback, unspecified or link-local address (IPv4, IPv6, or IPv4
 * mapped into IPv6). */
static int is_local(const struct sockaddr *address) {
    if (address->sa_family == AF_INET) {
        uint32_t a = ntohl(((const struct sockaddr_in *)address)->sin_addr.s_addr);
        return (a >> 24) == 127 || a == 0 || (a >> 16) == 0xA9FE; /* 127/8, 0.0.0.0, 169.254/16 */
    }
    if (address->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)address)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LINKLOCAL(a)) return 1;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            struct sockaddr_in v4 = {.sin_family = AF_INET};
            memcpy(&v4.sin_addr, &a->s6_addr[12], 4);
            return is_local((const struct sockaddr *)&v4);
        }
    }
    return 0;
}

/* Every connection libcurl opens (redirects and proxies included) goes through here: one to a
 * local address is refused unless allowed, and the attempt fails for good (curl_code -1). */
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    struct task *t = clientp;
    (void)purpose;
    if (!allow_loopback && is_local(&address->addr)) {
        fail_locally(t, -1, "refused: a connection to a loopback or link-local address (EXTENSIOND_TRANSFER_ALLOW_LOOPBACK is not set)");
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

/* ---- The multi interface on sd-event ---- */

static void check_done(void);

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
    (void)s, (void)userdata;
    int action = 0, running = 0;
    if (revents & (EPOLLIN | EPOLLPRI)) action |= CURL_CSELECT_IN;
    if (revents & EPOLLOUT) action |= CURL_CSELECT_OUT;
    if (revents & (EPOLLERR | EPOLLHUP)) action |= CURL_CSELECT_ERR;
    curl_multi_socket_action(multi, fd, action, &running);
    check_done();
    return 0;
}

static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)easy, (void)userp;
    sd_event_source *source = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (source) {
            sd_event_source_disable_unref(source);
            curl_multi_assign(multi, s, NULL);
        }
        return 0;
    }
    uint32_t events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (source) {
        sd_event_source_set_io_events(source, events);
        sd_event_source_set_enabled(source, SD_EVENT_ON);
        return 0;
    }
    if (sd_event_add_io(event, &source, s, events, on_io, NULL) < 0) return -1;
    curl_multi_assign(multi, s, source);
    return 0;
}

static int on_curl_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
    (void)s, (void)usec, (void)userdata;
    int running = 0;
    curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done();
    return 0;
}

static int on_curl_timer(CURLM *m, long timeout_ms, void *userp) {
    (void)m, (void)userp;
    if (timeout_ms < 0) {
        if (curl_timer) sd_event_source_set_enabled(curl_timer, SD_EVENT_OFF);
        return 0;
    }
    uint64_t at = now_usec() + (uint64_t)timeout_ms * 1000;
    /* Accuracy 1 µs: 0 would be sd-event's default of 250 ms, a delay on every request. */
    if (!curl_timer) return sd_event_add_time(event, &curl_timer, CLOCK_MONOTONIC, at, 1, on_curl_timeout, NULL) < 0 ? -1 : 0;
    sd_event_source_set_time(curl_timer, at);
    sd_event_source_set_enabled(curl_timer, SD_EVENT_ONESHOT);
    return 0;
}

static void unlink_task(struct task *t) {
    for (struct task **p = &tasks; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
}

static void free_task(struct task *t) {
    if (t->easy) {
        curl_multi_remove_handle(multi, t->easy);
        curl_easy_cleanup(t->easy);
    }
    curl_slist_free_all(t->headers);
    if (t->fd >= 0) close(t->fd);
    free(t);
}

static void check_done(void) {
    CURLMsg *message;
    int left = 0;
    while ((message = curl_multi_info_read(multi, &left))) {
        if (message->msg != CURLMSG_DONE) continue;
        struct task *t = NULL;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        if (!t) continue;
        CURLcode result = message->data.result;
        long status = 0;
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
        int code = (int)result;
        const char *error = result == CURLE_OK ? "" : (t->error[0] ? t->error : curl_easy_strerror(result));
        if (t->local_code) {
            code = t->local_code;
            error = t->local_error;
        } else if (result == CURLE_OK && t->method == 1 && status >= 200 && status < 300 && fdatasync(t->fd) != 0) {
            code = -1;
            snprintf(t->local_error, sizeof t->local_error, "fdatasync: %s", strerror(errno));
            error = t->local_error;
        }
        if (t->position != t->progress_sent_value) send_progress(t, mono_usec());
        uint64_t id = t->id, done = t->position;
        char text[CURL_ERROR_SIZE + 256];
        snprintf(text, sizeof text, "%s", error);
        unlink_task(t);
        free_task(t);
        send_done(id, status, code, done, text);
    }
}

/* ---- What the daemon asks ---- */

static struct task *find(uint64_t id) {
    for (struct task *t = tasks; t; t = t->next)
        if (t->id == id) return t;
    return NULL;
}

static void start(struct in *in, int fd) {
    uint64_t id = take(in, 8);
    int method = (int)take(in, 1);
    uint64_t offset = take(in, 8), upload_size = take(in, 8);
    long stall = (long)take(in, 4);
    char *url = takestr(in, 65535), *if_range = takestr(in, MAX_VALIDATOR);
    const char *refusal = NULL;
    if (in->bad || in->at != in->length) refusal = "malformed START";
    else if (fd < 0) refusal = "START without a descriptor";
    else if (method < 1 || method > 3) refusal = "unknown method (1 GET, 2 PUT, 3 POST)";
    else if (strlen(url) > MAX_URL) refusal = "url longer than 8192 bytes";
    else if (!*url) refusal = "empty url";
    else if (find(id)) refusal = "the task is running already";
    struct task *t = refusal ? NULL : calloc(1, sizeof *t);
    if (!refusal && !t) refusal = "out of memory";
    if (refusal) {
        if (fd >= 0) close(fd);
        send_done(id, 0, -1, 0, refusal);
        free(url), free(if_range);
        return;
    }
    t->id = id, t->fd = fd, t->method = method, t->offset = offset, t->upload_size = upload_size;
    t->position = method == 1 ? offset : 0;
    t->progress_sent_value = t->position;
    t->total = -1, t->content_length = -1, t->range_start = t->range_total = -1;
    t->easy = curl_easy_init();
    CURL *e = t->easy;
    if (!e) {
        free_task(t);
        send_done(id, 0, -1, 0, "curl_easy_init failed");
        free(url), free(if_range);
        return;
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, stall);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, stall);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "extensiond-transfer/1");
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)BUFFER_SIZE);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_FAILONERROR, 0L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    /* A proxy's "200 Connection established" is not the answer: never seen by on_header. */
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t);
    if (ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, ca_file);
    if (ca_path) curl_easy_setopt(e, CURLOPT_CAPATH, ca_path);
    if (method == 1) {
        if (offset > 0) {
            char range[32];
            snprintf(range, sizeof range, "%" PRIu64 "-", offset);
            curl_easy_setopt(e, CURLOPT_RANGE, range);
            if (if_range && *if_range) {
                char header[MAX_VALIDATOR + 16];
                snprintf(header, sizeof header, "If-Range: %s", if_range);
                t->headers = curl_slist_append(t->headers, header);
            }
        }
    } else {
        t->headers = curl_slist_append(t->headers, "Expect:");
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, t);
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, t);
        if (method == 2) {
            curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)upload_size);
        } else {
            curl_easy_setopt(e, CURLOPT_POST, 1L);
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)upload_size);
        }
    }
    if (t->headers) curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    free(url), free(if_range);
    t->next = tasks;
    tasks = t;
    if (curl_multi_add_handle(multi, e) != CURLM_OK) {
        unlink_task(t);
        free_task(t);
        send_done(id, 0, -1, 0, "curl_multi_add_handle failed");
    }
}

static void cancel(struct in *in) {
    uint64_t id = take(in, 8);
    struct task *t = in->bad ? NULL : find(id);
    if (!t) return;
    uint64_t done = t->position;
    if (t->position != t->progress_sent_value) send_progress(t, mono_usec());
    unlink_task(t);
    free_task(t);
    send_done(id, 0, CURLE_ABORTED_BY_CALLBACK, done, "cancelled");
}

static int on_daemon(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
    (void)s, (void)revents, (void)userdata;
    static uint8_t buffer[2 * 65536 + 256]; /* the largest START: two strings of 65535 bytes */
    for (;;) {
        union {
            struct cmsghdr header;
            char space[CMSG_SPACE(sizeof(int) * 4)];
        } control;
        struct iovec iov = {.iov_base = buffer, .iov_len = sizeof buffer};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
        ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n < 0) _exit(0); /* the daemon's socket failed: done */
        int received = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int *fds = (int *)CMSG_DATA(c);
            for (size_t i = 0; i < count; i++) {
                if (received < 0) received = fds[i];
                else close(fds[i]);
            }
        }
        if (n <= 0) _exit(0); /* the daemon closed its end (or it failed): done */
        struct in in = {.data = buffer, .length = (size_t)n, .at = 0, .bad = 0};
        if (msg.msg_flags & MSG_TRUNC) in.bad = 1;
        switch (take(&in, 1)) {
        case START: start(&in, received); break;
        case CANCEL:
            if (received >= 0) close(received);
            cancel(&in);
            break;
        default:
            if (received >= 0) close(received);
            say("an unknown message from the daemon: ignored");
        }
    }
}

int main(void) {
    /* Gone with the daemon, whatever happens to it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) return 0;
    signal(SIGPIPE, SIG_IGN);
    ca_file = getenv("SSL_CERT_FILE");
    ca_path = getenv("SSL_CERT_DIR");
    allow_loopback = getenv("EXTENSIOND_TRANSFER_ALLOW_LOOPBACK") && strcmp(getenv("EXTENSIOND_TRANSFER_ALLOW_LOOPBACK"), "1") == 0;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        say("curl_global_init failed");
        return 1;
    }
    multi = curl_multi_init();
    if (!multi || sd_event_default(&event) < 0) {
        say("cannot set up the event loop");
        return 1;
    }
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    int r = sd_event_add_io(event, NULL, DAEMON_FD, EPOLLIN, on_daemon, NULL);
    if (r < 0) {
        say("cannot watch fd %d: %s", DAEMON_FD, strerror(-r));
        return 1;
    }
    r = sd_event_loop(event);
    return r < 0 ? 1 : 0;
}
