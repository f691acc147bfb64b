"""A PyGObject application that imports NumPy (or torch, CuPy) before GStreamer, as AI
applications do, and runs one pipeline with cudaipc's elements in it (issue #38).

Same arguments, frames and output as embed_app.c (the driver, embedded.py, reads both):
  embed_app.py --first MODULE --pipeline DESC [--count N] [--first-id I] [--fps F] [--timeout-s T]
An element named "src" (appsrc) gets N frames, each carrying its id in its first 8 bytes and
tests/common's pattern after them; an element named "check" (fakesink signal-handoffs=true) has
every frame checked with NumPy, and the result the filter's model attached (custom meta
"filter-result", field "index") must be the frame's own id. Exit 0 once the pipeline ended (EOS
or an error), 3 on timeout. Warnings and infos on the bus are printed as "message KIND: TEXT".
"""
import argparse
import importlib
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--first", default="numpy")
parser.add_argument("--pipeline", required=True)
parser.add_argument("--count", type=int, default=30)
parser.add_argument("--first-id", type=int, default=0)
parser.add_argument("--fps", type=int, default=100)
parser.add_argument("--timeout-s", type=float, default=20)
args = parser.parse_args()

# The point of the program: this module's C++ runtime is in the process before GStreamer's.
importlib.import_module(args.first)
import numpy as np  # noqa: E402

import gi  # noqa: E402

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

Gst.init(None)

WIDTH, HEIGHT = 64, 48
C1, C2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)


def pattern(frame_id: int, words: int) -> np.ndarray:
    """tests/common/pattern.hpp's words for a frame id (uint64 arithmetic wraps, as in C++)."""
    with np.errstate(over="ignore"):
        x = np.uint64(frame_id) * C1 + np.arange(words, dtype=np.uint64) * C2 + np.uint64(1)
        return x ^ (x >> np.uint64(31))


def make_frame(frame_id: int) -> bytes:
    body = WIDTH * HEIGHT - 8  # a multiple of 8 for these caps
    return np.uint64(frame_id).tobytes() + pattern(frame_id, body // 8).tobytes()


seen = bad = wrong_results = with_results = 0
# The streaming thread (frames) and this one (bus messages) both report: one write per line, under
# a lock, or print()'s two writes (text, then newline) interleave and a line is lost to the reader.
_out = threading.Lock()


def say(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()



def on_handoff(_sink, buf, _pad):
    global seen, bad, wrong_results, with_results
    ok, info = buf.map(Gst.MapFlags.READ)
    if not ok:
        bad += 1
        say("frame id=? ok=0 (unmappable)")
        return
    data = np.frombuffer(info.data, dtype=np.uint8)
    frame_id = int(data[:8].view(np.uint64)[0]) if data.size >= 8 else -1
    body = data[8:]
    intact = (frame_id >= 0 and body.size % 8 == 0
              and np.array_equal(body.view(np.uint64), pattern(frame_id, body.size // 8)))
    buf.unmap(info)
    seen += 1
    bad += 0 if intact else 1
    result = ""
    meta = buf.get_custom_meta("filter-result")
    if meta is not None:
        with_results += 1
        found, index = meta.get_structure().get_int64("index")
        if not found or index != frame_id:
            wrong_results += 1
        result = f" result={index if found else '?'}"
    say(f"frame id={frame_id} ok={int(intact)}{result}")


pipeline = Gst.parse_launch(args.pipeline)
src = pipeline.get_by_name("src")
check = pipeline.get_by_name("check")
if check is not None:
    check.connect("handoff", on_handoff)
bus = pipeline.get_bus()
asked = time.monotonic()
pipeline.set_state(Gst.State.PLAYING)
# How long the application's own thread was held: never on a peer.
say(f"set-state ms={(time.monotonic() - asked) * 1000:.0f}")

deadline = time.monotonic() + args.timeout_s
pushed = 0
outcome = "timeout"
while time.monotonic() < deadline:
    if src is not None and pushed <= args.count:
        if pushed == args.count:
            src.emit("end-of-stream")
        else:
            b = Gst.Buffer.new_wrapped(make_frame(args.first_id + pushed))
            b.pts = pushed * Gst.SECOND // args.fps
            b.duration = Gst.SECOND // args.fps
            ret = src.emit("push-buffer", b)
            if ret != Gst.FlowReturn.OK:
                say(f"push-refused id={args.first_id + pushed} flow={ret.value_nick}")
        pushed += 1
    wait = Gst.SECOND // args.fps if src is not None and pushed <= args.count else 50 * Gst.MSECOND
    m = bus.timed_pop_filtered(wait, Gst.MessageType.EOS | Gst.MessageType.ERROR |
                               Gst.MessageType.WARNING | Gst.MessageType.INFO |
                               Gst.MessageType.ELEMENT)
    if m is None:
        continue
    if m.type == Gst.MessageType.ELEMENT:
        s = m.get_structure()
        if s is not None and s.get_name().startswith("cudaipc"):
            say(f"message element: {m.src.get_name()}: {s.to_string()}")
        continue
    if m.type in (Gst.MessageType.WARNING, Gst.MessageType.INFO):
        err, _dbg = m.parse_warning() if m.type == Gst.MessageType.WARNING else m.parse_info()
        kind = "warning" if m.type == Gst.MessageType.WARNING else "info"
        say(f"message {kind}: {err.message}")
        continue
    if m.type == Gst.MessageType.EOS:
        outcome = "eos"
    else:
        err, _dbg = m.parse_error()
        outcome = f"error: {err.message}"
    break
pipeline.set_state(Gst.State.NULL)
say(f"outcome {outcome}")
say(f"frames {seen} bad {bad} results {with_results} wrong-results {wrong_results}")
sys.exit(3 if outcome == "timeout" else 0)
