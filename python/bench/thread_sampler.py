#!/usr/bin/env python3
"""What every thread of a process is doing, sampled from /proc every --interval-us until it exits:
each thread's scheduler state (R running or runnable, S sleeping, D in the kernel unwakeable), the
system call it is blocked in (or "running"), the kernel function it waits in and the CPU it last
ran on. Only changes are kept, so a run of minutes stays small. Written as JSON to --out:

  {"pid": P, "clock": "CLOCK_REALTIME ns", "interval_us": I, "threads": {tid: name},
   "changes": [[t_ns, tid, state, syscall, wchan, cpu], ...]}

Reading another process's system calls takes ptrace rights over it (the same user, or root). A
thread's system call as /proc shows it: its number and first argument ("202 0x7f..": futex on that
word; "16 0x5": ioctl on fd 5), "running", or "-1" (stopped outside one). stall_trace.py reads the
file beside a trace of the same process: which threads did what while a launch call waited.

  python3 python/bench/thread_sampler.py --pid P --out FILE [--interval-us 500]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Dict, List, Tuple

RESCAN_S = 0.05  # new threads are looked for this often


def _read(fd: int) -> str:
    if fd < 0:
        return "?"
    try:
        return os.pread(fd, 512, 0).decode(errors="replace")
    except PermissionError:  # checked on each read: no ptrace rights over the thread
        return "?"


class Task:
    """One thread's /proc files, held open and read again from their start each sample."""

    def __init__(self, base: str) -> None:
        self.fds: List[int] = []
        for f in ("stat", "syscall", "wchan"):
            try:
                self.fds.append(os.open(os.path.join(base, f), os.O_RDONLY))
            except PermissionError:  # no ptrace rights over it: its calls are not shown
                if f == "stat":
                    raise
                self.fds.append(-1)
        with open(os.path.join(base, "comm")) as f:
            self.name = f.read().strip()

    def read(self) -> Tuple[str, str, str, int]:
        stat, call, wchan = (_read(fd) for fd in self.fds)
        # stat: "tid (comm) state ..."; comm may hold spaces and parentheses, so split after ")".
        fields = stat[stat.rindex(")") + 2:].split()
        parts = call.split()
        # The number and first argument: which call, on which word or descriptor.
        call = " ".join(parts[:2]) if parts and parts[0] not in ("running", "-1") else \
            (parts[0] if parts else "")
        return fields[0], call, wchan.strip() or "0", int(fields[36])

    def close(self) -> None:
        for fd in self.fds:
            if fd >= 0:
                os.close(fd)


def sample(pid: int, interval_s: float, out: str) -> None:
    tasks: Dict[int, Task] = {}
    names: Dict[int, str] = {}
    last: Dict[int, tuple] = {}
    changes: List[list] = []
    task_dir = f"/proc/{pid}/task"
    next_scan = 0.0
    try:
        while True:
            now = time.monotonic()
            if now >= next_scan:
                try:
                    tids = {int(t) for t in os.listdir(task_dir)}
                except FileNotFoundError:
                    break
                for tid in tids - tasks.keys():
                    try:
                        tasks[tid] = Task(f"{task_dir}/{tid}")
                        names[tid] = tasks[tid].name
                    except FileNotFoundError:  # gone already
                        pass
                next_scan = now + RESCAN_S
            t = time.time_ns()
            for tid, task in list(tasks.items()):
                try:
                    got = task.read()
                except (OSError, ValueError, IndexError):  # the thread ended
                    task.close()
                    del tasks[tid]
                    changes.append([t, tid, "gone", "", "", -1])
                    continue
                if last.get(tid) != got:
                    last[tid] = got
                    changes.append([t, tid, *got])
            if not tasks and not os.path.exists(task_dir):
                break
            time.sleep(interval_s)
    finally:
        for task in tasks.values():
            task.close()
        with open(out, "w") as f:
            json.dump({"pid": pid, "clock": "CLOCK_REALTIME ns",
                       "interval_us": round(interval_s * 1e6), "threads": names,
                       "changes": changes}, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval-us", type=int, default=500)
    args = ap.parse_args()
    # Stopped by its starter: what was sampled is written on the way out (sample's finally).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sample(args.pid, args.interval_us / 1e6, args.out)


if __name__ == "__main__":
    main()
