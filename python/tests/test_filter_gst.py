"""cudaipcfilter with a Python model process (cudaipc.Server), across processes: a GStreamer
pipeline sends each frame to examples/python/serve_detector.py (or a small server of the test's
own) and pushes the same buffer on with the results. Every frame's result is checked against that
frame: a custom meta naming its timestamp and pixel sum (any GStreamer version), and the ball of
videotestsrc found at its known position (GStreamer 1.24+, analytics metas). The model process
killed with SIGKILL mid-stream and started again: the pipeline plays on and uses the new one; the
pipeline killed: the model serves the next pipeline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import List

import numpy as np
import pytest

import cudaipc
from conftest import gst_env, gst_plugin_dir, gst_tool, require_gst_elements
from test_metas_gst import PEER, ball_centre, lines_of

PLUGIN_DIR = gst_plugin_dir()
GST_LAUNCH = gst_tool("gst-launch-1.0")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVE = os.path.join(REPO, "examples", "python", "serve_detector.py")

pytestmark = [
    pytest.mark.skipif(not os.path.exists(os.path.join(PLUGIN_DIR, "libgstcudaipc.so")),
                       reason=f"the cudaipc plugin is not built in {PLUGIN_DIR}"),
    pytest.mark.skipif(GST_LAUNCH is None, reason="gst-launch-1.0 is not installed"),
]


def start_server(args, **kw) -> subprocess.Popen:
    """A model process; returns once it serves (its first line)."""
    p = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, **kw)
    line = p.stdout.readline()
    if not line.startswith("serving"):
        p.kill()
        raise AssertionError(f"the server did not start: {line} {p.stderr.read()}")
    return p


SUMMING_SERVER = textwrap.dedent("""
    import sys, cudaipc
    with cudaipc.Server(sys.argv[1]) as s:
        print("serving", flush=True)
        for req in s:
            if req.frame.device == "cpu":
                total = int(req.numpy().sum(dtype="int64"))
            else:
                import torch
                total = int(torch.from_dlpack(req).sum(dtype=torch.int64))
            req.reply(meta={"pts": req.frame.pts, "sum": total})
""")


def cuda_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.parametrize("memory", ["host", "cuda"])
def test_python_server_answers_each_frame_with_its_own_result(tmp_path, memory):
    """Any GStreamer version: the results are a custom meta computed from each frame's pixels,
    which the server reads from host memory, or zero-copy from the GPU (CUDA frames from
    cudaupload, the sum taken with torch)."""
    n, w, h = 40, 64, 48
    model, out = str(tmp_path / "model"), str(tmp_path / "out")
    env = gst_env(tmp_path, PLUGIN_DIR)
    require_gst_elements(env, "videotestsrc")
    if memory == "cuda":
        if not cuda_gpu():
            pytest.skip("no CUDA GPU (torch sees none): the CUDA case runs on the GPU machine")
        require_gst_elements(env, "cudaupload")
    upload = ["cudaupload", "!", "video/x-raw(memory:CUDAMemory)", "!"] if memory == "cuda" else []
    mode = [] if memory == "cuda" else ["ipc-mode=host"]
    server = start_server(["-c", SUMMING_SERVER, model])
    try:
        with cudaipc.Consumer(out, timeout=60) as c:
            pipe = subprocess.Popen(
                [GST_LAUNCH, "-q", "videotestsrc", "pattern=ball", "animation-mode=frames",
                 f"num-buffers={n}", "!", f"video/x-raw,format=RGBA,width={w},height={h}", "!",
                 *upload, "cudaipcfilter", *mode, f"socket-path={model}", "on-missing=wait",
                 "timeout=10000000000", "!", "cudaipcringsink", *mode,
                 "wait-for-consumer=true", f"socket-path={out}"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            seen = 0
            for i, f in zip(range(n), c):
                with f:
                    m = f.meta
                    assert m.get("pts") == f.pts, (i, m, f.pts)
                    assert m.get("sum") == int(f.numpy().sum(dtype=np.int64)), (i, m)
                    seen += 1
            _, err = pipe.communicate(timeout=60)
            assert pipe.returncode == 0, err
            assert seen == n
    finally:
        server.kill()
        server.communicate()


def detector_pipeline(tmp_path, n: int, w: int, h: int, live: bool, between: str):
    """videotestsrc's ball into a channel, read by the meta peer through `between` (the filter)."""
    cam = str(tmp_path / "cam")
    env = gst_env(tmp_path, PLUGIN_DIR)
    require_gst_elements(env, "videotestsrc")
    producer = subprocess.Popen(
        [GST_LAUNCH, "-q", "videotestsrc", "pattern=ball", "animation-mode=frames",
         f"is-live={'true' if live else 'false'}", f"num-buffers={n}", "!",
         f"video/x-raw,format=RGBA,width={w},height={h},framerate=30/1", "!", "cudaipcringsink",
         "ipc-mode=host", "wait-for-consumer=true", f"socket-path={cam}",
         "block-timeout=120000000000"],  # a slow first answer must not cost frames
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peer_env = gst_env(tmp_path, PLUGIN_DIR)
    peer_env["CUDAIPC_META_PEER_BETWEEN"] = between
    peer = subprocess.Popen([PEER, "describe", cam, str(n)], env=peer_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return producer, peer


def ball_boxes(lines, w, h):
    """Per frame, its ball boxes ([] for a frame that went on without results); None when no
    frame had analytics metas (GStreamer 1.22 has none)."""
    if not any("mtds" in line for line in lines):
        return None
    out = []
    for i, line in enumerate(lines):
        ods = [m for m in line.get("mtds", []) if m[0] == "od"]
        for od in ods:
            assert od[1] == "ball", (i, od)
            x, y, bw, bh = od[2:6]
            cx, cy = ball_centre(i, w, h)
            # Never another frame's box: the ball moves several pixels a frame.
            assert abs(x + bw / 2 - cx) <= 1.5 and abs(y + bh / 2 - cy) <= 1.5, (i, od, cx, cy)
        assert len(ods) <= 1, (i, ods)
        out.append(ods)
    return out


def open_fds(pid: int) -> List[str]:
    """What a process's descriptors point at (sockets and memfds by kind, files by path), sorted:
    equal lists at two moments mean it holds the same kinds of things."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        out.append(target.split(":[")[0] if ":[" in target else target)
    return sorted(out)


needs_peer = pytest.mark.skipif(not os.access(PEER, os.X_OK),
                                reason=f"cudaipc-gst-meta-peer is not built ({PEER})")


@needs_peer
@pytest.mark.parametrize("memory", ["host", "cuda"])
def test_serve_detector_finds_the_ball_in_every_frame(tmp_path, memory):
    """examples/python/serve_detector.py as the filter's model: the ball's box on every frame,
    in host memory, or on the GPU (cudaupload before the filter; the detector reads the frames
    zero-copy with torch)."""
    n, w, h = 60, 320, 240
    model = str(tmp_path / "det")
    if memory == "cuda":
        if not cuda_gpu():
            pytest.skip("no CUDA GPU (torch sees none): the CUDA case runs on the GPU machine")
        require_gst_elements(gst_env(tmp_path, PLUGIN_DIR), "cudaupload")
        between = (f"cudaupload ! video/x-raw(memory:CUDAMemory) ! cudaipcfilter "
                   f"socket-path={model} on-missing=wait timeout=10000000000")
    else:
        between = (f"cudaipcfilter ipc-mode=host socket-path={model} on-missing=wait "
                   "timeout=10000000000")
    server = start_server([SERVE, model])
    try:
        producer, peer = detector_pipeline(tmp_path, n, w, h, False, between)
        lines = lines_of(peer, timeout=120)
        producer.communicate(timeout=60)
        assert len(lines) == n
        boxes = ball_boxes(lines, w, h)
        if boxes is None:
            pytest.skip("GStreamer 1.22 has no analytics metas: tests/gst/example_detections.py "
                        "reads the boxes from its CudaipcAnalyticsMeta")
        assert all(len(b) == 1 for b in boxes), [i for i, b in enumerate(boxes) if len(b) != 1]
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=30)
    assert f"done requests={n}" in out, (out, err)


@needs_peer
def test_model_killed_mid_stream_is_replaced_and_the_pipeline_plays_on(tmp_path):
    # 10 s live: the second model must be up (its imports take seconds on a cold GPU machine)
    # well before the last 30 frames.
    n, w, h = 300, 160, 120
    model = str(tmp_path / "det")
    server = start_server([SERVE, model])
    producer, peer = detector_pipeline(
        tmp_path, n, w, h, True,
        f"cudaipcfilter ipc-mode=host socket-path={model} on-missing=pass timeout=300000000")
    time.sleep(1.5)
    served = open_fds(peer.pid)  # the pipeline's descriptors while a model serves it
    server.kill()  # SIGKILL: no goodbye
    server.communicate()
    time.sleep(1.0)
    second = start_server([SERVE, model])
    try:
        # Once the second model serves, the pipeline holds what it held with the first: the dead
        # one's connections, leases and mappings were given back.
        deadline = time.monotonic() + 5
        while open_fds(peer.pid) != served and time.monotonic() < deadline:
            time.sleep(0.05)
        again = open_fds(peer.pid)
        lines = lines_of(peer, timeout=120)
        producer.communicate(timeout=60)
    finally:
        second.send_signal(signal.SIGTERM)
        second.communicate(timeout=30)
    assert again == served, (served, again)
    assert len(lines) == n  # every frame went on (and in order: each box is its own frame's)
    boxes = ball_boxes(lines, w, h)
    if boxes is None:
        pytest.skip("GStreamer 1.22 has no analytics metas")
    missing = [i for i, b in enumerate(boxes) if not b]
    # The model is killed 1.5 s (45 frames) in and replaced 1 s later; the stream lasts 10 s.
    assert any(15 <= i < n - 30 for i in missing), f"no frame went on without results: {missing}"
    assert all(boxes[i] for i in range(10, 30)), missing  # the first model served these
    assert all(boxes[i] for i in range(n - 30, n)), missing  # and the second one the end


@needs_peer
def test_pipeline_killed_and_the_model_serves_the_next(tmp_path):
    model = str(tmp_path / "det")
    server = start_server([SERVE, model])
    try:
        w, h = 160, 120
        between = (f"cudaipcfilter ipc-mode=host socket-path={model} on-missing=wait "
                   "timeout=10000000000")
        producer, peer = detector_pipeline(tmp_path, 300, w, h, True, between)
        time.sleep(1.0)
        peer.kill()  # the pipeline with the filter, mid-stream
        peer.communicate()
        producer.kill()
        producer.communicate()
        (tmp_path / "cam").unlink(missing_ok=True)
        producer, peer = detector_pipeline(tmp_path, 20, w, h, False, between)
        lines = lines_of(peer, timeout=120)
        producer.communicate(timeout=60)
        assert len(lines) == 20
        boxes = ball_boxes(lines, w, h)
        if boxes is not None:
            assert all(len(b) == 1 for b in boxes)
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=30)
    assert "went away" in err, err
