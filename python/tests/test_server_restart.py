"""Pipelines that start and restart under a model that already serves their directory
(cudaipc.Server(directory=...), the docs' batch loop). A pipeline that ends and starts again on
the same socket-path is served again, every run, while the model still holds its last batch's
zero-copy views (as a model loop does until its next batch); a pipeline that starts under the live
model has its first frame answered (on-missing=pass: the filter waits for a model that is there,
within its timeout); a filter with no model about passes its frames at once. Every frame's result
is checked against that frame (its timestamp, its pixel sum, its path). Host memory here; CUDA
frames (cudaupload before the filter; answers on the host, and detections left on the GPU) where
torch sees a GPU, skipped with the reason elsewhere."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from typing import List

import numpy as np
import pytest

import cudaipc
from conftest import gst_env, gst_plugin_dir, gst_tool, require_gst_elements
from test_filter_gst import cuda_gpu, start_server
from test_server_many import Pipeline

PLUGIN_DIR = gst_plugin_dir()
GST_LAUNCH = gst_tool("gst-launch-1.0")

pytestmark = [
    pytest.mark.skipif(not os.path.exists(os.path.join(PLUGIN_DIR, "libgstcudaipc.so")),
                       reason=f"the cudaipc plugin is not built in {PLUGIN_DIR}"),
    pytest.mark.skipif(GST_LAUNCH is None, reason="gst-launch-1.0 is not installed"),
]

# docs/python.md's batch loop over a directory (argv[1]; or "--paths=A,B,..."): the batch's frames
# as zero-copy views (NumPy for host frames, torch for CUDA ones), kept until the next batch comes;
# each answered with its timestamp, pixel sum and path, as host results or (argv[2] == "gpu") with
# detections left on the GPU beside them.
RESTART_SERVER = textwrap.dedent("""
    import signal, sys, cudaipc
    import numpy as np
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    answers = sys.argv[2]
    requests = 0
    served = sys.argv[1]
    paths = served[8:].split(",") if served.startswith("--paths=") else None
    with cudaipc.Server(paths, directory=None if paths else served) as s:
        print("serving", flush=True)
        while not stop:
            reqs = s.batch(8, timeout=0.1, max_delay=0.004)
            if not reqs:
                continue
            if reqs[0].frame.device == "cpu":
                images = [np.from_dlpack(r) for r in reqs]
                sums = [int(x.sum(dtype=np.int64)) for x in images]
            else:
                import torch
                images = [torch.from_dlpack(r) for r in reqs]
                sums = [int(x.sum(dtype=torch.int64)) for x in images]
            for r, x, total in zip(reqs, images, sums):
                meta = {"pts": r.frame.pts, "sum": total, "path": r.path}
                if answers == "gpu":
                    box = torch.tensor([[0.0, 0.0, 1.0, 1.0]], device=x.device)
                    r.reply(detections={"boxes": box}, meta=meta,
                            stream=torch.cuda.current_stream())
                else:
                    r.reply(meta=meta)
            requests += len(reqs)
    print(f"requests={requests}", flush=True)
""")


def ball_run(tmp_path, name: str, model: str, n: int, memory: str, missing: str = "pass",
             timeout_ns: int = 5_000_000_000) -> Pipeline:
    """One run of a pipeline (test_server_many's, ball frames, not live)."""
    return Pipeline(tmp_path, name, model, n, "ball", False, missing, timeout_ns, memory)


def stop_server(server: subprocess.Popen) -> int:
    server.send_signal(signal.SIGTERM)
    out, err = server.communicate(timeout=30)
    assert server.returncode == 0, err
    return int([ln for ln in out.splitlines() if ln.startswith("requests=")][-1].split("=")[1])


def needs(memory: str, tmp_path) -> None:
    env = gst_env(tmp_path, PLUGIN_DIR)
    require_gst_elements(env, "videotestsrc")
    if memory == "cuda":
        if not cuda_gpu():
            pytest.skip("no CUDA GPU (torch sees none): the CUDA case runs on the GPU machine")
        require_gst_elements(env, "cudaupload")


CASES = [pytest.param("host", "host", id="host"),
         pytest.param("cuda", "host", id="cuda-host-answers"),
         pytest.param("cuda", "gpu", id="cuda-gpu-answers")]


@pytest.mark.parametrize("memory,answers", CASES)
def test_a_pipeline_that_restarts_is_served_every_run(tmp_path, memory, answers):
    """One pipeline ends and starts again on its path, six times: at once (its start-up is the
    gap, shorter than the directory's 100 ms listing interval or about it) and after 0.3 s and
    1.2 s (the old pipeline has left by then); the model keeps its last batch's views between
    runs. Every frame of every run is answered with its own result, frame 0 included."""
    needs(memory, tmp_path)
    d = tmp_path / "models"
    d.mkdir(mode=0o700)
    model = str(d / "cam")
    n = 30
    server = start_server(["-c", RESTART_SERVER, str(d), answers])
    runs: List[Pipeline] = []
    try:
        for i, pause in enumerate([0.0, 0.0, 0.3, 1.2, 0.0, 0.3]):
            time.sleep(pause)
            run = ball_run(tmp_path, f"run{i}", model, n, memory)
            runs.append(run)
            run.finish()
    finally:
        requests = stop_server(server)
    for run in runs:
        assert run.unanswered() == [], (run.name, run.unanswered())
    assert requests == n * len(runs)


@pytest.mark.parametrize("memory,answers", CASES[:2])
@pytest.mark.parametrize("served", ["directory", "paths"])
def test_a_pipeline_that_starts_under_a_live_model_has_its_first_frame_answered(
        tmp_path, memory, answers, served):
    """Several pipelines start one after another, each on a path of its own, that a model
    already serves (it watches their directory, or was given their paths): on-missing=pass, and
    yet frame 0 and every frame after it are answered (the filter waits, within its timeout, for
    the model that is there to take its channel)."""
    needs(memory, tmp_path)
    d = tmp_path / "models"
    d.mkdir(mode=0o700)
    n = 10
    cams = [str(d / f"cam{i}") for i in range(4)]
    what = str(d) if served == "directory" else "--paths=" + ",".join(cams)
    server = start_server(["-c", RESTART_SERVER, what, answers])
    runs: List[Pipeline] = []
    try:
        for i, cam in enumerate(cams):
            run = ball_run(tmp_path, f"cam{i}", cam, n, memory)
            runs.append(run)
            run.finish()
    finally:
        stop_server(server)
    for run in runs:
        assert run.unanswered() == [], (run.name, run.unanswered())


def test_a_filter_with_no_model_passes_its_frames_at_once(tmp_path):
    """No model serves the directory (a server that served it has gone, its mark left behind): a
    filter with on-missing=pass and a 30 s timeout passes every frame without results, and the
    pipeline ends long before one timeout."""
    needs("host", tmp_path)
    d = tmp_path / "models"
    d.mkdir(mode=0o700)
    with cudaipc.Server(directory=str(d)):
        pass
    # A server killed with SIGKILL leaves its mark; the kernel has dropped its lock.
    (d / ".cudaipc-server").touch()
    t0 = time.monotonic()
    run = ball_run(tmp_path, "alone", str(d / "cam"), 20, "host", timeout_ns=30_000_000_000)
    run.finish()
    assert time.monotonic() - t0 < 20, "a frame waited for a model that is not there"
    assert run.unanswered() == list(range(20))
