"""Every way a frame's data leaves the package gives its lease back, and a consumer at the
producer's lease limit (num_slots - 1 frames held) says so. These are the usage patterns of
torch, cupy and NumPy, replayed on host frames: capsules versioned and legacy, consumed (renamed
"used_...", the deleter called later, as cupy's DLPack memory does) or dropped unconsumed, several
from one frame, freed before or after the frame, and tensors caught in reference cycles."""

from __future__ import annotations

import ctypes
import gc
import threading

import numpy as np
import pytest

import cudaipc
from cudaipc import _consumer
from conftest import live_exports, pattern
from dlpack_importer import CPU, Imported

SHAPE = (6, 10, 4)


def check(arr, seq):
    np.testing.assert_array_equal(arr, pattern(seq, SHAPE, np.uint8), err_msg=f"frame {seq}")


def imported(capsule) -> Imported:
    # An importer in the way cupy's DLPackMemory is one: it renames the capsule "used_..." and
    # calls the deleter itself when it lets go (Imported.close).
    return Imported(capsule)


def view_of(imp: Imported) -> np.ndarray:
    buf = (ctypes.c_uint8 * int(np.prod(imp.shape))).from_address(imp.data)
    return np.frombuffer(buf, dtype=np.uint8).reshape(imp.shape)


def numpy_versioned(f):
    a = np.from_dlpack(f)  # NumPy 2 asks for max_version (1, 0)
    check(a, f.seq)
    return [a]


def legacy_consumed_freed_after_release(f):
    imp = imported(f.__dlpack__())
    assert imp.device == (CPU, 0)
    f.release()
    check(view_of(imp), f.seq)
    imp.close()
    return []


def versioned_consumed_freed_by_gc(f):
    imp = imported(f.__dlpack__(max_version=(1, 0), stream=None, dl_device=(1, 0), copy=False))
    check(view_of(imp), f.seq)
    return [imp]  # dropped without close(): its __del__ calls the deleter


def unconsumed_capsules(f):
    caps = [f.__dlpack__(), f.__dlpack__(max_version=(1, 0)), f.__dlpack__(max_version=(0, 8))]
    del caps
    return []


def two_importers_one_frame(f):
    a = np.from_dlpack(f)
    imp = imported(f.__dlpack__(max_version=(1, 0)))
    check(view_of(imp), f.seq)
    f.release()
    imp.close()
    check(a, f.seq)
    return [a]


def numpy_view_and_dlpack(f):
    # numpy() is the slot's view (no lease of its own, valid until the release); the DLPack
    # export beside it holds the frame's.
    a, b = f.numpy(), f.numpy()
    check(a, f.seq)
    assert np.shares_memory(a, b)
    return [np.from_dlpack(f)]


def in_a_reference_cycle(f):
    box: list = [np.from_dlpack(f)]
    box.append(box)  # only a garbage collection frees this
    return []


in_a_reference_cycle.cyclic = True  # type: ignore[attr-defined]


PATTERNS = [numpy_versioned, legacy_consumed_freed_after_release, versioned_consumed_freed_by_gc,
            unconsumed_capsules, two_importers_one_frame, numpy_view_and_dlpack,
            in_a_reference_cycle]


@pytest.mark.parametrize("slots", [2, 3, 4])
@pytest.mark.parametrize("use", PATTERNS, ids=lambda u: u.__name__)
def test_every_export_gives_the_lease_back(path, use, slots):
    # Automatic collection off: a lease held by cyclic garbage must come back anyway, because
    # next() collects when it would otherwise wait on frames this consumer holds.
    n = 3 * slots
    enabled = gc.isenabled()
    gc.disable()
    try:
        with cudaipc.Producer(path, memory="host", num_slots=slots, block_timeout=10) as p, \
                cudaipc.Consumer(path, timeout=10) as c:
            p.wait_for_consumers()
            got = []
            for seq in range(1, n + 1):
                p.publish(pattern(seq, SHAPE, np.uint8))
                f = c.next()
                assert f.seq == seq
                kept = use(f)
                f.release()
                k = None
                for k in kept:  # still readable after the frame's release
                    check(k if isinstance(k, np.ndarray) else view_of(k), seq)
                del kept, f, k
                if not getattr(use, "cyclic", False):
                    assert c.held == 0, f"frame {seq}: {c.held} lease(s) left"
                got.append(seq)
            assert got == list(range(1, n + 1))
            gc.collect()
            assert c.held == 0
    finally:
        if enabled:
            gc.enable()
    gc.collect()
    assert live_exports() == 0, "exported capsules were never deleted"


def test_held_counts_frames_until_their_tensors_die(path):
    with cudaipc.Producer(path, memory="host", num_slots=4) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        for seq in (1, 2):
            p.publish(pattern(seq, SHAPE, np.uint8))
        f1, f2 = c.next(), c.next()
        assert c.held == 2
        a = np.from_dlpack(f1)
        f1.release()
        assert c.held == 2  # `a` still holds frame 1
        f2.release()
        assert c.held == 1
        check(a, 1)
        del a
        assert c.held == 0


def test_next_at_the_lease_limit_names_the_held_frames(path):
    # Two slots: a consumer may hold one frame. Holding it, next() cannot lease frame 2, and the
    # timeout says why instead of only that nothing came.
    with cudaipc.Producer(path, memory="host", num_slots=2) as p, \
            cudaipc.Consumer(path, timeout=10) as c:
        p.wait_for_consumers()
        p.publish(pattern(1, SHAPE, np.uint8))
        p.publish(pattern(2, SHAPE, np.uint8))
        f = c.next()
        a = np.from_dlpack(f)
        f.release()
        with pytest.raises(cudaipc.TimeoutError, match=r"still holds 1 frame\(s\) \(seq 1\).*"
                                                       r"num_slots - 1"):
            c.next(timeout=0.5)
        check(a, 1)
        del a
        with c.next() as f:
            assert f.seq == 2
            check(f.numpy(), 2)


def test_waiting_for_ever_at_the_lease_limit_warns(path, monkeypatch):
    monkeypatch.setattr(_consumer, "_HELD_WARNING_NS", 300_000_000)
    with cudaipc.Producer(path, memory="host", num_slots=2) as p, \
            cudaipc.Consumer(path) as c:
        p.wait_for_consumers()
        p.publish(pattern(1, SHAPE, np.uint8))
        p.publish(pattern(2, SHAPE, np.uint8))
        f = c.next()
        # The test's own way out of a wait that nothing else would end.
        stop = threading.Timer(3.0, c.interrupt)
        stop.start()
        try:
            with pytest.warns(RuntimeWarning, match=r"still holds 1 frame\(s\) \(seq 1\)"), \
                    pytest.raises(cudaipc.InterruptedError):
                c.next()
        finally:
            stop.cancel()
            stop.join()  # a thread exiting later would unsettle other tests' mapping counts
        f.release()
        with c.next() as f2:
            assert f2.seq == 2


def test_timeout_without_held_frames_says_only_that(path):
    with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path) as c:
        p.wait_for_consumers()
        with pytest.raises(cudaipc.TimeoutError) as e:
            c.next(timeout=0.3)
        assert "holds" not in str(e.value)
