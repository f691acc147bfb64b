"""Host-memory round trips: every dtype, ranks 1 to 5, every element checked."""

from __future__ import annotations

import numpy as np
import pytest

import cudaipc
from conftest import have_ml_dtypes, pattern

SHAPES = [(17,), (5, 7), (3, 4, 5), (2, 3, 4, 5), (2, 1, 3, 2, 4)]


def np_dtype(name):
    if name == "bfloat16":
        if not have_ml_dtypes():
            pytest.skip("bfloat16 from NumPy needs ml_dtypes (not installed)")
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@pytest.mark.parametrize("dtype", cudaipc.DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"rank{len(s)}")
def test_every_dtype_and_rank(path, dtype, shape):
    dt = np_dtype(dtype)
    with cudaipc.Producer(path, memory="host", num_slots=3) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for seq in range(1, 7):
            want = pattern(seq, shape, dt)
            assert p.publish(want, pts=seq * 1000)
            with c.next() as f:
                assert f.seq == seq
                assert f.pts == seq * 1000
                assert f.shape == shape
                assert f.dtype == dt
                assert f.dtype_name == dtype
                assert f.strides == want.strides
                assert f.device == "cpu"
                assert f.__dlpack_device__() == (1, 0)
                got = f.numpy()
                assert got.dtype == dt and got.shape == shape
                assert not got.flags.writeable
                np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
                if dtype != "bfloat16":
                    via_dlpack = np.from_dlpack(f)
                    np.testing.assert_array_equal(via_dlpack, want)
                del got


def test_caps_derived_from_shape_and_dtype(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        p.publish(pattern(1, (1, 480, 640, 3), np.uint8))
        with c.next() as f:
            assert f.caps == ("other/tensors, format=(string)static, num_tensors=(int)1, "
                              "types=(string)uint8, dimensions=(string)3:640:480:1, "
                              "framerate=(fraction)0/1")
            assert c.format.shape == (1, 480, 640, 3) and c.format.dtype == "uint8"


def test_explicit_video_caps(path):
    caps = "video/x-raw,format=RGBA,width=8,height=6,framerate=30/1"
    with cudaipc.Producer(path, memory="host", caps=caps) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        want = pattern(1, (6, 8, 4), np.uint8)
        p.publish(want)
        with c.next() as f:
            assert f.caps == caps
            np.testing.assert_array_equal(f.numpy(), want)
        with pytest.raises(cudaipc.InvalidArgumentError, match="format=RGBA 8x6 need"):
            p.publish(pattern(2, (6, 8, 3), np.uint8))


def test_non_contiguous_numpy_is_published_dense(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        base = pattern(3, (8, 10), np.int32)
        p.publish(base[:, ::2])
        with c.next() as f:
            np.testing.assert_array_equal(f.numpy(), base[:, ::2])


def test_writable_frame_renders_in_place(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for seq in range(1, 6):
            with p.frame((4, 5), np.float32, pts=seq) as slot:
                slot.numpy()[...] = pattern(seq, (4, 5), np.float32)
            with c.next() as f:
                assert f.seq == seq and f.pts == seq
                np.testing.assert_array_equal(f.numpy(), pattern(seq, (4, 5), np.float32))


def test_aborted_frame_is_not_published(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        with pytest.raises(RuntimeError):
            with p.frame((4,), np.uint8) as slot:
                slot.numpy()[...] = 1
                raise RuntimeError("render failed")
        p.publish(pattern(9, (4,), np.uint8))
        with c.next() as f:
            np.testing.assert_array_equal(f.numpy(), pattern(9, (4,), np.uint8))


def test_other_process_producer(path):
    from conftest import run_python
    peer = run_python("""
        import sys, numpy as np, cudaipc
        sys.path.insert(0, sys.argv[2])
        from conftest import pattern
        with cudaipc.Producer(sys.argv[1], memory="host", num_slots=4, block_timeout=10) as p:
            p.wait_for_consumers()
            for seq in range(1, 201):
                p.publish(pattern(seq, (64, 48, 3), np.uint16), pts=seq)
        """, path, __import__("os").path.dirname(__file__))
    try:
        with cudaipc.Consumer(path, timeout=20) as c:
            seqs = []
            for f in c:
                with f:
                    np.testing.assert_array_equal(f.numpy(), pattern(f.seq, (64, 48, 3),
                                                                     np.uint16))
                    assert f.pts == f.seq
                    seqs.append(f.seq)
        assert seqs == list(range(1, 201))
    finally:
        out, err = peer.communicate(timeout=30)
    assert peer.returncode == 0, err
