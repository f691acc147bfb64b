"""One model process, many pipelines: GStreamer pipelines in processes of their own, each with a
cudaipcfilter, served by one Python server that batches across them (cudaipc.Server.batch).
Every frame's result is checked against that frame (its timestamp, its pixel sum, and the path
of the filter it came through: no pipeline gets another's answer); the paths given or a watched
directory; a pipeline SIGKILLed among three (the others lose nothing and wait no longer); the
model SIGKILLed under three (each plays on per on-missing and uses the next server, holding the
descriptors it held before)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Dict, List, Optional

import numpy as np
import pytest

import cudaipc
from conftest import gst_env, gst_plugin_dir, gst_tool, require_gst_elements
from test_filter_gst import open_fds, start_server

PLUGIN_DIR = gst_plugin_dir()
GST_LAUNCH = gst_tool("gst-launch-1.0")

pytestmark = [
    pytest.mark.skipif(not os.path.exists(os.path.join(PLUGIN_DIR, "libgstcudaipc.so")),
                       reason=f"the cudaipc plugin is not built in {PLUGIN_DIR}"),
    pytest.mark.skipif(GST_LAUNCH is None, reason="gst-launch-1.0 is not installed"),
]

# Answers each request with its timestamp, pixel sum and pipeline path; at the end (SIGTERM) says
# how large its batches were.
BATCHING_SERVER = textwrap.dedent("""
    import signal, sys, cudaipc
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    paths = [a for a in sys.argv[2:] if not a.startswith("--dir=")]
    dirs = [a[6:] for a in sys.argv[2:] if a.startswith("--dir=")]
    sizes = []
    with cudaipc.Server(paths or None, directory=dirs[0] if dirs else None) as s:
        print("serving", flush=True)
        while not stop:
            reqs = s.batch(int(sys.argv[1]), timeout=0.1, max_delay=0.004)
            if reqs:
                sizes.append(len(reqs))
            for r in reqs:
                total = int(r.numpy().sum(dtype="int64"))
                r.reply(meta={"pts": r.frame.pts, "sum": total, "path": r.path})
    print(f"batches={len(sizes)} max={max(sizes, default=0)} "
          f"requests={sum(sizes)}", flush=True)
""")


class Pipeline:
    """videotestsrc -> cudaipcfilter -> cudaipcringsink (host memory, or CUDA frames through
    cudaupload), read back in this process on a thread: every frame's meta is checked against
    the frame."""

    def __init__(self, tmp_path, name: str, model: str, n: int, pattern: str, live: bool,
                 missing: str = "wait", timeout_ns: int = 10_000_000_000,
                 memory: str = "host") -> None:
        self.name, self.model, self.n = name, model, n
        self.out = str(tmp_path / f"{name}.out")
        env = gst_env(tmp_path, PLUGIN_DIR)
        upload = ["cudaupload", "!", "video/x-raw(memory:CUDAMemory)", "!"] \
            if memory == "cuda" else []
        mode = [] if memory == "cuda" else ["ipc-mode=host"]
        self.proc = subprocess.Popen(
            [GST_LAUNCH, "-q", "videotestsrc", f"pattern={pattern}", "animation-mode=frames",
             f"is-live={'true' if live else 'false'}", f"num-buffers={n}", "!",
             "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1", "!", *upload,
             "cudaipcfilter", *mode, f"socket-path={model}",
             f"on-missing={missing}", f"timeout={timeout_ns}", "!", "cudaipcringsink",
             *mode, "wait-for-consumer=true", f"socket-path={self.out}"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.frames: List[Optional[dict]] = []  # each frame's meta (None: none), in order
        self.errors: List[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        # Reconnecting: the pipeline's channel may not exist yet (a loaded machine starts
        # gst-launch-1.0 slowly); the stream's EOS ends the loop.
        try:
            with cudaipc.Consumer(self.out, timeout=60) as c:
                for f in c:
                    with f:
                        self.frames.append(self._check(f))
        except cudaipc.Error as e:
            if len(self.frames) < self.n:
                self.errors.append(f"reading: {e}")

    def _check(self, f: cudaipc.Frame) -> Optional[dict]:
        m = f.meta or None
        if m is not None:
            if m.get("pts") != f.pts:
                self.errors.append(f"frame {f.seq}: pts {m.get('pts')}")
            if m.get("sum") != int(f.numpy().sum(dtype=np.int64)):
                self.errors.append(f"frame {f.seq}: another frame's sum")
            if m.get("path") != self.model:
                self.errors.append(f"frame {f.seq}: answered for {m.get('path')}")
        return m

    def finish(self, timeout: float = 90) -> None:
        _, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, f"{self.name}: {err}"
        self.thread.join(timeout=30)
        assert not self.errors, (self.name, self.errors[:5])
        assert len(self.frames) == self.n, (self.name, len(self.frames))

    def unanswered(self) -> List[int]:
        return [i for i, m in enumerate(self.frames) if m is None]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.communicate()


def stop_server(server: subprocess.Popen) -> Dict[str, int]:
    server.send_signal(signal.SIGTERM)
    out, err = server.communicate(timeout=30)
    assert server.returncode == 0, err
    line = [ln for ln in out.splitlines() if ln.startswith("batches=")][-1]
    return {k: int(v) for k, v in (kv.split("=") for kv in line.split())}


@pytest.fixture
def env_ok(tmp_path):
    require_gst_elements(gst_env(tmp_path, PLUGIN_DIR), "videotestsrc")


def test_one_server_batches_three_pipelines_each_frame_its_own(tmp_path, env_ok):
    models = [str(tmp_path / f"model{i}") for i in range(3)]
    server = start_server(["-c", BATCHING_SERVER, "4", *models])
    try:
        pipes = [Pipeline(tmp_path, f"p{i}", models[i], 90, pat, live=False)
                 for i, pat in enumerate(["ball", "snow", "smpte"])]
        for p in pipes:
            p.finish()
    finally:
        stats = stop_server(server)
    for p in pipes:
        assert all(m is not None for m in p.frames), (p.name, p.frames.count(None))
    # Three pipelines running at once fill batches beyond one request.
    assert stats["requests"] == 3 * 90, stats
    assert 1 < stats["max"] <= 4, stats


def test_a_directory_serves_the_pipelines_that_start_in_it(tmp_path, env_ok):
    d = tmp_path / "models"
    d.mkdir(mode=0o700)
    server = start_server(["-c", BATCHING_SERVER, "8", f"--dir={d}"])
    try:
        first = Pipeline(tmp_path, "first", str(d / "cam0"), 40, "ball", live=False)
        first.finish()
        later = [Pipeline(tmp_path, f"later{i}", str(d / f"cam{i}"), 40, "snow", live=False)
                 for i in (1, 2)]
        for p in later:
            p.finish()
    finally:
        stats = stop_server(server)
    for p in [first, *later]:
        assert all(m is not None for m in p.frames), (p.name, p.frames.count(None))
    assert stats["requests"] == 120, stats


def test_a_pipeline_killed_among_three_costs_the_others_nothing(tmp_path, env_ok):
    models = [str(tmp_path / f"model{i}") for i in range(3)]
    server = start_server(["-c", BATCHING_SERVER, "4", *models])
    try:
        # Live at 30 frames/s: a frame that waited on the dead pipeline would come without its
        # result here (timeout 300 ms, on-missing=pass).
        pipes = [Pipeline(tmp_path, f"p{i}", models[i], 120, "ball", live=True, missing="pass",
                          timeout_ns=300_000_000) for i in range(3)]
        time.sleep(1.5)
        pipes[1].kill()
        for p in (pipes[0], pipes[2]):
            p.finish()
    finally:
        stop_server(server)
    for p in (pipes[0], pipes[2]):
        # The first frames may pass before the filter has joined the model's reply channel; from
        # then on (and through the kill, 45 frames in) every frame has its result.
        missing = [i for i, m in enumerate(p.frames) if m is None]
        assert all(i < 15 for i in missing), (p.name, missing)


def test_the_model_killed_under_three_pipelines_is_replaced(tmp_path, env_ok):
    models = [str(tmp_path / f"model{i}") for i in range(3)]
    server = start_server(["-c", BATCHING_SERVER, "4", *models])
    n = 330  # 11 s live
    pipes = [Pipeline(tmp_path, f"p{i}", models[i], n, "ball", live=True, missing="pass",
                      timeout_ns=300_000_000) for i in range(3)]

    def replace(server: subprocess.Popen) -> subprocess.Popen:
        server.kill()  # SIGKILL: no goodbye
        server.communicate()
        time.sleep(0.7)
        return start_server(["-c", BATCHING_SERVER, "4", *models])

    time.sleep(1.5)
    # GStreamer makes a pipe pair in each pipeline process the first time its model goes (once,
    # not per loss): the descriptors are compared from the first replacement on.
    server = replace(server)
    time.sleep(1.5)
    served = [open_fds(p.proc.pid) for p in pipes]
    server = replace(server)
    try:
        # Once the next model serves, each pipeline holds what it held with the last one: the
        # dead one's connections, leases and mappings were given back.
        deadline = time.monotonic() + 5
        again = served
        while time.monotonic() < deadline:
            again = [open_fds(p.proc.pid) for p in pipes]
            if again == served:
                break
            time.sleep(0.05)
        for p in pipes:
            p.finish()
    finally:
        stop_server(server)
    from collections import Counter
    assert again == served, [(Counter(a) - Counter(b), Counter(b) - Counter(a))
                             for a, b in zip(served, again)]
    for p in pipes:
        missing = [i for i, m in enumerate(p.frames) if m is None]
        # Frames went on without results while no model served, and the last model answered the
        # last two seconds.
        assert any(30 <= i < n - 60 for i in missing), (p.name, missing)
        assert all(p.frames[i] is not None for i in range(n - 60, n)), (p.name, missing)
