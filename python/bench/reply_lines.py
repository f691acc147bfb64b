#!/usr/bin/env python3
"""How many distinct cache lines a served model's reply() touches after its caches were emptied:
counted, not timed (issue #39), as cold_lines.py counts a consumer's frame. A requester process
publishes host requests every 5 ms and reads the replies on a thread asleep in its wait (as the
filter's reply reader is); this process serves them, and before each reply a 16 MiB write empties
the simulated caches. Only reply() itself is counted (callgrind collects inside the binding's
Request.reply), with a model's usual results: a box, its label and score as new NumPy arrays, one
label name and a `pts` field.

  python3 python/bench/reply_lines.py [--replies 40] [--keep DIR]

--keep leaves the profile in DIR (callgrind.reply), for callgrind_annotate to say which functions
the lines are in. Needs valgrind (callgrind, callgrind_annotate); without it the row says why. Run
on the build machine: valgrind is not on the GPU machine."""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from cold_lines import cache_options, totals

FLUSH = 16 << 20
WARMUP = 20
# The binding's Request.reply (python/native/server.cpp); the C API's cudaipc_server_reply must
# not match, or entering it would switch the collection off.
COLLECT = "cudaipc_py::(anonymous namespace)::r_reply*"


def requester(path: str, stop) -> None:
    import numpy as np

    import cudaipc
    with cudaipc.Producer(path, memory="host", num_slots=8, role="requests") as p:
        p.wait_for_consumers(1)
        replies = cudaipc.Consumer(path + ".reply", timeout=10, reconnect=True)

        def read() -> None:
            while not stop.is_set():
                try:
                    replies.next(timeout=0.2).release()
                except cudaipc.TimeoutError:
                    pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        i = 0
        while not stop.is_set():
            try:
                p.publish(np.full(64, i & 255, np.uint8), pts=i * 1000)
            except cudaipc.TimeoutError:
                continue  # the server stopped taking requests: the run is ending
            i += 1
            time.sleep(0.005)
        reader.join(5)
        replies.close()


def serve(replies: int) -> None:
    """The row's server, run under callgrind."""
    import numpy as np

    import cudaipc
    path = os.path.join(tempfile.mkdtemp(prefix="reply-lines-"), "model")
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    big = ctypes.create_string_buffer(FLUSH)
    with cudaipc.Server(path) as srv:
        peer = ctx.Process(target=requester, args=(path, stop))
        peer.start()
        try:
            for i in range(WARMUP + replies):
                r = srv.next(30)
                if r is None:
                    sys.exit("reply_lines: no request came")
                det = {"boxes": np.array([[1.0, 2.0, 30.0, 40.0]], np.float32),
                       "labels": np.zeros(1, np.int64), "scores": np.ones(1, np.float32)}
                pts = r.frame.pts
                ctypes.memset(big, i & 255, FLUSH)  # the model's own work, outside the counts
                if not r.reply(meta={"pts": pts}, detections=det, label_names=["object"]):
                    sys.exit(f"reply_lines: reply {i} was not sent")
        finally:
            stop.set()
            peer.join(30)
    if peer.exitcode != 0:
        sys.exit(f"reply_lines: the requester exited {peer.exitcode}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replies", type=int, default=40)
    ap.add_argument("--keep", metavar="DIR", help="leave the profile in DIR")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.replies)
        return
    print(f"distinct lines one served reply() touches after its caches were emptied "
          f"(callgrind, {args.replies} replies after {WARMUP}, host results)")
    missing = [t for t in ("valgrind", "callgrind_annotate") if not shutil.which(t)]
    if missing:
        print(f"  skipped: {', '.join(missing)} not found (install valgrind)")
        return
    work = tempfile.mkdtemp(prefix="reply-lines-")
    out = os.path.join(work, "callgrind.reply")
    cmd = ["valgrind", "--tool=callgrind", *cache_options(False), "--collect-atstart=no",
           f"--toggle-collect={COLLECT}", f"--callgrind-out-file={out}", sys.executable,
           os.path.abspath(__file__), "--serve", "--replies", str(args.replies)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        sys.exit(f"reply_lines: the server exited {r.returncode}: {r.stderr.strip()[-600:]}")
    code, data = totals(out)
    n = WARMUP + args.replies  # the warm-up's replies are collected too, each after its flush
    print(f"  {'row':<40}{'code':>8}{'data':>8}{'all':>8}")
    print(f"  {'reply(meta=, detections=, label_names=)':<40}{code / n:8.1f}{data / n:8.1f}"
          f"{(code + data) / n:8.1f}")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        shutil.copy(out, os.path.join(args.keep, "callgrind.reply"))
        print(f"  profile in {args.keep}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
