"""GPU suites: DLPack into torch and cupy shares the slot; the ordering races from Python, where a
slow kernel on one side meets the other side running ahead (the consumer's reads and its release
on the stream torch or cupy names, the producer's copy and its render in place on the caller's
stream); and GStreamer -> torch -> GStreamer round trips that keep every frame. Skipped, with the
reason, where torch, cupy or a GPU is missing."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import cudaipc

torch = pytest.importorskip("torch", reason="torch is not installed: GPU suites skipped")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA GPU: GPU suites skipped", allow_module_level=True)

from conftest import (consumers_joined, frames_from, gst_env, gst_plugin_dir,  # noqa: E402
                      gst_tool, held_on_timeout, live_exports, require_gst_elements)
from gpu_peer import gpu_pattern  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
H, W = 64, 96


def peer(path, frames, how="publish", slots=4, h=H, w=W, caps=None):
    args = [sys.executable, os.path.join(HERE, "gpu_peer.py"), path, str(frames), str(h), str(w),
            str(slots), how] + ([caps] if caps else [])
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, f"producer failed: {err}{out}"


@pytest.mark.parametrize("how", ["publish", "inplace"])
def test_torch_from_dlpack_shares_the_slot(path, how):
    n = 50
    p = peer(path, n, how)
    seqs = []
    with cudaipc.Consumer(path, timeout=60) as c, held_on_timeout(c):
        for f in c:
            with f:
                assert f.device.startswith("cuda:")
                t = torch.from_dlpack(f)
                assert t.is_cuda and t.data_ptr() == f.data_ptr
                assert tuple(t.shape) == (H, W, 4) and t.dtype == torch.uint8
                assert torch.equal(t, gpu_pattern(f.seq, (H, W, 4))), f"frame {f.seq}"
                assert f.pts == f.seq
                np.testing.assert_array_equal(f.numpy(), gpu_pattern(f.seq, (H, W, 4)).cpu())
                seqs.append(f.seq)
                del t
    finish(p)
    assert seqs == list(range(1, n + 1))


@pytest.mark.parametrize("how", ["from_dlpack", "array_interface", "both"])
def test_cupy_shares_the_slot(path, how):
    cupy = pytest.importorskip("cupy", reason="cupy is not installed")
    # cupy compiles its kernels on first use, which can take longer than the producer's lease
    # timeout (5 s): a consumer stuck that long on one frame is evicted by design. Compile them
    # before the stream starts.
    warm = cupy.zeros((H, W, 4), dtype=cupy.uint8)
    assert bool((warm == cupy.asarray(np.zeros((H, W, 4), np.uint8))).all())
    cupy.cuda.Device().synchronize()
    n = 20
    p = peer(path, n)
    # Leases still held once a frame's arrays are deleted and the frame released: only a
    # reference cycle (freed by the next collection) or a lost deleter keeps one.
    lingering = []
    seqs = []
    with cudaipc.Consumer(path, timeout=60) as c, held_on_timeout(c):
        for f in c:
            with f:
                want = cupy.asarray(gpu_pattern(f.seq, (H, W, 4)).cpu().numpy())
                arrays = []
                if how in ("from_dlpack", "both"):
                    arrays.append(cupy.from_dlpack(f))
                if how in ("array_interface", "both"):
                    arrays.append(cupy.asarray(f))  # __cuda_array_interface__
                for a in arrays:
                    assert a.data.ptr == f.data_ptr
                    assert bool((a == want).all()), f"frame {f.seq}"
                del a, arrays
            if c.held:
                lingering.append((f.seq, c.held))
            seqs.append(f.seq)
    finish(p)
    print(f"cupy {cupy.__version__}, {how}: leases outliving their frame (seq, held): "
          f"{lingering or 'none'}")
    assert seqs == list(range(1, n + 1))
    gc.collect()
    assert c.held == 0, f"leases never given back, even after gc.collect(): {lingering}"


def race_reads(path, read_one, frames=20):
    """The producer runs ahead (a peer process, 2 slots) while this latest consumer reads each
    frame with `read_one(frame)`: a copy queued behind ~10 ms of GPU sleep, the frame released on
    the CPU at once. Unless the release is ordered after that copy on the GPU, the producer
    overwrites the slot before the copy reads it. Checks every copy."""
    p = peer(path, 1_000_000, slots=2)  # runs until killed, never out of frames
    results = []
    with cudaipc.Consumer(path, mode="latest", timeout=60) as c, held_on_timeout(c):
        for f in c:
            results.append((f.seq, read_one(f)))
            if len(results) >= frames:
                break
        torch.cuda.synchronize()
    p.kill()
    p.communicate()
    for seq, r in results:
        assert torch.equal(torch.as_tensor(r, device="cuda"), gpu_pattern(seq, (H, W, 4))), \
            f"frame {seq} was overwritten"
    assert len(results) == frames


def test_release_waits_for_the_callers_kernels(path):
    def read_one(f):
        t = torch.from_dlpack(f)
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time on the current stream
        r = t.clone()
        del t  # the export's deleter orders its hold after the current stream
        f.release()
        return r

    race_reads(path, read_one)


def test_release_waits_for_reads_on_the_consumers_stream_asked_for_late(path):
    # The first frames are read on torch's stream, with the consumer's stream never handed out:
    # their releases need no driver query. Then the array interface names the consumer's stream
    # and the reads go there, released with no stream named: those releases must follow them.
    seen = []

    def read_one(f):
        seen.append(f.seq)
        if len(seen) <= 5:
            r = f.torch().clone()
            torch.cuda.current_stream().synchronize()
            f.release()
            return r
        s = f.__cuda_array_interface__["stream"]
        assert isinstance(s, int) and s
        with torch.cuda.stream(torch.cuda.ExternalStream(s)):
            t = f.torch(stream=s)
            torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time on the consumer's stream
            r = t.clone()
        del t
        f.release()
        return r

    race_reads(path, read_one)


@pytest.mark.parametrize("view", ["from_dlpack", "frame.torch()"])
def test_release_waits_for_a_side_streams_kernels(path, view):
    # As above on a stream of torch's own: the export names it, for the wait and the release, or
    # frame.torch() reads on it (torch's current stream), the consumer's stream never handed out.
    side = torch.cuda.Stream()

    def read_one(f):
        with torch.cuda.stream(side):
            t = torch.from_dlpack(f) if view == "from_dlpack" else f.torch()
            torch.cuda._sleep(20_000_000)
            r = t.clone()
            del t
        f.release()
        return r

    race_reads(path, read_one)


def test_release_after_a_stream_through_the_array_interface(path):
    # __cuda_array_interface__ holds no lease: the frame's own release(stream=...) must hold the
    # slot until the work on that stream has read it. CuPy reads the interface (torch.as_tensor
    # refuses its read-only flag, which is true: consumer mappings are read-only).
    cupy = pytest.importorskip("cupy", reason="cupy is not installed")
    stream = cupy.cuda.Stream(non_blocking=True)
    sleeper = torch.cuda.ExternalStream(stream.ptr)

    def read_one(f):
        with stream:
            a = cupy.asarray(f)  # CUDA array interface, zero-copy
            assert a.data.ptr == f.data_ptr
            with torch.cuda.stream(sleeper):
                torch.cuda._sleep(20_000_000)
            r = a.copy()
            del a
        f.release(stream=stream.ptr)
        return r

    race_reads(path, read_one)


def test_torch_refuses_the_read_only_array_interface_with_a_reason(path):
    # What a torch user meets: torch.as_tensor refuses read-only CUDA array interfaces; DLPack is
    # the way in (docs/python.md).
    p = peer(path, 1)
    with cudaipc.Consumer(path, timeout=60) as c, held_on_timeout(c):
        f = next(iter(c))
        assert f.__cuda_array_interface__["data"] == (f.data_ptr, True)
        with pytest.raises(TypeError, match="read only"):
            torch.as_tensor(f, device="cuda")
        assert torch.equal(torch.from_dlpack(f), gpu_pattern(f.seq, (H, W, 4)))
        f.release()
    finish(p)


@pytest.mark.parametrize("how", ["from_dlpack", "frame.cupy()", "frame.cupy(stream=)"])
def test_cupy_release_waits_for_cupys_stream(path, how):
    """cupy.from_dlpack(frame) (an export: its deleter orders the hold) and frame.cupy() (a slot
    view, no export: its reads ordered on cupy's current stream or the stream given, the frame's
    release after the work queued there)."""
    cupy = pytest.importorskip("cupy", reason="cupy is not installed")
    assert int(cupy.zeros((H, W, 4), dtype=cupy.uint8).sum()) == 0  # kernels compiled first
    stream = cupy.cuda.Stream(non_blocking=True)
    sleeper = torch.cuda.ExternalStream(stream.ptr)  # torch's sleep kernel on cupy's stream
    arrays = {"from_dlpack": cupy.from_dlpack, "frame.cupy()": lambda f: f.cupy(),
              "frame.cupy(stream=)": lambda f: f.cupy(stream=stream)}

    def read_one(f):
        with stream:
            a = arrays[how](f)
            assert a.data.ptr == f.data_ptr and a.shape == (H, W, 4)
            with torch.cuda.stream(sleeper):
                torch.cuda._sleep(20_000_000)
            r = a.copy()
            del a
        f.release()
        return r

    race_reads(path, read_one)


# A consumer in its own process that reads every frame slowly and lets go of it at once on the
# CPU: each frame is read on the GPU behind a sleep and released before that read has run, so
# only the GPU-side ordering keeps the producer's next write into the slot from overtaking it.
SLOW_READER = """
import sys, torch, cudaipc
sys.path.insert(0, {here!r})
from gpu_peer import gpu_pattern
kept = []
with cudaipc.Consumer({path!r}, timeout=60) as c:
    for f in c:
        t = torch.from_dlpack(f)
        torch.cuda._sleep(10_000_000)
        kept.append((f.seq, t.clone()))
        del t
        f.release()
    torch.cuda.synchronize()
bad = [seq for seq, r in kept if not torch.equal(r, gpu_pattern(seq, {shape!r}))]
print(len(kept), bad)
"""


def slow_reader(path, shape):
    code = SLOW_READER.format(here=HERE, path=path, shape=shape)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def read_back(proc, n):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    count, bad = out.strip().splitlines()[-1].split(" ", 1)
    assert int(count) == n and bad == "[]", f"{count} frames read, wrong ones: {bad}"


@pytest.mark.parametrize("how", ["publish", "frame"])
def test_producer_writes_on_a_side_stream_after_slow_readers(path, how):
    # The producer (here) makes each frame on a side stream behind a sleep and publishes it at
    # once, by copy or by rendering into the slot; with two slots, the slot it writes was just
    # released by a reader whose GPU read is still queued. The write must wait for that read and
    # the publish for the write, both on the GPU.
    shape = (8, 8, 4)
    n = 40
    reader = slow_reader(path, shape)
    side = torch.cuda.Stream()
    with cudaipc.Producer(path, memory="cuda", num_slots=2, block_timeout=30) as p:
        p.wait_for_consumers(timeout=60)
        for seq in range(1, n + 1):
            with torch.cuda.stream(side):
                if how == "publish":
                    x = torch.zeros(shape, dtype=torch.uint8, device="cuda")
                    torch.cuda._sleep(5_000_000)
                    x.copy_(gpu_pattern(seq, shape))
                    assert p.publish(x, pts=seq)
                    del x  # freed at once: the library holds it until the copy has run
                else:
                    with p.frame(shape, "uint8", pts=seq) as slot:
                        torch.cuda._sleep(5_000_000)
                        torch.from_dlpack(slot).copy_(gpu_pattern(seq, shape))
    read_back(reader, n)
    gc.collect()
    assert live_exports() == 0


def test_publish_from_cupy_waits_on_cupys_stream(path):
    cupy = pytest.importorskip("cupy", reason="cupy is not installed")
    shape = (8, 8, 4)
    n = 30
    reader = slow_reader(path, shape)
    stream = cupy.cuda.Stream(non_blocking=True)
    sleeper = torch.cuda.ExternalStream(stream.ptr)
    with cudaipc.Producer(path, memory="cuda", num_slots=2, block_timeout=30) as p, stream:
        p.wait_for_consumers(timeout=60)
        for seq in range(1, n + 1):
            x = cupy.zeros(shape, dtype=cupy.uint8)
            with torch.cuda.stream(sleeper):
                torch.cuda._sleep(5_000_000)
            x[...] = cupy.asarray(gpu_pattern(seq, shape).cpu().numpy())
            assert p.publish(x, pts=seq)
            del x
    read_back(reader, n)


def test_frames_exported_many_ways_leave_no_lease_or_export(path):
    n = 60
    p = peer(path, n)
    with cudaipc.Consumer(path, timeout=60) as c, held_on_timeout(c):
        for f in c:
            kind = f.seq % 4
            if kind == 0:
                with f:
                    t = torch.from_dlpack(f)
            elif kind == 1:
                t = torch.from_dlpack(f)
                f.release()
            elif kind == 2:
                assert f.__dlpack__(stream=torch.cuda.current_stream().cuda_stream or 1,
                                    max_version=(1, 0)) is not None  # never consumed
                f.release()
                t = gpu_pattern(f.seq, (H, W, 4))
            else:
                # No ordering asked for (stream -1): the reader waits for the frame itself, here
                # on the CPU through the consumer's own stream.
                torch.cuda.ExternalStream(c.cuda_stream).synchronize()
                t = torch.from_dlpack(f.__dlpack__(stream=-1)).clone()
                torch.cuda.synchronize()  # unordered reads must end before the release
                f.release()
            assert torch.equal(t, gpu_pattern(f.seq, (H, W, 4))), f"frame {f.seq}"
            del t
    finish(p)
    gc.collect()
    assert c.held == 0
    assert live_exports() == 0


def gst_round_trip_env(tmp_path):
    gst = gst_tool("gst-launch-1.0")
    plugin = gst_plugin_dir()
    if not gst or not os.path.exists(os.path.join(plugin, "libgstcudaipc.so")):
        pytest.skip("needs gst-launch-1.0 (or CUDAIPC_GST_BUNDLE) and the cudaipc plugin "
                    f"(CUDAIPC_GST_PLUGIN_DIR, now {plugin})")
    return gst, gst_env(tmp_path, plugin)


@pytest.mark.parametrize("memory", ["system", "cuda"])
def test_gstreamer_torch_gstreamer_round_trip(tmp_path, memory):
    # filesrc -> (cudaupload) -> cudaipcsink -> Python: torch computes 255 - x on the GPU ->
    # Producer -> cudaipcsrc -> (cudadownload) -> filesink; every frame of the output is checked.
    gst, env = gst_round_trip_env(tmp_path)
    # Core elements only (the GPU machine's bundle has no rawvideoparse), plus nvcodec's upload
    # and download for the CUDA-memory variant.
    need = ["filesrc", "capsfilter", "filesink", "cudaipcringsink", "cudaipcringsrc"]
    if memory == "cuda":
        need += ["cudaupload", "cudadownload"]
    require_gst_elements(env, *need)
    n = 60
    frames = np.stack([gpu_pattern(s, (H, W, 4)).cpu().numpy() for s in range(1, n + 1)])
    src, out = tmp_path / "in.raw", tmp_path / "out.raw"
    frames.tofile(src)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    caps = f"video/x-raw,format=RGBA,width={W},height={H},framerate=30/1"
    upload = ["!", "cudaupload"] if memory == "cuda" else []
    download = ["!", "cudadownload"] if memory == "cuda" else []
    # One frame per block; the caps filter gives the bytes their format.
    into = subprocess.Popen(
        [gst, "-q", "filesrc", f"location={src}", f"blocksize={H * W * 4}", "!", caps, *upload,
         "!", "cudaipcringsink", f"socket-path={a}", "wait-for-consumer=true",
         "block-timeout=30000000000"], env=env, stderr=subprocess.PIPE, text=True)
    with cudaipc.Consumer(a, timeout=60) as c, held_on_timeout(c), \
            cudaipc.Producer(b, memory="cuda", caps=caps, block_timeout=30) as p:
        outof = subprocess.Popen(
            [gst, "-q", "cudaipcringsrc", f"socket-path={b}", "mode=every-frame", "is-live=false",
             *download, "!", f"video/x-raw,format=RGBA,width={W},height={H}", "!", "filesink",
             "sync=false", "buffer-mode=unbuffered", f"location={out}"],
            env=env, stderr=subprocess.PIPE, text=True)
        consumers_joined(p, outof, timeout=60, what="the cudaipcsrc pipeline")
        got = 0
        for f in frames_from(c, into, timeout=60, what="the cudaipcsink pipeline"):
            with f:
                assert f.device.startswith("cuda")
                y = 255 - torch.from_dlpack(f)  # on torch's stream, after the frame arrived
                p.publish(y, pts=f.seq)
                got += 1
    assert got == n
    for proc in (into, outof):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    data = np.fromfile(out, dtype=np.uint8).reshape(-1, H, W, 4)
    assert len(data) == n
    for seq in range(1, n + 1):
        np.testing.assert_array_equal(data[seq - 1], 255 - frames[seq - 1], err_msg=f"frame {seq}")


@pytest.mark.parametrize("device", ["cuda:0", "cuda", torch.device("cuda", 0)])
def test_devices_named_as_torch_names_them(path, device):
    """Producer, Consumer and Server take torch's device names (issue #34): the slots live on, and
    the frames are read on, the device named; every frame's content is checked."""
    with cudaipc.Producer(path, memory="cuda", device=device) as p, \
            cudaipc.Consumer(path, device=device, timeout=30) as c:
        assert p.device == 0
        p.wait_for_consumers(1, timeout=30)
        for seq in range(1, 6):
            p.publish(gpu_pattern(seq, (H, W, 4)))
            with c.next() as f:
                assert f.device == "cuda:0"
                assert torch.equal(torch.from_dlpack(f), gpu_pattern(seq, (H, W, 4))), seq
    with cudaipc.Server(path + "-model", device=device) as s:
        assert s.pipelines[0]["connected"] is False
