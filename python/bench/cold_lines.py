#!/usr/bin/env python3
"""How many distinct cache lines one frame's path touches after a wait: counted, not timed
(issue #39). After each wait for a frame a reader's caches are cold, and what a Python row costs
over C++ on the GPU machine's CPU is mostly the lines its path refills then; the clock there moves
rows by several microseconds between runs and leases, these counts do not move at all.

Each row runs under callgrind with a simulated cache that a 16 MiB write empties before every frame
(last level 8 MiB; a 1 KiB first level, so code lines count too), so its misses are the distinct
lines each frame touches: code, and data read or written. A host producer publishes 1080p RGBA
every 5 ms, so every read waits. Rows: the C++ consumer's next -> release
(cudaipc-bench-consumer-rate --flush-mib, its read_one() alone), then the package's Python reads,
each less the same loop with an empty body. With --pages, lines of 4 KiB: pages instead.

  python3 python/bench/cold_lines.py [--frames 40] [--pages] [--cxx-consumer PATH] [--keep DIR]

--keep leaves each row's profile in DIR (callgrind.ROW), for callgrind_annotate to say which
functions the lines are in.

Needs valgrind (callgrind, callgrind_control, callgrind_annotate); without it each row says why.
Run on the build machine: valgrind is not on the GPU machine."""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

FLUSH = 16 << 20
ROWS = {
    "empty": "the Python loop, empty body (subtracted from the rows below)",
    "next": "package next -> release",
    "numpy": "package next -> frame.numpy() -> release",
}


def produce(path: str, stop) -> None:
    import numpy as np

    import cudaipc
    with cudaipc.Producer(path, memory="host", num_slots=4, policy="drop") as p:
        frame = np.full((1080, 1920, 4), 7, dtype=np.uint8)
        while not stop.is_set():
            p.publish(frame)
            time.sleep(0.005)


def wait_for(path: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def reader(args) -> None:
    """A row's loop, run under callgrind: instrumented between `go` and `done` only (the driver
    switches callgrind's instrumentation), so the interpreter's start and end are left out."""
    import ctypes

    import cudaipc
    big = ctypes.create_string_buffer(FLUSH)
    c = cudaipc.Consumer(args.path, mode="latest", timeout=60)
    c.next().release()

    def empty() -> None:
        pass

    def plain() -> None:
        c.next().release()

    def view() -> None:
        f = c.next()
        f.numpy()
        f.release()

    one: Callable[[], None] = {"empty": empty, "next": plain, "numpy": view}[args.reader]
    for i in range(20):
        ctypes.memset(big, i, FLUSH)
        one()
    sync = args.sync
    with open(os.path.join(sync, "ready"), "w") as f:
        f.write(str(os.getpid()))
    if not wait_for(os.path.join(sync, "go"), 600):
        sys.exit("cold_lines: the driver never said go")
    for i in range(args.frames):
        ctypes.memset(big, i & 255, FLUSH)  # the wait's eviction, outside the counts
        one()
    open(os.path.join(sync, "done"), "w").close()
    wait_for(os.path.join(sync, "exit"), 600)
    c.close()


def cache_options(pages: bool) -> List[str]:
    line = 4096 if pages else 64
    first = f"{max(1024, 2 * line)},2,{line}"
    return ["--cache-sim=yes", f"--LL=8388608,16,{line}", f"--I1={first}", f"--D1={first}"]


def totals(out_file: str) -> Tuple[float, float]:
    """(code lines, data lines) of a callgrind profile, the flush's memset left out."""
    got = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no",
                          "--show=ILmr,DLmr,DLmw", "--sort=ILmr", out_file],
                         capture_output=True, text=True, check=True).stdout
    code = data = 0
    started = False
    for line in got.splitlines():
        if "file:function" in line:
            started = True
            continue
        m = re.match(r"\s*([\d,.]+)\s+(?:\([^)]*\)\s+)?([\d,.]+)\s+(?:\([^)]*\)\s+)?([\d,.]+)"
                     r"\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if not started or not m or "memset" in m.group(4):
            continue
        il, dr, dw = (0 if x == "." else int(x.replace(",", "")) for x in m.groups()[:3])
        code += il
        data += dr + dw
    return code, data


def python_row(row: str, args, work: str) -> Tuple[float, float]:
    sync = tempfile.mkdtemp(dir=work)
    out = os.path.join(work, f"callgrind.{row}")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", *cache_options(args.pages),
           f"--callgrind-out-file={out}", sys.executable, os.path.abspath(__file__),
           "--reader", row, "--path", args.path, "--frames", str(args.frames), "--sync", sync]
    with open(os.path.join(work, f"valgrind.{row}.log"), "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            if not wait_for(os.path.join(sync, "ready"), 900):
                raise RuntimeError(f"{row}: the reader did not start (see {log.name})")
            pid = open(os.path.join(sync, "ready")).read()
            subprocess.run(["callgrind_control", "-i", "on", pid], capture_output=True, check=True)
            open(os.path.join(sync, "go"), "w").close()
            if not wait_for(os.path.join(sync, "done"), 900):
                raise RuntimeError(f"{row}: the reader did not finish (see {log.name})")
            subprocess.run(["callgrind_control", "-i", "off", pid], capture_output=True,
                           check=True)
            open(os.path.join(sync, "exit"), "w").close()
            if proc.wait(120) != 0:
                raise RuntimeError(f"{row}: the reader exited {proc.returncode} (see {log.name})")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    code, data = totals(out)
    return code / args.frames, data / args.frames


def cxx_row(program: str, args, work: str) -> Tuple[float, float]:
    out = os.path.join(work, "callgrind.cxx")
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(program))
    env["LD_LIBRARY_PATH"] = here + (":" + env["LD_LIBRARY_PATH"]
                                     if env.get("LD_LIBRARY_PATH") else "")
    cmd = ["valgrind", "--tool=callgrind", *cache_options(args.pages), "--collect-atstart=no",
           "--toggle-collect=*read_one*", f"--callgrind-out-file={out}", program,
           f"--path={args.path}", f"--frames={args.frames}", "--warmup=5", "--flush-mib=16"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{program} exited {r.returncode}: {r.stderr.strip()[-300:]}")
    code, data = totals(out)
    return code / args.frames, data / args.frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--pages", action="store_true", help="count 4 KiB pages instead of lines")
    ap.add_argument("--cxx-consumer", metavar="PATH",
                    help="cudaipc-bench-consumer-rate (default: the one in build/tests/bench)")
    ap.add_argument("--keep", metavar="DIR", help="leave the rows' callgrind profiles in DIR")
    ap.add_argument("--reader", choices=sorted(ROWS), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--sync", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reader:
        reader(args)
        return
    missing = [t for t in ("valgrind", "callgrind_control", "callgrind_annotate")
               if not shutil.which(t)]
    unit = "pages" if args.pages else "lines"
    print(f"distinct {unit} one frame's path touches after its caches were emptied "
          f"(callgrind, {args.frames} frames, host 1080p RGBA)")
    if missing:
        print(f"  skipped: {', '.join(missing)} not found (install valgrind)")
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from consumer_overhead import find_program

    cxx, why = find_program("cudaipc-bench-consumer-rate", args.cxx_consumer)
    work = tempfile.mkdtemp(prefix="cold-lines-")
    args.path = os.path.join(work, "channel")
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    prod = ctx.Process(target=produce, args=(args.path, stop))
    prod.start()
    results: Dict[str, Optional[Tuple[float, float]]] = {}
    try:
        if not wait_for(args.path, 30):
            raise RuntimeError("the producer did not start")
        print(f"  {'row':58s} {'code':>7s} {'data':>7s} {'all':>7s}")
        if cxx is None:
            print(f"  {'C++ consumer next -> release':58s} skipped ({why})")
        else:
            code, data = cxx_row(cxx, args, work)
            print(f"  {'C++ consumer next -> release':58s} {code:7.1f} {data:7.1f} "
                  f"{code + data:7.1f}")
        for row in ROWS:
            results[row] = python_row(row, args, work)
        base = results["empty"]
        for row, label in ROWS.items():
            code, data = results[row]
            if row != "empty":
                code, data = code - base[0], data - base[1]
            print(f"  {label:58s} {code:7.1f} {data:7.1f} {code + data:7.1f}")
    finally:
        stop.set()
        prod.join(10)
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for name in os.listdir(work):
                if name.startswith("callgrind."):
                    shutil.move(os.path.join(work, name), os.path.join(args.keep, name))
            print(f"  profiles in {args.keep}")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
