#!/usr/bin/env python3
"""Issue #34's first hour, end to end and in host memory, on any GStreamer: the README's model
(examples/python/serve_detector.py, its builtin detector) answers every frame of a
`videotestsrc pattern=ball ! cudaipcfilter ipc-mode=host` pipeline, and the application
examples/appsink_detections.cpp reads each frame's boxes back with GStreamer's public API: from
the CudaipcAnalyticsMeta on 1.22, from the GstAnalyticsRelationMeta on 1.24+ (issue #38). Every
frame must carry one box centred within 1.5 px of the ball's known position for its index. On 1.22
the filter must warn exactly once, naming the GStreamer version, the custom meta and
docs/metas.md; on 1.24+ neither it nor the application has anything to say.

  example_detections.py SOURCE_DIR BUILD_DIR GST_MINOR

The model runs with $CUDAIPC_PYTHON (scripts/dev.sh test: its build/python-venv), else python3;
where that Python has no `cudaipc` package the checkout's own (python/, with BUILD_DIR's library)
is used. Exit 77 (skipped, with the reason) without numpy."""

from __future__ import annotations

import glob
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
    # The build's compiled binding (made where Python's headers are: python/native/meson.build).
    native = glob.glob(os.path.join(build, "python", "native", "_native*.so"))
    if not native:
        return None
    env["CUDAIPC_NATIVE"] = native[0]
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


# Answers frame i (from its pts) with one box, a track and classes made from i: the classes
# classify the box on even frames and the whole frame on odd ones.
INDEX_MODEL = """
import sys, numpy as np, cudaipc
with cudaipc.Server(sys.argv[1]) as s:
    print("serving", flush=True)
    for req in s:
        i = round(req.frame.pts * 30 / 1e9)
        classes = {"labels": ["red", f"c{i}"], "scores": [0.75, 0.25]}
        req.reply(detections={"boxes": np.array([[i, i, i + 10, i + 20]], np.float32),
                              "labels": ["obj"], "scores": np.array([0.5], np.float32),
                              "track_ids": np.array([100 + i])},
                  classifications=[classes] if i % 2 == 0 else classes)
"""


def index_lines(i: int):
    """What the application prints for INDEX_MODEL's answer to frame i."""
    classes = f"[red 0.750, c{i} 0.250]"
    box = f"  obj x={i} y={i} w=10 h=20 score=0.500 track={100 + i}"
    if i % 2 == 0:
        return [f"{box} classes={classes}"]
    return [box, f"  frame classes={classes}"]


def serve_and_read(python, env, model_argv, app, tmp):
    """The model serving a filter pipeline of FRAMES frames, read by the application: its
    output, and what the model printed."""
    socket = os.path.join(tmp, "detector")
    model = subprocess.Popen([python, *model_argv, socket], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
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
    return r, out


def main() -> int:
    src, build, minor = sys.argv[1], sys.argv[2], int(sys.argv[3])
    python = os.environ.get("CUDAIPC_PYTHON") or "python3"
    env = model_env(python, src, build)
    if env is None:
        print(f"skip: {python} cannot import numpy (scripts/dev.sh test runs this suite again "
              "with its build/python-venv)")
        return SKIP
    app = os.path.join(build, "examples", "cudaipc-appsink-detections")
    with tempfile.TemporaryDirectory() as tmp:
        r, out = serve_and_read(
            python, env, [os.path.join(src, "examples", "python", "serve_detector.py")], app, tmp)

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
    if minor >= 24:
        # The relation metas were read: the application has no note that it cannot.
        assert not warnings and "note:" not in r.stderr, r.stderr
    else:
        assert len(warnings) == 1, f"not one warning: {warnings}"
        for part in (f"GStreamer 1.{minor}.", "has no analytics metas", '"CudaipcAnalyticsMeta"',
                     "docs/metas.md"):
            assert part in warnings[0], (part, warnings[0])
    assert f"done requests={FRAMES}" in out, out
    print(f"{FRAMES} frames, each with the ball's box where it is")

    # Tracks and classifications, each tied to its box or to the frame as the model tied them.
    with tempfile.TemporaryDirectory() as tmp:
        r, _ = serve_and_read(python, env, ["-c", INDEX_MODEL], app, tmp)
    lines = r.stdout.splitlines()
    want = []
    for i in range(FRAMES):
        want += [f"frame {i} pts {pts(i)}: 1 object(s)", *index_lines(i)]
    assert lines == want, "\n".join(f"{a!r} != {b!r}" for a, b in zip(lines, want) if a != b)
    print(f"{FRAMES} frames, each with its own track and classes")
    return 0


def pts(i: int) -> str:
    """Frame i's pts at 30/1 as GST_TIME_FORMAT prints it (videotestsrc rounds down)."""
    ns = i * 1_000_000_000 // 30
    return f"0:00:{ns // 1_000_000_000:02d}.{ns % 1_000_000_000:09d}"


if __name__ == "__main__":
    sys.exit(main())
