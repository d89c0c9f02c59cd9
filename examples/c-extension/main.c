/* c-extension: an extension written in C against include/extension_runtime.h.
 *
 * For each request it reads line commands on the channel:
 *   save <text>  saves <text> to $C_EXTENSION_STATE under a task assertion
 *                (atomic: temporary file, fsync, rename; abandoned when expired),
 *                answers "saved" or "not saved"
 *   ping         answers "pong <pid>"
 * Answers go out with send(2) and MSG_NOSIGNAL: written with write(2) after the host closed its
 * end, one would raise SIGPIPE, whose default ends the process (the runtime changes no signal
 * disposition).
 * Build: cc main.c $(pkg-config --cflags --libs extension-runtime) -o c-extension
 */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, fdopen, dup and fsync under -std=c11 */
#include <extension_runtime.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct save_job {
    int channel;
    char text[256];
    atomic_bool expired;
    atomic_int references; /* the request thread and the runtime */
    pthread_mutex_t lock;
    pthread_cond_t done;
    bool answered;
};

static void release_job(struct save_job *job) {
    if (atomic_fetch_sub(&job->references, 1) == 1) {
        pthread_mutex_destroy(&job->lock);
        pthread_cond_destroy(&job->done);
        free(job);
    }
}

static void answer(struct save_job *job, const char *line) {
    pthread_mutex_lock(&job->lock);
    if (!job->answered) {
        job->answered = true;
        (void)!send(job->channel, line, strlen(line), MSG_NOSIGNAL); /* EPIPE when the host is gone */
    }
    pthread_cond_signal(&job->done);
    pthread_mutex_unlock(&job->lock);
}

/* The activity block: expired == false does the work, expired == true asks it to stop. */
static void save(bool expired, void *context) {
    struct save_job *job = context;
    if (expired) {
        atomic_store(&job->expired, true);
        answer(job, "not saved\n");
        return;
    }
    const char *path = getenv("C_EXTENSION_STATE");
    if (!path) path = "/tmp/c-extension.state";
    char temporary[4096];
    snprintf(temporary, sizeof temporary, "%s.tmp", path);
    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && !atomic_load(&job->expired);
    if (ok) ok = write(fd, job->text, strlen(job->text)) == (ssize_t)strlen(job->text) && fsync(fd) == 0;
    if (fd >= 0) close(fd);
    if (ok && !atomic_load(&job->expired)) ok = rename(temporary, path) == 0;
    answer(job, ok ? "saved\n" : "not saved\n");
}

static void cleanup(void *context) { release_job(context); }

static void *serve(void *arg) {
    int fd = (int)(intptr_t)arg;
    FILE *in = fdopen(dup(fd), "r");
    char line[512];
    while (in && fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "save ", 5) == 0) {
            struct save_job *job = calloc(1, sizeof *job);
            job->channel = fd;
            atomic_init(&job->expired, false);
            atomic_init(&job->references, 2);
            pthread_mutex_init(&job->lock, NULL);
            pthread_cond_init(&job->done, NULL);
            snprintf(job->text, sizeof job->text, "%s\n", line + 5);
            if (ext_perform_expiring_activity_with_cleanup("save state", save, cleanup, job) != 0) {
                answer(job, "not saved\n");
                release_job(job); /* the runtime took no reference */
            }
            pthread_mutex_lock(&job->lock);
            while (!job->answered) pthread_cond_wait(&job->done, &job->lock);
            pthread_mutex_unlock(&job->lock);
            release_job(job);
        } else if (strcmp(line, "ping") == 0) {
            char pong[64];
            snprintf(pong, sizeof pong, "pong %d\n", (int)getpid());
            (void)!send(fd, pong, strlen(pong), MSG_NOSIGNAL);
        }
    }
    if (in) fclose(in);
    close(fd);
    return NULL;
}

static void on_request(uint64_t request_id, int channel_fd, void *context) {
    (void)request_id;
    (void)context;
    pthread_t thread;
    if (pthread_create(&thread, NULL, serve, (void *)(intptr_t)channel_fd) == 0) pthread_detach(thread);
    else close(channel_fd);
}

int main(void) {
    if (ext_runtime_start(on_request, NULL) != 0) {
        fprintf(stderr, "c-extension: not launched by extensiond\n");
        return 1;
    }
    for (;;) pause();
}
