"""Metas between Python and the GStreamer elements, both ways (docs/metas.md): what a Python
producer publishes arrives in a cudaipcsrc pipeline as GStreamer's own metas, and what a GStreamer
producer attaches reaches Python's Frame.detections / .tensors / .custom, field by field, every
frame with values from its index. The GStreamer side is cudaipc-gst-meta-peer (tests/gst/mp),
which prints each buffer's metas as JSON; which metas exist depends on its GStreamer version
(analytics 1.24+, tensors 1.26+), so those checks run where the peer's output has them. Also the
detector example end to end: videotestsrc's ball, found in every frame at its known position."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from typing import Dict, List

import numpy as np
import pytest

import cudaipc
from conftest import (consumers_joined, gst_env, gst_plugin_dir, gst_tool, next_frame,
                      require_gst_elements)

PLUGIN_DIR = gst_plugin_dir()
GST_LAUNCH = gst_tool("gst-launch-1.0")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def meta_peer() -> str:
    """The peer built with the plugin (CUDAIPC_GST_META_PEER, else beside it in the build)."""
    env = os.environ.get("CUDAIPC_GST_META_PEER")
    if env:
        return env
    return os.path.join(os.path.dirname(PLUGIN_DIR), "tests", "gst", "mp", "cudaipc-gst-meta-peer")


PEER = meta_peer()

pytestmark = [
    pytest.mark.skipif(not os.path.exists(os.path.join(PLUGIN_DIR, "libgstcudaipc.so")),
                       reason=f"the cudaipc plugin is not built in {PLUGIN_DIR}"),
    pytest.mark.skipif(not os.access(PEER, os.X_OK),
                       reason=f"cudaipc-gst-meta-peer is not built ({PEER})"),
]

W, H = 16, 12
FRAMES = 24
LABELS = ["ball", "cube", "cone"]


def run_peer(tmp_path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([PEER, *args], env=gst_env(tmp_path, PLUGIN_DIR),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def lines_of(proc: subprocess.Popen, timeout: float = 60) -> List[dict]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"cudaipc-gst-meta-peer did not finish: {err}")
    assert proc.returncode == 0, f"cudaipc-gst-meta-peer failed ({proc.returncode}): {err}"
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def boxes_of(seq: int) -> np.ndarray:
    """Frame seq's three boxes, x1 y1 x2 y2."""
    return np.array([[10 * k + seq, 5 * k + 2 * seq, 10 * k + seq + 20 + k,
                      5 * k + 2 * seq + 30 + k] for k in range(3)], np.float32)


def test_python_metas_arrive_as_gstreamer_metas(tmp_path, path):
    caps = f"video/x-raw,format=RGBA,width={W},height={H},framerate=30/1"
    with cudaipc.Producer(path, memory="host", caps=caps, block_timeout=10) as p:
        peer = run_peer(tmp_path, "describe", path, str(FRAMES))
        consumers_joined(p, peer)
        for seq in range(1, FRAMES + 1):
            frame = np.full((H, W, 4), seq, np.uint8)
            assert p.publish(
                frame, pts=seq * 33_333_333,
                detections={"boxes": boxes_of(seq), "labels": LABELS,
                            "scores": np.array([0.5, 0.625, 0.75], np.float32)},
                classifications=[{"labels": ["ball", "background"],
                                  "scores": np.array([0.875, 0.125], np.float32)}, None, None],
                tensors={"boxes": boxes_of(seq).reshape(1, 3, 4),
                         "count": np.array([3], np.float32)},
                meta={"index": seq, "name": f"frame-{seq}", "ratio": seq / 4, "odd": seq % 2 == 1})
    got = lines_of(peer)
    assert len(got) == FRAMES
    for seq, line in enumerate(got, start=1):
        assert line["custom"]["cudaipc-meta"] == {"index": seq, "name": f"frame-{seq}",
                                                  "ratio": seq / 4, "odd": seq % 2 == 1}, seq
        if "mtds" not in line:
            continue  # GStreamer 1.22: no analytics to attach the detections to
        ods = [m for m in line["mtds"] if m[0] == "od"]
        assert [m[1] for m in ods] == LABELS
        for k, m in enumerate(ods):
            x1, y1, x2, y2 = boxes_of(seq)[k]
            assert m[2:6] == [x1, y1, x2 - x1, y2 - y1], (seq, m)
            assert m[7] == [0.5, 0.625, 0.75][k]
        cls = [m for m in line["mtds"] if m[0] == "cls"]
        assert cls == [["cls", "ball", 0.875, "background", 0.125]]
        # The classification is related to the first detection.
        assert any(r[0] != r[1] for r in line["relations"]), line["relations"]
        if "tensors" in line:
            tensors = {t[0]: t for t in line["tensors"]}
            assert tensors["boxes"][3] == [1, 3, 4]
            assert bytes.fromhex(tensors["boxes"][4]) == boxes_of(seq).tobytes()
            assert bytes.fromhex(tensors["count"][4]) == np.array([3], np.float32).tobytes()


def test_gstreamer_metas_reach_python(tmp_path, path):
    with cudaipc.Consumer(path, timeout=30) as c:
        peer = run_peer(tmp_path, "produce", path, str(FRAMES))
        frames = []
        for _ in range(FRAMES):
            with next_frame(c, timeout=30) as f:
                frames.append({"seq": f.seq, "custom": f.custom, "detections": f.detections,
                               "classifications": f.classifications, "tracks": f.tracks,
                               "tensors": {k: np.array(v) for k, v in f.tensors.items()},
                               "timestamps": [(r.caps, r.timestamp, r.duration) for r in f.metas
                                              if isinstance(r, cudaipc.metas.TimestampRecord)]})
    want = lines_of(peer)
    assert len(want) == FRAMES == len(frames)
    for seq, (w, f) in enumerate(zip(want, frames), start=1):
        fields = f["custom"]["test-frame-meta"]
        assert fields == w["custom"]["test-frame-meta"] == {
            "index": seq, "name": f"frame-{seq}", "ratio": seq / 4, "odd": seq % 2 == 1}
        assert f["timestamps"] == [tuple(r) for r in w["references"]]
        if "mtds" in w:
            ods = [m for m in w["mtds"] if m[0] == "od"]
            d = f["detections"]
            assert d["labels"] == [m[1] for m in ods]
            np.testing.assert_array_equal(d["xywh"], np.array([m[2:6] for m in ods], np.int32))
            np.testing.assert_array_equal(d["scores"], np.array([m[7] for m in ods], np.float32))
            np.testing.assert_allclose(d["rotation"], np.array([m[6] for m in ods], np.float32))
            (cls,) = f["classifications"]
            assert cls["labels"] == ["ball", "background"] and cls["detection"] == 0
            track = [m for m in w["mtds"] if m[0] == "track"][0]
            assert int(f["tracks"]["ids"][0]) == track[1]
            assert bool(f["tracks"]["lost"][0]) == track[4]
        if "tensors" in w:
            for tid, _dtype, _order, dims, data in w["tensors"]:
                arr = f["tensors"][tid]
                assert list(arr.shape) == dims
                assert arr.tobytes() == bytes.fromhex(data)
    assert peer.returncode == 0


def ball_centre(n: int, w: int, h: int):
    """videotestsrc pattern=ball animation-mode=frames: frame n's ball (radius 20) centre."""
    rad = 2 * math.pi * n / 200
    return (20 + (0.5 + 0.5 * math.sin(rad)) * (w - 40),
            20 + (0.5 + 0.5 * math.sin(rad * math.sqrt(2))) * (h - 40))


def ball_and_detector(tmp_path, n: int, w: int, h: int):
    """videotestsrc's ball into a channel, and examples/python/detect.py reading it and
    publishing each frame with its box on another: (that channel, the two processes)."""
    cam, det = str(tmp_path / "cam"), str(tmp_path / "det")
    env = gst_env(tmp_path, PLUGIN_DIR)
    require_gst_elements(env, "videotestsrc")
    producer = subprocess.Popen(
        [GST_LAUNCH, "-q", "videotestsrc", "pattern=ball", "animation-mode=frames",
         f"num-buffers={n}", "!", f"video/x-raw,format=RGBA,width={w},height={h},framerate=30/1",
         "!", "cudaipcringsink", "ipc-mode=host", "wait-for-consumer=true", f"socket-path={cam}",
         # The detector's first frame waits for its imports and model (seconds on a cold GPU
         # machine): the camera waits for it rather than drop frames after the default 1 s.
         "block-timeout=120000000000"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    detector = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "examples", "python", "detect.py"), cam, det,
         # The reader may be a GStreamer process scanning a fresh registry (nvcodec probes the
         # GPU): frames published before it joins would never reach it.
         "--frames", str(n), "--wait-for-consumer", "120"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The detector publishes once its imports (torch, where installed: seconds on a cold machine)
    # are done and the first frame came; readers start then, within their own timeouts.
    deadline = time.monotonic() + 120
    while not os.path.exists(det) and detector.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return det, producer, detector


@pytest.mark.skipif(GST_LAUNCH is None, reason="gst-launch-1.0 is not installed")
def test_detect_example_finds_videotestsrc_ball_in_every_frame(tmp_path):
    n, w, h = 40, 320, 240
    env = gst_env(tmp_path, PLUGIN_DIR)
    det, producer, detector = ball_and_detector(tmp_path, n, w, h)
    # GStreamer 1.24+ draws the boxes too: the overlay runs on every frame before the checks.
    overlay = ""
    probe = subprocess.run([gst_tool("gst-inspect-1.0") or "false", "objectdetectionoverlay"],
                           env=env, capture_output=True)
    if probe.returncode == 0:
        overlay = "videoconvert ! objectdetectionoverlay ! videoconvert"
    peer_env = gst_env(tmp_path, PLUGIN_DIR)
    if overlay:
        peer_env["CUDAIPC_META_PEER_BETWEEN"] = overlay
    peer = subprocess.Popen([PEER, "describe", det, str(n)], env=peer_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got = lines_of(peer, timeout=90)
    except AssertionError as e:
        # What the other two processes said: the reader alone cannot tell who stopped.
        for p in (detector, producer):
            p.kill()
        raise AssertionError(f"{e}\ndetector: {detector.communicate()}\n"
                             f"camera: {producer.communicate()}") from None
    d_out, d_err = detector.communicate(timeout=60)
    producer.communicate(timeout=60)
    assert detector.returncode == 0, d_err
    assert len(got) == n
    for i, line in enumerate(got):
        if "mtds" not in line:
            continue  # GStreamer 1.22 has no analytics meta: Python's own reader checks below
        ods = [m for m in line["mtds"] if m[0] == "od"]
        assert len(ods) == 1 and ods[0][1] == "ball", (i, line["mtds"])
        x, y, bw, bh = ods[0][2:6]
        cx, cy = ball_centre(i, w, h)
        assert abs(x + bw / 2 - cx) <= 1.5 and abs(y + bh / 2 - cy) <= 1.5, (i, ods[0], cx, cy)
        assert 36 <= bw <= 42 and 36 <= bh <= 42, (i, ods[0])


@pytest.mark.skipif(GST_LAUNCH is None, reason="gst-launch-1.0 is not installed")
def test_detect_example_box_read_back_in_python(tmp_path):
    """The same detector, its output read by Python: checks the box on any GStreamer version."""
    n, w, h = 30, 320, 240
    det, producer, detector = ball_and_detector(tmp_path, n, w, h)
    seen: Dict[int, np.ndarray] = {}
    with cudaipc.Consumer(det, timeout=30) as c:
        for i, f in zip(range(n), c):
            with f:
                d = f.detections
                assert d["labels"] == ["ball"], (i, d)
                seen[i] = d["boxes"][0].copy()
    detector.communicate(timeout=60)
    producer.communicate(timeout=60)
    assert detector.returncode == 0
    assert len(seen) == n
    for i, (x1, y1, x2, y2) in seen.items():
        cx, cy = ball_centre(i, w, h)
        assert abs((x1 + x2) / 2 - cx) <= 1.5 and abs((y1 + y2) / 2 - cy) <= 1.5, (i, cx, cy)


def test_ssd_tensors_from_python_become_boxes_in_gstreamer(tmp_path, path):
    """GStreamer 1.28's tensor decoders: Python declares its SSD outputs in the caps' `tensors`
    field (the peer prints those caps with GStreamer's own API) and publishes them as a tensor
    meta; cudaipcsrc's caps carry the field through, so ssdtensordec negotiates, and the boxes
    it decodes are those Python sent, frame by frame."""
    w, h, n = 64, 48, 12
    made = subprocess.run([PEER, "ssd-caps", str(w), str(h)], env=gst_env(tmp_path, PLUGIN_DIR),
                          capture_output=True, text=True)
    if made.returncode == 77:
        pytest.skip("the tensors caps field needs GStreamer 1.28")
    assert made.returncode == 0, made.stderr
    env = gst_env(tmp_path, PLUGIN_DIR)
    require_gst_elements(env, "ssdtensordec")
    env["CUDAIPC_META_PEER_BETWEEN"] = "ssdtensordec"

    def boxes(seq: int) -> np.ndarray:  # ymin, xmin, ymax, xmax, normalised
        return np.array([[[0.1 * k, 0.05 * seq, 0.1 * k + 0.25, 0.05 * seq + 0.3]
                          for k in range(3)]], np.float32)

    with cudaipc.Producer(path, memory="host", caps=made.stdout.strip(), block_timeout=10) as p:
        peer = subprocess.Popen([PEER, "describe", path, str(n)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        consumers_joined(p, peer, what="cudaipc-gst-meta-peer")
        for seq in range(1, n + 1):
            assert p.publish(np.full((h, w, 4), seq, np.uint8), tensors={
                "generic-variant-1-out-count": np.array([3], np.float32),
                "ssd-mobilenet-v1-variant-1-out-scores": np.array([[0.9, 0.8, 0.7]], np.float32),
                "ssd-mobilenet-v1-variant-1-out-boxes": boxes(seq),
                "ssd-mobilenet-v1-variant-1-out-classes": np.array([[1, 2, 3]], np.float32)})
    got = lines_of(peer)
    assert len(got) == n
    f32 = np.float32
    for seq, line in enumerate(got, start=1):
        ods = [m for m in line["mtds"] if m[0] == "od"]
        assert len(ods) == 3, (seq, line["mtds"])
        for k, od in enumerate(ods):
            ymin, xmin, ymax, xmax = boxes(seq)[0][k]
            # ssdtensordec's arithmetic: float products, truncated to int.
            x, y = int(f32(xmin) * f32(w)), int(f32(ymin) * f32(h))
            want = [x, y, int(f32(xmax) * f32(w) - f32(x)), int(f32(ymax) * f32(h) - f32(y))]
            assert od[2:6] == want, (seq, k, od, want)
            assert abs(od[7] - [0.9, 0.8, 0.7][k]) < 1e-6
