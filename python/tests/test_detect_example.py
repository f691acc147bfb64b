"""examples/python/detect.py between two Python ends, no GStreamer: a producer draws the ball of
`videotestsrc pattern=ball` (its position from the frame index, its blended edge, as videotestsrc
draws them) into host frames, the example finds it and publishes each frame again with its
detection, and this consumer checks every frame's pixels and box (within 1 px of the ball's
known position) and that the input's own metas were forwarded. The detector also runs on frames
of GStreamer's own videotestsrc, where gst-launch-1.0 is installed."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import cudaipc
from conftest import REPO

EXAMPLE = os.path.join(REPO, "examples", "python", "detect.py")
W, H, RADIUS = 160, 120, 20
CAPS = f"video/x-raw,format=RGBA,width={W},height={H},framerate=30/1"


def ball_centre(t: int):
    """videotestsrc's ball centre at frame t (gst_video_test_src_ball)."""
    x = RADIUS + (0.5 + 0.5 * math.sin(2 * math.pi * t / 200)) * (W - 2 * RADIUS)
    y = RADIUS + (0.5 + 0.5 * math.sin(2 * math.pi * math.sqrt(2) * t / 200)) * (H - 2 * RADIUS)
    return x, y


def ball_frame(t: int) -> np.ndarray:
    """Frame t as videotestsrc pattern=ball draws it in RGBA: white on black, the edge blended
    by alpha = clamp(floor(256 * (radius - distance) / 2), 0, 255)."""
    x, y = ball_centre(t)
    i = np.arange(H)[:, None]
    j = np.arange(W)[None, :]
    d = np.sqrt((j - x) ** 2 + (i - y) ** 2)
    a = np.clip(np.floor(256 * (RADIUS - d) * 0.5), 0, 255).astype(np.uint8)
    img = np.empty((H, W, 4), np.uint8)
    img[..., :3] = a[..., None]
    img[..., 3] = 255
    return img


def want_box(t: int):
    """The pixels at least half bright: the disc of radius 19 about the centre."""
    x, y = ball_centre(t)
    r = RADIUS - 1
    return [math.ceil(x - r), math.ceil(y - r), math.floor(x + r) + 1, math.floor(y + r) + 1]


def test_detect_finds_the_ball_every_frame(tmp_path):
    cam, out = str(tmp_path / "cam"), str(tmp_path / "det")
    frames = 60
    errors = []

    def camera() -> None:
        try:
            with cudaipc.Producer(cam, memory="host", caps=CAPS, block_timeout=30) as p:
                p.wait_for_consumers(timeout=60)
                for t in range(frames):
                    p.publish(ball_frame(t), pts=t, meta={"t": t})
        except Exception as e:  # noqa: BLE001  (reported by the test below)
            errors.append(e)

    feeder = threading.Thread(target=camera)
    feeder.start()
    proc = subprocess.Popen([sys.executable, EXAMPLE, cam, out, "--wait-for-consumer", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        with cudaipc.Consumer(out, timeout=60) as c:
            for f in c:
                with f:
                    t = f.pts
                    np.testing.assert_array_equal(f.numpy(), ball_frame(t))
                    d = f.detections
                    assert d["labels"] == ["ball"], (t, d)
                    got = d["boxes"][0].tolist()
                    assert all(abs(g - w) <= 1 for g, w in zip(got, want_box(t))), \
                        (t, got, want_box(t))
                    assert f.meta == {"t": t}  # the input's metas, forwarded
                    assert f.caps.startswith("video/x-raw,format=RGBA,width=160,height=120")
                    seen.append(t)
    finally:
        stdout, stderr = proc.communicate(timeout=60)
        feeder.join(60)
    assert proc.returncode == 0, stderr
    assert not errors, errors
    assert seen == list(range(frames))
    assert f"done frames={frames}" in stdout


def test_builtin_detector_on_videotestsrc_itself(tmp_path):
    """The same detector on frames GStreamer's own videotestsrc pattern=ball made (no cudaipc
    plugin needed): every box within 1 px of the ball's known position."""
    gst = shutil.which("gst-launch-1.0")
    if gst is None:
        pytest.skip("gst-launch-1.0 is not installed")
    raw = tmp_path / "ball.raw"
    frames = 200  # the pattern's horizontal period
    r = subprocess.run([gst, "-q", "videotestsrc", "pattern=ball", f"num-buffers={frames}", "!",
                        f"video/x-raw,format=RGBA,width={W},height={H}", "!", "filesink",
                        f"location={raw}"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        pytest.skip(f"videotestsrc could not run: {r.stderr.strip()[-200:]}")
    video = np.fromfile(raw, np.uint8).reshape(-1, H, W, 4)
    assert len(video) == frames
    sys.path.insert(0, os.path.dirname(EXAMPLE))
    try:
        import detect
    finally:
        sys.path.pop(0)
    for t, img in enumerate(video):
        got = detect.box_from_mask_numpy(img[..., :3].max(axis=2) >= 128).tolist()
        assert all(abs(g - w) <= 1 for g, w in zip(got, want_box(t))), (t, got, want_box(t))


def test_a_bad_model_is_refused_before_any_frame(tmp_path):
    """No producer exists: the refusal comes at once, from the arguments alone, in one line."""
    for model, why in (("foo", "builtin or torchvision:NAME"), ("torchvision:", "torchvision")):
        r = subprocess.run([sys.executable, EXAMPLE, str(tmp_path / "cam"), str(tmp_path / "out"),
                            "--model", model], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert why in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_failure_is_one_line_not_a_traceback(tmp_path):
    serve = os.path.join(REPO, "examples", "python", "serve_detector.py")
    r = subprocess.run([sys.executable, serve, str(tmp_path / "no" / "dir" / "detector")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("serve_detector.py: ") and r.stderr.count("\n") == 1, r.stderr
