"""What a wait before a batch costs the model itself, with no channel: many_pipelines.py's batched
model (CUDA graphs) alone, back to back (the baseline) and after the model's thread slept, or spun
on the CPU, as long as a served batch waits for its requests. Per batch size and wait: p50 and p90
of the batch's wall time (launch to answer, as many_pipelines.py times it) and of its GPU time
(events around it).

If spinning gives the baseline back, the slowdown after a wait is the CPU's (its caches and
sleep states after the wait); if it does not, it is the GPU's own, which no change to the model
process's waiting can remove.

  python3 python/bench/model_after_idle.py [--batches 1,4] [--idle-ms 1,4,12] [--cpu N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from many_pipelines import make_batched_model, spin_for  # noqa: E402

WIDTH, HEIGHT = 1920, 1080


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,4", help="batch sizes, comma-separated")
    ap.add_argument("--idle-ms", default="1,4,12", help="waits before each batch, ms")
    ap.add_argument("--runs", type=int, default=100, help="batches timed per row")
    ap.add_argument("--cpu", type=int, help="pin this process to one CPU")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    model, torch = make_batched_model(WIDTH, HEIGHT, graph=True)
    if torch is None:
        raise SystemExit("needs torch with a CUDA GPU")
    frame = torch.randint(0, 256, (HEIGHT * 3 // 2, WIDTH), dtype=torch.uint8, device="cuda")
    batches = [int(b) for b in args.batches.split(",")]
    for b in batches:  # each batch size's graph captured, cuDNN's kernels picked
        for _ in range(5):
            model(model.inputs([frame] * b))
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(b: int, wait: Callable[[], None]) -> Tuple[List[float], List[float]]:
        wall: List[float] = []
        gpu: List[float] = []
        batch = [frame] * b
        for i in range(args.runs + 10):
            wait()
            t0 = time.perf_counter()
            start.record()
            model(model.inputs(batch))
            end.record()
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            if i >= 10:
                wall.append((t1 - t0) * 1e3)
                gpu.append(start.elapsed_time(end))
        return wall, gpu

    print(f"batched model alone ({WIDTH}x{HEIGHT} luma, CUDA graphs), {args.runs} batches a row"
          + (f", pinned to CPU {args.cpu}" if args.cpu is not None else ""))
    print("| batch | before each batch | wall p50 ms | p90 | GPU p50 ms | p90 | wall / back to back |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for b in batches:
        base = None
        rows = [("back to back", lambda: None)]
        for ms in (float(x) for x in args.idle_ms.split(",")):
            rows.append((f"asleep {ms:g} ms", lambda s=ms / 1e3: time.sleep(s)))
            rows.append((f"spinning {ms:g} ms", lambda s=ms / 1e3: spin_for(s)))
        for label, wait in rows:
            wall, gpu = timed(b, wait)
            p50 = float(np.median(wall))
            base = base or p50
            print(f"| {b} | {label} | {p50:.3f} | {np.percentile(wall, 90):.3f} | "
                  f"{np.median(gpu):.3f} | {np.percentile(gpu, 90):.3f} | {p50 / base:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
