"""Lifetimes: frames outlive their consumer, tensors hold leases, nothing leaks."""

from __future__ import annotations

import gc
import os
import warnings
import weakref

import numpy as np
import pytest

import cudaipc
from conftest import live_exports, pattern


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def mappings() -> int:
    # File-backed mappings only (slots and control blocks are memfds): anonymous ones come and go
    # with Python's own heap (1 MiB arenas), whatever ran before.
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if len(line.split(maxsplit=5)) == 6)


def test_frame_outlives_its_consumer(path):
    with cudaipc.Producer(path, memory="host") as p:
        c = cudaipc.Consumer(path, timeout=10)
        p.wait_for_consumers()
        p.publish(pattern(1, (16, 16), np.uint32))
        f = c.next()
        view = np.from_dlpack(f)
        c.close()
        del c
        gc.collect()
        np.testing.assert_array_equal(f.numpy(), pattern(1, (16, 16), np.uint32))
        f.release()
        np.testing.assert_array_equal(view, pattern(1, (16, 16), np.uint32))
        del view


def test_numpy_is_the_slots_view_until_release(path):
    """A host frame's numpy() is its slot's read-only view, made once per slot: each frame's
    content while it is held, no lease of its own (the frame's release gives the slot back at
    once), an alias per frame (a shape set on one stays with it), and still mapped when kept past
    the frame and its consumer (stale then, never a crash)."""
    shape = (6, 8)
    with cudaipc.Producer(path, memory="host", num_slots=3) as p:
        c = cudaipc.Consumer(path, timeout=10)
        p.wait_for_consumers()
        by_slot: dict = {}
        kept = None
        for seq in range(1, 10):
            p.publish(pattern(seq, shape, np.uint16))
            with c.next() as f:
                a = f.numpy()
                np.testing.assert_array_equal(a, pattern(seq, shape, np.uint16))
                assert a.ctypes.data == f.data_ptr and not a.flags.writeable
                with pytest.raises(ValueError):
                    a[0, 0] = 1
                with pytest.raises(ValueError):
                    a.flags.writeable = True
                b = f.numpy()
                with warnings.catch_warnings():  # setting shape is deprecated from NumPy 2.5
                    warnings.simplefilter("ignore", DeprecationWarning)
                    b.shape = (48,)  # in place on this alias only
                assert f.numpy().shape == shape
                same = by_slot.setdefault(f.data_ptr, a)
                assert np.shares_memory(same, a)
                kept = a
            assert c.held == 0  # the views hold no lease
        assert len(by_slot) == 3  # one view per slot, handed out again
        c.close()
        del c
        gc.collect()
        assert kept.shape == shape and int(kept.sum()) >= 0  # mapped: readable, stale


def test_numpy_hands_an_unheld_view_out_again_unless_changed_in_place(path):
    """A host frame's numpy() array that nobody holds any more is handed out again for its slot's
    next frame (no array made per frame), showing that frame; one still held, or whose shape,
    dtype or flags were set in place, is not: that frame gets a fresh view with the slot's
    layout."""
    shape = (6, 8)
    with cudaipc.Producer(path, memory="host", num_slots=2, policy="block") as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()

        def next_view(seq: int) -> np.ndarray:
            p.publish(pattern(seq, shape, np.uint16))
            with c.next() as f:
                a = f.numpy()
                np.testing.assert_array_equal(a, pattern(seq, shape, np.uint16))
                assert a.shape == shape and a.dtype == np.uint16 and not a.flags.writeable
                assert a.ctypes.data == f.data_ptr
                return a

        # Two slots taken in turn: frame k + 2 is in frame k's slot.
        dropped = [weakref.ref(next_view(seq)) for seq in (1, 2)]  # each dropped at once
        # The check reads NumPy's C layout, which agreed with the arrays' attributes.
        assert c._shared.numpy_views.c_layout
        for seq in (3, 4):
            a = next_view(seq)
            assert a is dropped[seq - 3](), seq  # the same array again, showing this frame
        held = [next_view(5), next_view(6)]  # kept: frames 7 and 8 get other arrays
        for seq in (7, 8):
            a = next_view(seq)
            assert all(a is not h for h in held), seq
        del held, a
        first = next_view(9)
        second = next_view(10)
        with warnings.catch_warnings():  # setting shape or dtype is deprecated from NumPy 2.5
            warnings.simplefilter("ignore", DeprecationWarning)
            first.shape = (48,)
            second.dtype = np.int16  # the same shape and strides, another dtype
        changed = [weakref.ref(first), weakref.ref(second)]
        del first, second
        for seq in (11, 12):
            next_view(seq)  # the slot's layout, checked there
            assert changed[seq - 11]() is None, seq  # the changed array was let go, not lent
        unaligned = next_view(13)
        unaligned.flags.aligned = False  # a flag set in place stays with that array too
        gone = weakref.ref(unaligned)
        del unaligned
        next_view(14)
        assert next_view(15).flags.aligned and gone() is None


def test_tensor_holds_the_lease(path):
    # Two slots: while a tensor made from frame 1 lives, its slot stays leased; frame 2 fills the
    # other, which an every-frame consumer has not read, so the producer (drop policy) has none.
    with cudaipc.Producer(path, memory="host", num_slots=2, policy="drop") as p, \
            cudaipc.Consumer(path, mode="every-frame", timeout=10) as c:
        p.wait_for_consumers()
        p.publish(pattern(1, (8,), np.int64))
        with c.next() as f:
            held = np.from_dlpack(f)
        assert p.publish(pattern(2, (8,), np.int64))
        assert not p.publish(pattern(3, (8,), np.int64))  # slot 1 leased by `held`, slot 2 unread
        np.testing.assert_array_equal(held, pattern(1, (8,), np.int64))
        del held
        gc.collect()
        with c.next() as f:
            assert f.seq == 2
        assert p.publish(pattern(4, (8,), np.int64))


def test_release_in_any_order_leaks_nothing(path):
    shape = (32, 24, 3)
    with cudaipc.Producer(path, memory="host", num_slots=4, policy="drop") as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        # Warm up, so one-time allocations (format, first mappings) are in the baseline.
        p.publish(pattern(1, shape, np.uint8))
        c.next().release()
        gc.collect()
        fd0, maps0 = fds(), mappings()
        kept = []
        for seq in range(2, 1002):
            assert p.publish(pattern(seq, shape, np.uint8))
            f = c.next()
            assert f.seq == seq
            way = seq % 5
            if way == 0:  # tensor freed after the frame
                t = np.from_dlpack(f)
                f.release()
                np.testing.assert_array_equal(t, pattern(seq, shape, np.uint8))
                del t
            elif way == 1:  # frame released while a versioned export lives, freed later
                kept.append((seq, np.from_dlpack(f)))
                f.release()
            elif way == 2:  # a capsule never consumed
                cap = f.__dlpack__(max_version=(1, 0))
                del cap
                f.release()
            elif way == 3:  # only garbage collection releases it
                del f
            else:
                with f:
                    np.testing.assert_array_equal(f.numpy(), pattern(f.seq, shape, np.uint8))
            if len(kept) > 2:  # views outlive their frames' release, intact
                old, view = kept.pop(0)
                np.testing.assert_array_equal(view, pattern(old, shape, np.uint8))
                del view
        kept.clear()
        gc.collect()
        assert live_exports() == 0, "exported capsules were never deleted"
        assert fds() == fd0
        assert mappings() == maps0
        # Every slot is free again: four publishes in a row are not dropped.
        _, dropped0, _ = p.counters()
        for seq in range(1002, 1006):
            assert p.publish(pattern(seq, shape, np.uint8))
        assert p.counters()[1] == dropped0


def test_consumers_and_producers_leave_no_fds(path):
    gc.collect()
    fd0 = fds()
    for _ in range(20):
        with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=5) as c:
            p.wait_for_consumers()
            p.publish(pattern(1, (64,), np.float32))
            with c.next() as f:
                np.testing.assert_array_equal(f.numpy(), pattern(1, (64,), np.float32))
    gc.collect()
    assert fds() == fd0


def test_frame_objects_made_again_carry_nothing_over(path):
    """The binding keeps the objects of frames that ended for the next frames: each comes back
    with the new frame's description, content, metas and state alone (no metas, weak references
    or release of the frame it was before), and a frame still referenced is never one of them."""
    shape = (4, 6)
    with cudaipc.Producer(path, memory="host", num_slots=4) as p:
        c = cudaipc.Consumer(path, timeout=10)
        p.wait_for_consumers()
        kept = []
        ended = []
        for seq in range(1, 41):
            p.publish(pattern(seq, shape, np.int32), meta={"seq": seq} if seq % 2 else None)
            f = c.next()
            assert f.seq == seq and not f.released
            np.testing.assert_array_equal(f.numpy(), pattern(seq, shape, np.int32))
            assert f.meta == ({"seq": seq} if seq % 2 else {})
            assert all(k is not f for k in kept)
            ref = weakref.ref(f, lambda _r, seq=seq: ended.append(seq))
            if seq % 10 == 0:
                kept.append(f)  # released but referenced: never made again meanwhile
            f.release()
            del f
            assert ref() is None or seq % 10 == 0
        assert ended == [s for s in range(1, 41) if s % 10], ended
        for k, seq in zip(kept, (10, 20, 30, 40)):
            assert k.seq == seq and k.released
        assert c.held == 0
        c.close()
