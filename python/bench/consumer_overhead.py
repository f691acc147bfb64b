#!/usr/bin/env python3
"""Python consumer overhead per frame at 1080p RGBA (next -> tensor -> release), p50/p99, beside a
baseline measured in the same run: the same loop (CPU time of the reading thread, so waiting
for the producer does not count) calling the C API directly through ctypes (no
Frame object, no DLPack), so the difference is what the package adds. Frames/s of each loop too,
and the native C++ consumer (tests/bench/consumer_rate.cpp, next -> release) on the same channel
in the same run: found in build/tests/bench, or named with --cxx-consumer; absent, its row says why.

  python3 python/bench/consumer_overhead.py [--memory host|cuda] [--frames N] [--cxx-consumer PATH]

The producer runs in another process, publishing as fast as it can (drop policy, latest
consumer). With --memory cuda the tensor is torch.from_dlpack on the GPU (torch needed)."""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import subprocess
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


CXX_NAME = "cudaipc-bench-consumer-rate"


def find_cxx_consumer(given):
    """The native consumer's path, or (None, why not)."""
    if given:
        return (given, None) if os.access(given, os.X_OK) else (None, f"{given} is not executable")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for build in ("build", "builddir"):
        p = os.path.join(root, build, "tests", "bench", CXX_NAME)
        if os.access(p, os.X_OK):
            return p, None
    return None, (f"{CXX_NAME} not found under {root}/build/tests/bench (build it: ninja -C build "
                  f"tests/bench/{CXX_NAME}, or pass --cxx-consumer PATH)")


def run_cxx_consumer(exe, path, frames):
    """(frames/s, p50 us, p99 us) of the native consumer, or a str saying why there is none."""
    try:
        r = subprocess.run([exe, f"--path={path}", f"--frames={frames}"], capture_output=True,
                           text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{exe} failed: {e}"
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("consumer-rate ")), None)
    if r.returncode != 0 or line is None:
        return f"{exe} exited {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
    kv = dict(item.split("=", 1) for item in line.split()[1:])
    return float(kv["fps"]), float(kv["p50_us"]), float(kv["p99_us"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory", default="host", choices=["host", "cuda"])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--cxx-consumer", metavar="PATH",
                    help=f"the {CXX_NAME} program (default: the one in build/tests/bench)")
    args = ap.parse_args()
    cxx_exe, cxx = find_cxx_consumer(args.cxx_consumer)
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
            # The native consumer, a second latest consumer on the same producer, while this one
            # stays connected and idle.
            if cxx_exe is not None:
                cxx = run_cxx_consumer(cxx_exe, path, args.frames)
    finally:
        stop.set()
        prod.join(10)
    print(f"1080p RGBA, {args.memory} memory, {args.frames} frames each (latest consumer; per-frame "
          "times are this thread's CPU time, so waiting for the producer is left out)")
    print(f"  C API via ctypes (baseline): p50 {pct(base, .5)/1e3:7.1f} us  "
          f"p99 {pct(base, .99)/1e3:7.1f} us  {base_fps:8.0f} frames/s")
    print(f"  cudaipc next->tensor->release: p50 {pct(pkg, .5)/1e3:7.1f} us  "
          f"p99 {pct(pkg, .99)/1e3:7.1f} us  {pkg_fps:8.0f} frames/s")
    if isinstance(cxx, tuple):
        print(f"  C++ consumer next->release:    p50 {cxx[1]:7.1f} us  p99 {cxx[2]:7.1f} us  "
              f"{cxx[0]:8.0f} frames/s")
    else:
        print(f"  C++ consumer: skipped ({cxx})")
    print(f"  overhead p50: {(pct(pkg, .5) - pct(base, .5))/1e3:.1f} us per frame "
          f"(mean {(statistics.mean(pkg) - statistics.mean(base))/1e3:.1f} us)")


if __name__ == "__main__":
    main()
