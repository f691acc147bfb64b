#!/usr/bin/env python3
"""Where an answered frame's way back goes, step by step, from the pipelines' GStreamer logs.

cudaipcfilter and the sink after it trace each frame's way back at GStreamer's TRACE level: the
reply read (with how long after the model published it), the frame pushed on, then the sink's
render, its slot taken, the frame copied in and published. Run the pipelines with

  GST_DEBUG=cudaipcfilter:7,cudaipcsink:7 GST_DEBUG_NO_COLOR=1 GST_DEBUG_FILE=DIR/%p.log

(`many_pipelines.py --way-back` does) and this splits every frame's way back into those steps,
p50/p90/p99/max, with the slowest frames step by step:

  python3 python/bench/way_back.py DIR [--worst 10]
"""

from __future__ import annotations

import argparse
import glob
import os
import re
from typing import Dict, List, Tuple

import numpy as np

# 0:00:21.382830561   717 0x5649df4248d0 TRACE  cudaipcfilter file:line:func:<object> message
LINE = re.compile(r"^(\d+):(\d+):(\d+)\.(\d+)\s+\d+\s+(0x[0-9a-f]+)\s+TRACE\s+(\S+)\s.*?:<[^>]+> (.*)$")
READ = re.compile(r"reply to frame (\d+) read (-?\d+) ns after its publish")
PUSHED = re.compile(r"frame (\d+) pushed on")
# The sink's own steps, in the thread that pushed the frame on.
SINK_STEPS = (("render", "render"), ("slot", "taken"), ("frame copied", "copied"),
              ("frame published", "published"))
STEPS = ("model's publish -> read", "read -> pushed on", "pushed on -> sink render",
         "render -> slot taken", "slot taken -> copied in", "copied in -> published")


def frames_of(path: str) -> List[Dict[str, float]]:
    """Each frame's step times (µs since the process's start) from one pipeline's log."""
    frames: Dict[int, Dict[str, float]] = {}
    pushing: Dict[str, int] = {}  # thread -> the frame it pushed on last, until its publish
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            h, mi, s, frac, thread, category, text = m.groups()
            t = (int(h) * 3600 + int(mi) * 60 + int(s)) * 1e6 + int(frac.ljust(9, "0")) / 1e3
            if category == "cudaipcfilter":
                r = READ.match(text)
                if r:
                    frames.setdefault(int(r.group(1)), {}).update(
                        read=t, delay=int(r.group(2)) / 1e3)
                    continue
                r = PUSHED.match(text)
                if r:
                    pushing[thread] = int(r.group(1))
                    frames.setdefault(pushing[thread], {})["pushed"] = t
            elif category == "cudaipcsink" and thread in pushing:
                step = next((k for prefix, k in SINK_STEPS if text.startswith(prefix)), None)
                frame = frames[pushing[thread]]
                if step and step not in frame:
                    frame[step] = t
                if step == "published":
                    del pushing[thread]
    return list(frames.values())


def split(frame: Dict[str, float]) -> Tuple[float, ...]:
    return (frame["delay"], frame["pushed"] - frame["read"], frame["render"] - frame["pushed"],
            frame["taken"] - frame["render"], frame["copied"] - frame["taken"],
            frame["published"] - frame["copied"])


def summarize(directory: str, worst: int = 10) -> str:
    """The table, or why there is none."""
    rows: List[Tuple[str, Tuple[float, ...]]] = []
    partial = 0  # frames without every step: passed on unanswered, or into a lent slot (no copy)
    for path in sorted(glob.glob(os.path.join(directory, "*.log"))):
        name = os.path.basename(path)
        for f in frames_of(path):
            if all(k in f for k in ("read", "delay", "pushed", "render", "taken", "copied",
                                    "published")):
                rows.append((name, split(f)))
            else:
                partial += 1
    if not rows:
        return f"no frame's way back traced in {directory} (GST_DEBUG as in way_back.py's help)"
    a = np.array([r for _, r in rows])
    out = [f"The way back of {len(rows)} frames, step by step, µs (the pipelines' TRACE logs; "
           f"{partial} without every step left out):",
           "", "| step | p50 | p90 | p99 | max |", "|---|---|---|---|---|"]
    for i, step in enumerate(STEPS + ("all",)):
        col = a[:, i] if i < len(STEPS) else a.sum(axis=1)
        out.append(f"| {step} | {np.percentile(col, 50):.1f} | {np.percentile(col, 90):.1f} | "
                   f"{np.percentile(col, 99):.1f} | {col.max():.1f} |")
    out.append(f"\nthe {worst} slowest, µs per step in that order:")
    for i in np.argsort(-a.sum(axis=1))[:worst]:
        name, r = rows[i]
        out.append(f"  {sum(r):.0f}: {name} " + " / ".join(f"{v:.0f}" for v in r))
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory")
    ap.add_argument("--worst", type=int, default=10)
    args = ap.parse_args()
    print(summarize(args.directory, args.worst))


if __name__ == "__main__":
    main()
