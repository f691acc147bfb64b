"""cudaipc.gst_detections in a PyGObject application (docs/python.md, "Results in a PyGObject
application"), on the GStreamer the suite runs against: 1.22 (the system's), where the results are
the CudaipcAnalyticsMeta custom meta, or a 1.24+ prefix, where they are a
GstAnalyticsRelationMeta: its env.sh sourced and CUDAIPC_GST_PLUGIN_DIR naming a plugin built
against it, as .ci/run runs the 1.28 suites (or CUDAIPC_GST_BUNDLE naming the prefix, as
python/tests/run-on-device.sh does). examples/python/appsink_detections.py, with
examples/python/serve_detector.py as the cudaipcfilter's model, must print the ball's box where
each frame's own pixels have it; an application of the test's own gets back every field a model of
the test's own made from each frame's index.

The applications run in CUDAIPC_GI_PYTHON (scripts/dev.sh: build/gi-venv, the system's PyGObject
with NumPy), else in this Python when it has PyGObject; they import this cudaipc. A prefix without
typelibs (../shared/gst-1.28) is driven through the system's own (1.22's): GStreamer keeps its ABI
within 1.x, and the applications call nothing newer through PyGObject."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from typing import Dict, List, Tuple

import numpy as np
import pytest

import cudaipc
from conftest import REPO, gst_env, gst_plugin_dir, gst_tool, require_gst_elements
from test_filter_gst import start_server
from test_metas_gst import ball_centre

PLUGIN_DIR = gst_plugin_dir()
GST_LAUNCH = gst_tool("gst-launch-1.0")
EXAMPLES = os.path.join(REPO, "examples", "python")
FRAMES, W, H = 60, 320, 240

pytestmark = [
    pytest.mark.skipif(not os.path.exists(os.path.join(PLUGIN_DIR, "libgstcudaipc.so")),
                       reason=f"the cudaipc plugin is not built in {PLUGIN_DIR}"),
    pytest.mark.skipif(GST_LAUNCH is None, reason="gst-launch-1.0 is not installed"),
]

PROBE = ("import gi, numpy, sys; gi.require_version('Gst', '1.0');"
         "gi.require_version('GstApp', '1.0'); from gi.repository import Gst, GstApp;"
         "Gst.init(None);"
         "print('%d.%d' % sys.version_info[:2], Gst.version_string())")


def app_env(tmp_path) -> Tuple[str, Dict[str, str], Tuple[int, int]]:
    """The PyGObject Python, its environment (this GStreamer, this cudaipc alone on its path) and
    the GStreamer version it runs; skips, saying why, when there is no such Python."""
    python = os.environ.get("CUDAIPC_GI_PYTHON") or sys.executable
    env = gst_env(tmp_path, PLUGIN_DIR)
    site = tmp_path / "site"
    site.mkdir()
    (site / "cudaipc").symlink_to(os.path.dirname(cudaipc.__file__))
    env["PYTHONPATH"] = str(site)
    r = subprocess.run([python, "-c", PROBE], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"{python} has no PyGObject with GStreamer's Gst and GstApp typelibs and NumPy "
                    f"({why}); set CUDAIPC_GI_PYTHON to one (scripts/dev.sh: build/gi-venv)")
    # The binding is built for one CPython (pip builds it for the Python that runs pip): an
    # application of another one could not import this cudaipc, nor could the user's.
    theirs, version = r.stdout.split()[0], r.stdout.split()[-1]
    ours = "%d.%d" % sys.version_info[:2]
    if theirs != ours:
        pytest.skip(f"{python} is CPython {theirs}, and this cudaipc's binding is built for "
                    f"{ours}: set CUDAIPC_GI_PYTHON to a PyGObject Python of {ours}")
    launch = subprocess.run([GST_LAUNCH, "--version"], env=env, capture_output=True, text=True)
    # The application must run the GStreamer under test, not another one on the machine.
    assert f"GStreamer {version}" in launch.stdout, (version, launch.stdout)
    major, minor = map(int, version.split(".")[:2])
    return python, env, (major, minor)


def filter_pipeline(model: str) -> str:
    return (f"videotestsrc pattern=ball animation-mode=frames num-buffers={FRAMES} "
            f"! video/x-raw,format=RGBA,width={W},height={H},framerate=30/1 "
            f"! cudaipcfilter ipc-mode=host socket-path={model} on-missing=wait "
            "timeout=10000000000")


def run_app(argv: List[str], env: Dict[str, str]) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"the application failed ({r.returncode}): {r.stdout} {r.stderr}"
    return r


def stop(model: subprocess.Popen) -> str:
    model.send_signal(signal.SIGTERM)
    out, err = model.communicate(timeout=30)
    return out + err


def check_warnings(stderr: str, version: Tuple[int, int]) -> None:
    """1.22's filter says once that the results are a custom meta; 1.24+ has nothing to say."""
    warnings = [ln for ln in stderr.splitlines() if ln.startswith("warning from")]
    if version < (1, 24):
        assert len(warnings) == 1 and '"CudaipcAnalyticsMeta"' in warnings[0], warnings
    else:
        assert warnings == [], warnings


def test_example_application_finds_the_ball_in_every_frame(tmp_path):
    python, env, version = app_env(tmp_path)
    require_gst_elements(env, "videotestsrc", "appsink")
    model = str(tmp_path / "det")
    server = start_server([os.path.join(EXAMPLES, "serve_detector.py"), model])
    try:
        r = run_app([python, os.path.join(EXAMPLES, "appsink_detections.py"),
                     filter_pipeline(model)], env)
    finally:
        served = stop(server)
    frames: Dict[int, list] = {}
    for line in r.stdout.splitlines():
        m = re.match(r"frame (\d+) pts \S+: (\d+) object\(s\)$", line)
        if m:
            frames[int(m.group(1))] = []
            continue
        m = re.match(r"  (\S+) x=(-?\d+) y=(-?\d+) w=(\d+) h=(\d+) score=([\d.]+)$", line)
        assert m and frames, f"a line the example does not print: {line!r}"
        frames[max(frames)].append((m.group(1), *map(int, m.group(2, 3, 4, 5)),
                                    float(m.group(6))))
    assert sorted(frames) == list(range(FRAMES)), r.stdout
    for i, objects in frames.items():
        assert len(objects) == 1, (i, objects)
        label, x, y, w, h, score = objects[0]
        cx, cy = ball_centre(i, W, H)
        # Never another frame's box: the ball moves several pixels a frame.
        assert label == "ball" and score == 1.0, (i, objects)
        assert abs(x + w / 2 - cx) <= 1.5 and abs(y + h / 2 - cy) <= 1.5, (i, objects, cx, cy)
    check_warnings(r.stderr, version)
    assert f"done requests={FRAMES}" in served, served


# Answers frame i (from its pts) with two boxes, labels, scores, a rotation and a track made from i;
# every fifth frame with nothing found.
INDEX_MODEL = textwrap.dedent("""
    import sys, numpy as np, cudaipc
    with cudaipc.Server(sys.argv[1]) as s:
        print("serving", flush=True)
        for req in s:
            i = round(req.frame.pts * 30 / 1e9)
            if i % 5 == 4:
                req.reply(detections={"boxes": np.zeros((0, 4), np.float32)})
                continue
            req.reply(detections={
                "boxes": np.array([[i, 2 * i, i + 20, 2 * i + 30], [100, 50, 140 + i, 60]],
                                  np.float32),
                "labels": [f"obj{i}", "other"], "scores": np.array([i / 100, 0.5], np.float32),
                "rotation": np.array([0.0, 0.25], np.float32),
                "track_ids": np.array([1000 + i, -1])})
""")

# Every buffer's gst_detections as JSON, beside whether it has the 1.22 custom meta; then what the
# function says of a buffer without results and of things that are not buffers.
INDEX_APP = textwrap.dedent("""
    import json, sys, gi
    gi.require_version("Gst", "1.0"); gi.require_version("GstApp", "1.0")
    from gi.repository import Gst, GstApp
    import cudaipc
    Gst.init(None)
    pipeline = Gst.parse_launch(sys.argv[1] + " ! appsink name=out sync=false")
    sink = pipeline.get_by_name("out")
    pipeline.set_state(Gst.State.PLAYING)
    sample = None
    while True:
        s = sink.try_pull_sample(10_000_000_000)  # ns
        if s is None:
            break
        sample, buf = s, s.get_buffer()
        d = cudaipc.gst_detections(buf)
        print(json.dumps({"pts": buf.pts,
                          "custom": buf.get_custom_meta("CudaipcAnalyticsMeta") is not None,
                          "d": None if d is None else {k: v.tolist() if hasattr(v, "tolist")
                                                       else v for k, v in d.items()},
                          "dtypes": None if d is None else {k: str(v.dtype) for k, v in d.items()
                                                            if hasattr(v, "dtype")}}),
              flush=True)
    eos = sink.is_eos()
    pipeline.set_state(Gst.State.NULL)
    refusals = []
    for thing in (sample, 3, None):
        try:
            cudaipc.gst_detections(thing)
        except cudaipc.InvalidArgumentError as e:
            refusals.append(str(e))
    print(json.dumps({"eos": eos, "plain": cudaipc.gst_detections(Gst.Buffer.new()),
                      "refusals": refusals}))
""")

DTYPES = {"boxes": "float32", "xywh": "int32", "scores": "float32", "rotation": "float32",
          "oriented": "bool", "ids": "uint32", "track_ids": "int64"}


def expected(i: int, version: Tuple[int, int]) -> dict:
    """What INDEX_MODEL answered frame i with, as gst_detections gives it back."""
    if i % 5 == 4:
        return {"boxes": [], "xywh": [], "labels": [], "scores": [], "rotation": [],
                "oriented": [], "ids": [], "track_ids": []}
    # 1.24 and 1.25 hold no rotation in a relation meta; 1.22's custom meta and 1.26+ do.
    r = 0.25 if version < (1, 24) or version >= (1, 26) else 0.0
    xywh = [[i, 2 * i, 20, 30], [100, 50, 40 + i, 10]]
    return {"boxes": [[x, y, x + w, y + h] for x, y, w, h in xywh], "xywh": xywh,
            "labels": [f"obj{i}", "other"], "scores": [float(np.float32(i / 100)), 0.5],
            "rotation": [0.0, r], "oriented": [False, r != 0], "ids": [0, 1],
            "track_ids": [1000 + i, -1]}


def test_every_field_of_every_frame_comes_back(tmp_path):
    python, env, version = app_env(tmp_path)
    require_gst_elements(env, "videotestsrc", "appsink")
    model = str(tmp_path / "det")
    server = start_server(["-c", INDEX_MODEL, model])
    try:
        r = run_app([python, "-c", INDEX_APP, filter_pipeline(model)], env)
    finally:
        stop(server)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    frames, end = lines[:-1], lines[-1]
    assert len(frames) == FRAMES and end["eos"], r.stdout
    for i, f in enumerate(frames):
        assert round(f["pts"] * 30 / 1e9) == i, (i, f["pts"])
        # Which form carried the results: the custom meta on 1.22 only.
        assert f["custom"] == (version < (1, 24)), (i, f)
        want = expected(i, version)
        got = f["d"]
        assert got is not None, (i, f)
        assert f["dtypes"] == DTYPES, (i, f["dtypes"])
        for k, v in want.items():
            if k in ("scores", "rotation", "boxes"):
                assert np.allclose(np.asarray(got[k], np.float64).reshape(-1),
                                   np.asarray(v, np.float64).reshape(-1), atol=1e-6), (i, k, got)
            else:
                assert got[k] == v, (i, k, got[k], v)
    assert end["plain"] is None, end
    sample_refusal, int_refusal, none_refusal = end["refusals"]
    assert "Gst.Buffer" in sample_refusal and "sample.get_buffer()" in sample_refusal, end
    assert "not int" in int_refusal and "not NoneType" in none_refusal, end
