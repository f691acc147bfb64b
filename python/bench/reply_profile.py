#!/usr/bin/env python3
"""Where a model process's reply() spends its time: a server in this process answering a host
requester's frames with a detector's results, on the host (NumPy) and on the GPU (torch CUDA
tensors, sent by the core once computed). Prints p50 µs per reply for each, then cProfile's top
functions for the GPU path.

  python3 python/bench/reply_profile.py [--frames N]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time

import numpy as np

import cudaipc


def run(frames: int, gpu: bool, profile: bool) -> float:
    import torch

    d = tempfile.mkdtemp()
    path = os.path.join(d, "model")
    times = []
    with cudaipc.Producer(path, memory="host", num_slots=8, role="requests") as req, \
            cudaipc.Server(path) as srv:
        req.wait_for_consumers(1)
        replies = cudaipc.Consumer(path + ".reply", timeout=10)
        if gpu:
            det = {"boxes": torch.tensor([[1.0, 2.0, 30.0, 40.0]], device="cuda"),
                   "labels": torch.zeros(1, dtype=torch.int64, device="cuda"),
                   "scores": torch.ones(1, device="cuda")}
        else:
            det = {"boxes": np.array([[1.0, 2.0, 30.0, 40.0]], np.float32),
                   "labels": np.zeros(1, np.int64), "scores": np.ones(1, np.float32)}
        stream = torch.cuda.current_stream()
        prof = cProfile.Profile() if profile else None
        for i in range(frames):
            req.publish(np.full(8, i & 0xff, np.uint8))
            r = srv.next(5)
            if prof:
                prof.enable()
            t0 = time.perf_counter()
            r.reply(stream=stream, meta={"pts": i}, detections=det, label_names=["object"])
            times.append(time.perf_counter() - t0)
            if prof:
                prof.disable()
            with replies.next(10):
                pass
        replies.close()
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    times.sort()
    return times[len(times) // 2] * 1e6


def run_batch(rounds: int, size: int) -> float:
    """Server.reply_batch for `size` requests at once, GPU results: p50 µs per request."""
    import torch

    d = tempfile.mkdtemp()
    path = os.path.join(d, "model")
    times = []
    with cudaipc.Producer(path, memory="host", num_slots=max(8, size), role="requests") as req, \
            cudaipc.Server(path) as srv:
        req.wait_for_consumers(1)
        replies = cudaipc.Consumer(path + ".reply", timeout=10)
        dets = [{"boxes": torch.tensor([[1.0, 2.0, 30.0, 40.0]], device="cuda"),
                 "labels": torch.zeros(1, dtype=torch.int64, device="cuda"),
                 "scores": torch.ones(1, device="cuda")} for _ in range(size)]
        for i in range(rounds):
            for k in range(size):
                req.publish(np.full(8, (i + k) & 0xff, np.uint8))
            reqs = []
            while len(reqs) < size:
                reqs += srv.batch(size - len(reqs), timeout=5)
            t0 = time.perf_counter()
            srv.reply_batch(reqs, dets, label_names=["object"])
            times.append((time.perf_counter() - t0) / size)
            for _ in range(size):
                with replies.next(10):
                    pass
        replies.close()
    times.sort()
    return times[len(times) // 2] * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000)
    args = ap.parse_args()
    host = run(args.frames, False, False)
    gpu = run(args.frames, True, False)
    batch = run_batch(max(1, args.frames // 8), 8)
    print(f"| reply() p50 µs | host results | GPU results | GPU, reply_batch of 8 (per request) |"
          f"\n|---|---|---|---|\n| {args.frames} replies | {host:.1f} | {gpu:.1f} | {batch:.1f} |")
    run(min(args.frames, 500), True, True)


if __name__ == "__main__":
    main()
