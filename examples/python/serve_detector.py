#!/usr/bin/env python3
"""A detector as one element of GStreamer pipelines: this process serves the `cudaipcfilter` of
every pipeline on the socket paths given (or in --directory), answering each frame with the
objects found in it. Each pipeline pushes the original buffer on with the detections attached (a
GstAnalyticsRelationMeta on GStreamer 1.24+), so `objectdetectionoverlay` right after the filter
draws them. GStreamer 1.22 has neither: there the boxes are a GstCustomMeta named
CudaipcAnalyticsMeta, which examples/appsink_detections.cpp prints (docs/metas.md).

  python3 examples/python/serve_detector.py $XDG_RUNTIME_DIR/cudaipc/detector &
  gst-launch-1.0 videotestsrc pattern=ball is-live=true \\
      ! video/x-raw,format=RGBA,width=640,height=480 \\
      ! cudaipcfilter socket-path=$XDG_RUNTIME_DIR/cudaipc/detector ipc-mode=host \\
      ! videoconvert ! objectdetectionoverlay ! videoconvert ! autovideosink

(with `cudaupload !` before the filter and without ipc-mode=host the frames stay on the GPU, and
this process reads them there, zero-copy.) Kill this process and start it again: the pipeline
plays on (frames pass without boxes per on-missing=pass) and uses the new one within one timeout.

Many pipelines, one model: give several paths (`serve_detector.py $D/cam0 $D/cam1 ...`), or
`--directory $D` to serve every filter channel that appears there as pipelines start. `--batch N`
answers up to N frames per model call, taken fairly across the pipelines (one busy camera cannot
starve another), waiting at most `--max-delay` seconds for a batch to fill.

Detectors: those of detect.py: builtin (the ball of videotestsrc pattern=ball), or
torchvision:NAME (any torchvision detection model with its default weights; they take a list of
images, so a batch is one model call).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import detect  # noqa: E402  (the detectors, beside this file)

import cudaipc  # noqa: E402


def find_all(find, frames):
    """One model call for the batch where the detector takes a list (torchvision's do)."""
    many = getattr(find, "batch", None)
    return many(frames) if many else [find(f) for f in frames]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("socket", nargs="*", help="the cudaipcfilters' socket-paths")
    ap.add_argument("--directory", help="serve every filter channel that appears in DIR")
    ap.add_argument("--model", default="builtin", help="builtin, or torchvision:NAME")
    ap.add_argument("--threshold", type=int, default=128,
                    help="builtin: the brightness (max of R, G, B) a ball pixel has at least")
    ap.add_argument("--score", type=float, default=0.5,
                    help="torchvision: the lowest score answered")
    ap.add_argument("--device", default="cuda", help="torchvision: where the model runs")
    ap.add_argument("--batch", type=int, default=1, help="answer up to N frames at once")
    ap.add_argument("--max-delay", type=float, default=0.0,
                    help="seconds a batch waits to fill (default 0: what is there)")
    ap.add_argument("--requests", type=int, default=0, help="stop after N requests (0: never)")
    args = ap.parse_args()
    if not args.socket and not args.directory:
        ap.error("give the filters' socket paths, or --directory")
    if args.batch < 1 or args.max_delay < 0:
        ap.error("--batch is at least 1 and --max-delay is not negative")
    # The server says when a pipeline goes away (and that it waits for the next).
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    detect.check_model(ap, args.model)
    if args.model == "builtin":
        find = detect.builtin_detector(args.threshold)
    else:
        find = detect.torchvision_detector(args.model.split(":", 1)[1], args.score, args.device)

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    n = 0
    start = time.monotonic()
    with cudaipc.Server(args.socket, directory=args.directory) as server:
        print(f"serving {' '.join(args.socket + ([args.directory] if args.directory else []))}",
              flush=True)
        while not stop and (not args.requests or n < args.requests):
            reqs = server.batch(args.batch, timeout=0.2, max_delay=args.max_delay)
            if not reqs:
                continue
            for req, dets in zip(reqs, find_all(find, [r.frame for r in reqs])):
                dets = dict(dets)
                names = dets.pop("label_names", None)
                req.reply(detections=dets, label_names=names)
                n += 1
    elapsed = time.monotonic() - start
    print(f"done requests={n} rps={n / elapsed if elapsed else 0:.1f}", flush=True)


if __name__ == "__main__":
    # A failure is one line (what failed, and why), not a traceback.
    try:
        main()
    except cudaipc.Error as e:
        sys.exit(f"serve_detector.py: {e}")
    except KeyboardInterrupt:
        sys.exit(130)
