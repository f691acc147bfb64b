#!/usr/bin/env python3
"""cudaipcfilter with a real model: the pipeline's frames/s against the model's own frames/s in a
Python process alone (issue #20's target: >= 0.95x), same run, 1080p NV12 CUDA frames.

The model is a convolutional heat-map detector in torch (fp16, cuDNN; fixed random weights: no
weights can be downloaded here, and the rate, not the answer, is measured). Per frame it reads the
luma plane, runs the network, takes the hottest cell to the CPU as a box (the CPU wait any detector
has when it answers) and, when serving, replies with that box and the frame's timestamp.

  alone:  the model on one resident CUDA frame, frame after frame, in this process
  served: cudaipc-gst-filter-bench --cuda runs `appsrc ! cudaipcfilter ! fakesink` with this
          script serving the filter (`--serve PATH`), as fast as the model answers; every frame
          must come back with its own answer or that program fails

With --gpu-results the detector answers as a batched model would: its box, label and score stay
torch tensors on the GPU (no CPU wait per frame), and reply() hands them to the core, which sends
them once the model's stream has computed and copied them (the model's thread goes on at once).

With --trace DIR both sides are recorded by torch.profiler (CPU steps and the model's GPU work,
CUPTI) over 300 frames after warm-up, into DIR/alone-TAG.json.gz and DIR/served-TAG.json.gz;
python/bench/timeline.py reads them (docs/design.md, the served frame's budget).

  python3 python/bench/filter_model_rate.py --filter-bench PATH [--frames N] [--inflight N]
      [--python PYTHON] [--gpu-results] [--overlap] [--graph] [--pin]
      [--upstream cudaupload|FRAGMENT] [--trace DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Optional, Tuple

WIDTH, HEIGHT = 1920, 1080


def cuda_graph(run, graph_in):
    """`run(graph_in)` captured once as a CUDA graph, after three runs on a side stream (cuDNN's
    choices and the allocator's pools made first): (the graph, what the captured run returned,
    which each replay writes again)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run(graph_in)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    # thread_local: the core's threads may call CUDA while this thread captures.
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        out = run(graph_in)
    torch.cuda.synchronize()
    return g, out


def make_model(width: int, gpu_results: bool = False, graph: bool = False):
    """The network, `width` times as wide as the base one (about width**2 times the work); with
    `gpu_results` its answer stays on the GPU (a dict of tensors). With `graph` the network and
    its answer are captured once as a CUDA graph (torch.cuda.graph) and each frame's luma plane is
    copied into the graph's input: one launch for the whole network instead of one per kernel,
    for a model whose CPU cannot launch its kernels as fast as its GPU runs them."""
    import torch

    torch.manual_seed(0)
    c = torch.nn.Conv2d
    a, b, d = 64 * width, 128 * width, 256 * width
    net = torch.nn.Sequential(
        c(1, a, 3, 2, 1), torch.nn.ReLU(),
        c(a, b, 3, 2, 1), torch.nn.ReLU(),
        c(b, d, 3, 2, 1), torch.nn.ReLU(),
        c(d, d, 3, 2, 1), torch.nn.ReLU(),
        c(d, d, 3, 1, 1), torch.nn.ReLU(),
        c(d, d, 3, 1, 1), torch.nn.ReLU(),
        c(d, 1, 1),
    ).to("cuda", torch.float16).eval()
    scale = 16  # the network's stride
    zero = torch.zeros(1, dtype=torch.int64, device="cuda")
    one = torch.ones(1, dtype=torch.float32, device="cuda")
    # Where each answer lands for the CPU: page-locked, with an event recorded after its copy, so
    # reading it waits for that frame's network only, not for the next frame's queued behind it
    # on the same stream (an int() of a CUDA tensor would wait for the whole stream). A ring of
    # four: the overlapped loop has two answers out at most.
    landing = []
    for _ in range(4):
        host = torch.empty(1, dtype=torch.int64, pin_memory=True)
        landing.append((host, host.numpy(), torch.cuda.Event()))
    turn = [0]

    def network(frame):
        """The hottest cell's index and the detections as tensors, from `frame` (a CUDA uint8
        tensor whose first rows are the luma plane: a request's NV12 frame exports its luma
        plane)."""
        luma = frame[:HEIGHT].reshape(1, 1, HEIGHT, WIDTH)
        heat = net(luma.to(torch.float16).mul_(1 / 255))[0, 0]
        cell = heat.flatten().argmax()
        if not gpu_results:
            return cell, heat.shape[1], None
        y = torch.div(cell, heat.shape[1], rounding_mode="floor")
        x = cell - y * heat.shape[1]
        box = torch.stack([x, y, x + 1, y + 1]).to(torch.float32).mul_(scale).reshape(1, 4)
        return cell, heat.shape[1], {"boxes": box, "labels": zero, "scores": one}

    run = network
    if graph:
        with torch.inference_mode():
            graph_in = torch.zeros((HEIGHT, WIDTH), dtype=torch.uint8, device="cuda")
            g, captured = cuda_graph(network, graph_in)

        def replay(frame):
            graph_in.copy_(frame[:HEIGHT])
            g.replay()
            return captured

        run = replay

    @torch.inference_mode()
    def launch(frame):
        """Queues the network on `frame` and returns its answer still on the GPU: the hottest
        cell's index on its way to the host, or with `gpu_results` the detections as tensors
        (a graph's own outputs: each reply queues their copies before the next replay)."""
        cell, cols, detections = run(frame)
        if gpu_results:
            return detections
        host, view, landed = landing[turn[0] % len(landing)]
        turn[0] += 1
        host.copy_(cell.reshape(1), non_blocking=True)
        landed.record()
        return view, landed, cols

    def finish(answer):
        """The answer as the CPU reads it: a box (the CPU waits for this frame's network here),
        or the GPU results as they are."""
        if gpu_results:
            return answer
        view, landed, cols = answer
        landed.synchronize()
        y, x = divmod(int(view[0]), cols)
        return [x * scale, y * scale, (x + 1) * scale, (y + 1) * scale]

    def read_event(answer):
        """The event finish() waits on, recorded after the frame's network (None for GPU results,
        which the core copies on the model's stream): a reply released after it puts no work on
        the GPU once the CPU waited for it."""
        return None if gpu_results else answer[1]

    def detect(frame):
        return finish(launch(frame))

    detect.launch = launch
    detect.finish = finish
    detect.read_event = read_event
    return detect


def answer(box) -> dict:
    """The model's result as it reports it: its boxes, labels and scores as arrays (built alone
    too, so both sides of the ratio pay for them); GPU results as they are."""
    import numpy as np

    if isinstance(box, dict):
        return box
    return {"boxes": np.array([box], np.float32), "labels": np.zeros(1, np.int64),
            "scores": np.ones(1, np.float32)}


def cpu_halves():
    """This process's CPUs as two sets on different physical cores (hyperthread siblings kept
    together): the model's and the pipeline's, for --pin."""
    cpus = sorted(os.sched_getaffinity(0))
    cores: dict = {}
    for c in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list") as f:
                key = f.read().strip()
        except OSError:
            key = str(c)
        cores.setdefault(key, []).append(c)
    groups = list(cores.values())
    half = max(1, len(groups) // 2)
    model = {c for g in groups[:half] for c in g}
    pipeline = {c for g in groups[half:] for c in g} or model
    return model, pipeline


def mps_control_pipe() -> Tuple[bool, str]:
    """Whether this process's CUDA programs are MPS clients, and the control pipe's path: the
    driver makes a process one when an MPS control daemon's pipe is in its pipe directory
    (CUDA_MPS_PIPE_DIRECTORY, by default /tmp/nvidia-mps). The pipe is only looked for: one left
    behind by a daemon that died would read as MPS on."""
    pipe = os.path.join(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps", "control")
    return os.path.exists(pipe), pipe


def rate_note(own: float, through: float, mps: bool) -> str:
    """The ratio's note: the target where it applies (MPS, the documented setting for a model on
    its pipelines' GPU), else what a frame loses without it, by name."""
    if mps:
        return "target >= 0.95"
    lost = 1e6 / through - 1e6 / own
    return (f"without MPS, beside the target: {lost:+.0f} us a frame, the GPU switching between "
            "the pipeline's context and the model's")


def pin_from_env() -> None:
    """The served model's CPUs, when the bench was run with --pin."""
    cpus = os.environ.get("CUDAIPC_FILTER_MODEL_CPUS", "")
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


TRACE_FRAMES = 300


class Tracer:
    """torch.profiler over TRACE_FRAMES frames once `start_at` frames have run (none without a
    path); each frame's steps are named ranges, so timeline.py can cut the trace into frames."""

    def __init__(self, path: str, start_at: int, frames: Optional[int] = TRACE_FRAMES):
        self.path, self.start_at, self.frames, self.n, self.prof = path, start_at, frames, 0, None

    def frame(self) -> None:
        """Called once before each frame."""
        if not self.path:
            return
        import torch
        from torch.profiler import ProfilerActivity, profile

        if self.n == self.start_at:
            torch.cuda.synchronize()
            self.prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self.prof.__enter__()
        elif self.prof is not None and self.frames and self.n == self.start_at + self.frames:
            self.stop()
        self.n += 1

    def step(self, name: str):
        import contextlib

        if self.prof is None:
            return contextlib.nullcontext()
        import torch

        return torch.profiler.record_function(name)

    def stop(self) -> None:
        if self.prof is None:
            return
        import gzip
        import shutil
        import torch

        torch.cuda.synchronize()
        self.prof.__exit__(None, None, None)
        raw = self.path[:-3]
        self.prof.export_chrome_trace(raw)
        with open(raw, "rb") as f, gzip.open(self.path, "wb") as g:
            shutil.copyfileobj(f, g)
        os.unlink(raw)
        self.prof = None
        print(f"trace: {self.path}", flush=True)


def alone(frames: int, width: int, gpu_results: bool = False, trace: str = "",
          overlap: bool = False, graph: bool = False) -> float:
    import torch

    detect = make_model(width, gpu_results, graph)
    frame = torch.randint(0, 256, (HEIGHT * 3 // 2, WIDTH), dtype=torch.uint8, device="cuda")
    host = torch.empty((1, 4), dtype=torch.float32, pin_memory=True)
    pending = []

    launches = []

    def step():
        if overlap and not gpu_results:
            # The loop the docs teach for an answer the CPU reads: the next frame's network is
            # queued before the CPU waits for the previous frame's answer.
            t = time.perf_counter()
            pending.append(detect.launch(frame))
            launches.append(time.perf_counter() - t)
            if len(pending) > 1:
                answer(detect.finish(pending.pop(0)))
            return
        r = answer(detect(frame))
        if gpu_results:  # the results reach the host as a reply's do, without a CPU wait
            host.copy_(r["boxes"], non_blocking=True)

    for _ in range(50):
        step()
    torch.cuda.synchronize()
    if trace:
        tracer = Tracer(trace, 0)
        for _ in range(TRACE_FRAMES + 1):
            tracer.frame()
            with tracer.step("frame"), tracer.step("model"):
                step()
        tracer.stop()
    times = []
    start = time.perf_counter()
    for _ in range(frames):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    rate = frames / (time.perf_counter() - start)
    times.sort()
    queued = ""
    if launches:  # the served loop's "model queued" step, alone: what the CPU spends launching
        a = sorted(launches[-frames:])
        queued = (f" (network queued: {a[len(a) // 2] * 1e6:.1f} us p50, "
                  f"{sum(a) / len(a) * 1e6:.1f} mean)")
    print(f"model alone: {rate:.0f} frames/s, {times[len(times) // 2] * 1e6:.1f} us p50 a frame"
          f"{queued}")
    return rate


def serve(path: str, width: int, steps_file: str, gpu_results: bool = False,
          trace: str = "", overlap: bool = False, graph: bool = False) -> None:
    """Serves the filter until the bench ends it (SIGTERM), then writes where a request's time went
    (p50 us per step) to `steps_file`, when given: at the end, as the process's last act, so the
    tables' work (numpy's first percentile imports modules: ~50 ms) falls outside the rate the
    pipeline measures, which it did when they were written every 500 requests."""
    import cudaipc

    pin_from_env()
    detect = make_model(width, gpu_results, graph)
    steps: list = []
    # Starting and stopping the profiler take the model thread away for seconds, which the filter
    # would see as a dead model: served, it records from before the first request until the bench
    # ends the process (SIGTERM), and writes the trace then (timeline.py skips the warm-up).
    tracer = Tracer(trace, 0, None)
    tracer.frame()

    class Ended(Exception):
        pass

    def on_term(*_):
        raise Ended()

    signal.signal(signal.SIGTERM, on_term)
    overlapped = overlap and not gpu_results
    with cudaipc.Server(path) as server:
        print("serving", flush=True)
        try:
            if overlapped:
                serve_overlapped(server, detect, steps)
            else:
                serve_loop(server, detect, tracer, steps)
        except Ended:
            pass
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    tracer.stop()
    write_steps(steps, steps_file,
                "next() | tensor | model queued | the previous answer (CPU waits) | reply"
                if overlapped else "next() | tensor | model | its result arrays | reply")


def write_steps(steps: list, steps_file: str, names: str) -> None:
    import numpy as np

    if steps_file and len(steps) > 100:
        # Each entry: the steps' seconds, then when its iteration started.
        a = np.array([e[:-1] for e in steps[50:]]) * 1e6
        # Means beside the medians: a rate is a mean, and a step that waits now and then (next()
        # for a request the pipeline has not sent yet) shows there and not in its p50.
        rows = [("p50", np.median(a, axis=0)), ("mean", a.mean(axis=0)),
                ("p99", np.percentile(a, 99, axis=0))]
        starts = np.array([e[-1] for e in steps[100:]])
        with open(steps_file, "w") as f:
            f.write(f"| model process, us | {names} | all |\n|---|---|---|---|---|---|---|\n")
            for name, v in rows:
                f.write(f"| {name}, {len(steps)} requests | " +
                        " | ".join(f"{x:.1f}" for x in v) + f" | {v.sum():.1f} |\n")
            if len(starts) > 1:
                # The loop's own rate over the pipeline's window (from its 100th frame), and the
                # time between iterations that no step holds: what the pipeline's rate is
                # measured against.
                gaps = np.diff(starts) - np.array([sum(e[:-1]) for e in steps[100:-1]])
                rate = (len(starts) - 1) / (starts[-1] - starts[0])
                f.write(f"\nmodel loop from request 100: {rate:.0f} requests/s; "
                        f"between iterations, outside the steps: "
                        f"{gaps.sum() * 1e3:.1f} ms in all, longest {gaps.max() * 1e6:.0f} us\n")


def serve_loop(server, detect, tracer, steps: list) -> None:
    """next -> tensor -> model -> reply, one request at a time (the model's answer read on the
    CPU, or left on the GPU for reply())."""
    import torch

    stream = torch.cuda.current_stream()  # the model's stream: the replies go after its work
    while True:
        tracer.frame()
        t0 = time.perf_counter()
        with tracer.step("next"):
            req = server.next()
        if req is None:
            break
        t1 = time.perf_counter()
        with tracer.step("frame"):
            with tracer.step("tensor"):
                frame = req.torch()
            t2 = time.perf_counter()
            with tracer.step("model"):
                box = detect(frame)
                t3 = time.perf_counter()
                result = answer(box)
            t4 = time.perf_counter()
            with tracer.step("reply"):
                req.reply(stream=stream, meta={"pts": req.frame.pts}, detections=result,
                          label_names=["object"])
        steps.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, time.perf_counter() - t4, t0))


def serve_overlapped(server, detect, steps: list) -> None:
    """The loop docs/python.md teaches for a model whose answer the CPU reads: request N+1 is taken
    and its network queued before the CPU waits for request N's answer, so the GPU always has the
    next frame's work while the CPU replies."""
    import torch

    stream = torch.cuda.current_stream()
    prev = None

    def order(queued) -> dict:
        """How a reply's release follows the frame's reads: after the event the CPU just waited
        on for the answer (nothing for the GPU to do), else (GPU results) after the stream."""
        event = detect.read_event(queued)
        return {"stream": stream} if event is None else {"after": event}

    def answer_prev():
        preq, pqueued = prev
        result = answer(detect.finish(pqueued))
        preq.reply(meta={"pts": preq.frame.pts}, detections=result, label_names=["object"],
                   **order(pqueued))

    while True:
        t0 = time.perf_counter()
        req = server.next(0)
        if req is None and prev is not None:
            answer_prev()  # nothing waits: the answer is not held back for the next request
            prev = None
        if req is None:
            req = server.next()
        if req is None:
            break
        t1 = time.perf_counter()
        frame = req.torch()
        t2 = time.perf_counter()
        queued = detect.launch(frame)
        t3 = time.perf_counter()
        t4 = t3
        if prev is not None:
            preq, pqueued = prev
            result = answer(detect.finish(pqueued))
            how = order(pqueued)
            t4 = time.perf_counter()
            preq.reply(meta={"pts": preq.frame.pts}, detections=result, label_names=["object"],
                       **how)
        prev = (req, queued)
        steps.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, time.perf_counter() - t4, t0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", metavar="PATH", help="serve the filter on PATH (used by the bench)")
    ap.add_argument("--filter-bench", help="the cudaipc-gst-filter-bench program")
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--width", type=int, default=1,
                    help="the network's width multiplier (2: about 4x the work a frame)")
    ap.add_argument("--label", default="", help="a note for the row (e.g. MPS on)")
    ap.add_argument("--gpu-results", action="store_true",
                    help="answers stay on the GPU; reply() does not wait for them")
    ap.add_argument("--upstream", default="",
                    help="frames made in the pipeline, into the filter's slots: cudaupload "
                         "(videotestsrc ! cudaupload) or a gst-launch fragment (the bench's "
                         "--upstream; it must make --frames frames)")
    ap.add_argument("--overlap", action="store_true",
                    help="answers read on the CPU: the next request's network is queued before "
                         "the CPU waits for the previous answer (both sides of the ratio)")
    ap.add_argument("--graph", action="store_true",
                    help="the network captured as one CUDA graph, each frame copied into its "
                         "input (both sides of the ratio)")
    ap.add_argument("--trace", metavar="DIR", default="",
                    help="record both sides with torch.profiler into DIR (timeline.py reads them)")
    ap.add_argument("--pin", action="store_true",
                    help="the model (alone and served) and the pipeline on disjoint physical "
                         "cores, to tell CPU interference from the package's own cost")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter the bench starts this script's server with")
    args = ap.parse_args()
    if args.serve:
        # The bench starts this as `PY FILE --serve PATH`: the rest comes through the environment.
        serve(args.serve, int(os.environ.get("CUDAIPC_FILTER_MODEL_WIDTH", args.width)),
              os.environ.get("CUDAIPC_FILTER_MODEL_STEPS", ""),
              os.environ.get("CUDAIPC_FILTER_MODEL_GPU") == "1",
              os.environ.get("CUDAIPC_FILTER_MODEL_TRACE", ""),
              os.environ.get("CUDAIPC_FILTER_MODEL_OVERLAP") == "1",
              os.environ.get("CUDAIPC_FILTER_MODEL_GRAPH") == "1")
        return
    if not args.filter_bench:
        ap.error("--filter-bench is needed")
    try:
        import torch
    except ImportError:
        sys.exit("SKIP: no torch")
    if not torch.cuda.is_available():
        sys.exit("SKIP: torch sees no CUDA GPU")

    tag = f"x{args.width}" + ("-gpu" if args.gpu_results else "") + \
        ("-overlap" if args.overlap else "") + ("-graph" if args.graph else "") + \
        ("-up" if args.upstream else "") + \
        (f"-{re.sub('[^A-Za-z0-9]+', '-', args.label)}" if args.label else "")
    model_cpus, pipeline_cpus = cpu_halves() if args.pin else (set(), set())
    if model_cpus:
        os.sched_setaffinity(0, model_cpus)  # alone: this process; served: pin_from_env()
        print(f"pinned: model on CPUs {sorted(model_cpus)}, pipeline on {sorted(pipeline_cpus)}")
    traces = {}
    if args.trace:
        os.makedirs(args.trace, exist_ok=True)
        traces = {k: os.path.join(os.path.abspath(args.trace), f"{k}-{tag}.json.gz")
                  for k in ("alone", "served")}
    own = alone(args.frames, args.width, args.gpu_results, traces.get("alone", ""), args.overlap,
                args.graph)
    steps = tempfile.NamedTemporaryFile(prefix="filter-model-steps-", suffix=".md")
    upstream = args.upstream
    if upstream == "cudaupload":
        # A queue between the CPU's frames and their upload: each on a thread of its own, or the
        # source alone (~750 frames/s at 1080p, one thread) sets the row's rate, not the model.
        upstream = (f"videotestsrc num-buffers={args.frames} pattern=black ! video/x-raw,"
                    f"format=NV12,width={WIDTH},height={HEIGHT},framerate=10000/1 ! "
                    f"queue max-size-buffers=8 ! cudaupload")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import lease  # noqa: E402 (beside this file; the served model, this file imported, needs none)
    before = lease.CpuTimes()
    out = subprocess.run(
        [args.filter_bench, "--cuda", f"--frames={args.frames}", f"--inflight={args.inflight}",
         f"--python={args.python}",
         f"--python-model={os.path.abspath(__file__)}", "--only-python"] +
        ([f"--upstream={upstream}"] if upstream else []),
        capture_output=True, text=True, timeout=600,
        preexec_fn=(lambda: os.sched_setaffinity(0, pipeline_cpus)) if pipeline_cpus else None,
        env=dict(os.environ, CUDAIPC_FILTER_MODEL_STEPS=steps.name,
                 CUDAIPC_FILTER_MODEL_CPUS=",".join(map(str, sorted(model_cpus))),
                 CUDAIPC_FILTER_MODEL_WIDTH=str(args.width),
                 CUDAIPC_FILTER_MODEL_GPU="1" if args.gpu_results else "0",
                 CUDAIPC_FILTER_MODEL_OVERLAP="1" if args.overlap else "0",
                 CUDAIPC_FILTER_MODEL_GRAPH="1" if args.graph else "0",
                 CUDAIPC_FILTER_MODEL_TRACE=traces.get("served", "")))
    after = lease.CpuTimes()
    sys.stdout.write(out.stdout)
    with open(steps.name) as f:
        sys.stdout.write("\n" + f.read())
    # The lease beside the loop's rows: its CPU, a Python loop's speed on the model's CPUs, and
    # what else had the CPUs while it served (the model's own thread counts as busy).
    print(f"\nlease: {lease.describe_cpu()}; a Python loop step {lease.yardstick():.1f} ns on the "
          f"model's CPUs; over the served run, model side {before.report(after, model_cpus)}"
          + (f", pipeline side {before.report(after, pipeline_cpus)}" if pipeline_cpus else ""))
    if out.returncode != 0:
        sys.exit(f"the filter bench failed: {out.stderr.strip()[-2000:]}")
    m = re.search(r"^\| filter, Python model[^|]*\|[^|]*\|[^|]*\| ([0-9.]+) \|", out.stdout, re.M)
    if not m:
        sys.exit("no Python model row in the filter bench's output")
    through = float(m.group(1))
    # The machine may have changed meanwhile: the better of both sides of the run.
    again = alone(args.frames, args.width, args.gpu_results, overlap=args.overlap,
                  graph=args.graph)
    own = max(own, again)
    mps, pipe = mps_control_pipe()
    print(f"\nMPS: {'on' if mps else 'off'} ({'a' if mps else 'no'} control daemon's pipe at "
          f"{pipe})")
    print(f"\n| model | frames/s alone (best of 2) | frames/s through cudaipcfilter "
          f"(max-inflight={args.inflight}) | a frame alone / served, us | ratio |")
    print("|---|---|---|---|---|")
    label = (", results on the GPU" if args.gpu_results else "") + \
        (", overlapped loop" if args.overlap else "") + (", CUDA graph" if args.graph else "") + \
        (f", from {args.upstream.split(' ')[0]} into the filter's slots" if args.upstream else "") + \
        (", pinned" if args.pin else "") + (f", {args.label}" if args.label else "")
    print(f"| conv heat-map detector x{args.width}, 1080p fp16{label} | {own:.0f} | "
          f"{through:.0f} | {1e6 / own:.0f} / {1e6 / through:.0f} | {through / own:.3f} "
          f"({rate_note(own, through, mps)}) |")


if __name__ == "__main__":
    main()
