#!/usr/bin/env python3
"""The AI bridge: frames from a camera-style GStreamer pipeline (cudaipcsink) into PyTorch, a model
on the GPU, and its results published for another pipeline (cudaipcsrc). Copy it and swap in your
model: `build_model()` and `run_model()` are the only parts that know what the model is.

Prints, every --report seconds and at the end: frames/s, per-frame latency from the producer's
publish to our result's publish (both CLOCK_MONOTONIC, one machine), and GPU time per frame of the
model (CUDA events, read when done: the CPU never waits for the GPU).

  # a camera (or videotestsrc is-live=true) into GPU slots; on an NVIDIA decoder:
  #   filesrc location=clip.h264 ! h264parse ! nvh264dec ! videoconvert ! ...
  gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,format=RGBA,width=640,height=480 \\
      ! cudaupload ! cudaipcringsink socket-path=$XDG_RUNTIME_DIR/cudaipc/cam0
  python3 examples/python/infer.py $XDG_RUNTIME_DIR/cudaipc/cam0 $XDG_RUNTIME_DIR/cudaipc/out0
  gst-launch-1.0 cudaipcringsrc socket-path=$XDG_RUNTIME_DIR/cudaipc/out0 ! cudadownload \\
      ! videoconvert ! autovideosink

examples/python/bridge.sh runs the three together. cudaipcringsink and cudaipcringsrc are
cudaipcsink and cudaipcsrc under names that nvcodec (whose cudaupload and cudadownload these
pipelines use) does not also have (docs/coexistence.md).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from typing import Deque, List, Tuple

try:
    import torch
except ImportError as e:
    sys.exit(f"infer.py needs PyTorch with CUDA (pip install torch): {e}")

import cudaipc


def build_model() -> torch.nn.Module:
    """A small convolutional net built in code (nothing downloaded): an edge filter, a blur and a
    colour mix with fixed weights. Replace it with yours."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 3, 1), torch.nn.Sigmoid())
    return net.cuda().half().eval()


def run_model(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(H, W, 4) uint8 RGBA in the producer's slot -> (H, W, 3) uint8 RGB result."""
    rgb = x[..., :3].permute(2, 0, 1).unsqueeze(0).half().div_(255)
    return net(rgb).mul_(255).to(torch.uint8)[0].permute(1, 2, 0)


def pct(xs: List[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


class GpuTimer:
    """GPU time of each frame's model, from CUDA events read once they completed (never waiting)."""

    def __init__(self) -> None:
        self.pending: Deque[Tuple[torch.cuda.Event, torch.cuda.Event]] = collections.deque()
        self.spare: List[torch.cuda.Event] = []
        self.times: List[float] = []

    def event(self) -> torch.cuda.Event:
        return self.spare.pop() if self.spare else torch.cuda.Event(enable_timing=True)

    def start(self) -> torch.cuda.Event:
        e = self.event()
        e.record()
        return e

    def stop(self, start: torch.cuda.Event) -> None:
        end = self.event()
        end.record()
        self.pending.append((start, end))
        self.collect()

    def collect(self, wait: bool = False) -> None:
        while self.pending and (wait or self.pending[0][1].query()):
            start, end = self.pending.popleft()
            end.synchronize()  # done already unless `wait`
            self.times.append(start.elapsed_time(end))
            self.spare += [start, end]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="socket path of the cudaipcsink to read")
    ap.add_argument("output", help="socket path to publish on (a cudaipcsrc reads it)")
    ap.add_argument("--frames", type=int, default=0, help="stop after N frames (0: at EOS)")
    ap.add_argument("--mode", default="latest", choices=["latest", "every-frame"],
                    help="latest: skip frames the model could not keep up with")
    ap.add_argument("--report", type=float, default=1.0, help="seconds between reports")
    ap.add_argument("--wait-for-consumer", type=float, default=0.0, metavar="SECONDS",
                    help="before the first result, wait this long for a reader of the results "
                         "(0: publish at once, and results nobody reads yet are not kept)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("infer.py: the model runs on a CUDA GPU, and torch sees none "
                 "(torch.cuda.is_available() is False)")
    net = build_model()
    timer = GpuTimer()
    latencies: List[float] = []  # ms
    n = 0
    first = last_report = None
    out = None
    with cudaipc.Consumer(args.input, mode=args.mode, timeout=30) as src, torch.inference_mode():
        for frame in src:
            with frame:
                x = torch.from_dlpack(frame)  # zero-copy; torch's stream waits for the frame
                h, w = x.shape[0], x.shape[1]
                if out is None:
                    caps = f"video/x-raw,format=RGBA,width={w},height={h},framerate=30/1"
                    out = cudaipc.Producer(args.output, memory="cuda", caps=caps)
                    if args.wait_for_consumer > 0:
                        out.wait_for_consumers(timeout=args.wait_for_consumer)
                start = timer.start()
                y = run_model(net, x)
                timer.stop(start)
                with out.frame((h, w, 4), "uint8", pts=frame.pts) as slot:
                    dst = torch.from_dlpack(slot)  # the output slot, written in place
                    dst[..., :3] = y
                    dst[..., 3] = 255
                    del dst
                del x, y  # the input's lease ends after the model's reads, on the GPU
            now = time.monotonic()
            latencies.append((time.monotonic_ns() - frame.publish_time_ns) / 1e6)
            n += 1
            first = first or now
            last_report = last_report or now
            if now - last_report >= args.report:
                last_report = now
                print(f"{n} frames  {(n - 1) / max(now - first, 1e-9):.1f} frames/s  "
                      f"latency p50 {pct(latencies[-300:], .5):.2f} ms "
                      f"p99 {pct(latencies[-300:], .99):.2f} ms  "
                      f"GPU {pct(timer.times[-300:], .5):.3f} ms/frame", flush=True)
            if args.frames and n >= args.frames:
                break
        timer.collect(wait=True)
        if out is not None:
            out.close()
    elapsed = (time.monotonic() - first) if first else 0.0
    print(f"done frames={n} fps={(n - 1) / elapsed if elapsed else 0:.1f} "
          f"latency_p50_ms={pct(latencies, .5):.3f} latency_p99_ms={pct(latencies, .99):.3f} "
          f"gpu_ms_p50={pct(timer.times, .5):.3f}", flush=True)


if __name__ == "__main__":
    # A failure is one line (what failed, and why), not a traceback.
    try:
        main()
    except cudaipc.Error as e:
        sys.exit(f"infer.py: {e}")
    except KeyboardInterrupt:
        sys.exit(130)
