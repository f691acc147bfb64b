#!/usr/bin/env python3
"""What a frame's metas cost in Python (docs/metas.md), beside the same frame without them, in the
same run (the issue's target: publish(frame, detections=<100 boxes>) <= 15 us over
publish(frame) at p50).

Producer rows (a consumer process drains the channel): publish(frame) and publish(frame,
detections=100 boxes with labels and scores) taken in turn frame by frame, so both rows see the
same machine; then publish(frame) and the same plus a 4-tensor dict of about 10 KiB, likewise;
then the encoding alone (into the producer's buffer, no publish), each kind of call on its own.
Consumer rows (a producer process publishes frames carrying both): next -> release, and next ->
frame.detections / frame.tensors / frame.metas -> release, in turn frame by frame. Every row is
this thread's CPU time per frame (waiting for the other process left out), p50 and p99, paced a
frame per 0.5 ms as consumer_overhead.py does (--pace-ms 0: back to back, caches warmer).

  python3 python/bench/metas_overhead.py [--memory host|cuda] [--frames N] [--height H]
      [--width W] [--rows producer,consumer] [--pace-ms MS]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

PACE_S = 0.0005
TARGET_US = 15.0
COCO_LIKE = [f"category {i}" for i in range(91)]


def detections(n: int = 100, seed: int = 0) -> Dict[str, np.ndarray]:
    """n boxes as a torchvision detector returns them (on the host): x1 y1 x2 y2, int64 labels,
    float32 scores."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 600, (n, 2)).astype(np.float32)
    wh = rng.uniform(4, 120, (n, 2)).astype(np.float32)
    return {"boxes": np.concatenate([xy, xy + wh], axis=1),
            "labels": rng.integers(1, 91, n), "scores": rng.random(n, dtype=np.float32)}


def tensors() -> Dict[str, np.ndarray]:
    """Four tensors, 9.8 KiB: a detector's raw outputs and an embedding."""
    return {"boxes": np.zeros((100, 4), np.float32), "scores": np.zeros(100, np.float32),
            "classes": np.zeros(100, np.int64), "embedding": np.zeros((1, 3584), np.float16)}


def pct(xs: List[int], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] / 1e3


def interleaved(frames: int, calls: List[Callable[[], None]],
                pace: float = PACE_S) -> List[List[int]]:
    """Each call once per round, in turn, `frames` rounds (after 50 to warm up), `pace` seconds
    apart: the thread CPU time of each call, in ns."""
    for _ in range(50):
        for c in calls:
            c()
            if pace:
                time.sleep(pace)
    out: List[List[int]] = [[] for _ in calls]
    for _ in range(frames):
        for times, c in zip(out, calls):
            s = time.thread_time_ns()
            c()
            times.append(time.thread_time_ns() - s)
            if pace:
                time.sleep(pace)
    return out


def show(label: str, times: List[int], base: Optional[List[int]] = None,
         target: Optional[float] = None) -> None:
    p50, p99 = pct(times, .5), pct(times, .99)
    extra = ""
    if base is not None:
        over = p50 - pct(base, .5)
        extra = f"  over its baseline {over:+6.1f} us"
        if target is not None:
            extra += f" [{'meets' if over <= target else 'misses'} <= {target:g}]"
    print(f"  {label:52s} p50 {p50:7.1f} us  p99 {p99:7.1f} us{extra}")


def drain(path: str, stop, ready) -> None:
    import cudaipc
    with cudaipc.Consumer(path, mode="latest", reconnect=True) as c:
        ready.set()
        while not stop.is_set():
            try:
                c.next(timeout=0.2).release()
            except (cudaipc.TimeoutError, cudaipc.EndOfStream):
                pass


def produce(path: str, memory: str, shape: Tuple[int, ...], stop) -> None:
    import cudaipc
    det, ten = detections(), tensors()
    with cudaipc.Producer(path, memory=memory, num_slots=4, policy="drop") as p:
        frame = _frame(memory, shape)
        while not stop.is_set():
            p.publish(frame, detections=det, label_names=COCO_LIKE, tensors=ten)
            time.sleep(PACE_S)


def _frame(memory: str, shape: Tuple[int, ...]):
    if memory == "cuda":
        import torch
        return torch.full(shape, 7, dtype=torch.uint8, device="cuda")
    return np.full(shape, 7, dtype=np.uint8)


def producer_rows(args, ctx, shape: Tuple[int, ...]) -> None:
    import cudaipc
    from cudaipc._metas_io import MetaWriter

    path = os.path.join(tempfile.mkdtemp(), "bench")
    stop, ready = ctx.Event(), ctx.Event()
    cons = ctx.Process(target=drain, args=(path, stop, ready))
    cons.start()
    ready.wait(30)
    det, ten = detections(), tensors()
    try:
        with cudaipc.Producer(path, memory=args.memory, num_slots=4, policy="drop") as p:
            p.wait_for_consumers(timeout=60)
            frame = _frame(args.memory, shape)
            # Two pairs, each taken in turn frame by frame with its own baseline.
            bare, with_det = interleaved(args.frames, [
                lambda: p.publish(frame),
                lambda: p.publish(frame, detections=det, label_names=COCO_LIKE)], args.pace)
            bare2, with_both = interleaved(args.frames, [
                lambda: p.publish(frame),
                lambda: p.publish(frame, detections=det, label_names=COCO_LIKE, tensors=ten)],
                args.pace)
        w = MetaWriter(65536)
        buf = w.buffer()
        # Each alone: back to back (--pace-ms 0), this is the steady cost with warm caches.
        (enc_det,) = interleaved(args.frames, [
            lambda: w.encode(buf, detections=det, label_names=COCO_LIKE)], args.pace)
        (enc_both,) = interleaved(args.frames, [
            lambda: w.encode(buf, detections=det, label_names=COCO_LIKE, tensors=ten)],
            args.pace)
    finally:
        stop.set()
        cons.join(10)
    size = w.encode(buf, detections=det, label_names=COCO_LIKE, tensors=ten)
    print(f"producer, {args.memory} memory, {'x'.join(map(str, shape))} uint8, "
          f"{args.frames} frames a row, interleaved, {args.pace * 1e3:g} ms apart (area with "
          f"both: {size} bytes)")
    show("publish(frame)", bare)
    show("publish(frame, detections=100 boxes)", with_det, bare, TARGET_US)
    show("publish(frame) (second pair)", bare2)
    show("publish(frame, detections=100 boxes, tensors=4, 9.8 KiB)", with_both, bare2)
    show("encode detections=100 boxes only (no publish)", enc_det)
    show("encode detections + tensors only (no publish)", enc_both)


def consumer_rows(args, ctx, shape: Tuple[int, ...]) -> None:
    import cudaipc

    path = os.path.join(tempfile.mkdtemp(), "bench")
    stop = ctx.Event()
    prod = ctx.Process(target=produce, args=(path, args.memory, shape, stop))
    prod.start()
    try:
        with cudaipc.Consumer(path, mode="latest", timeout=60) as c:
            c.next().release()

            def read(what: str) -> Callable[[], None]:
                def one() -> None:
                    f = c.next()
                    if what:
                        getattr(f, what)
                    f.release()
                return one

            calls = [read(""), read("detections"), read("tensors"), read("metas")]
            rows = interleaved(args.frames, calls, args.pace)
            stats = c.stats
    finally:
        stop.set()
        prod.join(10)
    print(f"consumer, {args.memory} memory, frames carrying 100 detections and 4 tensors, "
          f"{args.frames} frames a row, interleaved, {args.pace * 1e3:g} ms apart "
          f"({stats['metas-received']} records read, {stats['metas-bad']} bad)")
    show("next -> release", rows[0])
    show("next -> frame.detections -> release", rows[1], rows[0])
    show("next -> frame.tensors -> release", rows[2], rows[0])
    show("next -> frame.metas (every record) -> release", rows[3], rows[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memory", default="host", choices=["host", "cuda"])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--rows", default="producer,consumer")
    ap.add_argument("--pace-ms", type=float, default=PACE_S * 1e3,
                    help="pause after each call (0: back to back)")
    args = ap.parse_args()
    args.pace = args.pace_ms / 1e3
    ctx = mp.get_context("spawn")  # no CUDA state inherited through fork
    shape = (args.height, args.width, 4)
    wanted = set(args.rows.split(","))
    if "producer" in wanted:
        producer_rows(args, ctx, shape)
    if "consumer" in wanted:
        consumer_rows(args, ctx, shape)


if __name__ == "__main__":
    main()
