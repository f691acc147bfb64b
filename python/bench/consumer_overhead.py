#!/usr/bin/env python3
"""What the Python package costs per frame at 1080p RGBA, beside the native C++ code on the same
channel in the same run (issue #15's targets: <= 10 us p50 over the C++ rows, p99 <= 2x p50).

Consumer rows (a producer process publishes as fast as the consumer reads: drop policy, one frame
per 0.5 ms; this process reads as a latest consumer): the bare C API through ctypes (next and
release, no Frame, no DLPack), then next -> tensor -> release with NumPy (host), torch and CuPy
(CUDA: their from_dlpack, and the slot views frame.torch() and frame.cupy()), beside
cudaipc-bench-consumer-rate (C++ next -> release; for CUDA also with the frame's reads and release
ordered on a stream, as frame.torch() and frame.cupy() order them). Producer rows (a consumer process
drains the channel): publish(tensor) and frame() rendering in place (torch copy_ into the slot),
beside cudaipc-bench-producer-rate (C++ publish() of a device buffer after the caller's stream,
and begin_frame -> device copy -> commit). Every row's per-frame time is this thread's CPU time,
so waiting for the other process is left out, and every row runs paced (a frame per 0.5 ms) as
the native ones do.

  python3 python/bench/consumer_overhead.py [--memory host|cuda] [--frames N] [--pin]
      [--cxx-consumer PATH] [--cxx-producer PATH] [--rows consumer,producer]

With --pin the reading side (this process's thread and the C++ consumer in turn) keeps one CPU
and the producer another physical core: a thread that wakes on another core each frame finds its
caches cold, which costs Python's larger working set more than C++'s, and unpinned rows carry
the scheduler's choices.

The native programs are found in build/tests/bench (or beside this file's bundle copy, see
python/tests/build-device-bundle.sh) or named; absent, their rows say why."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import multiprocessing as mp
import os
import random
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, List, Optional, Tuple, Union

import numpy as np

H, W = 1080, 1920
PACE_S = 0.0005
TORCH_ROW = "next -> frame.torch() -> release"
CUPY_ROW = "next -> frame.cupy() -> release"
TORCH_OWN = "torch's own: from_dlpack(to_dlpack(resident)), no channel"
TORCH_OWN_PACED = "next -> torch's own import of a resident tensor -> release"
PLAIN_ROW = "package next -> release (the binding)"
AGAIN_ROW = "package next -> release, again (the same calls)"
# The consumer's stream asked for: each release then queries it (a driver call), as every release
# did before the consumer counted its own work there.
HANDED_OUT = "handed out"
PLAIN_LENT_ROW = "package next -> release, its stream handed out"


def produce(path: str, memory: str, stop, cpus: Optional[set] = None) -> None:
    import cudaipc
    if cpus:
        os.sched_setaffinity(0, cpus)
    with cudaipc.Producer(path, memory=memory, num_slots=4, policy="drop") as p:
        if memory == "cuda":
            import torch
            frame = torch.full((H, W, 4), 7, dtype=torch.uint8, device="cuda")
        else:
            frame = np.full((H, W, 4), 7, dtype=np.uint8)
        while not stop.is_set():
            p.publish(frame)
            time.sleep(PACE_S)


def drain(path: str, stop, ready, cpus: Optional[set] = None) -> None:
    """A latest consumer that takes and releases every frame it gets, following producers that
    come and go on the path, until told to stop."""
    import cudaipc
    if cpus:
        os.sched_setaffinity(0, cpus)
    with cudaipc.Consumer(path, mode="latest", reconnect=True) as c:
        ready.set()
        while not stop.is_set():
            try:
                c.next(timeout=0.2).release()
            except (cudaipc.TimeoutError, cudaipc.EndOfStream):
                pass


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


Row = Union[Tuple[float, float, float], str]  # (frames/s, p50 us, p99 us), or why there is none


def timed(frames: int, one: Callable[[], None], pace: bool = False) -> Row:
    """Runs `one` per frame (with a 0.5 ms pause after each when `pace`, outside the timing, as
    the native producer does); the CPU time of each call."""
    for _ in range(20):
        one()
    cpu: List[int] = []
    t0 = time.perf_counter()
    for _ in range(frames):
        s = time.thread_time_ns()
        one()
        cpu.append(time.thread_time_ns() - s)
        if pace:
            time.sleep(PACE_S)
    fps = frames / (time.perf_counter() - t0)
    return fps, pct(cpu, .5) / 1e3, pct(cpu, .99) / 1e3


def in_rounds(specs: List[Tuple[str, Callable[[], None]]], natives: List[Tuple[str, List[str]]],
              frames: int, rounds: int, counters: Optional[Callable[[], dict]] = None
              ) -> Tuple[List[Tuple[str, Row]], dict, dict]:
    """Every row `frames` times, in `rounds` rounds that take turns (each row and each native run
    once a round): a lent machine's speed drifts over seconds, more than the few microseconds
    the rows differ by, and taking turns spreads the drift over all of them. Each round takes the
    Python rows in another order (seeded): a row runs with its caches as the row before it left
    them, which moved rows by up to 8 us in a fixed order. Python rows: p50 and p99 over all their
    frames; native ones (a program per round): the median of the rounds'. With `counters` (the
    consumer's), each row's GPU waits and releases too."""
    per = max(1, frames // rounds)
    cpu: dict = {label: [] for label, _ in specs}
    wall = {label: 0.0 for label, _ in specs}
    got: dict = {label: [] for label, _ in natives}
    gpu: dict = {label: [0, 0] for label, _ in specs}
    native_gpu: dict = {label: [] for label, _ in natives}
    order = random.Random(39)
    for _ in range(rounds):
        for label, argv in natives:
            printed: dict = {}
            got[label].append(run_native(argv + [f"--frames={per}"], "consumer-rate", printed))
            if "gpu_waits" in printed:
                native_gpu[label].append((float(printed["gpu_waits"]),
                                          float(printed["gpu_releases"])))
        for label, one in order.sample(specs, len(specs)):
            for _ in range(10):
                one()
            before = counters() if counters else None
            t0 = time.perf_counter()
            for _ in range(per):
                s = time.thread_time_ns()
                one()
                cpu[label].append(time.thread_time_ns() - s)
            wall[label] += time.perf_counter() - t0
            if before is not None:
                after = counters()
                gpu[label][0] += after["gpu_waits"] - before["gpu_waits"]
                gpu[label][1] += after["gpu_releases"] - before["gpu_releases"]
    rows: List[Tuple[str, Row]] = [
        (label, (len(cpu[label]) / wall[label], pct(cpu[label], .5) / 1e3,
                 pct(cpu[label], .99) / 1e3)) for label, _ in specs]
    native_rows: dict = {}
    for label, runs in got.items():
        failed = [r for r in runs if isinstance(r, str)]
        native_rows[label] = failed[0] if failed else tuple(
            float(np.median([r[i] for r in runs])) for i in range(3))
    n = max(1, per * rounds)
    per_frame = {label: (w / n, r / n) for label, (w, r) in gpu.items()}
    for label, runs in native_gpu.items():
        if runs:
            per_frame[f"C++ consumer, {label}"] = (float(np.mean([w for w, _ in runs])),
                                                   float(np.mean([r for _, r in runs])))
    return rows, native_rows, per_frame


def find_program(name: str, given: Optional[str]):
    """A native bench program's path, or (None, why not)."""
    if given:
        return (given, None) if os.access(given, os.X_OK) else (None, f"{given} is not executable")
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    places = [os.path.join(root, b, "tests", "bench", name) for b in ("build", "builddir")]
    places.append(os.path.join(root, "build", "python-dist", "bench", name))
    for p in places:
        if os.access(p, os.X_OK):
            return p, None
    return None, (f"{name} not found under {root}/build/tests/bench (build it: ninja -C build "
                  f"tests/bench/{name}, or pass its path)")


def run_native(args: List[str], prefix: str, extra: Optional[dict] = None) -> Row:
    # A program copied out of build/ (the device bundle) finds libcudaipc beside it.
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(args[0]))
    env["LD_LIBRARY_PATH"] = here + (":" + env["LD_LIBRARY_PATH"]
                                     if env.get("LD_LIBRARY_PATH") else "")
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=180, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{args[0]} failed: {e}"
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith(prefix + " ")), None)
    if r.returncode != 0 or line is None:
        return f"{args[0]} exited {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
    kv = dict(item.split("=", 1) for item in line.split()[1:])
    if extra is not None:
        extra.update(kv)  # what else the program printed (the consumer's GPU counters)
    return float(kv["fps"]), float(kv["p50_us"]), float(kv["p99_us"])


def show(label: str, row: Row, native: Optional[Row] = None, ordered: Optional[Row] = None) -> None:
    if isinstance(row, str):
        print(f"  {label:44s} skipped ({row})")
        return
    fps, p50, p99 = row
    extra = ""
    if native is not None and not isinstance(native, str):
        over = p50 - native[1]
        extra = (f"  over C++ {over:+6.1f} us [{'meets' if over <= 10 else 'misses'} <= 10], "
                 f"p99/p50 {p99 / p50:.1f} [{'meets' if p99 <= 2 * p50 else 'misses'} <= 2]")
    if ordered is not None and not isinstance(ordered, str):
        extra += f", over C++ ordered {p50 - ordered[1]:+6.1f} us"
    print(f"  {label:44s} p50 {p50:7.1f} us  p99 {p99:7.1f} us  {fps:8.0f} frames/s{extra}")


def p50_of(rows: List[Tuple[str, Row]], label: str) -> Optional[float]:
    row = dict(rows).get(label)
    return None if row is None or isinstance(row, str) else row[1]


def targets(rows: List[Tuple[str, Row]], native: Row, ordered: Row) -> None:
    """Issue #39's consumer targets, each against the baseline of this run: frame.torch() within
    torch's own import + 5 us of the C++ consumer, frame.cupy() within 5 us. The C++ consumer that
    orders its reads and release on a stream, as frame.torch() and frame.cupy() do, is the
    like-for-like baseline; the plain one is printed beside."""
    own = p50_of(rows, TORCH_OWN)
    paced, plain = p50_of(rows, TORCH_OWN_PACED), p50_of(rows, PLAIN_ROW)
    budgets = [(TORCH_ROW, own, "torch's own import back to back + 5")]
    if paced is not None and plain is not None:
        budgets.append((TORCH_ROW, paced - plain, "torch's own import between next and release "
                        "+ 5"))
    budgets.append((CUPY_ROW, 0.0, "+5"))
    for label, budget, what in budgets:
        p50 = p50_of(rows, label)
        if p50 is None or budget is None:
            continue
        cells = []
        for name, base in (("plain", native), ("ordered", ordered)):
            if isinstance(base, str):
                continue
            over = p50 - base[1]
            cells.append(f"{over:+.1f} over the {name} C++ consumer "
                         f"[{'meets' if over <= budget + 5 else 'misses'} {what} = "
                         f"{budget + 5:.1f}]")
        print(f"  target, {label}: " + "; ".join(cells))
    again = p50_of(rows, AGAIN_ROW)
    if plain is not None and again is not None:
        print(f"  noise: one row run twice under two labels, p50 {plain:.1f} and {again:.1f} us "
              f"({again - plain:+.1f}): a difference between rows within that is not one")


def consumer_rows(args, ctx, cxx_consumer) -> None:
    import cudaipc
    from cudaipc import _lib

    path = os.path.join(tempfile.mkdtemp(), "bench")
    stop = ctx.Event()
    prod = ctx.Process(target=produce, args=(path, args.memory, stop, args.producer_cpus))
    prod.start()
    rows: List[Tuple[str, Row]] = []  # rows that did not run, with why
    specs: List[Tuple[str, Callable[[], None]]] = []
    native: Row = "not run"
    ordered: Row = "host memory: nothing to order"
    handed_out: Row = "host memory: no stream"
    importers: List[Tuple[str, Callable]] = [("NumPy", np.from_dlpack)]
    if args.memory == "cuda":
        importers = []
        try:
            import torch
            importers.append(("torch", torch.from_dlpack))
        except ImportError as e:
            rows.append(("next -> torch.from_dlpack -> release", f"torch: {e}"))
        try:
            import cupy
            importers.append(("CuPy", cupy.from_dlpack))
        except ImportError as e:
            rows.append(("next -> cupy.from_dlpack -> release", f"cupy: {e}"))
    try:
        with contextlib.ExitStack() as stack, \
                cudaipc.Consumer(path, mode="latest", timeout=60) as c:
            c.next().release()  # connected, format known
            next_frame, release, ev, refs = _ctypes_reader()

            def bare() -> None:
                while True:
                    _lib.check(next_frame(c._h, 10**9, *refs))
                    if ev.type == _lib.EVENT_FRAME:
                        break
                release(ev.frame)

            specs.append(("C API via ctypes (next, release)", bare))

            def plain() -> None:
                c.next().release()

            specs.append((PLAIN_ROW, plain))
            # The same calls under a second label: how far two rows apart that do the same work
            # land in one run, the noise every difference below carries.
            specs.append((AGAIN_ROW, plain))
            if args.memory == "cuda":
                # The same on a second consumer whose stream was asked for: each of its releases
                # queries the stream, as every release did before the consumer counted its work.
                lent = stack.enter_context(cudaipc.Consumer(path, mode="latest", timeout=60))
                lent.next().release()
                assert lent.cuda_stream

                def plain_lent() -> None:
                    lent.next().release()

                specs.append((PLAIN_LENT_ROW, plain_lent))

            # The compiled call Consumer.next() makes, without it (its lock, timeout and
            # attribute reads): what the Python method adds to the binding.
            from cudaipc import _native
            consumer_next, events = _native.consumer_next, c._events

            def binding_alone() -> None:
                shared = c._shared
                got = consumer_next(c._h, 10**9, events, shared, shared.tensor_id,
                                    shared.device_id)
                if type(got) is int:
                    raise RuntimeError(f"not a frame: {got} (event {events.type})")
                got.release()

            specs.append(("the binding's next call alone -> release", binding_alone))
            if args.memory == "host":
                def host_view() -> None:
                    f = c.next()
                    f.numpy()  # the read-only slot view the docs teach, made and dropped
                    f.release()

                specs.append(("next -> frame.numpy() -> release", host_view))

            def paced(call: Callable[[], Any]) -> Callable[[], None]:
                """`call` between a frame's next and release, as a reader's calls run: their
                caches as cold as after each wait for a frame."""
                def run() -> None:
                    f = c.next()
                    call()
                    f.release()

                return run

            def view_rows(name: str) -> List[Tuple[str, Callable[[], None]]]:
                """frame.<name>() between next and release, made and dropped as a reader's view is
                at its frame's end: ordered on the library's current stream, unordered (-1), and
                on the legacy stream named by the caller (the order without the library's current
                stream asked)."""
                method = getattr(cudaipc.Frame, name)

                def row(stream: Optional[int]) -> Callable[[], None]:
                    def run() -> None:
                        f = c.next()
                        method(f, stream)
                        f.release()

                    return run

                # A stream of the library's own, not the legacy one: what the legacy stream's
                # semantics (it orders with every blocking stream of the context) cost a query.
                own = (torch.cuda.Stream() if name == "torch"
                       else cupy.cuda.Stream(non_blocking=True))
                return [(f"next -> frame.{name}() -> release", row(None)),
                        (f"next -> frame.{name}(stream=-1), unordered -> release", row(-1)),
                        (f"next -> frame.{name}(stream=1), legacy named -> release", row(1)),
                        (f"next -> frame.{name}(stream=its own stream) -> release", row(own))]

            if args.memory == "cuda" and any(n == "torch" for n, _ in importers):
                import torch

                specs.extend(view_rows("torch"))

                # Where frame.torch()'s time goes: the export alone (a capsule made, ordered on the
                # legacy stream, then dropped unconsumed: its deleter orders the release), the
                # same unordered, and one CUDA driver query (what each ordering step costs at
                # least on this machine).
                def capsule(stream: int) -> None:
                    f = c.next()
                    f.__dlpack__(stream=stream)  # dropped unconsumed
                    f.release()

                specs.append(("next -> capsule (legacy stream) -> release", lambda: capsule(1)))
                specs.append(("next -> capsule (stream -1, unordered) -> release",
                              lambda: capsule(-1)))
                legacy = torch.cuda.default_stream()
                specs.append(("torch: default_stream().query(), no channel", legacy.query))
                resident = torch.zeros(1080 * 1920 * 4, dtype=torch.uint8, device="cuda")
                to_dlpack = torch.utils.dlpack.to_dlpack

                def torch_alone() -> None:
                    torch.from_dlpack(to_dlpack(resident))

                specs.append((TORCH_OWN, torch_alone))

                # torch's own import again, between a frame's next and release as frame.torch()
                # runs: its caches as cold as theirs after the wait for the frame.
                specs.append((TORCH_OWN_PACED, paced(torch_alone)))

                # frame.torch()'s own steps, each between a frame's next and release as it runs
                # there: torch's current stream, and the alias of a slot's tensor (detach) that it
                # hands out.
                raw_stream = torch._C._cuda_getCurrentRawStream
                small = torch.zeros(16, dtype=torch.uint8, device="cuda")
                specs.append(("next -> torch: _cuda_getCurrentRawStream(0) -> release",
                              paced(lambda: raw_stream(0))))
                specs.append(("next -> torch: tensor.detach() -> release", paced(small.detach)))
            if args.memory == "cuda" and any(n == "CuPy" for n, _ in importers):
                # Where frame.cupy()'s time goes: the view rows, and cupy's own calls that it
                # makes (its current stream, with and without the device; the stream's pointer;
                # an alias of a resident array).
                specs.extend(view_rows("cupy"))
                import cupy
                current = cupy.cuda.get_current_stream
                stream_now = current()
                array = cupy.zeros(16, dtype=cupy.uint8)
                for label, call in (("cupy: get_current_stream(0)", lambda: current(0)),
                                    ("cupy: get_current_stream()", current),
                                    ("cupy: stream.ptr", lambda: stream_now.ptr),
                                    ("cupy: array.view()", array.view)):
                    specs.append((label + ", no channel", call))
                # The same two calls frame.cupy() makes, between a frame's next and release.
                for label, call in (("cupy: get_current_stream(0)", lambda: current(0)),
                                    ("cupy: array.view()", array.view)):
                    specs.append((f"next -> {label} -> release", paced(call)))
            if args.memory == "cuda" and any(n == "torch" for n, _ in importers):
                import torch
                resident = torch.zeros(16, dtype=torch.uint8, device="cuda")
                raw = torch._C._cuda_getCurrentRawStream
                for label, call in (("torch: _cuda_getCurrentRawStream(0)", lambda: raw(0)),
                                    ("torch: tensor.detach()", resident.detach)):
                    specs.append((label + ", no channel", call))
            for name, to_tensor in importers:
                def one(to_tensor=to_tensor) -> None:
                    f = c.next()
                    t = to_tensor(f)
                    del t
                    f.release()

                specs.append((f"next -> {name} from_dlpack -> release", one))
            natives: List[Tuple[str, List[str]]] = []
            if cxx_consumer[0] is not None:
                natives.append(("plain", [cxx_consumer[0], f"--path={path}"]))
                if args.memory == "cuda":
                    natives.append(("ordered", [cxx_consumer[0], f"--path={path}", "--ordered"]))
                    natives.append((HANDED_OUT, [cxx_consumer[0], f"--path={path}",
                                                 "--stream-handed-out"]))
            else:
                native = ordered = cxx_consumer[1]
            timed_rows, native_rows, gpu = in_rounds(
                specs, natives, args.frames, args.rounds,
                c.counters if args.memory == "cuda" else None)
            rows.extend(timed_rows)
            native = native_rows.get("plain", native)
            ordered = native_rows.get("ordered", ordered)
            handed_out = native_rows.get(HANDED_OUT, "not run")
    finally:
        stop.set()
        prod.join(10)
    print(f"consumer, {args.memory} memory, 1080p RGBA, {args.frames} frames a row in "
          f"{args.rounds} rounds")
    show("C++ consumer next -> release", native)
    if args.memory == "cuda":
        show("C++ consumer, reads and release on a stream", ordered)
        show("C++ consumer, its stream handed out", handed_out)
    for label, row in rows:
        show(label, row, None if label.startswith(("C API", "torch", "cupy")) else native,
             ordered if label in (TORCH_ROW, CUPY_ROW) else None)
    targets(rows, native, ordered)
    if args.memory == "cuda":
        # A frame taken before its bytes landed makes the reader's stream wait on the GPU, and a
        # release with reads still queued is written by the consumer's stream: both are GPU work
        # the CPU-only path skips, and what a row's ordering may cost beyond a stream query.
        print("  GPU waits / releases per frame taken (frames not yet written when taken; "
              "releases written by the consumer's stream):")
        for label, (waits, releases) in gpu.items():
            if label.startswith(("next", "C++")):
                print(f"    {label:60s} {waits:.2f} / {releases:.2f}")


def producer_rows(args, ctx, cxx_producer) -> None:
    import cudaipc

    path = os.path.join(tempfile.mkdtemp(), "bench")
    stop, ready = ctx.Event(), ctx.Event()
    cons = ctx.Process(target=drain, args=(path, stop, ready, args.producer_cpus))
    cons.start()
    ready.wait(30)
    natives: List[Tuple[str, Row]] = []
    rows: List[Tuple[str, str, Row]] = []
    try:
        for mode in ("copy-in", "borrowed"):
            if cxx_producer[0] is None:
                natives.append((mode, cxx_producer[1]))
                continue
            natives.append((mode, run_native(
                [cxx_producer[0], f"--path={path}", f"--memory={args.memory}", f"--mode={mode}",
                 f"--frames={args.frames}"], "producer-rate")))
        sources: List[Tuple[str, object, Callable]] = []
        if args.memory == "cuda":
            try:
                import torch
                src = torch.full((H, W, 4), 7, dtype=torch.uint8, device="cuda")

                def torch_render(slot, src=src) -> None:
                    torch.from_dlpack(slot).copy_(src)

                sources.append(("torch", src, torch_render))
            except ImportError as e:
                rows.append(("copy-in", "publish(torch tensor)", f"torch: {e}"))
            try:
                import cupy
                csrc = cupy.full((H, W, 4), 7, dtype=cupy.uint8)

                def cupy_render(slot, csrc=csrc) -> None:
                    cupy.from_dlpack(slot)[...] = csrc

                sources.append(("CuPy", csrc, cupy_render))
            except ImportError as e:
                rows.append(("copy-in", "publish(cupy array)", f"cupy: {e}"))
        else:
            nsrc = np.full((H, W, 4), 7, dtype=np.uint8)

            def numpy_render(slot, nsrc=nsrc) -> None:
                slot.numpy()[...] = nsrc

            sources.append(("NumPy", nsrc, numpy_render))
        with cudaipc.Producer(path, memory=args.memory, num_slots=4, policy="drop") as p:
            p.wait_for_consumers(timeout=60)
            for name, src, render in sources:
                def publish(src=src) -> None:
                    p.publish(src)

                def frame(render=render) -> None:
                    try:
                        with p.frame((H, W, 4), "uint8") as slot:
                            render(slot)
                    except cudaipc.FrameDropped:
                        pass

                rows.append(("copy-in", f"publish({name})", timed(args.frames, publish, True)))
                rows.append(("borrowed", f"frame() + {name} copy into the slot",
                             timed(args.frames, frame, True)))
    finally:
        stop.set()
        cons.join(10)
    print(f"producer, {args.memory} memory, 1080p RGBA, {args.frames} frames a row")
    native_of = dict(natives)
    for mode, row in natives:
        show(f"C++ producer {mode}", row)
    for mode, label, row in rows:
        show(label, row, native_of.get(mode))


class _EventHead(ctypes.Structure):
    """The head of cudaipc_event (type, frame): all the ctypes row reads."""
    _fields_ = [("type", ctypes.c_int), ("frame", ctypes.c_void_p)]


def _ctypes_reader() -> Tuple[Callable, Callable, "_EventHead", tuple]:
    """The "C API via ctypes" row's own binding: the package has only its compiled one, so this
    row loads the same shared object with ctypes (the core's C API is exported from it) to measure
    what a foreign-function call costs beside it. Buffers larger than cudaipc_event and
    cudaipc_frame_view, of which only the event's head is read."""
    from cudaipc import _lib
    lib = ctypes.CDLL(_lib.native.__file__)
    next_frame = lib.cudaipc_consumer_next_frame
    next_frame.restype = ctypes.c_int
    next_frame.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
    release = lib.cudaipc_frame_release
    release.restype = None
    release.argtypes = [ctypes.c_void_p]
    event, view = ctypes.create_string_buffer(1024), ctypes.create_string_buffer(1024)
    ev = _EventHead.from_buffer(event)
    # The buffers themselves go to the calls (ctypes passes their addresses): passing bare
    # addresses would let the view's buffer be freed once this returns, and the core would then
    # write each frame's view into freed memory.
    return next_frame, release, ev, (event, view)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memory", default="host", choices=["host", "cuda"])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=30,
                    help="consumer rows: turns the rows take, each with frames/rounds frames "
                         "(short turns: a lent machine's drift spread over every row)")
    ap.add_argument("--rows", default="consumer,producer")
    ap.add_argument("--pin", action="store_true",
                    help="the reader on one CPU, the other process on another physical core")
    ap.add_argument("--cxx-consumer", metavar="PATH",
                    help="cudaipc-bench-consumer-rate (default: the one in build/tests/bench)")
    ap.add_argument("--cxx-producer", metavar="PATH",
                    help="cudaipc-bench-producer-rate (default: the one in build/tests/bench)")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")  # no CUDA state inherited through fork
    args.producer_cpus = None
    if args.pin:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from filter_model_rate import cpu_halves

        mine, others = cpu_halves()
        reader = min(mine)
        args.producer_cpus = {min(others - mine or mine - {reader} or mine)}
        os.sched_setaffinity(0, {reader})  # this thread, and the C++ consumer it starts
        print(f"pinned: reader on CPU {reader}, the other process on {sorted(args.producer_cpus)}")
    wanted = set(args.rows.split(","))
    if "consumer" in wanted:
        consumer_rows(args, ctx, find_program("cudaipc-bench-consumer-rate", args.cxx_consumer))
    if "producer" in wanted:
        producer_rows(args, ctx, find_program("cudaipc-bench-producer-rate", args.cxx_producer))


if __name__ == "__main__":
    main()
