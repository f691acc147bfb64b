#!/usr/bin/env python3
"""A PyGObject application reading a model's detections: the pipeline given (ending in a
cudaipcfilter, or a cudaipcsrc) runs into an appsink, and cudaipc.gst_detections reads each
frame's boxes as NumPy arrays, from GStreamer 1.24+'s GstAnalyticsRelationMeta or 1.22's
CudaipcAnalyticsMeta alike (docs/python.md, "Results in a PyGObject application").

  python3 examples/python/serve_detector.py $XDG_RUNTIME_DIR/cudaipc/detector &
  python3 examples/python/appsink_detections.py "videotestsrc pattern=ball \\
      ! video/x-raw,format=RGBA,width=640,height=480 \\
      ! cudaipcfilter ipc-mode=host socket-path=$XDG_RUNTIME_DIR/cudaipc/detector"

prints, per frame (as build/examples/cudaipc-appsink-detections does):

  frame 0 pts 0:00:00.000000000: 1 object(s)
    ball x=300 y=220 w=41 h=41 score=1.000

It needs PyGObject with GStreamer's typelibs (Debian, Ubuntu: python3-gi, gir1.2-gstreamer-1.0,
gir1.2-gst-plugins-base-1.0) in the Python that has cudaipc and NumPy.
"""
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
from gi.repository import Gst, GstApp  # noqa: E402,F401  (GstApp: the appsink's methods)

import cudaipc  # noqa: E402


def clock_time(ns: int) -> str:
    if ns == Gst.CLOCK_TIME_NONE:
        return "none"
    s, ns = divmod(ns, 1_000_000_000)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}.{ns:09d}"


def report(msg: Gst.Message) -> bool:
    """Prints an error or warning of the bus; True for an error."""
    error = msg.type == Gst.MessageType.ERROR
    err, debug = msg.parse_error() if error else msg.parse_warning()
    print(f"{'error' if error else 'warning'} from {msg.src.get_name()}: {err.message}",
          file=sys.stderr, flush=True)
    return error


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} 'PIPELINE'", file=sys.stderr)
        return 2
    Gst.init(None)
    pipeline = Gst.parse_launch(sys.argv[1] + " ! appsink name=results sync=false")
    sink, bus = pipeline.get_by_name("results"), pipeline.get_bus()
    pipeline.set_state(Gst.State.PLAYING)
    try:
        n = 0
        while True:
            sample = sink.try_pull_sample(100_000_000)  # ns
            while msg := bus.pop_filtered(Gst.MessageType.ERROR | Gst.MessageType.WARNING):
                if report(msg):
                    return 1
            if sample is None:
                if sink.is_eos():
                    return 0
                continue
            buf = sample.get_buffer()
            d = cudaipc.gst_detections(buf)  # None: the model did not answer this frame in time
            print(f"frame {n} pts {clock_time(buf.pts)}: ", end="")
            if d is None:
                print("no results")
            else:
                print(f"{len(d['labels'])} object(s)")
                for label, (x, y, w, h), score in zip(d["labels"], d["xywh"], d["scores"]):
                    print(f"  {label or '(no label)'} x={x} y={y} w={w} h={h} score={score:.3f}")
            sys.stdout.flush()
            n += 1
    finally:
        pipeline.set_state(Gst.State.NULL)


if __name__ == "__main__":
    sys.exit(main())
