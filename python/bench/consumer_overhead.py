#!/usr/bin/env python3
"""Python consumer overhead per frame at 1080p RGBA (next -> tensor -> release), p50/p99, beside a
baseline measured in the same run: the same loop (CPU time of the reading thread, so waiting
for the producer does not count) calling the C API directly through ctypes (no
Frame object, no DLPack), so the difference is what the package adds. Frames/s of each loop too.

  python3 python/bench/consumer_overhead.py [--memory host|cuda] [--frames N]

The producer runs in another process, publishing as fast as it can (drop policy, latest
consumer). With --memory cuda the tensor is torch.from_dlpack on the GPU (torch needed)."""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import tempfile
import time

import numpy as np


def produce(path: str, memory: str, stop) -> None:
    import cudaipc
    with cudaipc.Producer(path, memory=memory, num_slots=4, policy="drop") as p:
        if memory == "cuda":
            import torch
            frame = torch.full((1080, 1920, 4), 7, dtype=torch.uint8, device="cuda")
        else:
            frame = np.full((1080, 1920, 4), 7, dtype=np.uint8)
        while not stop.is_set():
            p.publish(frame)
            time.sleep(0.0005)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory", default="host", choices=["host", "cuda"])
    ap.add_argument("--frames", type=int, default=2000)
    args = ap.parse_args()
    import cudaipc
    from cudaipc import _lib

    path = os.path.join(tempfile.mkdtemp(), "bench")
    ctx = mp.get_context("spawn")  # no CUDA state inherited through fork
    stop = ctx.Event()
    prod = ctx.Process(target=produce, args=(path, args.memory, stop))
    prod.start()
    to_tensor = np.from_dlpack
    if args.memory == "cuda":
        import torch
        to_tensor = torch.from_dlpack
    try:
        with cudaipc.Consumer(path, mode="latest", timeout=30) as c:
            c.next().release()  # connected, format known
            # Baseline: the C API through ctypes, no Python objects per frame.
            ev = _lib.Event()
            base = []
            t0 = time.perf_counter()
            for _ in range(args.frames):
                s = time.thread_time_ns()
                while True:
                    _lib.check(_lib.lib.cudaipc_consumer_next(c._h, 10**9, ctypes.byref(ev)))
                    if ev.type == _lib.EVENT_FRAME:
                        break
                _lib.lib.cudaipc_frame_data(ev.frame)
                _lib.lib.cudaipc_frame_release(ev.frame)
                base.append(time.thread_time_ns() - s)
            base_fps = args.frames / (time.perf_counter() - t0)
            # The package: next -> tensor (DLPack) -> release.
            pkg = []
            t0 = time.perf_counter()
            for _ in range(args.frames):
                s = time.thread_time_ns()
                f = c.next()
                t = to_tensor(f)
                del t
                f.release()
                pkg.append(time.thread_time_ns() - s)
            pkg_fps = args.frames / (time.perf_counter() - t0)
    finally:
        stop.set()
        prod.join(10)
    print(f"1080p RGBA, {args.memory} memory, {args.frames} frames each (latest consumer; per-frame "
          "times are this thread's CPU time, so waiting for the producer is left out)")
    print(f"  C API via ctypes (baseline): p50 {pct(base, .5)/1e3:7.1f} us  "
          f"p99 {pct(base, .99)/1e3:7.1f} us  {base_fps:8.0f} frames/s")
    print(f"  cudaipc next->tensor->release: p50 {pct(pkg, .5)/1e3:7.1f} us  "
          f"p99 {pct(pkg, .99)/1e3:7.1f} us  {pkg_fps:8.0f} frames/s")
    print(f"  overhead p50: {(pct(pkg, .5) - pct(base, .5))/1e3:.1f} us per frame "
          f"(mean {(statistics.mean(pkg) - statistics.mean(base))/1e3:.1f} us)")


if __name__ == "__main__":
    main()
