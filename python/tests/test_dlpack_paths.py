"""The library's DLPack paths as Python sees them, on host channels: what a published tensor's
owner gets back (every source handed back once copied, from NumPy's capsules, from the package's
own for dtypes NumPy cannot export, from any object with __dlpack__), formats that follow the
tensors, the GIL let go while a publish waits, deleters on other threads, and the per-frame view
staying right across formats. Every frame's content is checked."""

from __future__ import annotations

import gc
import sys
import threading

import numpy as np
import pytest

import cudaipc
from conftest import have_ml_dtypes, live_exports, pattern


class DlpackOnly:
    """An object that offers only DLPack (no array interface): a framework the package does not
    know."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr
        self.calls = []

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()

    def __dlpack__(self, **kw):
        self.calls.append(kw)
        kw.pop("stream", None)
        return self.arr.__dlpack__(**kw)


def test_published_sources_are_handed_back(path):
    shape = (16, 24, 3)
    with cudaipc.Producer(path, memory="host", num_slots=4, block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        base = live_exports()
        for seq in range(1, 201):
            src = pattern(seq, shape, np.uint8)
            refs = sys.getrefcount(src)
            assert p.publish(src, pts=seq)
            # NumPy's DLPack deleter dropped the reference its capsule took: the copy is done
            # and the array is its owner's alone again.
            assert sys.getrefcount(src) == refs, f"frame {seq}: source still referenced"
            with c.next() as f:
                assert f.seq == seq and f.pts == seq
                np.testing.assert_array_equal(f.numpy(), src, err_msg=f"frame {seq}")
        gc.collect()
        assert live_exports() == base


def test_sources_numpy_cannot_export(path):
    # Read-only arrays (NumPy before 2.1 refuses their legacy capsule) and non-contiguous ones
    # (copied dense first) go through capsules the package makes, handed back the same way.
    with cudaipc.Producer(path, memory="host", block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for seq in range(1, 21):
            src = pattern(seq, (6, 10), np.int16)
            src.flags.writeable = False
            view = np.repeat(src, 2, axis=1)[:, ::2]  # strided
            given = src if seq % 2 else view
            refs = sys.getrefcount(given)
            assert p.publish(given)
            # The capsule's hold on the array ended with the copy (host memory: before publish
            # returned).
            assert sys.getrefcount(given) == refs, f"frame {seq}: source still referenced"
            with c.next() as f:
                np.testing.assert_array_equal(f.numpy(), src, err_msg=f"frame {seq}")
        gc.collect()
        assert live_exports() == 0


@pytest.mark.skipif(not have_ml_dtypes(), reason="bfloat16 from NumPy needs ml_dtypes")
def test_bfloat16_sources(path):
    import ml_dtypes
    with cudaipc.Producer(path, memory="host", block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for seq in range(1, 6):
            src = pattern(seq, (3, 5), ml_dtypes.bfloat16)
            assert p.publish(src)
            with c.next() as f:
                assert f.dtype_name == "bfloat16"
                np.testing.assert_array_equal(f.numpy().view(np.uint16), src.view(np.uint16))
        gc.collect()
        assert live_exports() == 0


def test_any_dlpack_object_is_published(path):
    with cudaipc.Producer(path, memory="host", block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for seq in range(1, 11):
            obj = DlpackOnly(pattern(seq, (4, 7), np.float32))
            assert p.publish(obj)
            assert obj.calls and "stream" not in obj.calls[0]  # host: no stream to order
            with c.next() as f:
                np.testing.assert_array_equal(np.from_dlpack(f), obj.arr, err_msg=f"frame {seq}")


def test_formats_follow_the_tensors(path):
    shapes = [(4, 5), (4, 5), (2, 3, 2), (7,), (7,), (4, 5)]
    with cudaipc.Producer(path, memory="host", block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        formats = []
        c.on_format = formats.append
        for seq, shape in enumerate(shapes, start=1):
            dtype = np.uint8 if seq % 2 else np.float64
            assert p.publish(pattern(seq, shape, dtype))
            with c.next() as f:
                assert f.shape == shape and f.dtype == dtype, f"frame {seq}"
                np.testing.assert_array_equal(np.from_dlpack(f), pattern(seq, shape, dtype))
                np.testing.assert_array_equal(f.numpy(), pattern(seq, shape, dtype))
        # A new format whenever dtype or shape changed (each frame here changes one of them).
        assert len(formats) == len(shapes)
        assert [fm.shape for fm in formats] == shapes


def test_caps_given_per_publish_start_a_format(path):
    caps = "video/x-raw,format=RGBA,width=8,height=6,framerate=30/1"
    with cudaipc.Producer(path, memory="host", block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        assert p.publish(pattern(1, (6, 8, 4), np.uint8))
        assert p.publish(pattern(2, (6, 8, 4), np.uint8), caps=caps)
        with c.next() as f:
            assert f.caps.startswith("other/tensors")
        with c.next() as f:
            assert f.caps == caps
            np.testing.assert_array_equal(f.numpy(), pattern(2, (6, 8, 4), np.uint8))


def test_a_publish_waiting_for_a_slot_lets_other_threads_run(path):
    # Two slots, an every-frame consumer that holds one and has not read the other: the third
    # publish waits for a slot. The release that frees one comes from another Python thread, which
    # could not run if the waiting publish kept the GIL.
    with cudaipc.Producer(path, memory="host", num_slots=2, block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        p.publish(pattern(1, (8,), np.uint8))
        p.publish(pattern(2, (8,), np.uint8))
        f1 = c.next()
        released = threading.Event()

        def release_later():
            released.wait(5)
            f1.release()
            with c.next() as f2:
                assert f2.seq == 2

        t = threading.Thread(target=release_later)
        t.start()
        released.set()
        assert p.publish(pattern(3, (8,), np.uint8))  # waits until the thread released frame 1
        t.join(10)
        assert not t.is_alive()
        with c.next() as f3:
            np.testing.assert_array_equal(f3.numpy(), pattern(3, (8,), np.uint8))


def test_tensors_freed_on_other_threads_give_leases_back(path):
    with cudaipc.Producer(path, memory="host", num_slots=3, block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for seq in range(1, 61):
            p.publish(pattern(seq, (5, 5), np.uint32))
            f = c.next()
            arrays = [np.from_dlpack(f) for _ in range(seq % 3 + 1)]
            f.release()
            box = [arrays]
            del arrays
            seen = []

            def check_and_free(want=pattern(seq, (5, 5), np.uint32)):
                seen.append(all(np.array_equal(a, want) for a in box[0]))
                box.clear()  # the last references: the deleters run on this thread

            t = threading.Thread(target=check_and_free)
            t.start()
            t.join(10)
            assert seen == [True], f"frame {seq}"
            assert c.held == 0, f"frame {seq}"
        assert live_exports() == 0


def test_the_view_follows_every_frame(path):
    # One consumer reads frames of three tensor descriptions in turn: shape, strides, dtype, pts
    # and data pointer of each Frame are its own, also after later frames came.
    with cudaipc.Producer(path, memory="host", num_slots=4, block_timeout=10) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        kept = []
        for seq in range(1, 31):
            shape, dtype = [((3, 4), np.int8), ((2, 2, 2), np.float32), ((9,), np.uint16)][seq % 3]
            p.publish(pattern(seq, shape, dtype), pts=seq * 10, duration=seq)
            f = c.next()
            kept.append((f, np.from_dlpack(f)))
            f.release()
            if len(kept) > 1:  # two leases at most: the third slot keeps the producer going
                old, arr = kept.pop(0)
                oshape, odtype = [((3, 4), np.int8), ((2, 2, 2), np.float32),
                                  ((9,), np.uint16)][old.seq % 3]
                assert old.shape == oshape and old.dtype == odtype
                assert old.pts == old.seq * 10 and old.duration == old.seq
                assert old.released and old.data_ptr == arr.ctypes.data
                np.testing.assert_array_equal(arr, pattern(old.seq, oshape, odtype))
        kept.clear()
        del old, arr, f
        assert c.held == 0


def test_stream_for_a_host_frame_is_refused(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        p.publish(pattern(1, (4,), np.uint8))
        with c.next() as f:
            with pytest.raises(BufferError, match="host memory"):
                f.__dlpack__(stream=5)
            with pytest.raises(BufferError, match="copy"):
                f.__dlpack__(copy=True)
            with pytest.raises(BufferError, match="cpu"):
                f.__dlpack__(dl_device=(2, 0))
            cap = f.__dlpack__(stream=-1)  # "no synchronisation" is fine
            del cap
        assert c.held == 0
        with pytest.raises(cudaipc.ClosedError, match="frame 1 was released"):
            f.__dlpack__()


def test_a_closed_consumer_still_counts_what_it_holds(path):
    with cudaipc.Producer(path, memory="host") as p:
        c = cudaipc.Consumer(path, timeout=10)
        p.wait_for_consumers()
        p.publish(pattern(1, (4,), np.uint8))
        f = c.next()
        a = np.from_dlpack(f)
        c.close()
        assert c.held == 1
        f.release()
        assert c.held == 1  # `a` still holds it
        np.testing.assert_array_equal(a, pattern(1, (4,), np.uint8))
        del a
        assert c.held == 0
        with pytest.raises(cudaipc.ClosedError):
            c.next()
