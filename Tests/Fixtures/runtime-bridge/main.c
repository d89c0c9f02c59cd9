/* runtime-bridge: serves requests with a program written for a runtime that cannot speak the
 * runtime channel. Node.js and Java have neither SOCK_SEQPACKET sockets nor SCM_RIGHTS, so
 * they can neither read the channel at fd 3 nor receive a request's descriptor from it.
 *
 *   runtime-bridge PROGRAM [ARGUMENT...]
 *
 * Starts PROGRAM (a child, in the extension's cgroup like everything it starts) with pipes on
 * its stdin and stdout, and without the runtime channel; waits for its first line, "ready";
 * then announces readiness through libExtensionRuntimeC. Every line a host writes on a
 * request's channel goes to PROGRAM's stdin, and the line PROGRAM answers goes back to the
 * host; one line at a time, whatever request it came from. When PROGRAM ends, the bridge ends the same way
 * (its exit status, or the same signal).
 */
#define _GNU_SOURCE
#include <extension_runtime.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t serving = PTHREAD_MUTEX_INITIALIZER;
static FILE *to_program, *from_program;

static int write_all(int fd, const char *text, size_t length) {
    while (length > 0) {
        ssize_t n = write(fd, text, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        text += n;
        length -= (size_t)n;
    }
    return 0;
}

static void on_request(uint64_t request_id, int channel, void *context) {
    (void)request_id, (void)context;
    FILE *in = fdopen(channel, "r");
    if (in == NULL) {
        close(channel);
        return;
    }
    char line[4096], answer[4096];
    while (fgets(line, sizeof line, in) != NULL) {
        pthread_mutex_lock(&serving);
        bool answered = fputs(line, to_program) != EOF && fflush(to_program) != EOF
            && fgets(answer, sizeof answer, from_program) != NULL; /* NULL: the program ended */
        pthread_mutex_unlock(&serving);
        if (!answered || write_all(channel, answer, strlen(answer)) != 0) break;
    }
    fclose(in);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: runtime-bridge PROGRAM [ARGUMENT...]\n");
        return 2;
    }
    int input[2], output[2];
    if (pipe2(input, O_CLOEXEC) != 0 || pipe2(output, O_CLOEXEC) != 0) {
        perror("runtime-bridge: pipe2");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("runtime-bridge: fork");
        return 1;
    }
    if (child == 0) {
        if (dup2(input[0], 0) < 0 || dup2(output[1], 1) < 0) _exit(127);
        syscall(SYS_close_range, 3, ~0U, 0); /* the runtime channel stays the bridge's */
        unsetenv("EXTENSIOND_CHANNEL_FD");
        execvp(argv[1], argv + 1);
        fprintf(stderr, "runtime-bridge: cannot run %s: %s\n", argv[1], strerror(errno));
        _exit(127);
    }
    close(input[0]);
    close(output[1]);
    to_program = fdopen(input[1], "w");
    from_program = fdopen(output[0], "r");
    char line[256];
    if (to_program == NULL || from_program == NULL || fgets(line, sizeof line, from_program) == NULL || strcmp(line, "ready\n") != 0) {
        fprintf(stderr, "runtime-bridge: %s did not start (no \"ready\" line)\n", argv[1]);
    } else if (ext_runtime_start(on_request, NULL) != 0) {
        fprintf(stderr, "runtime-bridge: not launched by extensiond\n");
        kill(child, SIGKILL);
    }
    int status;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) return 1;
    }
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
