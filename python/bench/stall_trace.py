#!/usr/bin/env python3
"""Where a stalled batch's time went, from the trace `many_pipelines.py --trace DIR` records of the
model process (torch.profiler: its CPU ranges, its CUDA runtime calls and, through CUPTI, its own
GPU work; other processes' work is not in it).

For every served batch (its range "batch" or "frame") longer than --over ms, and for the median
batch of the run beside them:

  CPU model / reply   the named ranges inside the batch
  launch calls max    the longest CUDA runtime call that queues work (a launch, a copy, an event
                      record): long means the CPU waited in the driver (a lock another thread
                      held, or a full queue)
  sync                the CUDA runtime calls that wait (stream or event synchronize), summed
  GPU ops / kernels   how many ops the batch launched, the sum of their kernels' durations (a
                      kernel whose SMs other clients share runs longer)
  first op's wait     from the first op's launch to its start on the GPU (queued behind other
                      work of this process, or the GPU busy elsewhere)
  idle inside         the GPU span of the batch's ops less the time one of them ran
  longest launch      the runtime call, and the op it launched: its name, and its wait from its
                      launch to its start on the GPU

With the model process's threads sampled beside the trace (thread_sampler.py's file,
DIR/threads.json where many_pipelines.py --trace wrote it, or --threads FILE), each stalled batch's
longest launch call is followed by what every thread of the process did while it waited: each
thread that was not asleep where it had been before the call, with its states in order (state,
system call, kernel function, CPU; how long, ms). A launch that waits on a lock shows the model's
thread asleep on a futex and the holder busy (the core's threads are named: cudaipc-scan joins a
pipeline, cudaipc-reader reads and leaves one); one that waits on the kernel driver shows it in an
ioctl. After the stalls, each thread's waits in the kernel (uninterruptible) of over 1 ms over the
whole run: the model's thread's one by one (each is time its GPU had no work from it: a driver call
behind the kernel driver's GPU-wide lock, say), the others' summed per thread. The file may be
gzipped (threads.json.gz, as scripts/device-run.sh brings it back).

  python3 python/bench/stall_trace.py DIR/served-batchB.json.gz [--over 10] [--threads FILE]
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import os
import statistics
from typing import Dict, List, Optional, Tuple

from timeline import GPU_CATS, load_with_base

QUEUEING = ("Launch", "Memcpy", "Memset", "EventRecord", "StreamWaitEvent")
WAITING = ("Synchronize", "EventQuery")


def batches(events: List[dict]) -> List[dict]:
    ann = [e for e in events if e.get("cat") == "user_annotation"]
    return sorted((e for e in ann if e["name"] in ("batch", "frame")), key=lambda e: e["ts"])


class Threads:
    """thread_sampler.py's changes, per thread in time order."""

    def __init__(self, path: str) -> None:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            d = json.load(f)
        self.names = {int(t): n for t, n in d["threads"].items()}
        self.pid = int(d["pid"])
        self.interval_ms = d.get("interval_us", 0) / 1e3
        self.of: Dict[int, List[list]] = {}
        for c in d["changes"]:
            self.of.setdefault(int(c[1]), []).append(c)

    def during(self, t0: int, t1: int) -> List[str]:
        """Each thread's states between t0 and t1 (ns), the threads idle throughout left out."""
        lines = []
        for tid, cs in sorted(self.of.items()):
            times = [c[0] for c in cs]
            i = bisect.bisect_right(times, t0) - 1
            before = cs[i] if i >= 0 else None
            seen: List[Tuple[list, float]] = []
            j = max(i, 0)
            while j < len(cs) and cs[j][0] < t1:
                start = max(cs[j][0], t0)
                end = min(cs[j + 1][0] if j + 1 < len(cs) else t1, t1)
                if end > start:
                    seen.append((cs[j], (end - start) / 1e6))
                j += 1
            # Asleep where it was before the call throughout, or gone before it.
            idle = before is not None and before[2] in ("S", "gone") and all(
                c[2:5] == before[2:5] for c, _ in seen)
            if not seen or (idle and tid != self.pid):
                continue
            states = ", ".join(f"{c[2]} {c[3]} {c[4]} cpu{c[5]} {ms:.1f}" for c, ms in seen)
            who = "the model's thread" if tid == self.pid else self.names.get(tid, "?")
            lines.append(f"    {tid} ({who}): {states}")
        return lines

    def kernel_waits(self, over_ms: float) -> Dict[int, List[Tuple[int, float, List[str]]]]:
        """Per thread, its uninterruptible waits in the kernel (state D, one run of D samples
        whatever the kernel function) of over `over_ms`: start (ns), ms, kernel functions."""
        waits: Dict[int, List[Tuple[int, float, List[str]]]] = {}
        for tid, cs in self.of.items():
            i = 0
            while i < len(cs):
                if cs[i][2] != "D":
                    i += 1
                    continue
                j = i
                funcs: List[str] = []
                while j < len(cs) and cs[j][2] == "D":
                    if cs[j][4] not in funcs and cs[j][4] not in ("0", ""):
                        funcs.append(cs[j][4])
                    j += 1
                end = cs[j][0] if j < len(cs) else cs[j - 1][0]
                ms = (end - cs[i][0]) / 1e6
                if ms > over_ms:
                    waits.setdefault(tid, []).append((cs[i][0], ms, funcs))
                i = j
        return waits

    def first_ns(self) -> int:
        return min(cs[0][0] for cs in self.of.values())


def kernel_waits_report(threads: Threads, over_ms: float = 1.0, listed: int = 20) -> List[str]:
    """Each thread's waits in the kernel over the whole run: the model's thread's one by one (it
    should have none: every one is the GPU idle), the others' summed per thread."""
    waits = threads.kernel_waits(over_ms)
    first = threads.first_ns()
    out = ["", f"Waits in the kernel (state D) of over {over_ms:g} ms, the whole run (s from the "
               "first sample; ms; kernel functions):"]
    mine = waits.get(threads.pid, [])
    out.append(f"  the model's thread: {len(mine)}, {sum(w[1] for w in mine):.1f} ms in all"
               + (":" if mine else ""))
    for at, ms, funcs in mine[:listed]:
        out.append(f"    {(at - first) / 1e9:.3f} s: {ms:.1f} ms {' '.join(funcs)}")
    if len(mine) > listed:
        out.append(f"    ... {len(mine) - listed} more")
    for tid, ws in sorted(waits.items(), key=lambda kv: -sum(w[1] for w in kv[1])):
        if tid == threads.pid:
            continue
        longest = max(ws, key=lambda w: w[1])
        out.append(f"  {tid} ({threads.names.get(tid, '?')}): {len(ws)}, "
                   f"{sum(w[1] for w in ws):.1f} ms in all, longest {longest[1]:.1f} ms at "
                   f"{(longest[0] - first) / 1e9:.3f} s {' '.join(longest[2])}")
    return out


def describe(events: List[dict], over_ms: float, base_ns: int = 0,
             threads: Optional[Threads] = None) -> List[str]:
    runs = batches(events)
    if not runs:
        return ["no batch ranges in the trace (was it recorded with many_pipelines.py --trace?)"]
    starts = [b["ts"] for b in runs]

    def owner(ts: float) -> int:
        i = bisect.bisect_right(starts, ts) - 1
        return i if i >= 0 and ts <= runs[i]["ts"] + runs[i]["dur"] else -1

    info: List[Dict[str, float]] = [
        {"model": 0.0, "reply": 0.0, "launch max": 0.0, "sync": 0.0} for _ in runs]
    launch_name: List[str] = [""] * len(runs)
    launch_corr: List[object] = [None] * len(runs)
    launch_at: List[Tuple[float, float]] = [(0.0, 0.0)] * len(runs)
    launch_ts: Dict[int, float] = {}
    for e in events:
        cat = e.get("cat")
        if cat == "user_annotation" and e["name"] in ("model", "reply"):
            i = owner(e["ts"])
            if i >= 0:
                info[i][e["name"]] += e["dur"]
        elif cat == "cuda_runtime":
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launch_ts[corr] = e["ts"]
            i = owner(e["ts"])
            if i < 0:
                continue
            if any(k in e["name"] for k in WAITING):
                info[i]["sync"] += e["dur"]
            elif any(k in e["name"] for k in QUEUEING) and e["dur"] > info[i]["launch max"]:
                info[i]["launch max"] = e["dur"]
                launch_name[i] = e["name"]
                launch_corr[i] = corr
                launch_at[i] = (e["ts"], e["dur"])
    ops: List[List[dict]] = [[] for _ in runs]
    for e in events:
        if e.get("cat") not in GPU_CATS:
            continue
        t = launch_ts.get((e.get("args") or {}).get("correlation"))
        i = owner(t) if t is not None else -1
        if i >= 0:
            ops[i].append(dict(e, launch=t))
    for i, o in enumerate(ops):
        o.sort(key=lambda e: e["ts"])
        d = info[i]
        d["ops"] = len(o)
        d["kernels"] = sum(e["dur"] for e in o if e["cat"] == "kernel")
        d["first wait"] = max(0.0, o[0]["ts"] - o[0]["launch"]) if o else 0.0
        busy, end, first = 0.0, o[0]["ts"] if o else 0.0, o[0]["ts"] if o else 0.0
        for e in o:
            a, b = max(e["ts"], end), e["ts"] + e["dur"]
            busy += max(0.0, b - a)
            end = max(end, b)
        d["idle"] = (end - first - busy) if o else 0.0

    def row(label: str, d: Dict[str, float], longest: str) -> str:
        return (f"| {label} | {d['model'] / 1e3:.2f} / {d['reply'] / 1e3:.2f} | "
                f"{d['launch max'] / 1e3:.2f} | {d['sync'] / 1e3:.2f} | {d['ops']:.0f} / "
                f"{d['kernels'] / 1e3:.2f} | {d['first wait'] / 1e3:.2f} | {d['idle'] / 1e3:.2f} | "
                f"{longest} |")

    waits: List[str] = []
    out = [f"{len(runs)} batches traced; those over {over_ms:g} ms, and the median of all "
           "(ms; launch and wait calls are the CUDA runtime's):", "",
           "| batch (ms after the first) | CPU model / reply | launch calls max | sync | GPU ops / "
           "kernels | first op's wait | idle inside | longest launch: call; its op, its wait ms |",
           "|---|---|---|---|---|---|---|---|"]
    keys = ["model", "reply", "launch max", "sync", "ops", "kernels", "first wait", "idle"]
    median = {k: statistics.median(d[k] for d in info) for k in keys}
    out.append(row(f"median ({len(runs)})", median, ""))
    for i, b in enumerate(runs):
        if b["dur"] < over_ms * 1e3:
            continue
        op = next((e for e in ops[i]
                   if (e.get("args") or {}).get("correlation") == launch_corr[i]), None)
        what = launch_name[i]
        if op is not None:
            what += f"; {op['name'][:48]}, {max(0.0, op['ts'] - op['launch']) / 1e3:.2f}"
        at = f"{(b['ts'] - runs[0]['ts']) / 1e3:.0f}: {b['dur'] / 1e3:.1f}"
        out.append(row(at, info[i], what))
        if threads is not None and base_ns and launch_at[i][1] > 1e3:
            ts, dur = launch_at[i]
            t0 = base_ns + int(ts * 1e3)
            waits.append(f"  batch at {at} ms: its {launch_name[i]} of {dur / 1e3:.2f} ms")
            waits.extend(threads.during(t0, t0 + int(dur * 1e3)) or
                         ["    (no thread sampled in it)"])
    if waits:
        out += ["", f"What the model process's threads did during each launch call of over 1 ms "
                f"(sampled every {threads.interval_ms:g} ms; state, system call, kernel "
                "function, CPU, ms):"] + waits
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--over", type=float, default=10.0, help="batches longer than this, ms")
    ap.add_argument("--threads", help="thread_sampler.py's file of the same process (default: "
                    "threads.json beside the trace, if there)")
    args = ap.parse_args()
    path = args.threads or os.path.join(os.path.dirname(os.path.abspath(args.trace)),
                                        "threads.json")
    threads = Threads(path) if args.threads or os.path.exists(path) else None
    events, base_ns = load_with_base(args.trace)
    print("\n".join(describe(events, args.over, base_ns, threads)))
    if threads is not None:
        print("\n".join(kernel_waits_report(threads)))


if __name__ == "__main__":
    main()
