"""The package against the GStreamer elements (host memory): a Python producer played by
cudaipcsrc, a cudaipcsink pipeline read from Python, and a relay through both. The plugin comes
from this checkout's build (CUDAIPC_GST_PLUGIN_DIR, else build/gst) with a private registry.
Pipelines use core elements only (filesrc, capsfilter, filesink), which every GStreamer has,
the GPU machine's minimal bundle included (no rawvideoparse there), and the elements under their
ring names, which GStreamer 1.24+'s own cudaipcsrc and cudaipcsink cannot shadow."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

import cudaipc
from conftest import (consumers_joined, frames_from, gst_env, gst_plugin_dir, gst_tool, pattern,
                      require_gst_elements)

PLUGIN_DIR = gst_plugin_dir()
GST_LAUNCH = gst_tool("gst-launch-1.0")

pytestmark = [
    pytest.mark.skipif(GST_LAUNCH is None, reason="gst-launch-1.0 is not installed"),
    pytest.mark.skipif(not os.path.exists(os.path.join(PLUGIN_DIR, "libgstcudaipc.so")),
                       reason=f"the cudaipc plugin is not built in {PLUGIN_DIR} "
                              "(ninja -C build, or set CUDAIPC_GST_PLUGIN_DIR)"),
]

W, H = 16, 12
FRAMES = 40


def launch(tmp_path, pipeline: str) -> subprocess.Popen:
    """gst-launch-1.0 on `pipeline`, skipping the test when an element it names is not installed
    (read the stream with frames_from, which fails with its stderr if it exits early)."""
    env = gst_env(tmp_path, PLUGIN_DIR)
    words = pipeline.split()
    elements = [w for i, w in enumerate(words)
                if (i == 0 or words[i - 1] == "!") and "/" not in w and "=" not in w]
    require_gst_elements(env, *elements)
    return subprocess.Popen([GST_LAUNCH, "-q", *words], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float = 60) -> None:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"gst-launch-1.0 did not finish: {err}")
    assert proc.returncode == 0, f"gst-launch-1.0 failed ({proc.returncode}): {err}{out}"


def test_python_producer_played_by_cudaipcsrc(tmp_path, path):
    out = tmp_path / "out.raw"
    caps = f"video/x-raw,format=RGBA,width={W},height={H},framerate=30/1"
    with cudaipc.Producer(path, memory="host", caps=caps, block_timeout=10) as p:
        gst = launch(tmp_path, f"cudaipcringsrc socket-path={path} mode=every-frame is-live=false "
                               f"! video/x-raw,format=RGBA,width={W},height={H} "
                               # filesink would otherwise hold 64 KiB of buffers, each a slot.
                               f"! filesink sync=false buffer-mode=unbuffered location={out}")
        consumers_joined(p, gst)
        for seq in range(1, FRAMES + 1):
            assert p.publish(pattern(seq, (H, W, 4), np.uint8), pts=seq * 33_333_333)
    finish(gst)
    data = np.fromfile(out, dtype=np.uint8)
    assert data.size == FRAMES * H * W * 4
    for seq, frame in enumerate(data.reshape(FRAMES, H, W, 4), start=1):
        np.testing.assert_array_equal(frame, pattern(seq, (H, W, 4), np.uint8),
                                      err_msg=f"frame {seq}")


def test_cudaipcsink_pipeline_read_from_python(tmp_path, path):
    src = tmp_path / "in.raw"
    frames = np.stack([pattern(seq, (H, W, 4), np.uint8) for seq in range(1, FRAMES + 1)])
    frames.tofile(src)
    with cudaipc.Consumer(path, timeout=30) as c:
        # One frame per block; the caps filter gives the bytes their format.
        gst = launch(tmp_path, f"filesrc location={src} blocksize={H * W * 4} "
                               f"! video/x-raw,format=RGBA,width={W},height={H},framerate=30/1 "
                               f"! cudaipcringsink ipc-mode=host socket-path={path} "
                               f"wait-for-consumer=true block-timeout=10000000000")
        got = 0
        for f in frames_from(c, gst):
            with f:
                assert f.shape == (H, W, 4) and f.dtype == np.uint8
                assert f.caps.startswith("video/x-raw") and "RGBA" in f.caps
                np.testing.assert_array_equal(f.numpy(), frames[f.seq - 1],
                                              err_msg=f"frame {f.seq}")
                assert f.seq == got + 1
                got += 1
        assert got == FRAMES
    finish(gst)


def test_tensors_relay_through_cudaipcsrc_and_cudaipcsink(tmp_path):
    # Python -> cudaipcsrc ! cudaipcsink -> Python, in other/tensors caps derived by the package.
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    shape = (2, 5, 7)
    with cudaipc.Producer(a, memory="host", block_timeout=10, framerate=30) as p, \
            cudaipc.Consumer(b, timeout=30) as c:
        gst = launch(tmp_path, f"cudaipcringsrc socket-path={a} mode=every-frame is-live=false "
                               f"! cudaipcringsink ipc-mode=host socket-path={b} "
                               f"wait-for-consumer=true block-timeout=10000000000")
        consumers_joined(p, gst)
        for seq in range(1, FRAMES + 1):
            p.publish(pattern(seq, shape, np.float32), pts=seq * 33_333_333)
            with c.next() as f:
                assert f.shape == shape and f.dtype == np.float32
                assert f.caps.startswith("other/tensors")
                np.testing.assert_array_equal(f.numpy(), pattern(seq, shape, np.float32),
                                              err_msg=f"frame {seq}")
        p.end_of_stream()
        with pytest.raises(cudaipc.EndOfStream):
            c.next()
    finish(gst)
