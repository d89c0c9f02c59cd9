/*
 * c-host: an example host of extensiond in C, on libExtensionHostC (include/extension_host.h),
 * over D-Bus.
 *
 *   host [EXTENSION_ID [MESSAGE]]     (default: com.example.stocks.widget ping)
 *
 * Begins a request on the extension (extensiond launches or resumes it), writes MESSAGE and a
 * newline on the request's channel, prints the first line the extension writes back, dismisses
 * the request and exits 0. The examples answer "ping": c-extension and python-extension with
 * "pong PID"; the stocks widget greets every request with "stocks-widget pid PID, shown N
 * time(s)" (followed by its quotes) whatever the host writes. Any failure is printed on stderr,
 * naming what failed, and exits 1 (2 for a usage error).
 *
 * The bus: $EXTENSIOND_BUS ("system" or "session") when set, else the session bus when a user's
 * extensiond is on it, else the system bus.
 *
 * It waits on both the channel and the bus connection with poll(2), as a host with an event
 * loop would: the request may end (the extension cancels it, or exits) before it answers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <extension_host.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REPLY_TIMEOUT_MS 30000

static const char usage[] =
    "usage: host [EXTENSION_ID [MESSAGE]]\n"
    "Begins a request on EXTENSION_ID (default com.example.stocks.widget) through extensiond's\n"
    "D-Bus interface, writes MESSAGE (default \"ping\") on its channel, prints the first line\n"
    "the extension answers, and dismisses the request. The bus: $EXTENSIOND_BUS (system or\n"
    "session), else the session bus when extensiond is there, else the system bus.\n";

/* How the request ended, when it did. */
struct ending {
    int ended;
    ext_host_outcome outcome;
    char reason[512];
};

static void on_end(ext_host_request *request, ext_host_outcome outcome, const void *payload, size_t size,
                   const char *reason, void *context) {
    (void)request, (void)payload, (void)size;
    struct ending *ending = context;
    ending->ended = 1;
    ending->outcome = outcome;
    snprintf(ending->reason, sizeof ending->reason, "%s", reason ? reason : "");
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Runs the host's callbacks for everything queued. 0 or -errno. */
static int process_all(ext_host *host) {
    int r;
    while ((r = ext_host_process(host)) > 0)
        ;
    return r;
}

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc > 3 || (argc > 1 && argv[1][0] == '-')) {
        fputs(usage, stderr);
        return 2;
    }
    const char *id = argc > 1 ? argv[1] : "com.example.stocks.widget";
    const char *message = argc > 2 ? argv[2] : "ping";

    ext_host *host = NULL;
    int r = ext_host_open(EXT_HOST_BUS_DEFAULT, &host);
    if (r < 0) {
        fprintf(stderr, "host: cannot connect to extensiond's bus: %s\n", ext_host_error(NULL));
        return 1;
    }
    struct ending ending = {0};
    ext_host_request *request = NULL;
    r = ext_host_begin(host, id, on_end, &ending, &request);
    if (r < 0) {
        fprintf(stderr, "host: cannot begin a request on %s: %s\n", id, ext_host_error(host));
        ext_host_close(host);
        return 1;
    }
    int channel = ext_host_request_channel(request);
    int status = 1;
    char line[4096];
    size_t length = 0;
    char *newline = NULL;

    /* MSG_NOSIGNAL: EPIPE rather than SIGPIPE when the extension has closed its end. */
    size_t size = strlen(message);
    char *out = malloc(size + 1);
    if (!out) {
        fprintf(stderr, "host: out of memory\n");
        goto done;
    }
    memcpy(out, message, size);
    out[size] = '\n';
    for (size_t sent = 0; sent < size + 1;) {
        ssize_t n = send(channel, out + sent, size + 1 - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "host: cannot write to the channel of request %s: %s\n", ext_host_request_path(request),
                    strerror(errno));
            free(out);
            goto done;
        }
        sent += (size_t)n;
    }
    free(out);

    long long deadline = now_ms() + REPLY_TIMEOUT_MS;
    while (!newline) {
        /* Messages the blocking calls queued first, then the descriptors. */
        if ((r = process_all(host)) < 0) {
            fprintf(stderr, "host: the bus connection failed: %s\n", ext_host_error(host));
            goto done;
        }
        long long left = deadline - now_ms();
        if (left <= 0) {
            fprintf(stderr, "host: %s did not answer within %d s\n", id, REPLY_TIMEOUT_MS / 1000);
            goto done;
        }
        struct pollfd fds[2] = {
            {.fd = channel, .events = POLLIN},
            {.fd = ext_host_fd(host), .events = (short)ext_host_events(host)},
        };
        /* Once the request ended, only what the extension wrote before is still read. */
        r = poll(fds, ending.ended ? 1 : 2, ending.ended ? 0 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            fprintf(stderr, "host: poll: %s\n", strerror(errno));
            goto done;
        }
        if (fds[0].revents) {
            ssize_t n = read(channel, line + length, sizeof line - 1 - length);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                fprintf(stderr, "host: cannot read the channel of request %s: %s\n", ext_host_request_path(request),
                        strerror(errno));
                goto done;
            }
            if (n == 0) {
                fprintf(stderr, "host: %s closed the request's channel without answering%s\n", id,
                        ending.ended ? "" : " (an extension without the runtime has no channel)");
                goto done;
            }
            length += (size_t)n;
            line[length] = '\0';
            newline = memchr(line, '\n', length);
            if (!newline && length == sizeof line - 1) {
                fprintf(stderr, "host: the answer of %s is over %zu bytes without a newline\n", id, sizeof line - 1);
                goto done;
            }
        } else if (ending.ended) {
            static const char *const words[] = {"", "completed", "cancelled", "interrupted"};
            fprintf(stderr, "host: the request on %s was %s before it answered%s%s\n", id, words[ending.outcome],
                    ending.reason[0] ? ": " : "", ending.reason);
            goto done;
        }
    }
    *newline = '\0';
    printf("%s\n", line);
    fflush(stdout);
    status = 0;
done:
    /* Dismissing closes the channel: the extension reads end-of-file. */
    r = ext_host_dismiss(request);
    if (r < 0) {
        fprintf(stderr, "host: cannot dismiss request: %s\n", ext_host_error(host));
        status = 1;
    }
    ext_host_close(host);
    return status;
}
