#!/usr/bin/env python3
"""Where a model process's reply() spends its time: a server in this process answering a host
requester's frames with a detector's results, on the host (NumPy) and on the GPU (torch CUDA
tensors, sent by the core once computed). Prints p50 µs per reply for each, then cProfile's top
functions for the GPU path.

  python3 python/bench/reply_profile.py [--frames N]
  python3 python/bench/reply_profile.py --loop [--frames N]

--loop splits a served model's request on the GPU into its calls, as cudaipcfilter would send it:
another process publishes 1080p NV12 CUDA frames as requests and reads the replies (a thread
asleep in its wait, woken by each reply, as the filter's reply reader is), and this process runs
next() -> torch() -> a few kernels on the frame and a CPU wait for their answer -> the reply,
taking each step's calls apart: the reply with and without its stream, its publish alone, the
frame's release after the stream and without one. Each row is that call's p50/mean/p99 in µs.
--memory host does the same on NumPy frames; --busy N launches N kernels before each reply, as a
model does (its launches leave the package's code and pages out of the caches), waits for them
through an event, and queues N more (the next request's, as the overlapped loop has them queued
when it replies); reply(after=e) then releases after that event. On CUDA the
second half of the requests runs with the request channel's stream handed out (rows marked so):
each release then asks the driver whether that stream is idle.
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


def _requester(path: str, frames: int, memory: str, failed) -> None:
    """The filter's side of --loop: requests (each frame's first byte its index), every reply
    read and matched to its frame."""
    import cudaipc

    if memory == "cuda":
        import torch
        frame = torch.zeros((1620, 1920), dtype=torch.uint8, device="cuda")
    else:
        frame = np.zeros((1620, 1920), np.uint8)
    with cudaipc.Producer(path, memory=memory, num_slots=8, role="requests") as req:
        req.wait_for_consumers(1, timeout=30)
        replies = cudaipc.Consumer(path + ".reply", timeout=30)
        for i in range(frames):
            frame[0, 0] = i & 0xff
            req.publish(frame, pts=i)
            with replies.next(30) as r:
                if r.pts != i and not failed.is_set():
                    failed.set()
        replies.close()


def loop(frames: int, memory: str, busy: int = 0) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    d = tempfile.mkdtemp()
    path = os.path.join(d, "model")
    det = {"boxes": np.array([[1.0, 2.0, 30.0, 40.0]], np.float32),
           "labels": np.zeros(1, np.int64), "scores": np.ones(1, np.float32)}
    names = ["object"]
    rows: dict = {}
    kinds = ("reply(stream=s)", "reply(after=e)", "reply()", "publish, then release(s)",
             "publish, then release(after=e)", "release()")

    def note(name: str, t: float) -> None:
        rows.setdefault(name + lent, []).append(time.perf_counter() - t)

    with cudaipc.Server(path) as srv:
        failed = ctx.Event()
        p = ctx.Process(target=_requester, args=(path, frames, memory, failed))
        p.start()
        stream = None
        if memory == "cuda":
            import torch
            stream = torch.cuda.current_stream()
            scratch = torch.ones(4096, device="cuda")
            answered = torch.cuda.Event()
        native = cudaipc._lib.native
        lent = ""
        for i in range(frames):
            t = time.perf_counter()
            r = srv.next(30)
            note("next()", t)
            if r is None:
                break
            t = time.perf_counter()
            f = r.torch() if memory == "cuda" else r.numpy()
            note("req.torch()" if memory == "cuda" else "req.numpy()", t)
            if int(f[0, 0]) != i & 0xff or r.frame.pts != i:  # the CPU waits for the kernel here
                raise SystemExit(f"request {i} carries frame {int(f[0, 0])}, pts {r.frame.pts}")
            if busy and memory == "cuda":
                # A model's launches between the request and its reply (torch's CPU work in the
                # caches and the driver's queues), then its CPU wait.
                for _ in range(busy):
                    scratch.mul_(1.0)
                answered.record()  # the model's answer, which the CPU waits for
                answered.synchronize()
                # The next request's launches, queued before this reply as the overlapped loop
                # does: the stream is busy when the reply names it.
                for _ in range(busy):
                    scratch.mul_(1.0)
            if memory == "cuda":
                t = time.perf_counter()
                torch.cuda.current_stream()
                note("torch.cuda.current_stream()", t)
            if memory == "cuda" and not lent and i >= frames // 2:
                # The second half with the request channel's stream handed out (the array
                # interface names it): each release then queries it, as every release did
                # before the consumer counted its own work there.
                assert r.__cuda_array_interface__["stream"]
                lent = ", stream handed out"
            kind = kinds[i % len(kinds)]
            if kind.endswith("(after=e)") and not (busy and memory == "cuda"):
                kind = "reply()"  # no answer waited for through an event
            t = time.perf_counter()
            if kind == "reply(stream=s)":
                r.reply(stream=stream, meta={"pts": r.frame.pts}, detections=det,
                        label_names=names)
                note(kind, t)
            elif kind == "reply(after=e)":
                r.reply(meta={"pts": r.frame.pts}, detections=det, label_names=names,
                        after=answered)
                note(kind, t)
            elif kind == "reply()":
                r.reply(meta={"pts": r.frame.pts}, detections=det, label_names=names)
                note(kind, t)
            else:
                native.server_reply(srv._handle(), r.frame._h, None, 0)
                note("publish (server_reply, no metas)", t)
                t = time.perf_counter()
                if kind.endswith("(after=e)"):
                    r.frame.release(after=answered)
                    note("release(after=e) after its publish", t)
                else:
                    r.frame.release(stream if kind.endswith("(s)") else None)
                    note("release(s) after its publish" if kind.endswith("(s)") else
                         "release() after its publish", t)
        p.join(60)
        if p.exitcode != 0 or failed.is_set():
            raise SystemExit(f"the requester failed (exit {p.exitcode}, a reply not its "
                             f"frame's: {failed.is_set()})")
    if busy:
        print(f"(each request after {busy} kernel launches and a CPU wait for them)")
    print(f"| {frames} {memory} requests, µs | p50 | mean | p99 |\n|---|---|---|---|")
    for name, v in rows.items():
        a = np.array(v[len(v) // 10:]) * 1e6
        print(f"| {name} | {np.median(a):.1f} | {a.mean():.1f} | {np.percentile(a, 99):.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--loop", action="store_true",
                    help="a served model's request, call by call")
    ap.add_argument("--memory", choices=("cuda", "host"), default="cuda",
                    help="--loop's requests (host: no GPU needed)")
    ap.add_argument("--busy", type=int, default=0, metavar="N",
                    help="--loop on CUDA: N kernel launches between a request and its reply, "
                         "as a model's")
    args = ap.parse_args()
    if args.loop:
        loop(args.frames, args.memory, args.busy)
        return
    host = run(args.frames, False, False)
    gpu = run(args.frames, True, False)
    batch = run_batch(max(1, args.frames // 8), 8)
    print(f"| reply() p50 µs | host results | GPU results | GPU, reply_batch of 8 (per request) |"
          f"\n|---|---|---|---|\n| {args.frames} replies | {host:.1f} | {gpu:.1f} | {batch:.1f} |")
    run(min(args.frames, 500), True, True)


if __name__ == "__main__":
    main()
