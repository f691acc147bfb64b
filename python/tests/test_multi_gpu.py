"""Two GPUs (issue #30: a decoder GPU and an inference GPU). A producer on one GPU and a torch
consumer on the other (``Consumer(path, device=N)``) read every frame through peer access, both
ways; and a ``cudaipc.Server(path, device=1)`` answers a cudaipcfilter whose pipeline runs on GPU 0,
each frame with its own result. Skipped, with the reason, without torch, with fewer than 2 GPUs or
without peer access between GPUs 0 and 1 (the library refuses such a channel)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cudaipc

torch = pytest.importorskip("torch", reason="torch is not installed: two-GPU suite skipped")
if torch.cuda.device_count() < 2:
    pytest.skip(f"torch sees {torch.cuda.device_count()} CUDA GPU(s): the two-GPU suite needs 2",
                allow_module_level=True)
if not (torch.cuda.can_device_access_peer(0, 1) and torch.cuda.can_device_access_peer(1, 0)):
    pytest.skip("no peer access between GPUs 0 and 1: a consumer cannot read the other GPU's "
                "slots", allow_module_level=True)

from conftest import (gst_env, gst_plugin_dir, gst_tool, held_on_timeout,  # noqa: E402
                      require_gst_elements)
from gpu_peer import gpu_pattern  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
H, W = 64, 96


def peer_on(device, path, frames, how):
    """gpu_peer.py producing on `device` (its slots there too)."""
    env = dict(os.environ, CUDAIPC_PEER_DEVICE=str(device))
    args = [sys.executable, os.path.join(HERE, "gpu_peer.py"), path, str(frames), str(H), str(W),
            "4", how]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


@pytest.mark.parametrize("how", ["publish", "inplace"])
@pytest.mark.parametrize("producer,consumer", [(0, 1), (1, 0)], ids=["0to1", "1to0"])
def test_consumer_on_the_other_gpu_reads_every_frame(path, producer, consumer, how):
    n = 50
    p = peer_on(producer, path, n, how)
    seqs = []
    with cudaipc.Consumer(path, timeout=60, device=consumer) as c, held_on_timeout(c):
        for f in c:
            with f:
                # The frame is read where the consumer asked, from the producer's GPU.
                assert f.device == f"cuda:{consumer}"
                t = torch.from_dlpack(f)
                assert t.device == torch.device("cuda", consumer)
                want = gpu_pattern(f.seq, (H, W, 4), device=f"cuda:{consumer}")
                assert torch.equal(t, want), f"frame {f.seq}"
                np.testing.assert_array_equal(f.numpy(), want.cpu().numpy())
                seqs.append(f.seq)
                del t
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, f"producer failed: {err}{out}"
    assert c.held == 0
    assert seqs == list(range(1, n + 1))


# The model on its own GPU: it reads each request (slots on GPU 0) with torch on GPU 1.
SERVER_ON_GPU1 = textwrap.dedent("""
    import sys, torch, cudaipc
    with cudaipc.Server(sys.argv[1], device=1) as s:
        print("serving", flush=True)
        for req in s:
            t = torch.from_dlpack(req)
            req.reply(meta={"pts": req.frame.pts, "sum": int(t.sum(dtype=torch.int64)),
                            "device": t.device.index})
""")


def test_server_on_gpu1_answers_a_filter_on_gpu0(tmp_path):
    gst = gst_tool("gst-launch-1.0")
    plugin = gst_plugin_dir()
    if not gst or not os.path.exists(os.path.join(plugin, "libgstcudaipc.so")):
        pytest.skip("needs gst-launch-1.0 (or CUDAIPC_GST_BUNDLE) and the cudaipc plugin "
                    f"(CUDAIPC_GST_PLUGIN_DIR, now {plugin})")
    env = gst_env(tmp_path, plugin)
    require_gst_elements(env, "videotestsrc", "cudaupload", "cudaipcfilter", "cudaipcringsink")
    n, w, h = 60, 320, 240
    model, out = str(tmp_path / "model"), str(tmp_path / "out")
    server = subprocess.Popen([sys.executable, "-c", SERVER_ON_GPU1, model],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("serving"):
            server.kill()
            raise AssertionError(f"the server did not start: {line} {server.stderr.read()}")
        with cudaipc.Consumer(out, timeout=60, device=0) as c, held_on_timeout(c):
            # Every CUDA element names GPU 0, so none takes a context on the model's GPU.
            pipe = subprocess.Popen(
                [gst, "-q", "videotestsrc", "pattern=ball", "animation-mode=frames",
                 f"num-buffers={n}", "!", f"video/x-raw,format=RGBA,width={w},height={h}", "!",
                 "cudaupload", "cuda-device-id=0", "!", "video/x-raw(memory:CUDAMemory)", "!",
                 "cudaipcfilter", "cuda-device-id=0", f"socket-path={model}", "on-missing=wait",
                 "timeout=10000000000", "!", "cudaipcringsink", "cuda-device-id=0",
                 "wait-for-consumer=true", f"socket-path={out}"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            seen = 0
            for i, f in zip(range(n), c):
                with f:
                    assert f.device == "cuda:0", (i, f.device)  # the pipeline's frames stay there
                    m = f.meta
                    assert m.get("pts") == f.pts, (i, m, f.pts)
                    assert m.get("device") == 1, (i, m)
                    assert m.get("sum") == int(f.numpy().sum(dtype=np.int64)), (i, m)
                    seen += 1
            _, err = pipe.communicate(timeout=60)
            assert pipe.returncode == 0, err
            assert seen == n
    finally:
        server.kill()
        server.communicate()
