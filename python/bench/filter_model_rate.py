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

  python3 python/bench/filter_model_rate.py --filter-bench PATH [--frames N] [--inflight N]
      [--python PYTHON]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

WIDTH, HEIGHT = 1920, 1080


def make_model(width: int):
    """The network, `width` times as wide as the base one (about width**2 times the work)."""
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

    @torch.inference_mode()
    def detect(frame):
        """frame: a CUDA uint8 tensor whose first rows are the luma plane (a request's NV12 frame
        exports its luma plane)."""
        luma = frame[:HEIGHT].reshape(1, 1, HEIGHT, WIDTH)
        heat = net(luma.to(torch.float16).mul_(1 / 255))[0, 0]
        cell = int(heat.argmax())  # the CPU waits for the answer here
        y, x = divmod(cell, heat.shape[1])
        return [x * scale, y * scale, (x + 1) * scale, (y + 1) * scale]

    return detect


def answer(box: list) -> dict:
    """The model's result as it reports it: its boxes, labels and scores as arrays (built alone
    too, so both sides of the ratio pay for them)."""
    import numpy as np

    return {"boxes": np.array([box], np.float32), "labels": np.zeros(1, np.int64),
            "scores": np.ones(1, np.float32)}


def alone(frames: int, width: int) -> float:
    import torch

    detect = make_model(width)
    frame = torch.randint(0, 256, (HEIGHT * 3 // 2, WIDTH), dtype=torch.uint8, device="cuda")
    for _ in range(50):
        answer(detect(frame))
    times = []
    start = time.perf_counter()
    for _ in range(frames):
        t = time.perf_counter()
        answer(detect(frame))
        times.append(time.perf_counter() - t)
    rate = frames / (time.perf_counter() - start)
    times.sort()
    print(f"model alone: {rate:.0f} frames/s, {times[len(times) // 2] * 1e6:.1f} us p50 a frame")
    return rate


def serve(path: str, width: int, steps_file: str) -> None:
    """Serves the filter; every 500 requests it writes where a request's time went (p50 us per
    step) to `steps_file`, when given."""
    import numpy as np
    import torch

    import cudaipc

    detect = make_model(width)
    steps: list = []
    with cudaipc.Server(path) as server:
        print("serving", flush=True)
        while True:
            t0 = time.perf_counter()
            req = server.next()
            if req is None:
                break
            t1 = time.perf_counter()
            frame = torch.from_dlpack(req)
            t2 = time.perf_counter()
            box = detect(frame)
            t3 = time.perf_counter()
            result = answer(box)
            t4 = time.perf_counter()
            req.reply(stream=torch.cuda.current_stream(), meta={"pts": req.frame.pts},
                      detections=result, label_names=["object"])
            steps.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, time.perf_counter() - t4))
            if steps_file and len(steps) % 500 == 0:
                p50 = np.median(np.array(steps[50:]) * 1e6, axis=0)
                with open(steps_file, "w") as f:
                    f.write("| model process, p50 us | next() | from_dlpack | model | its result "
                            "arrays | reply |\n|---|---|---|---|---|---|\n")
                    f.write(f"| {len(steps)} requests | " + " | ".join(f"{v:.1f}" for v in p50)
                            + " |\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", metavar="PATH", help="serve the filter on PATH (used by the bench)")
    ap.add_argument("--filter-bench", help="the cudaipc-gst-filter-bench program")
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--width", type=int, default=1,
                    help="the network's width multiplier (2: about 4x the work a frame)")
    ap.add_argument("--label", default="", help="a note for the row (e.g. MPS on)")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter the bench starts this script's server with")
    args = ap.parse_args()
    if args.serve:
        # The bench starts this as `PY FILE --serve PATH`: the rest comes through the environment.
        serve(args.serve, int(os.environ.get("CUDAIPC_FILTER_MODEL_WIDTH", args.width)),
              os.environ.get("CUDAIPC_FILTER_MODEL_STEPS", ""))
        return
    if not args.filter_bench:
        ap.error("--filter-bench is needed")
    try:
        import torch
    except ImportError:
        sys.exit("SKIP: no torch")
    if not torch.cuda.is_available():
        sys.exit("SKIP: torch sees no CUDA GPU")

    own = alone(args.frames, args.width)
    steps = tempfile.NamedTemporaryFile(prefix="filter-model-steps-", suffix=".md")
    out = subprocess.run(
        [args.filter_bench, "--cuda", f"--frames={args.frames}", f"--inflight={args.inflight}",
         f"--python={args.python}",
         f"--python-model={os.path.abspath(__file__)}", "--only-python"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, CUDAIPC_FILTER_MODEL_STEPS=steps.name,
                 CUDAIPC_FILTER_MODEL_WIDTH=str(args.width)))
    sys.stdout.write(out.stdout)
    with open(steps.name) as f:
        sys.stdout.write("\n" + f.read())
    if out.returncode != 0:
        sys.exit(f"the filter bench failed: {out.stderr.strip()[-2000:]}")
    m = re.search(r"^\| filter, Python model[^|]*\|[^|]*\|[^|]*\| ([0-9.]+) \|", out.stdout, re.M)
    if not m:
        sys.exit("no Python model row in the filter bench's output")
    through = float(m.group(1))
    # The machine may have changed meanwhile: the better of both sides of the run.
    again = alone(args.frames, args.width)
    own = max(own, again)
    print(f"\n| model | frames/s alone (best of 2) | frames/s through cudaipcfilter "
          f"(max-inflight={args.inflight}) | ratio |")
    print("|---|---|---|---|")
    label = f", {args.label}" if args.label else ""
    print(f"| conv heat-map detector x{args.width}, 1080p fp16{label} | {own:.0f} | "
          f"{through:.0f} | {through / own:.3f} (target >= 0.95) |")


if __name__ == "__main__":
    main()
