#!/usr/bin/env python3
"""Where the time of one suspension goes, from kernel tracepoints (root, tracefs).

Runs `scripts/bench.sh --only suspend` (one extension dismissed 300 times), records scheduler,
signal and system-call tracepoints from the daemon's start to the bench's end through tracefs
(into the kernel's ring buffer: no recorder process perturbs the run), and prints, for each
SIGSTOP the daemon sent,
the legs from the kernel's own timestamps:

  recv→kill       the daemon reads the host's `end` → it sends SIGSTOP (core, cgroup.procs)
  kill→stopped    SIGSTOP sent → the last thread of the extension stopped (SIGCHLD generated)
  stopped→wake    SIGCHLD → the daemon's signalfd read (its wake-up)
  wake→record     → the daemon's next write, its `suspend` log line (confirmation, lock
                  survey, core)
  waking→running  each wake-up of the daemon: sched_waking → it runs (the cost of waking an
                  idle vCPU on this machine)

Usage: sudo scripts/trace-suspend.py [--keep FILE]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

TRACEFS = "/sys/kernel/tracing"
EVENTS = [
    "sched:sched_switch", "sched:sched_waking", "sched:sched_wakeup",
    "signal:signal_generate",
    "syscalls:sys_enter_recvmsg", "syscalls:sys_enter_read", "syscalls:sys_enter_write",
    "syscalls:sys_enter_kill", "syscalls:sys_enter_epoll_wait",
]
LINE = re.compile(r"^\s*(\S+)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+):\s+([a-z_]+)[:(]?\s*(.*)$")


def write(name, text):
    with open(os.path.join(TRACEFS, name), "w") as f:
        f.write(text)


def record(root):
    if not os.path.isdir(TRACEFS) or not os.path.exists(os.path.join(TRACEFS, "set_event")):
        sys.exit(f"{TRACEFS} is not mounted (mount -t tracefs nodev {TRACEFS}), or this is not root")
    write("tracing_on", "0")
    write("trace", "")
    write("buffer_size_kb", "65536")
    write("set_event", "")
    # Appended one write each (tracefs files do not seek, so not through Python's "a" mode).
    fd = os.open(os.path.join(TRACEFS, "set_event"), os.O_WRONLY | os.O_APPEND)
    try:
        for e in EVENTS:
            os.write(fd, (e + "\n").encode())
    finally:
        os.close(fd)
    log = open(os.path.join(root, ".build", "trace-suspend.log"), "w")
    bench = subprocess.Popen(["bash", "scripts/bench.sh", "--only", "suspend"], cwd=root, stdout=log, stderr=subprocess.STDOUT)
    try:
        # Recording starts once the daemon runs and stops when the bench ends: the ring buffer
        # overwrites its oldest entries, so it keeps the suspend phase and the shutdown after it.
        while "[bench] extensiond pid" not in open(log.name).read():
            if bench.poll() is not None:
                sys.exit(f"the bench ended before the daemon started; see {log.name}")
            time.sleep(0.05)
        write("tracing_on", "1")
        bench.wait()
        write("tracing_on", "0")
        with open(os.path.join(TRACEFS, "trace")) as f:
            text = f.read()
    finally:
        write("tracing_on", "0")
        write("set_event", "")
        if bench.poll() is None:
            bench.terminate()
            bench.wait()
    return text


def legs(text):
    events = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            comm, pid, cpu, t, name, rest = m.groups()
            events.append((comm, int(pid), int(cpu), float(t), name, rest))
    daemon = next((e[1] for e in events if e[0] == "extensiond"), None)
    if daemon is None:
        sys.exit("no event of the daemon (comm extensiond) in the trace")
    rows = {k: [] for k in ("recv→kill", "kill→stopped", "stopped→wake", "wake→record", "recv→record")}
    for k, e in enumerate(events):
        if not (e[1] == daemon and e[4] == "signal_generate" and "sig=19" in e[5]):
            continue
        j = k
        while j > 0 and not (events[j][1] == daemon and events[j][4] == "sys_recvmsg"):
            j -= 1
        recv, kill = events[j][3], e[3]
        stopped = wake = done = None
        for x in events[k:k + 600]:
            if stopped is None and x[4] == "signal_generate" and "sig=17" in x[5] and "code=5" in x[5]:
                stopped = x[3]
            elif stopped and wake is None and x[1] == daemon and x[4] == "sys_read" and "count: 0x80" in x[5]:
                wake = x[3]
            elif wake and x[1] == daemon and x[4] == "sys_write":
                done = x[3]
                break
        if done:
            for key, v in zip(rows, (kill - recv, stopped - kill, wake - stopped, done - wake, done - recv)):
                rows[key].append(v * 1e6)
    waking = {}
    latency = []
    for e in events:
        if e[4] == "sched_waking" and f"pid={daemon} " in e[5]:
            waking.setdefault(daemon, e[3])
        elif e[4] == "sched_switch" and f"next_pid={daemon} " in e[5] and daemon in waking:
            latency.append((e[3] - waking.pop(daemon)) * 1e6)
    rows["waking→running"] = latency
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="also write the raw trace to this file")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if shutil.which("swift") is None:
        sys.exit("swift is not on PATH")
    text = record(root)
    if args.keep:
        with open(args.keep, "w") as f:
            f.write(text)
    rows = legs(text)
    if not rows["recv→record"]:
        sys.exit("no complete suspension in the traced window")
    print(f"{'leg (µs)':16} {'n':>5} {'min':>8} {'p50':>8} {'p90':>8} {'max':>8}")
    for key, values in rows.items():
        if values:
            values.sort()
            print(f"{key:16} {len(values):5d} {values[0]:8.1f} {statistics.median(values):8.1f} {values[int(len(values) * 0.9)]:8.1f} {values[-1]:8.1f}")


if __name__ == "__main__":
    main()
