/* bench-c-extension: the bench's C extension, on libExtensionRuntimeC (include/extension_runtime.h).
 * Each request channel answers the bench's 1-byte ping ('p' -> 'P') until the host closes it;
 * the handler serves it on the runtime thread it was called on. */
#include <extension_runtime.h>

#include <stdio.h>
#include <unistd.h>

static void on_request(uint64_t request_id, int fd, void *context) {
    (void)request_id, (void)context;
    char byte;
    while (read(fd, &byte, 1) == 1) {
        byte = 'P';
        if (write(fd, &byte, 1) != 1) break;
    }
    close(fd);
}

int main(void) {
    if (ext_runtime_start(on_request, NULL) != 0) {
        fprintf(stderr, "bench-c-extension: not launched by extensiond\n");
        return 1;
    }
    for (;;) pause();
}
