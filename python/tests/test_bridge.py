"""The AI bridge example (examples/python/infer.py) end to end on a GPU machine: a camera-style
pipeline (videotestsrc, or an H.264 clip decoded by nvh264dec) publishes GPU frames through
cudaipcsink, the example runs its model on every frame in torch and publishes the results, and a
cudaipcsrc pipeline writes them to a file. Checked: the example read and published every frame and
reported its rates (frames/s, latency from the producer's publish, GPU time per frame); every
result frame the cudaipcsrc pipeline got is whole, has the alpha the example sets, and holds the
model's output for its input (the inputs made again here by the same source without the channel,
the model run again on each). Skipped, saying why, without torch, a GPU or GStreamer with nvcodec
and the cudaipc plugin (the device bundle has them: python/tests/run-on-device.sh)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: GPU suites skipped")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA GPU: GPU suites skipped", allow_module_level=True)

from conftest import REPO, gst_env, gst_plugin_dir, gst_tool, require_gst_elements  # noqa: E402

EXAMPLE = os.path.join(REPO, "examples", "python", "infer.py")
W, H = 160, 120
FRAMES = 90  # from videotestsrc; the clip has its own count (300 from build-device-bundle.sh)
CAPS = f"video/x-raw,format=RGBA,width={W},height={H}"


def source_elements(tmp_path, source):
    """(gst-launch-1.0, its environment, the source's elements up to RGBA in system memory)."""
    gst = gst_tool("gst-launch-1.0")
    plugin = gst_plugin_dir()
    if not gst or not os.path.exists(os.path.join(plugin, "libgstcudaipc.so")):
        pytest.skip("needs gst-launch-1.0 (or CUDAIPC_GST_BUNDLE) and the cudaipc plugin")
    env = gst_env(tmp_path, plugin)
    need = ["cudaupload", "cudadownload", "cudaipcringsink", "cudaipcringsrc", "filesink"]
    if source == "videotestsrc":
        require_gst_elements(env, "videotestsrc", *need)
        return gst, env, ["videotestsrc", f"num-buffers={FRAMES}", "!",
                          CAPS + ",framerate=60/1"]
    clip = os.environ.get("CUDAIPC_TEST_H264", "")
    if not os.path.exists(clip):
        pytest.skip("no H.264 clip (CUDAIPC_TEST_H264; build-device-bundle.sh makes one)")
    require_gst_elements(env, "filesrc", "h264parse", "nvh264dec", "videoconvertscale", *need)
    # NVDEC decodes on the GPU; videoconvertscale makes small RGBA (cudaconvert needs NVRTC).
    return gst, env, ["filesrc", f"location={clip}", "!", "h264parse", "!", "nvh264dec", "!",
                      "videoconvertscale", "!", CAPS]


def run(cmd, env, what, timeout=120):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{what} failed ({r.returncode}): {r.stderr}"


@pytest.mark.parametrize("source", ["videotestsrc", "nvh264dec"])
def test_camera_pipeline_to_torch_and_back(tmp_path, source):
    gst, env, elements = source_elements(tmp_path, source)
    # The inputs as the example will see them, made once more without the channel in between.
    inputs_file = tmp_path / "inputs.raw"
    run([gst, "-q", *elements, "!", "filesink", f"location={inputs_file}"], env, "the reference")
    inputs = np.fromfile(inputs_file, dtype=np.uint8).reshape(-1, H, W, 4)
    n = len(inputs)
    assert n > 0

    cam, out = str(tmp_path / "cam0"), str(tmp_path / "out0")
    result = tmp_path / "result.raw"
    camera = list(elements)
    if source == "videotestsrc":
        camera.insert(1, "is-live=true")  # a camera's timing; the same pictures
    # sync=false: frames that waited for the example to join are late, not to be dropped.
    cam_proc = subprocess.Popen([gst, "-q", *camera, "!", "cudaupload", "!", "cudaipcringsink",
                                 f"socket-path={cam}", "wait-for-consumer=true", "sync=false",
                                 "block-timeout=30000000000"],
                                env=env, stderr=subprocess.PIPE, text=True)
    # --wait-for-consumer: the results' pipeline below gets every result, however long it takes
    # to start (a live camera's 90 frames last 1.5 s; a first gst-launch can take longer).
    example = subprocess.Popen([sys.executable, EXAMPLE, cam, out, "--mode", "every-frame",
                                "--report", "0.2", "--wait-for-consumer", "60"],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    outof = None
    stdout = ""
    try:
        # The results' pipeline joins once the example has made its channel (at its first frame)
        # and is waiting for it.
        deadline = time.monotonic() + 90
        while not os.path.exists(out):
            assert example.poll() is None, f"the example exited early: {example.stderr.read()}"
            assert time.monotonic() < deadline, "the example never published a result"
            time.sleep(0.05)
        outof = subprocess.Popen(
            [gst, "-q", "cudaipcringsrc", f"socket-path={out}", "mode=every-frame", "is-live=false",
             "!", "cudadownload", "!", CAPS, "!", "filesink", "sync=false",
             "buffer-mode=unbuffered", f"location={result}"],
            env=env, stderr=subprocess.PIPE, text=True)
        stdout, stderr = example.communicate(timeout=120)
        assert example.returncode == 0, stderr
        for proc, what in ((outof, "the cudaipcsrc pipeline"), (cam_proc, "the camera")):
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, f"{what}: {err}"
    finally:
        # A process still running here is stuck: what it said is the diagnosis.
        for p, what in ((cam_proc, "the camera"), (example, "the example"),
                        (outof, "the cudaipcsrc pipeline")):
            if p is not None and p.poll() is None:
                p.kill()
                _, err = p.communicate()
                print(f"{what} did not finish and was killed; its stderr:\n{err}")
    print(stdout)
    done = [ln for ln in stdout.splitlines() if ln.startswith("done ")]
    assert done, stdout
    stats = dict(kv.split("=") for kv in done[0].split()[1:])
    assert int(stats["frames"]) == n  # every frame, every-frame mode
    for key in ("fps", "latency_p50_ms", "latency_p99_ms", "gpu_ms_p50"):
        assert float(stats[key]) > 0, f"{key} in {done[0]}"
    # The example waited for the cudaipcsrc pipeline, which read every result: each whole, alpha
    # 255, and its colours the model's output for its input.
    results = np.fromfile(result, dtype=np.uint8).reshape(-1, H, W, 4)
    m = len(results)
    assert m == n, f"{m} results of {n} frames"
    assert (results[..., 3] == 255).all()
    sys.path.insert(0, os.path.dirname(EXAMPLE))
    try:
        import infer
    finally:
        sys.path.pop(0)
    net = infer.build_model()
    with torch.inference_mode():
        for i in range(m):
            want = infer.run_model(net, torch.from_numpy(inputs[n - m + i]).cuda()).cpu().numpy()
            diff = np.abs(want.astype(np.int16) - results[i][..., :3].astype(np.int16)).max()
            assert diff <= 2, f"result {n - m + i + 1} of {n} is not the model's output ({diff})"
