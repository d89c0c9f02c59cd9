/* bench-c-raw: the baseline of the C extension figures: a C program with no runtime that does
 * the handshake itself with a plain socket loop: reads $EXTENSIOND_CHANNEL_FD, sends `ready`
 * (the 8-byte header of message kind 64, docs/protocol.md), then polls the channel and its
 * request channels: a `deliver` (kind 96) brings a request channel with SCM_RIGHTS, each of
 * which answers the 1-byte ping ('p' -> 'P'). One thread. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FDS 64

int main(void) {
    const char *raw = getenv("EXTENSIOND_CHANNEL_FD");
    if (!raw) return 1;
    int channel = atoi(raw);
    const uint8_t ready[8] = {1, 64, 0, 0, 0, 0, 0, 0};
    if (send(channel, ready, sizeof ready, MSG_NOSIGNAL) != sizeof ready) return 1;
    struct pollfd fds[MAX_FDS] = {{.fd = channel, .events = POLLIN}};
    int count = 1;
    for (;;) {
        if (poll(fds, (nfds_t)count, -1) < 0) continue;
        if (fds[0].revents) {
            uint8_t buffer[256];
            union {
                struct cmsghdr header;
                char space[CMSG_SPACE(sizeof(int))];
            } control;
            struct iovec iov = {buffer, sizeof buffer};
            struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control};
            ssize_t n = recvmsg(channel, &msg, MSG_CMSG_CLOEXEC);
            if (n <= 0) return 0;
            struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
            if (c && c->cmsg_type == SCM_RIGHTS) {
                int fd;
                memcpy(&fd, CMSG_DATA(c), sizeof fd);
                if (n >= 2 && buffer[1] == 96 && count < MAX_FDS) fds[count++] = (struct pollfd){.fd = fd, .events = POLLIN};
                else close(fd);
            }
        }
        for (int i = 1; i < count; i++) {
            if (!fds[i].revents) continue;
            char byte;
            if (read(fds[i].fd, &byte, 1) == 1) {
                byte = 'P';
                if (write(fds[i].fd, &byte, 1) == 1) continue;
            }
            close(fds[i].fd);
            fds[i--] = fds[--count];
        }
    }
}
