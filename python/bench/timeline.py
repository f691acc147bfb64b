#!/usr/bin/env python3
"""A served frame's timeline from the traces filter_model_rate.py --trace records (torch.profiler:
the model process's CPU steps and, through CUPTI, its GPU work), beside the same model alone.

Each frame is cut out of the trace by its named ranges (next, from_dlpack, model, reply); each GPU
operation belongs to the frame whose CPU range launched it (CUPTI's correlation ids). Per frame:

  GPU ops            kernels, copies and memsets the frame launched
  kernel sum         the sum of their durations (as CUPTI times them: a kernel whose context is
                     switched out by time-slicing keeps its clock running)
  GPU span           first op's start to last op's end
  first op's wait    its start less its launch (a GPU idle and free starts an op some µs after the
                     launch; longer: it waited for other work, another context's time slice or an
                     event, e.g. the frame's ready event from the pipeline's process)
  idle inside        GPU span less the time some op of the frame ran (launches slower than kernels)
  GPU gap before     the model's GPU idle between the previous frame's last op and this frame's first
  GPU ahead at next  how much of the model's queued GPU work was still to run when next() returned
                     (0: the CPU waited for requests with the GPU idle)
  CPU steps          each named range's duration

and, per kernel, its mean duration served against alone (where time-slicing lands), and the torch
operations inside reply().

  python3 python/bench/timeline.py ALONE.json.gz SERVED.json.gz [--skip N] [--skip-served N]
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import statistics
from collections import defaultdict
from typing import Dict, List, Optional, Tuple

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
STEPS = ("next", "from_dlpack", "model", "reply")


def load(path: str) -> List[dict]:
    return load_with_base(path)[0]


def load_with_base(path: str) -> Tuple[List[dict], int]:
    """The trace's ranges, and its baseTimeNanoseconds: a range's "ts" (us) + base is its
    CLOCK_REALTIME time (0 where the trace does not say)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    return ([e for e in trace.get("traceEvents", []) if e.get("ph") == "X"],
            int(trace.get("baseTimeNanoseconds", 0)))


def pct(values: List[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * q))]


class Frames:
    """The trace cut into frames."""

    def __init__(self, events: List[dict], skip: int):
        ann = [e for e in events if e.get("cat") == "user_annotation"]
        frames = sorted((e for e in ann if e["name"] == "frame"), key=lambda e: e["ts"])
        self.frames = frames[skip:]
        starts = [f["ts"] for f in self.frames]
        # Each step belongs to the frame it lies in; next() to the frame it precedes.
        self.steps: List[Dict[str, float]] = [dict() for _ in self.frames]
        self.next_end: List[Optional[float]] = [None] * len(self.frames)
        for e in ann:
            if e["name"] not in STEPS:
                continue
            if e["name"] == "next":
                i = bisect.bisect_left(starts, e["ts"] + e["dur"] - 0.5)
                if i < len(self.frames) and self.frames[i]["ts"] - (e["ts"] + e["dur"]) < 50:
                    self.steps[i]["next"] = e["dur"]
                    self.next_end[i] = e["ts"] + e["dur"]
                continue
            i = bisect.bisect_right(starts, e["ts"]) - 1
            if i >= 0 and e["ts"] <= self.frames[i]["ts"] + self.frames[i]["dur"]:
                self.steps[i][e["name"]] = self.steps[i].get(e["name"], 0.0) + e["dur"]
        # GPU work by the CPU range that launched it.
        launch_ts: Dict[int, float] = {}
        for e in events:
            corr = (e.get("args") or {}).get("correlation")
            if e.get("cat") == "cuda_runtime" and corr is not None:
                launch_ts[corr] = e["ts"]
        self.gpu: List[List[dict]] = [[] for _ in self.frames]
        for e in events:
            if e.get("cat") not in GPU_CATS:
                continue
            t = launch_ts.get((e.get("args") or {}).get("correlation"))
            if t is None:
                continue
            i = bisect.bisect_right(starts, t) - 1
            if i >= 0 and t <= self.frames[i]["ts"] + self.frames[i]["dur"]:
                self.gpu[i].append(dict(e, launch=t))
        for ops in self.gpu:
            ops.sort(key=lambda e: e["ts"])
        self.cpu_ops = [e for e in events if e.get("cat") == "cpu_op"]
        self.reply_ranges = [(e["ts"], e["ts"] + e["dur"]) for e in ann if e["name"] == "reply"]

    def rows(self) -> Dict[str, List[float]]:
        out: Dict[str, List[float]] = defaultdict(list)
        prev_end = None
        last_end_so_far = 0.0
        for i, ops in enumerate(self.gpu):
            if not ops:
                continue
            first = ops[0]["ts"]
            last = max(e["ts"] + e["dur"] for e in ops)
            out["GPU ops"].append(len(ops))
            out["kernel sum"].append(sum(e["dur"] for e in ops if e["cat"] == "kernel"))
            out["GPU span"].append(last - first)
            out["first op's wait"].append(max(0.0, first - ops[0]["launch"]))
            busy, end = 0.0, first
            for e in ops:
                a, b = max(e["ts"], end), e["ts"] + e["dur"]
                if b > a:
                    busy += b - a
                end = max(end, b)
            out["idle inside"].append(last - first - busy)
            if prev_end is not None:
                out["GPU gap before"].append(max(0.0, first - prev_end))
            if self.next_end[i] is not None and prev_end is not None:
                out["GPU ahead at next"].append(max(0.0, last_end_so_far - self.next_end[i]))
            prev_end = last
            last_end_so_far = max(last_end_so_far, last)
            for k, v in self.steps[i].items():
                out[f"CPU {k}"].append(v)
        return out

    def kernel_means(self) -> Dict[str, List[float]]:
        out: Dict[str, List[float]] = defaultdict(list)
        for ops in self.gpu:
            for e in ops:
                out[e["name"]].append(e["dur"])
        return out

    def reply_ops(self) -> Dict[str, float]:
        """Total time (us) of each top-level torch operation inside reply() ranges."""
        starts = [a for a, _ in self.reply_ranges]
        tot: Dict[str, float] = defaultdict(float)
        for e in self.cpu_ops:
            i = bisect.bisect_right(starts, e["ts"]) - 1
            if i >= 0 and e["ts"] + e["dur"] <= self.reply_ranges[i][1]:
                tot[e["name"]] += e["dur"]
        return tot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("alone")
    ap.add_argument("served")
    ap.add_argument("--skip", type=int, default=20,
                    help="frames left out at the start of the alone trace")
    ap.add_argument("--skip-served", type=int, default=300,
                    help="frames left out at the start of the served trace (its warm-up)")
    args = ap.parse_args()
    sides = {"alone": Frames(load(args.alone), args.skip),
             "served": Frames(load(args.served), args.skip_served)}
    rows = {k: f.rows() for k, f in sides.items()}
    names = []
    for r in rows.values():
        names += [n for n in r if n not in names]
    print(f"frames: alone {len(sides['alone'].frames)}, served {len(sides['served'].frames)}\n")
    print("| per frame, us | alone p50 | alone p99 | served p50 | served p99 |")
    print("|---|---|---|---|---|")
    for n in names:
        a, s = rows["alone"].get(n, []), rows["served"].get(n, [])
        print(f"| {n} | {pct(a, .5):.1f} | {pct(a, .99):.1f} | {pct(s, .5):.1f} | "
              f"{pct(s, .99):.1f} |")
    ka, ks = sides["alone"].kernel_means(), sides["served"].kernel_means()
    fa, fs = max(1, len(sides["alone"].frames)), max(1, len(sides["served"].frames))
    print("\n| GPU op (per frame) | count | alone mean us | served mean us | served max us | "
          "added per frame us |")
    print("|---|---|---|---|---|---|")
    deltas = []
    for name in set(ka) | set(ks):
        a, s = ka.get(name, []), ks.get(name, [])
        am = statistics.fmean(a) if a else 0.0
        sm = statistics.fmean(s) if s else 0.0
        deltas.append((sum(s) / fs - sum(a) / fa, name, len(s) / fs, am, sm, max(s or [0])))
    for d, name, n, am, sm, mx in sorted(deltas, reverse=True)[:12]:
        print(f"| {name[:70]} | {n:.2f} | {am:.1f} | {sm:.1f} | {mx:.1f} | {d:.1f} |")
    ops = sides["served"].reply_ops()
    if ops:
        total = sum(rows["served"].get("CPU reply", [0.0])) or 1.0
        print("\n| torch op inside reply() (served) | us per frame | share of reply |")
        print("|---|---|---|")
        for name, us in sorted(ops.items(), key=lambda kv: -kv[1])[:10]:
            print(f"| {name[:60]} | {us / fs:.1f} | {100 * us / total:.0f} % |")


if __name__ == "__main__":
    main()
