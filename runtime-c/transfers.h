/*
 * transfers.h: the background transfers API (include/extension_runtime.h, ext_transfer_*),
 * private to libExtensionRuntimeC. transfers.c checks the caller's arguments, builds the messages,
 * keeps the sessions' callbacks and delivers their events; the round trips, the reading of
 * *transferEvents* and the threads are the runtime's (runtime.c).
 *
 * runtime.c refers to nothing of transfers.c (a program built from runtime.c without it still
 * links): transfers.c hands it a hook for *transferEvents* (extt_set_events_hook) when the first
 * callback is set; until then such messages are dropped, as for a session without a callback.
 */
#ifndef EXTENSION_RUNTIME_TRANSFERS_H
#define EXTENSION_RUNTIME_TRANSFERS_H

#include "extension_runtime.h"
#include "wire.h"

#include <stdint.h>

/* Work to run on a runtime thread: run(arg). */
struct extt_job {
    void (*run)(void *arg);
    void *arg;
};

/* Called on the reading thread with each decoded *transferEvents* (its pointers into the
 * datagram, valid only during the call): returns 1 with *job set when work is due (the job is
 * then run on a thread that no longer holds the read role), else 0. */
typedef int (*extt_events_hook)(const struct ext_wire_message *m, struct extt_job *job);

/* runtime.c: sets the hook (once; later calls replace it), and starts the channel's reader when
 * the process is supervised, so that events are read. */
void extt_set_events_hook(extt_events_hook hook);

/* runtime.c: sends `m` (a transfer kind; its tag is set here) and waits for its answer. 0 for an
 * *answer* with code 0, when `task` is NULL; when it is not, a *transferCreated* is expected
 * instead, whose task goes to *task (an *answer* with code 0 is then -EIO). A failure code is
 * an errno as the header says (5 -EPERM, 6 -EINVAL, 7 -ENOENT, 8 -ENOSPC, others -EIO).
 * -ENOTCONN, -EAGAIN as the other round trips. */
int extt_round_trip(struct ext_wire_message *m, uint64_t *task);

/* runtime.c: sends `m` (a transfer kind; its tag is set here) without waiting for its answer,
 * which is read and dropped. 0, or -ENOTCONN (or -ENOMEM) when it was not sent. */
int extt_send(struct ext_wire_message *m);

#endif
