#!/usr/bin/env python3
"""Where the CPU spends the package's per-frame calls, function by function, from perf's samples.

The loops: a served model's reply() (as reply_profile.py --loop --busy 20 has it: next -> torch()
-> 20 launches -> a CPU wait through an event -> 20 more -> reply(after=event)), or a consumer's
next -> [view] -> release (as consumer_overhead.py's rows: a paced producer process, a frame per
0.5 ms, read back to back).

  python3 python/bench/perf_breakdown.py --perf PERF reply [--frames N]
  python3 python/bench/perf_breakdown.py --perf PERF consumer --row plain|torch|cupy|numpy [--frames N]

The loop runs in a child Python started with -X perf (its Python functions named in the samples).
perf attaches once the child is connected and warm, so imports and connections are left out; it
samples CPU time (cpu-clock: a virtual machine may expose no hardware counters) with frame-pointer
call chains. For each anchor (the binding's call: reply, next, the view, release) it prints every
function beneath it, in microseconds per call: with what it calls (inclusive) and alone (self).
Sampling slows what it samples (about 2x at 50 kHz, the child's own p50 says by how much): read the
shares, not the absolute times. The binding's own frames need the package built with frame
pointers (FRAME_POINTERS=1 python/tests/build-device-bundle.sh); without them their callers are
lost. PERF is a perf program (scripts/perf-bundle.sh makes one for a machine without it).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterable, List, Optional

import numpy as np

ANCHORS = {
    "reply": ["r_reply", "cudaipc_server_reply", "frame_release", "m_next", "r_torch"],
    "plain": ["m_next", "m_release"],
    "torch": ["m_next", "m_torch", "m_release"],
    "cupy": ["m_next", "m_cupy", "m_release"],
    "numpy": ["m_next", "m_numpy", "m_release"],
}
WARM = 200
# The loop's CPU and the producer's (another core), as consumer_overhead.py --pin has them: a
# thread that wakes on another core each frame finds its caches cold. Unpinned on a machine with
# fewer CPUs.
READER, PRODUCER = 2, 6
WINDOW_S = 1.5  # after the pid file: perf attaches while the child sleeps


def pin(cpu: int, now: bool = True) -> Optional[set]:
    """Keeps this thread on `cpu` (now), or the set to give a child; None where there is no such
    CPU."""
    if cpu not in os.sched_getaffinity(0):
        return None
    if now:
        os.sched_setaffinity(0, {cpu})
    return {cpu}


def ready(pidfile: str) -> None:
    """Tells the parent to attach, and gives it the time to."""
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pidfile + ".tmp", pidfile)
    time.sleep(WINDOW_S)


def child_reply(frames: int, pidfile: str, busy: int = 20) -> None:
    import multiprocessing as mp

    import torch

    import cudaipc
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from reply_profile import _requester

    ctx = mp.get_context("spawn")
    path = os.path.join(tempfile.mkdtemp(), "model")
    det = {"boxes": np.array([[1.0, 2.0, 30.0, 40.0]], np.float32),
           "labels": np.zeros(1, np.int64), "scores": np.ones(1, np.float32)}
    names = ["object"]
    scratch = torch.ones(4096, device="cuda")
    answered = torch.cuda.Event()
    times: List[float] = []
    with cudaipc.Server(path) as srv:
        failed = ctx.Event()
        p = ctx.Process(target=_requester, args=(path, frames + WARM, "cuda", failed))
        p.start()
        pin(READER)  # the requester (started before) keeps every CPU
        for i in range(frames + WARM):
            if i == WARM:
                ready(pidfile)
            r = srv.next(30)
            f = r.torch()
            if int(f[0, 0]) != i & 0xff or r.frame.pts != i:
                raise SystemExit(f"request {i} carries frame {int(f[0, 0])}, pts {r.frame.pts}")
            for _ in range(busy):
                scratch.mul_(1.0)
            answered.record()
            answered.synchronize()
            for _ in range(busy):
                scratch.mul_(1.0)
            t = time.perf_counter()
            r.reply(meta={"pts": r.frame.pts}, detections=det, label_names=names, after=answered)
            if i >= WARM:
                times.append(time.perf_counter() - t)
        p.join(60)
        if p.exitcode != 0 or failed.is_set():
            raise SystemExit(f"the requester failed (exit {p.exitcode})")
    a = np.array(times) * 1e6
    print(f"reply(after=e), {len(a)} under perf: p50 {np.median(a):.1f} µs")


def child_consumer(row: str, frames: int, pidfile: str) -> None:
    import multiprocessing as mp

    import cudaipc
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from consumer_overhead import produce

    memory = "host" if row == "numpy" else "cuda"
    ctx = mp.get_context("spawn")
    path = os.path.join(tempfile.mkdtemp(), "ch")
    stop = ctx.Event()
    p = ctx.Process(target=produce, args=(path, memory, stop, pin(PRODUCER, False)))
    p.start()
    if row == "cupy":
        importlib.import_module("cupy")  # before the window, as a consumer has it imported
    pin(READER)
    view = {"plain": lambda f: None, "torch": lambda f: f.torch(), "cupy": lambda f: f.cupy(),
            "numpy": lambda f: f.numpy()}[row]
    cpu: List[int] = []
    try:
        with cudaipc.Consumer(path, mode="latest", timeout=30) as c:
            for i in range(frames + WARM):
                if i == WARM:
                    ready(pidfile)
                s = time.thread_time_ns()
                f = c.next()
                view(f)
                f.release()
                if i >= WARM:
                    cpu.append(time.thread_time_ns() - s)
    finally:
        stop.set()
        p.join(30)
    a = np.array(cpu) / 1e3
    print(f"{row}: next -> release, {len(a)} under perf: p50 {np.median(a):.1f} µs (thread CPU)")


def fold(lines: Iterable[str], pid: str, anchors: List[str], calls: int, freq: float) -> str:
    """`perf script -F pid,ip,sym,dso` output folded under each anchor: µs per call."""
    stacks: List[List[str]] = []  # only the samples of `pid` under an anchor
    total = 0
    head, stack = None, []
    for line in itertools.chain(lines, [""]):
        if not line.strip() or not line.startswith("\t"):
            if head == pid and stack:
                total += 1
                if any(a in s for s in stack for a in anchors):
                    stacks.append(stack)
            head, stack = (line.split()[0] if line.strip() else None), []
            continue
        parts = line.strip().split(None, 1)
        sym = re.sub(r"\+0x[0-9a-f]+", "", parts[1] if len(parts) > 1 else "?")
        stack.append(re.sub(r" \((\S*/)?([^/)]*)\)$", r" [\2]", sym)[:140])
    out = []

    def us(n: int) -> float:
        return n / freq / calls * 1e6

    for anchor in anchors:
        incl: Dict[str, int] = collections.Counter()
        alone: Dict[str, int] = collections.Counter()
        hits = 0
        for st in stacks:
            at = [i for i, s in enumerate(st) if anchor in s]
            if not at:
                continue
            hits += 1
            beneath = st[:at[-1] + 1]  # leaf first, up to the outermost frame of the anchor
            for s in set(beneath):
                incl[s] += 1
            alone[beneath[0]] += 1
        out.append(f"\n### under {anchor}: {us(hits):.2f} µs per call ({hits} of {total} "
                   f"samples, {calls} calls)\n\n| inclusive | self | function |\n|---:|---:|---|")
        for s, n in incl.most_common(40):
            if us(n) < 0.05:
                break
            out.append(f"| {us(n):.2f} | {us(alone[s]):.2f} | `{s}` |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perf", help="the perf program")
    ap.add_argument("--freq", type=int, default=50000, help="samples a second (default 50000)")
    ap.add_argument("--frames", type=int, default=10000)
    ap.add_argument("--pidfile", help=argparse.SUPPRESS)  # the child's side
    ap.add_argument("loop", choices=["reply", "consumer"])
    ap.add_argument("--row", choices=["plain", "torch", "cupy", "numpy"], default="plain")
    args = ap.parse_args()
    if args.pidfile:
        if args.loop == "reply":
            child_reply(args.frames, args.pidfile)
        else:
            child_consumer(args.row, args.frames, args.pidfile)
        return
    if not args.perf:
        ap.error("--perf PATH is needed (scripts/perf-bundle.sh makes one)")
    d = tempfile.mkdtemp()
    pidfile, data = os.path.join(d, "pid"), os.path.join(d, "perf.data")
    child = subprocess.Popen([sys.executable, "-X", "perf", os.path.abspath(__file__),
                              args.loop, "--row", args.row, "--frames", str(args.frames),
                              "--pidfile", pidfile])
    deadline = time.monotonic() + 120
    while not os.path.exists(pidfile):
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            raise SystemExit(f"the loop did not start (exit {child.wait()})")
        time.sleep(0.05)
    pid = open(pidfile).read().strip()
    rec = subprocess.Popen([args.perf, "record", "-q", "-F", str(args.freq), "-e", "cpu-clock",
                            "--call-graph", "fp", "-p", pid, "-o", data],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rc = child.wait(timeout=600)
    _, err = rec.communicate(timeout=120)
    if rc != 0 or not os.path.exists(data):
        raise SystemExit(f"the loop exited {rc}; perf record: {err.strip()[-300:]}")
    name = args.loop if args.loop == "reply" else args.row
    with subprocess.Popen([args.perf, "script", "-i", data, "-F", "pid,ip,sym,dso"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as script:
        table = fold(script.stdout, pid, ANCHORS[name], args.frames, float(args.freq))
    print(f"## {name}: per call, sampled at {args.freq} Hz (times slowed by the sampling)")
    print(table)


if __name__ == "__main__":
    main()
