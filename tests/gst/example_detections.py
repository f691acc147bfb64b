#!/usr/bin/env python3
"""Issue #34's first hour on GStreamer 1.22, end to end and in host memory: the README's model
(examples/python/serve_detector.py, its builtin detector) answers every frame of a
`videotestsrc pattern=ball ! cudaipcfilter ipc-mode=host` pipeline, and the application
examples/appsink_detections.cpp reads each frame's boxes back from the CudaipcAnalyticsMeta with
GStreamer's public API. Every frame must carry one box centred within 1.5 px of the ball's known
position for its index, and the filter must warn exactly once, naming the GStreamer version, the
custom meta and docs/metas.md.

  example_detections.py SOURCE_DIR BUILD_DIR GST_MINOR

The model runs with $CUDAIPC_PYTHON (scripts/dev.sh test: its build/python-venv), else python3;
where that Python has no `cudaipc` package the checkout's own (python/, with BUILD_DIR's library)
is used. Exit 77 (skipped, with the reason) without numpy, or on GStreamer 1.24+, whose analytics
metas python/tests/test_filter_gst.py checks."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import tempfile

SKIP = 77
FRAMES, W, H = 60, 320, 240


def ball_centre(n: int):
    """videotestsrc pattern=ball animation-mode=frames: frame n's ball (radius 20) centre."""
    rad = 2 * math.pi * n / 200
    return (20 + (0.5 + 0.5 * math.sin(rad)) * (W - 40),
            20 + (0.5 + 0.5 * math.sin(rad * math.sqrt(2))) * (H - 40))


def model_env(python: str, src: str, build: str):
    """The environment in which `python` imports numpy and cudaipc, or None."""
    env = dict(os.environ)
    probe = [python, "-c", "import numpy, cudaipc"]
    if subprocess.run(probe, env=env, capture_output=True).returncode == 0:
        return env
    env["PYTHONPATH"] = os.path.join(src, "python") + (
        ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["CUDAIPC_LIBRARY"] = os.path.join(build, "core", "libcudaipc.so")
    if subprocess.run(probe, env=env, capture_output=True).returncode == 0:
        return env
    return None


def parse(stdout: str):
    """Per frame index, its objects as (label, x, y, w, h, score)."""
    frames, current = {}, None
    for line in stdout.splitlines():
        m = re.match(r"frame (\d+) pts .*: (\d+) object", line)
        if m:
            current = int(m.group(1))
            frames[current] = []
            continue
        m = re.match(r"  (\S+) x=(-?\d+) y=(-?\d+) w=(\d+) h=(\d+) score=([\d.]+)", line)
        if m and current is not None:
            frames[current].append((m.group(1), *map(int, m.group(2, 3, 4, 5)),
                                    float(m.group(6))))
        elif line.startswith("frame "):
            raise AssertionError(f"a frame without results: {line}")
    return frames


def main() -> int:
    src, build, minor = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if minor >= 24:
        print(f"skip: GStreamer 1.{minor} attaches a model's results as GstAnalyticsRelationMeta "
              "(python/tests/test_filter_gst.py checks those)")
        return SKIP
    python = os.environ.get("CUDAIPC_PYTHON") or "python3"
    env = model_env(python, src, build)
    if env is None:
        print(f"skip: {python} cannot import numpy (scripts/dev.sh test runs this suite again "
              "with its build/python-venv)")
        return SKIP
    app = os.path.join(build, "examples", "cudaipc-appsink-detections")
    with tempfile.TemporaryDirectory() as tmp:
        socket = os.path.join(tmp, "detector")
        model = subprocess.Popen(
            [python, os.path.join(src, "examples", "python", "serve_detector.py"), socket],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = model.stdout.readline()
            assert line.startswith("serving"), f"the model did not start: {line}"
            pipeline = (f"videotestsrc pattern=ball animation-mode=frames num-buffers={FRAMES} "
                        f"! video/x-raw,format=RGBA,width={W},height={H},framerate=30/1 "
                        f"! cudaipcfilter ipc-mode=host socket-path={socket} on-missing=wait "
                        "timeout=10000000000")
            print(f"$ {app} '{pipeline}'", flush=True)
            r = subprocess.run([app, pipeline], capture_output=True, text=True, timeout=120)
            print(r.stdout, r.stderr, sep="\n", flush=True)
            assert r.returncode == 0, f"the application failed ({r.returncode})"
        finally:
            model.send_signal(signal.SIGTERM)
            out, err = model.communicate(timeout=30)
            print(f"model: {out.strip()} {err.strip()}", flush=True)

    frames = parse(r.stdout)
    assert sorted(frames) == list(range(FRAMES)), f"frames read: {sorted(frames)}"
    for i, objects in frames.items():
        assert len(objects) == 1, (i, objects)
        label, x, y, w, h, score = objects[0]
        cx, cy = ball_centre(i)
        # Never another frame's box: the ball moves several pixels a frame.
        assert label == "ball" and score == 1.0, (i, objects)
        assert abs(x + w / 2 - cx) <= 1.5 and abs(y + h / 2 - cy) <= 1.5, (i, objects, cx, cy)
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning from")]
    assert len(warnings) == 1, f"not one warning: {warnings}"
    for part in (f"GStreamer 1.{minor}.", "has no analytics metas", '"CudaipcAnalyticsMeta"',
                 "docs/metas.md"):
        assert part in warnings[0], (part, warnings[0])
    assert f"done requests={FRAMES}" in out, out
    print(f"{FRAMES} frames, each with the ball's box where it is")
    return 0


if __name__ == "__main__":
    sys.exit(main())
