#!/usr/bin/env python3
"""Many pipelines, one model process (issue #30's target): N GStreamer pipelines in processes of
their own (`videotestsrc is-live=true ! [cudaupload !] cudaipcfilter ! cudaipcringsink`), one
model process serving every filter of a directory with `Server.batch(max_batch, max_delay)`, and
this process reading every pipeline's output and checking each frame's answer (its timestamp and
its own filter's path).

The model is filter_model_rate.py's heat-map detector, batched: the luma planes of a batch stacked
into one call, the answers left on the GPU (the core sends them once computed). Without torch or a
GPU (a smoke run on any machine) it is a NumPy sum of each frame.

Printed: frames offered and answered with their own result; the batches formed; the model's time
per batch serving against the same batch alone (its rate at the batch sizes it formed); the latency
from the filter's publish of a request to the output's publish of the answered frame, p50/p99,
against max_delay + 2 batch times (with --interleave, each batch's time counts the resident batch
of its size the bench runs beside it).

With --trace DIR --trace-batch B the model process records itself with torch.profiler while it
serves (batches of B are the ones timeline.py compares) and then B frames alone, into
DIR/served-batchB.json.gz and DIR/alone-batchB.json.gz: `python/bench/timeline.py
DIR/alone-batchB.json.gz DIR/served-batchB.json.gz --skip-served 0`. Its threads are sampled
meanwhile into DIR/threads.json (thread_sampler.py), which `python/bench/stall_trace.py
DIR/served-batchB.json.gz` reads beside the trace.

  python3 python/bench/many_pipelines.py [--pipelines 16] [--seconds 8] [--fps 30]
      [--width 1920] [--height 1080] [--memory cuda|host] [--batch 16] [--max-delay 0.005]
      [--trace DIR --trace-batch B] [--graph] [--pin] [--spin] [--interleave] [--device-sync]
      [--gc-freeze] [--model-connections N]
      [--pattern ball|black|...] [--rt-priority N] [--nice N] [--time-slice NS] [--way-back]
"""

from __future__ import annotations

import argparse
import bisect
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Tuple

import numpy as np

import cudaipc


def torch_gpu() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def make_batched_model(width: int, height: int, graph: bool = False):
    """(frames) -> per-frame answers; the time of one call is what the model costs a batch. With
    `graph` the network of each batch size is captured once as a CUDA graph (at its first call)
    and each batch's luma planes are stacked into that graph's input: one launch a batch instead
    of one per kernel, for batches small enough that the CPU's launches set their time."""
    torch = torch_gpu()
    if torch is None:
        def host(frames: List[Any]) -> List[Dict[str, Any]]:
            return [{"boxes": np.array([[0, 0, 1, 1]], np.float32),
                     "scores": np.array([float(f.numpy()[:height].mean())], np.float32)}
                    for f in frames]
        host.inputs = lambda frames: frames
        return host, None
    # filter_model_rate.py's network (x1), taking a batch.
    torch.manual_seed(0)
    c = torch.nn.Conv2d
    net = torch.nn.Sequential(
        c(1, 64, 3, 2, 1), torch.nn.ReLU(), c(64, 128, 3, 2, 1), torch.nn.ReLU(),
        c(128, 256, 3, 2, 1), torch.nn.ReLU(), c(256, 256, 3, 2, 1), torch.nn.ReLU(),
        c(256, 256, 3, 1, 1), torch.nn.ReLU(), c(256, 1, 1)).to("cuda", torch.float16).eval()
    label = torch.zeros(1, dtype=torch.int64, device="cuda")

    def inputs(frames: List[Any]) -> List[Any]:
        """The frames as torch tensors: the package's per-frame step (zero-copy for CUDA frames,
        their reads queued after each frame's landing)."""
        return [f if isinstance(f, torch.Tensor) else f.torch() if f.device != "cpu" else
                torch.from_numpy(f.numpy()).cuda() for f in frames]

    def network(luma: Any) -> Any:
        """Each luma plane's hottest cell as a box, (batch, 4) float32."""
        heat = net(luma.unsqueeze(1).to(torch.float16).mul_(1 / 255))[:, 0]
        cells = heat.flatten(1).argmax(1)
        w = heat.shape[2]
        y = torch.div(cells, w, rounding_mode="floor")
        x = cells - y * w
        return torch.stack([x, y, x + 1, y + 1], 1).to(torch.float32).mul_(16)

    # Batch size -> (the graph's input, the graph, its boxes): the boxes are the graph's own
    # output, which each reply queues its copy of before the next replay.
    graphs: Dict[int, Any] = {}

    def captured(b: int) -> Any:
        if b not in graphs:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from filter_model_rate import cuda_graph

            luma = torch.zeros((b, height, width), dtype=torch.uint8, device="cuda")
            graphs[b] = (luma, *cuda_graph(network, luma))
        return graphs[b]

    @torch.inference_mode()
    def gpu(frames: List[Any]) -> List[Dict[str, Any]]:
        planes = [f[:height] for f in frames]
        if graph:
            luma, g, boxes = captured(len(frames))
            torch.stack(planes, out=luma)
            g.replay()
        else:
            boxes = network(torch.stack(planes))
        return [{"boxes": boxes[i:i + 1], "labels": label} for i in range(len(frames))]

    gpu.inputs = inputs
    return gpu, torch


def spin_for(seconds: float) -> None:
    """A wait that keeps the CPU busy (the --spin rows, here and in model_after_idle.py)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def tracers(trace: str, size: int) -> Any:
    """filter_model_rate.py's Tracer for the served and the alone side (no-ops without `trace`)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from filter_model_rate import Tracer

    if not trace:
        return Tracer("", 0), Tracer("", 0)
    os.makedirs(trace, exist_ok=True)
    return (Tracer(os.path.join(trace, f"served-batch{size}.json.gz"), 0, None),
            Tracer(os.path.join(trace, f"alone-batch{size}.json.gz"), 0))


def serve(directory: str, width: int, height: int, max_batch: int, max_delay: float,
          report: str, trace: str = "", trace_batch: int = 8, graph: bool = False,
          spin: bool = False, interleave: bool = False, device_sync: bool = False,
          gc_freeze: bool = False) -> None:
    """The model process: serves every filter in `directory` until SIGTERM, then measures the
    model alone at the batch sizes it formed and writes both to `report` (JSON). With `spin` its
    thread polls for requests (server.batch with no wait) instead of sleeping until one comes:
    model_after_idle.py's spinning rows, served. With `gc_freeze` the objects made until serving
    (torch's, the model's) are left out of Python's collections (gc.freeze())."""
    model, torch = make_batched_model(width, height, graph)
    resident: Any = None
    if torch is not None:
        # The model's work is on its stream: waiting for that stream is waiting for the model. A
        # device-wide synchronize (`device_sync`) also waits for every stream of the context,
        # the server's among them, which wait on the GPU for the frames of requests read ahead
        # that are still on their way (docs/python.md).
        sync = torch.cuda.synchronize if device_sync else torch.cuda.current_stream().synchronize
        # Every batch size once before serving: cuDNN picks its kernels per shape on first use,
        # which would otherwise land on the first served batch of each size.
        resident = torch.randint(0, 256, (height * 3 // 2, width), dtype=torch.uint8,
                                 device="cuda")
        for b in range(1, max_batch + 1):
            for _ in range(3):
                model(model.inputs([resident] * b))
        torch.cuda.synchronize()
    stop: List[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    # Per batch size: the model's time (the frames' import, then the network once they have
    # landed), the wait for them to land (the pipelines' upload and copy, latency rather than the
    # model's cost), and the whole batch on the wall clock.
    sizes: Dict[int, List[float]] = {}
    began: Dict[int, List[int]] = {}  # when each batch began (monotonic ns, the frames' clock)
    landing: Dict[int, List[float]] = {}
    walls: Dict[int, List[float]] = {}
    # How long the model's thread had waited for each batch since it answered the one before: a
    # batch of 1 comes after the longest waits, from which a model's launches start cold.
    idles: Dict[int, List[float]] = {}
    answered_at = 0.0
    # Each batch's hand-over (monotonic ns) and how long the model's thread had been back in
    # server.batch() by then (ms): a request that waited long for a batch the model was idle
    # before was held by this process's readers, not by the model.
    handed: List[List[float]] = []
    answered_ns = 0
    # The batches that carried a pipeline's first request (its slots' first views made here): when
    # the oldest request of the batch was published, when the batch came, its inputs made, its
    # frames landed and its network done (monotonic ns), its size and how many pipelines were new.
    seen: set = set()
    joins: List[List[int]] = []
    # The batches that took over 10 ms from being handed over to their last reply (a stall, where
    # a batch takes 1-5 ms): when each began (monotonic ns), its size, and its steps (s).
    stalls: List[List[float]] = []
    # With `interleave`, each batch beside a batch of the same size from a resident tensor, timed
    # as a served one is; which of the two comes first after the wait alternates per size. The
    # first of a pair meets the GPU and the CPU as the wait left them, beside the same pipelines
    # at the same moment: served first against resident first is what a request costs the model
    # over a tensor of its own.
    flip: Dict[int, bool] = {}
    pairs: Dict[str, Dict[int, List[float]]] = {
        k: {} for k in ("served first", "resident first", "served second", "resident second")}

    def resident_time(b: int) -> float:
        t0 = time.perf_counter()
        tensors = model.inputs([resident] * b)
        t1 = time.perf_counter()
        torch.cuda.current_stream().synchronize()
        t2 = time.perf_counter()
        model(tensors)
        sync()
        return (t1 - t0) + (time.perf_counter() - t2)

    interleave = interleave and torch is not None
    served_trace, alone_trace = tracers(trace if torch is not None else "", trace_batch)
    served_trace.frame()  # starts recording: the profiler's start stalls, so before serving
    # Python's own collections while serving, each when it began (monotonic ns), how long it took
    # (ns) and its generation: a full one walks every object torch made, on the model's thread.
    collections: List[List[int]] = []
    began_gc: List[int] = []

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            began_gc[:] = [time.monotonic_ns()]
        elif began_gc:
            collections.append([began_gc[0], time.monotonic_ns() - began_gc[0],
                                info["generation"]])

    if gc_freeze:
        gc.collect()
        gc.freeze()
    gc.callbacks.append(on_gc)
    with cudaipc.Server(directory=directory, queue_depth=16) as server:
        print("serving", flush=True)
        while not stop:
            reqs = server.batch(max_batch, timeout=0 if spin else 0.1, max_delay=max_delay)
            if not reqs:
                continue
            taken_ns = time.monotonic_ns()
            if answered_ns:
                handed.append([taken_ns, (taken_ns - answered_ns) / 1e6])
            b = len(reqs)
            new = {r.path for r in reqs} - seen
            seen |= new
            resident_first = interleave and flip.setdefault(b, False)
            if interleave:
                flip[b] = not flip[b]
            if resident_first:
                pairs["resident first"].setdefault(b, []).append(resident_time(b))
            t0, began_ns = time.perf_counter(), time.monotonic_ns()
            if answered_at:
                idles.setdefault(b, []).append(t0 - answered_at)
            # timeline.py compares the batches of the traced size ("frame") with that size alone.
            with served_trace.step("frame" if len(reqs) == trace_batch else "batch"):
                with served_trace.step("model"):
                    tensors = model.inputs([r.frame for r in reqs])
                    t1 = time.perf_counter()
                    if torch is not None:
                        torch.cuda.current_stream().synchronize()  # the frames have landed
                    t2 = time.perf_counter()
                    answers = model(tensors)
                    if torch is not None:
                        sync()  # the batch's own time, for the comparison alone
                t3 = time.perf_counter()
                if new:
                    joins.append([min(r.frame.publish_time_ns for r in reqs), taken_ns,
                                  began_ns + int((t1 - t0) * 1e9), began_ns + int((t2 - t0) * 1e9),
                                  began_ns + int((t3 - t0) * 1e9), b, len(new)])
                model_time = (t1 - t0) + (t3 - t2)
                sizes.setdefault(b, []).append(model_time)
                if interleave:
                    pairs["served second" if resident_first else "served first"].setdefault(
                        b, []).append(model_time)
                began.setdefault(b, []).append(began_ns)
                landing.setdefault(b, []).append(t2 - t1)
                walls.setdefault(b, []).append(t3 - t0)
                with served_trace.step("reply"):
                    for r, a in zip(reqs, answers):
                        r.reply(detections=a, label_names=["object"],
                                meta={"pts": r.frame.pts, "path": r.path,
                                      "sent": r.frame.publish_time_ns, "taken": taken_ns,
                                      "replied": time.monotonic_ns()})
            t4 = time.perf_counter()
            if t4 - t0 > 0.010:
                stalls.append([began_ns, b, t1 - t0, t2 - t1, t3 - t2, t4 - t3])
            if interleave and not resident_first:
                pairs["resident second"].setdefault(b, []).append(resident_time(b))
            answered_at = time.perf_counter()
            answered_ns = time.monotonic_ns()
    gc.callbacks.remove(on_gc)
    served_trace.stop()
    if torch is not None and trace:
        batch = [resident] * trace_batch
        for _ in range(TRACE_ALONE + 1):
            alone_trace.frame()
            with alone_trace.step("frame"), alone_trace.step("model"):
                model(model.inputs(batch))
                sync()
        alone_trace.stop()

    def alone_times(back_to_back: bool = True) -> Tuple[Dict[int, float], Dict[int, float]]:
        """The model alone at each batch size it formed, p50 s: back to back (unless not
        `back_to_back`), and after the wait the served batches of that size had (asleep, or
        spinning with `spin`)."""
        times: Tuple[Dict[int, float], Dict[int, float]] = ({}, {})
        if torch is None:
            return times
        for b in sizes:
            batch = [resident] * b
            waits = [(float(np.median(idles.get(b, [0.0]))), times[1])]
            for idle, into in ([(0.0, times[0])] if back_to_back else []) + waits:
                t = []
                for _ in range(50):
                    (spin_for if spin else time.sleep)(idle)
                    t0 = time.perf_counter()
                    model(model.inputs(batch))
                    sync()
                    t.append(time.perf_counter() - t0)
                into[b] = float(np.median(t))
        return times

    # Alone beside the same pipelines, unserved (their filters pass frames on without a model):
    # the GPU shared with their uploads and outputs as it was while serving, without cudaipc's
    # part. Measured when the bench says they run ("load"), before alone on an idle GPU ("idle").
    loaded: Tuple[Dict[int, float], Dict[int, float]] = ({}, {})
    if sys.stdin.readline().strip() == "load":
        loaded = alone_times(back_to_back=False)
        print("measured", flush=True)
        sys.stdin.readline()
    alone, alone_idle = alone_times()
    with open(report, "w") as f:
        json.dump({"served": {b: [len(v), float(np.median(v))] for b, v in sizes.items()},
                   "batches": {b: [began[b], v] for b, v in sizes.items()},
                   "landing": {b: float(np.median(v)) for b, v in landing.items()},
                   "wall": {b: float(np.median(v)) for b, v in walls.items()},
                   "alone": alone, "alone_idle": alone_idle,
                   "loaded_idle": loaded[1],
                   "pairs": {k: {b: [len(v), float(np.median(v))] for b, v in d.items()}
                             for k, d in pairs.items()},
                   "idle": {b: float(np.median(v)) for b, v in idles.items()},
                   "joins": joins, "stalls": stalls, "handed": handed,
                   "collections": collections, "gc_frozen": gc_freeze}, f)


TRACE_ALONE = 100  # batches traced alone


class CpuLoad:
    """How busy a set of CPUs is, sampled from /proc/stat every `period` seconds while it runs:
    the way back's tail is a thread waiting for one of them."""

    def __init__(self, cpus: set, period: float = 0.05) -> None:
        self.names = {f"cpu{c}" for c in cpus}
        self.period = period
        self.busy: List[float] = []  # each sample's busy share of the set, 0..1
        # Of it, the time the hypervisor ran something else on these (virtual) CPUs: a thread
        # woken then waits whatever its scheduling.
        self.steal: List[float] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def read(self) -> Tuple[int, int, int]:
        total = idle = steal = 0
        with open("/proc/stat") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] in self.names:
                    ticks = [int(x) for x in fields[1:]]
                    total += sum(ticks[:8])  # guest time is counted in user already
                    idle += ticks[3] + ticks[4]  # idle, iowait
                    steal += ticks[7] if len(ticks) > 7 else 0
        return total, idle, steal

    def run(self) -> None:
        try:
            before = self.read()
            while not self.done.wait(self.period):
                now = self.read()
                spent = now[0] - before[0]
                if spent > 0:
                    self.busy.append(1 - (now[1] - before[1]) / spent)
                    self.steal.append((now[2] - before[2]) / spent)
                before = now
        except OSError:
            pass  # no /proc/stat: nothing printed

    def stop(self) -> str:
        self.done.set()
        self.thread.join()
        if not self.busy:
            return ""
        b, st = np.array(self.busy) * 100, np.array(self.steal) * 100
        return (f"busy p50 {np.percentile(b, 50):.0f} %, p99 {np.percentile(b, 99):.0f} %, "
                f"samples of {self.period * 1e3:.0f} ms at least 90 % busy: "
                f"{(b >= 90).mean() * 100:.0f} %; the CPUs' time stolen by the hypervisor: p50 "
                f"{np.percentile(st, 50):.1f} %, p99 {np.percentile(st, 99):.1f} %")


class Reader:
    """One pipeline's output, every frame's answer checked."""

    def __init__(self, path: str, model_path: str, n: int) -> None:
        self.path, self.model_path, self.n = path, model_path, n
        self.answered = self.missing = 0
        self.errors: List[str] = []
        self.latency: List[float] = []
        self.published: List[int] = []  # each answered frame's publish time (ns)
        self.model_side: List[float] = []  # request published -> its reply made (us)
        self.waited: List[float] = []  # request published -> its batch handed to the model (us)
        self.sent: List[int] = []  # each answered frame's request publish time (ns)
        self.connected = 0  # when this reader's consumer met its channel's format (ns)
        self.opened = 0  # when its consumer was made (connected to the sink's socket) (ns)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            def met(_fmt) -> None:
                if not self.connected:
                    self.connected = time.monotonic_ns()

            with cudaipc.Consumer(self.path, timeout=60, on_format=met) as c:
                self.opened = time.monotonic_ns()
                for f in c:
                    with f:
                        m = f.meta
                        if not m:
                            self.missing += 1
                            continue
                        if m.get("pts") != f.pts or m.get("path") != self.model_path:
                            self.errors.append(f"frame {f.seq}: {m}")
                            continue
                        self.answered += 1
                        self.latency.append((f.publish_time_ns - m["sent"]) / 1e3)
                        self.published.append(f.publish_time_ns)
                        self.model_side.append((m["replied"] - m["sent"]) / 1e3)
                        self.waited.append((m["taken"] - m["sent"]) / 1e3)
                        self.sent.append(m["sent"])
        except cudaipc.Error as e:
            self.errors.append(str(e))


def pipeline(args: argparse.Namespace, n: int, model_path: str, out: str,
             read: bool) -> List[str]:
    """One camera's gst-launch command: `n` frames (0: until stopped) through the filter of
    `model_path` to an output channel at `out`, held for its reader when `read`."""
    host = args.memory == "host"
    upload = [] if host else ["!", "cudaupload"]
    mode = ["ipc-mode=host"] if host else []
    return [args.gst_launch, "-q", "-e", "videotestsrc", "is-live=true",
            f"pattern={args.pattern}", f"num-buffers={n or -1}", "!",
            f"video/x-raw,format=NV12,width={args.width},height={args.height},"
            f"framerate={args.fps}/1", *upload, "!", "cudaipcfilter", *mode,
            f"socket-path={model_path}", "on-missing=pass", "timeout=1000000000",
            *([f"rt-priority={args.rt_priority}"] if args.rt_priority else []),
            *([f"nice={args.nice}"] if args.nice else []),
            *([f"time-slice={args.time_slice}"] if args.time_slice else []), "!",
            "cudaipcringsink", *mode, f"wait-for-consumer={'true' if read else 'false'}",
            "sync=false", f"socket-path={out}"]


def ratio(num: float, den: float) -> str:
    """A rate ratio's cell; a dash where either side has no batch (a size formed once, a pair
    whose twin never ran), which a 0.000 would pass off as a measured loss."""
    return f"{num / den:.3f}" if num and den else "-"


def awaited(server: subprocess.Popen, word: str) -> bool:
    """Whether the model process said `word` before it ended. Its libraries may print on its
    standard output too (torch's profiler does, traced): those lines are shown, not taken for
    the answer."""
    for line in server.stdout:
        if line.strip() == word:
            return True
        print(f"note: the model process printed: {line.rstrip()[:300]}")
    return False


def unserved_load(args: argparse.Namespace, server: subprocess.Popen, work: str) -> None:
    """The same pipelines again, their filters unserved (no model at their paths: they pass
    frames on), while the model process, done serving, times the model alone beside them."""
    unserved, outs = os.path.join(work, "unserved"), os.path.join(work, "unserved-out")
    os.mkdir(unserved, 0o700)
    os.mkdir(outs, 0o700)
    pipes = [subprocess.Popen(pipeline(args, 0, os.path.join(unserved, f"cam{i}"),
                                       os.path.join(outs, f"cam{i}"), False),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(args.pipelines)]
    try:
        time.sleep(2.0)  # every pipeline playing, their first frames behind them
        running = all(p.poll() is None for p in pipes)
        server.stdin.write("load\n" if running else "none\n")
        server.stdin.flush()
        if running and not awaited(server, "measured"):
            print("FAIL the model process did not time the model beside the unserved pipelines")
    finally:
        for p in pipes:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)  # -e: an EOS, then a clean stop
        for i, p in enumerate(pipes):
            try:
                _, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            if p.returncode not in (0, -signal.SIGINT):
                print(f"note: unserved pipeline {i} ended with {p.returncode}: "
                      f"{err.strip()[-300:]}")
        try:
            server.stdin.write("idle\n")
            server.stdin.flush()
        except BrokenPipeError:  # the model process is gone: its exit status says why
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--report", help=argparse.SUPPRESS)
    ap.add_argument("--pipelines", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--fps", type=int, default=30)
    ap.add_argument("--width", type=int, default=1920)
    ap.add_argument("--height", type=int, default=1080)
    ap.add_argument("--memory", choices=("cuda", "host"), default="cuda")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-delay", type=float, default=0.005)
    ap.add_argument("--trace", default="", help="record the model process into DIR (timeline.py)")
    ap.add_argument("--trace-batch", type=int, default=8,
                    help="the batch size the trace compares served and alone")
    ap.add_argument("--graph", action="store_true",
                    help="the network of each batch size as a CUDA graph (served and alone)")
    ap.add_argument("--pin", action="store_true",
                    help="the model process on its own physical cores, the pipelines and this "
                         "process's readers on the others")
    ap.add_argument("--pattern", default="ball",
                    help="videotestsrc's pattern: ball draws each 1080p frame on the CPU (16 "
                         "pipelines share the pipelines' CPUs with it), black only fills it")
    ap.add_argument("--spin", action="store_true",
                    help="the model's thread polls for requests instead of sleeping (a CPU "
                         "always busy: model_after_idle.py's spinning rows, served)")
    ap.add_argument("--interleave", action="store_true",
                    help="each served batch beside a batch of a resident tensor of its size, "
                         "which of them first after the wait alternating (a diagnosis: the "
                         "replies wait for both)")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="the model process leaves what it made before serving (torch, the "
                         "model) out of Python's collections (gc.freeze()): whether a collection "
                         "is what stalls a batch")
    ap.add_argument("--device-sync", action="store_true",
                    help="the model's batches timed with torch.cuda.synchronize() instead of a "
                         "wait for its stream: the whole device, the server's waits for frames "
                         "still on their way included (what a model loop should not do)")
    ap.add_argument("--model-connections", type=int, default=0, metavar="N",
                    help="CUDA_DEVICE_MAX_CONNECTIONS for the model process alone (its hardware "
                         "queues: its readers' streams wait on the GPU for frames still on their "
                         "way, and 8 queues are shared by its 16 readers and the model's own "
                         "stream; 0: the driver's default, 8)")
    ap.add_argument("--rt-priority", type=int, default=0, metavar="N",
                    help="the filters' rt-priority: the threads that push answered frames on "
                         "at SCHED_FIFO N, so they need not wait for a CPU the drawing "
                         "pipelines hold (0: the default scheduling)")
    ap.add_argument("--nice", type=int, default=0, metavar="N",
                    help="the filters' nice: the same threads at nice N (-20..0), for where "
                         "real-time priority is refused (0: left as it is)")
    ap.add_argument("--time-slice", type=int, default=0, metavar="NS",
                    help="the filters' time-slice: the same threads' own slice in ns, shorter "
                         "than the drawing threads' so that they get a CPU on waking (Linux "
                         "6.12+; 0: the kernel's)")
    ap.add_argument("--way-back", action="store_true",
                    help="the pipelines trace each frame's way back (GStreamer TRACE logs, which "
                         "cost it a little): printed step by step after the run (way_back.py)")
    ap.add_argument("--gst-launch", default=shutil.which("gst-launch-1.0") or "gst-launch-1.0")
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.width, args.height, args.batch, args.max_delay, args.report,
              args.trace, args.trace_batch, args.graph, args.spin, args.interleave,
              args.device_sync, args.gc_freeze)
        return
    model_cpus: set = set()
    if args.pin:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from filter_model_rate import cpu_halves

        model_cpus, others = cpu_halves()
        os.sched_setaffinity(0, others)  # the readers, and the pipelines started from here
        print(f"pinned: model on CPUs {sorted(model_cpus)}, pipelines on {sorted(others)}")
    if args.memory == "cuda" and torch_gpu() is not None:
        # This process's CUDA context made before the pipelines start, as an application reading
        # their outputs has it: the readers' first connects then import the channels' memory
        # only, instead of racing sixteen processes to make a context.
        torch_gpu().zeros(1, device="cuda")
    work = tempfile.mkdtemp(prefix="cudaipc-many-")
    models, outs = os.path.join(work, "models"), os.path.join(work, "out")
    os.mkdir(models, 0o700)
    os.mkdir(outs, 0o700)
    report = os.path.join(work, "report.json")
    server = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", models, "--report", report,
         "--width", str(args.width), "--height", str(args.height), "--batch", str(args.batch),
         "--max-delay", str(args.max_delay), "--trace", os.path.abspath(args.trace) if args.trace
         else "", "--trace-batch", str(args.trace_batch)] + (["--graph"] if args.graph else [])
        + (["--spin"] if args.spin else []) + (["--interleave"] if args.interleave else [])
        + (["--device-sync"] if args.device_sync else [])
        + (["--gc-freeze"] if args.gc_freeze else []),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS=str(args.model_connections))
        if args.model_connections else None,
        preexec_fn=(lambda: os.sched_setaffinity(0, model_cpus)) if model_cpus else None)
    if not awaited(server, "serving"):
        sys.exit("the model process did not start")
    sampler = None
    if args.trace:
        # Every thread of the model process sampled beside its trace (stall_trace.py reads both):
        # what the others did while the model's thread waited in a launch call.
        os.makedirs(args.trace, exist_ok=True)
        sampler = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "thread_sampler.py"),
             "--pid", str(server.pid), "--out", os.path.join(os.path.abspath(args.trace),
                                                             "threads.json")])
    n = int(args.seconds * args.fps)
    pipes, readers = [], []
    pipeline_cpus = os.sched_getaffinity(0)  # the pipelines' CPUs (pinned: not the model's)
    env = None
    if args.way_back:
        # Each pipeline traces its way back into a log of its own (way_back.py reads them).
        trace_dir = os.path.join(work, "way-back")
        os.mkdir(trace_dir, 0o700)
        env = dict(os.environ, GST_DEBUG="cudaipcfilter:7,cudaipcsink:7", GST_DEBUG_NO_COLOR="1",
                   GST_DEBUG_FILE=os.path.join(trace_dir, "%p.log"))
    load = CpuLoad(pipeline_cpus)
    for i in range(args.pipelines):
        model_path, out = os.path.join(models, f"cam{i}"), os.path.join(outs, f"cam{i}")
        pipes.append(subprocess.Popen(pipeline(args, n, model_path, out, True),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True, env=env))
        readers.append(Reader(out, model_path, n))
    failed = []
    for i, p in enumerate(pipes):
        _, err = p.communicate(timeout=args.seconds * 4 + 60)
        if p.returncode:
            failed.append(f"pipeline {i}: {err.strip()[-300:]}")
    for r in readers:
        r.thread.join(timeout=30)
    cpu_load = load.stop()
    server.send_signal(signal.SIGTERM)
    unserved_load(args, server, work)
    server.communicate(timeout=120)
    if sampler is not None:
        sampler.wait(timeout=60)  # it ends with the model process, writing what it sampled
    with open(report) as f:
        rep = json.load(f)
    way_back = ""
    if args.way_back:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from way_back import summarize

        way_back = summarize(os.path.join(work, "way-back"))
    shutil.rmtree(work, ignore_errors=True)

    lat = np.array(sum((r.latency for r in readers), []) or [0.0])
    answered = sum(r.answered for r in readers)
    missing = sum(r.missing for r in readers)
    errors = sum((r.errors for r in readers), [])
    served = {int(b): v for b, v in rep["served"].items()}
    alone = {int(b): v for b, v in rep["alone"].items()}
    alone_idle = {int(b): v for b, v in rep.get("alone_idle", {}).items()}
    loaded_idle = {int(b): v for b, v in rep.get("loaded_idle", {}).items()}
    idle = {int(b): v for b, v in rep.get("idle", {}).items()}
    batches = sum(v[0] for v in served.values())
    frames = sum(b * v[0] for b, v in served.items())
    mean_b = frames / batches if batches else 0
    wall = {int(b): v for b, v in rep.get("wall", {}).items()}
    landed = {int(b): v for b, v in rep.get("landing", {}).items()}
    # The bound counts each batch as the model process lived it (landing wait included). Under
    # --interleave each served batch has a resident twin of its size, run just before or just
    # after it: the model process lives both, so a batch's time counts its twin's.
    pairs = {k: {int(b): v for b, v in d.items()} for k, d in rep.get("pairs", {}).items()}
    twin = {b: max(pairs.get(k, {}).get(b, (0, 0.0))[1] for k in ("resident first",
                                                                  "resident second"))
            for b in wall}
    worst = max((t + twin.get(b, 0.0) for b, t in wall.items()),
                default=max((v[1] for v in served.values()), default=0.0))
    # Once every pipeline has joined and run a second: the steady state, beside the whole run
    # (whose p99 carries the joins of sixteen pipelines at once).
    joined = max((min(r.published) for r in readers if r.published), default=0)
    steady = np.array([lt for r in readers for t, lt in zip(r.published, r.latency)
                       if t > joined + 1_000_000_000] or [0.0])
    model_side = np.array(sum((r.model_side for r in readers), []) or [0.0])
    # The same steady state for the model's time per batch size: the joins (sixteen processes
    # making their CUDA contexts and slots at once) slow the GPU under every batch of their second.
    steady_model: Dict[int, List[float]] = {}
    for b, (starts, times) in rep.get("batches", {}).items():
        kept = [t for at, t in zip(starts, times) if at > joined + 1_000_000_000]
        if kept:
            steady_model[int(b)] = kept
    print(f"\n{args.pipelines} pipelines of {args.width}x{args.height}@{args.fps} "
          f"({args.memory} memory), {n} frames each, batch <= {args.batch}, "
          f"max_delay {args.max_delay * 1e3:.1f} ms"
          f"{', the network as CUDA graphs' if args.graph and torch_gpu() else ''}"
          f"{f', filters at rt-priority {args.rt_priority}' if args.rt_priority else ''}"
          f"{f', filters at nice {args.nice}' if args.nice else ''}"
          f"{f', time-slice {args.time_slice} ns' if args.time_slice else ''}"
          f"{', the model timed with a device-wide synchronize' if args.device_sync else ''}"
          + (f", the model process at {args.model_connections} CUDA connections"
             if args.model_connections else "") + "\n")
    print("| frames offered | answered, own result | without result | wrong | batches | "
          "mean / max batch | latency p50 / p99 ms | once all joined, +1 s: p50 / p99 ms | "
          "bound: max_delay + 2 batch times ms"
          f"{' (each with its resident twin)' if any(twin.values()) else ''} |")
    print("|---|---|---|---|---|---|---|---|---|")
    bound = (args.max_delay + 2 * worst) * 1e3
    p99 = np.percentile(lat, 99) / 1e3
    print(f"| {args.pipelines * n} | {answered} | {missing} | {len(errors)} | {batches} | "
          f"{mean_b:.1f} / {max(served, default=0)} | {np.percentile(lat, 50) / 1e3:.2f} / "
          f"{p99:.2f} [{'within' if p99 <= bound else 'over'}] | "
          f"{np.percentile(steady, 50) / 1e3:.2f} / {np.percentile(steady, 99) / 1e3:.2f} | "
          f"{bound:.2f} |")
    # Where the run's tail lies: the frames over the bound, and how many of them came while
    # pipelines were still joining (before the last one's first output, +1 s).
    over = [(t, lt) for r in readers for t, lt in zip(r.published, r.latency) if lt > bound * 1e3]
    early_over = sum(1 for t, _ in over if t <= joined + 1_000_000_000)
    print(f"\nframes over the bound: {len(over)} of {lat.size} ({len(over) / lat.size:.2%}; the "
          f"p99 is over it beyond 1 %), {early_over} of them while the pipelines joined (+1 s)")
    # Each of them split: the wait for its batch (the server's reader, then the model busy with
    # the batches before), its batch (inputs, network, reply) and the way back, with when it was
    # published (ms after the first pipeline's first request).
    first = min((r.sent[0] for r in readers if r.sent), default=0)
    # What the other processes do then: pipelines start (contexts, slot memory made) and end.
    starts = [(r.sent[0] - first) / 1e6 for r in readers if r.sent]
    ends = [(r.sent[-1] - first) / 1e6 for r in readers if r.sent]
    if starts:
        print(f"  the pipelines' first requests came {min(starts):.0f}-{max(starts):.0f} ms after "
              f"the first, their last {min(ends):.0f}-{max(ends):.0f} ms")
    stalls = rep.get("stalls", [])
    if stalls:
        print(f"  batches of over 10 ms, {len(stalls)}{' (the first 40)' if len(stalls) > 40 else ''}"
              ", ms: began at (after the first request), size: inputs / frames landed / network "
              "/ replies")
        print("  " + "; ".join(f"{(at - first) / 1e6:.0f}, {b}: {i * 1e3:.1f} / {ld * 1e3:.1f} / "
                               f"{nw * 1e3:.1f} / {rp * 1e3:.1f}"
                               for at, b, i, ld, nw, rp in stalls[:40]))
        # Whether a stall comes with a pipeline's first frames: the first requests published from
        # 50 ms before each stalled batch began to its end.
        spans = [((at - first) / 1e6, (i + ld + nw + rp) * 1e3)
                 for at, b, i, ld, nw, rp in stalls[:40]]
        near = [sum(1 for f in starts if at - 50 <= f <= at + took) for at, took in spans]
        print(f"  pipelines' first requests from 50 ms before each to its end: {near} "
              f"(of {len(starts)})")
    slow = sorted(((t, w, m - w, lt - m) for r in readers
                   for t, lt, m, w in zip(r.sent, r.latency, r.model_side, r.waited)
                   if lt > bound * 1e3), key=lambda x: x[0])
    if slow:
        # The model's thread idle before a request's batch (its hand-over: published + waited).
        handed = sorted(rep.get("handed", []))
        at = [h[0] for h in handed]

        def idle_before(t: int, w: float) -> str:
            i = bisect.bisect_left(at, t + w * 1e3 - 1e3)
            found = i < len(at) and abs(at[i] - t - w * 1e3) < 1e4
            return f" (idle {handed[i][1]:.1f})" if found else ""

        print(f"  each{' (the first 60)' if len(slow) > 60 else ''}, ms: published at: wait for "
              "its batch (the model's thread in server.batch() before it, max_delay's gathering "
              "included: as long as the wait, the readers held the request) + its batch + the "
              "way back")
        print("  " + "; ".join(f"{(t - first) / 1e6:.0f}: {w / 1e3:.1f}{idle_before(t, w)}"
                               f"+{b / 1e3:.1f}+{k / 1e3:.1f}" for t, w, b, k in slow[:60]))
    # Python's collections in the model process, and the stalled batches they ran in.
    collected = rep.get("collections", [])
    if collected:
        by_gen = [sum(1 for c in collected if c[2] == g) for g in range(3)]
        full = sorted(c[1] / 1e6 for c in collected if c[2] == 2)
        long_ones = [c for c in collected if c[1] > 5_000_000]
        print(f"\nPython's collections in the model process while serving"
              f"{' (gc.freeze() before serving)' if rep.get('gc_frozen') else ''}: "
              f"{by_gen[0]} / {by_gen[1]} / {by_gen[2]} of generations 0 / 1 / 2"
              + (f", the full ones {np.percentile(full, 50):.1f} ms p50, {full[-1]:.1f} max"
                 if full else "")
              + f"; {len(long_ones)} over 5 ms")
        if long_ones:
            print("  over 5 ms, at ms after the first request (generation): "
                  + "; ".join(f"{(b - first) / 1e6:.0f} ({g}): {d / 1e6:.1f}"
                              for b, d, g in long_ones[:30]))
        if stalls:
            inside = sum(1 for at, b, i, ld, nw, rp in stalls
                         if any(cb < at + (i + ld + nw + rp) * 1e9 and cb + cd > at
                                for cb, cd, _ in long_ones))
            print(f"  batches of over 10 ms that a collection of over 5 ms ran in: {inside} of "
                  f"{len(stalls)}")
    print(f"\nRequest published -> its reply made (the model process's side, whole run): p50 "
          f"{np.percentile(model_side, 50) / 1e3:.2f} ms, p99 "
          f"{np.percentile(model_side, 99) / 1e3:.2f} ms, max {model_side.max() / 1e3:.2f} ms")
    if alone:
        print("\nThe model's time: its frames imported, then its network once they have landed "
              "(the wait for them is the pipelines' upload, counted in the latency above).\n")
        print("Alone three times: back to back; after the same wait as the served batches of "
              "its size had (the model's thread asleep that long before it: its caches cold, as "
              "served); and after that wait beside the same pipelines unserved (their filters "
              "pass frames on without a model: the GPU shared with their uploads and outputs as "
              "while serving, cudaipc's part left out), against the batches served once all "
              "joined, +1 s (the like-for-like: both beside the running pipelines).\n")
        print("| batch size | batches | model ms serving (p50) | model ms alone (p50) | "
              "rate ratio | waited before it, ms (p50) | alone after that wait, ms | "
              "rate ratio to it | once all joined, +1 s: batches, model ms serving (p50) | "
              "beside the unserved pipelines after that wait, ms | rate ratio to the joined | "
              "frames landing ms (p50) | whole batch ms (p50) |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for b in sorted(served):
            count, t = served[b]
            a, ai, li = alone.get(b, 0.0), alone_idle.get(b, 0.0), loaded_idle.get(b, 0.0)
            kept = steady_model.get(b, [])
            st = float(np.median(kept)) if kept else 0.0
            print(f"| {b} | {count} | {t * 1e3:.2f} | {a * 1e3:.2f} | "
                  f"{ratio(a, t)} | {idle.get(b, 0.0) * 1e3:.2f} | {ai * 1e3:.2f} | "
                  f"{ratio(ai, t)} | {len(kept)}, {st * 1e3:.2f} | {li * 1e3:.2f} | "
                  f"{ratio(li, st)} | {landed.get(b, 0.0) * 1e3:.2f} | "
                  f"{wall.get(b, 0.0) * 1e3:.2f} |")
    if any(pairs.values()):
        print("\nInterleaved: each served batch beside a resident batch of its size, which first "
              "after the wait alternating; model ms p50 (batches).\n")
        print("| batch size | served first | resident first | ratio, first | served second | "
              "resident second | ratio, second |\n|---|---|---|---|---|---|---|")
        for b in sorted(set().union(*(d.keys() for d in pairs.values()))):
            cells = []
            for served_key, resident_key in (("served first", "resident first"),
                                             ("served second", "resident second")):
                (ns, ts), (nr, tr) = (pairs[served_key].get(b, (0, 0.0)),
                                      pairs[resident_key].get(b, (0, 0.0)))
                cells.append(f"{ts * 1e3:.2f} ({ns}) | {tr * 1e3:.2f} ({nr}) | {ratio(tr, ts)}")
            print(f"| {b} | " + " | ".join(cells) + " |")
    firsts = [[round(x / 1e3, 1) for x in r.latency[:3]] for r in readers]
    print(f"first three frames' latency per pipeline, ms: {firsts}")
    # Where a slow start went: the model's side (request published -> reply made), and the rest
    # (the reply's way back through the filter, then the output sink's publish).
    split = [[f"{m / 1e3:.1f}+{(t - m) / 1e3:.1f}" for t, m in zip(r.latency[:3], r.model_side[:3])]
             for r in readers]
    print(f"the same, as model side + reply to output, ms: {split}")
    # The model's side of the joins: each batch that brought a pipeline's first request, from its
    # oldest request's publish. Made of the wait for the batch (the server's reader: the new
    # pipeline's slots imported; the model busy with the batch before), its inputs (a new slot's
    # first view), its frames landing and its network.
    joins = rep.get("joins", [])
    if joins:
        print("\nThe batches that brought a pipeline's first request, at ms after the first "
              "request (size, new pipelines), ms from the oldest request's publish: wait for the "
              "batch / inputs made / frames landed / network")
        print("  " + "; ".join(
            f"{(s0 - first) / 1e6:.0f} {b} ({k}): {(t - s0) / 1e6:.1f} / {(i - t) / 1e6:.1f} / "
            f"{(ld - i) / 1e6:.1f} / {(d - ld) / 1e6:.1f}" for s0, t, i, ld, d, b, k in joins))
    # The output sink waits for this bench's reader (wait-for-consumer) before its first publish:
    # how long after its pipeline's first request each reader met its channel.
    waits = [round((r.connected - r.sent[0]) / 1e6, 1) if r.connected and r.sent else None
             for r in readers]
    print(f"each reader met its output channel, ms after its pipeline's first request: {waits}")
    # Whether that wait was the socket (the reader connects when the sink starts) or the format
    # after it (the sink's first format, then the reader's import of its slots).
    opened = [round((r.opened - r.sent[0]) / 1e6, 1) if r.opened and r.sent else None
              for r in readers]
    print(f"each reader's consumer was made (its socket met), ms after the first request: "
          f"{opened}")
    early = np.array([lt for r in readers for s_, lt in zip(r.sent, r.latency)
                      if r.connected and s_ >= r.connected] or [0.0])
    print(f"latency of the requests sent once their reader was there: p50 "
          f"{np.percentile(early, 50) / 1e3:.2f} / p99 {np.percentile(early, 99) / 1e3:.2f} ms "
          f"({len(early)} frames)")
    # Once all joined: where the tail is, the model process's side (request published -> reply
    # made) or the way back (the filter's reply reader, its push, the output sink's publish).
    side = [(m, lt - m) for r in readers for t, lt, m in zip(r.published, r.latency, r.model_side)
            if t > joined + 1_000_000_000]
    if side:
        model_ms, back_ms = (np.array(v) / 1e3 for v in zip(*side))
        print(f"once all joined, +1 s: the model's side p50 {np.percentile(model_ms, 50):.2f} / "
              f"p99 {np.percentile(model_ms, 99):.2f} ms; the way back p50 "
              f"{np.percentile(back_ms, 50):.2f} / p99 {np.percentile(back_ms, 99):.2f} ms")
    if cpu_load:
        print(f"the pipelines' {len(pipeline_cpus)} CPUs while they ran (with this process's "
              f"readers): {cpu_load}")
    if way_back:
        print(way_back)
    for line in failed + errors[:5]:
        print("FAIL", line)
    if failed or errors or answered + missing != args.pipelines * n:
        sys.exit(1)


if __name__ == "__main__":
    main()
