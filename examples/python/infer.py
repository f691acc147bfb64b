#!/usr/bin/env python3
"""Reads frames from a cudaipcsink pipeline into torch, runs a small convolutional model on the GPU
and publishes the result to a cudaipcsrc pipeline; prints frames/s and latency.

  # producer pipeline (RGBA frames in GPU slots):
  gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,format=RGBA,width=640,height=480 \\
      ! cudaupload ! cudaipcsink socket-path=$XDG_RUNTIME_DIR/cam0
  # this program:
  python3 examples/python/infer.py $XDG_RUNTIME_DIR/cam0 $XDG_RUNTIME_DIR/out0
  # consumer pipeline of the result:
  gst-launch-1.0 cudaipcsrc socket-path=$XDG_RUNTIME_DIR/out0 ! cudadownload ! videoconvert \\
      ! autovideosink
"""

from __future__ import annotations

import argparse
import time

import torch

import cudaipc


def model() -> torch.nn.Module:
    # A few convolutions with fixed weights: an edge filter, a blur and a colour mix.
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 3, 1))
    torch.manual_seed(0)
    return net.cuda().half().eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="socket path of the cudaipcsink to read")
    ap.add_argument("output", help="socket path to publish on (a cudaipcsrc reads it)")
    ap.add_argument("--frames", type=int, default=0, help="stop after N frames (0: at EOS)")
    args = ap.parse_args()
    net = model()
    latencies = []
    start = None
    n = 0
    with cudaipc.Consumer(args.input, mode="latest", timeout=30) as src, torch.inference_mode():
        out = None
        for frame in src:
            with frame:
                x = torch.from_dlpack(frame)  # (H, W, 4) uint8 in the producer's slot
                h, w = x.shape[0], x.shape[1]
                if out is None:
                    caps = f"video/x-raw,format=RGBA,width={w},height={h},framerate=30/1"
                    out = cudaipc.Producer(args.output, memory="cuda", caps=caps)
                rgb = x[..., :3].permute(2, 0, 1).unsqueeze(0).half() / 255
                y = net(rgb).clamp(0, 1).mul(255).to(torch.uint8)[0].permute(1, 2, 0)
                with out.frame((h, w, 4), "uint8", pts=frame.pts) as slot:
                    dst = torch.from_dlpack(slot)
                    dst[..., :3] = y
                    dst[..., 3] = 255
                    del dst
                # Latency: producer's publish to our result queued (same clock in both).
                latencies.append((time.monotonic_ns() - frame.publish_time_ns) / 1e6)
            n += 1
            start = start or time.monotonic()
            if n % 100 == 0:
                lat = sorted(latencies[-100:])
                fps = (n - 1) / (time.monotonic() - start)
                print(f"{n} frames  {fps:.1f} frames/s  latency p50 {lat[50]:.2f} ms "
                      f"p99 {lat[98]:.2f} ms", flush=True)
            if args.frames and n >= args.frames:
                break
        if out is not None:
            out.close()
    print(f"done: {n} frames")


if __name__ == "__main__":
    main()
