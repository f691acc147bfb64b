"""The binding's calls below the package's classes (cudaipc._native: producer, channel setup,
consumer, server, metas): every argument is checked in C and a bad one raises TypeError or
ValueError naming the call instead of reaching the core; and a host channel run end to end through
the raw calls alone (a producer's format, publishes and borrowed slots, a consumer's Events), each
frame's content checked against the pattern of its index."""

from __future__ import annotations

import time

import numpy as np
import pytest

import cudaipc
from cudaipc import _errors, _lib

from conftest import pattern

native = _lib.native
SHAPE = (6, 10)


class _Capsule:
    """A capsule as the object np.from_dlpack takes (it asks for __dlpack__)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kw):
        return self.capsule

    def __dlpack_device__(self):
        return (_lib.DL_CPU, 0)


def open_producer(path, slots=4):
    return native.producer_new(path, slots, _lib.MEMORY_HOST, _lib.BLOCK, 10**9, 0, 4096,
                               _lib.ROLE_FRAMES, f"producer on {path}")


@pytest.mark.parametrize("args, exc, words", [
    ((1, 4, 1, 0, 10**9, 0, 4096, 1, ""), TypeError, "path must be a str"),
    (("p\0x", 4, 1, 0, 10**9, 0, 4096, 1, ""), ValueError, "NUL"),
    (("p", 0, 1, 0, 10**9, 0, 4096, 1, ""), ValueError, "slots 0"),
    (("p", 33, 1, 0, 10**9, 0, 4096, 1, ""), ValueError, "slots 33"),
    (("p", 4, 3, 0, 10**9, 0, 4096, 1, ""), ValueError, "memory 3"),
    (("p", 4, 1, 2, 10**9, 0, 4096, 1, ""), ValueError, "on_full 2"),
    (("p", 4, 1, 0, -1, 0, 4096, 1, ""), ValueError, "block_timeout_ns"),
    (("p", 4, 1, 0, 1.5, 0, 4096, 1, ""), TypeError, "block_timeout_ns must be an int"),
    (("p", 4, 1, 0, 10**9, -1, 4096, 1, ""), ValueError, "cuda_device -1"),
    (("p", 4, 1, 0, 10**9, 0, 1 << 32, 1, ""), ValueError, "meta_size"),
    (("p", 4, 1, 0, 10**9, 0, 4096, 7, ""), ValueError, "role 7"),
    (("p", 4, 1, 0, 10**9, 0, 4096), TypeError, "takes 9 arguments"),
])
def test_producer_new_checks_its_arguments(args, exc, words):
    with pytest.raises(exc, match=words) as e:
        native.producer_new(*args)
    assert "producer_new" in str(e.value)


def test_handles_are_checked_before_the_core_sees_them():
    for call in (lambda: native.producer_begin(None, ""), lambda: native.producer_begin(0, ""),
                 lambda: native.producer_commit(0, None, None, None, 0, ""),
                 lambda: native.producer_free(0), lambda: native.consumer_free(None),
                 lambda: native.consumer_close(0), lambda: native.server_free(0),
                 lambda: native.frame_tensor(0), lambda: native.frame_written(0),
                 lambda: native.frame_metas(0), lambda: native.request_format(0),
                 lambda: native.server_pipelines(0), lambda: native.producer_describe(0),
                 lambda: native.slot_capsule(0, 0, 0), lambda: native.frame_capsule(0, 0, 0)):
        with pytest.raises(ValueError, match="NULL handle|handle is None"):
            call()
    with pytest.raises(ValueError, match="handle"):
        native.producer_begin(-5, "")
    with pytest.raises(TypeError, match="must be an int"):
        native.producer_interrupt("a producer")


def test_per_frame_calls_check_their_arguments(path):
    h = open_producer(path)
    try:
        with pytest.raises(TypeError, match="DLPack capsule"):
            native.producer_publish(h, np.zeros(4, np.uint8), 0, 0, None, None, None, 0)
        capsule = np.zeros(4, np.uint8).__dlpack__()
        with pytest.raises(ValueError, match="bytes of metas at NULL"):
            native.producer_publish(h, capsule, 0, 0, None, None, None, 8)
        with pytest.raises(ValueError, match="pts"):
            native.producer_publish(h, capsule, 0, 0, -1, None, None, 0)
        with pytest.raises(ValueError, match="flags"):
            native.producer_publish(h, capsule, 0, 1 << 32, None, None, None, 0)
        with pytest.raises(TypeError, match="takes 8 arguments"):
            native.producer_publish(h, capsule)
        with pytest.raises(TypeError, match="DLPack capsule"):
            native.capsule_describe(b"no", "")
        with pytest.raises(ValueError, match="rank 1 to 8"):
            native.producer_set_format(h, "other/tensors", 5, (), (), 0, [], "")
        with pytest.raises(ValueError, match="a dimension 0"):
            native.producer_set_format(h, "other/tensors", 5, (0,), (1,), 0, [], "")
        with pytest.raises(TypeError, match="a plane"):
            native.producer_set_format(h, "other/tensors", 5, (4,), (1,), 4, [1], "")
        with pytest.raises(ValueError, match="at most 4 planes"):
            native.producer_set_format(h, "other/tensors", 5, (4,), (1,), 4, [(0, 1)] * 5, "")
        with pytest.raises(ValueError, match="metas at NULL"):
            native.producer_commit(h, None, None, None, 4, "")
        with pytest.raises(ValueError, match="capacity"):
            native.consumer_held(h, -1, "")
    finally:
        native.producer_free(h)


def test_a_freed_producers_handle_never_reaches_the_core(path):
    """A handle read just before another thread's close is refused, not used after the free."""
    h = open_producer(path)
    native.producer_free(h)
    for call in (lambda: native.producer_begin(h, ""), lambda: native.producer_describe(h),
                 lambda: native.producer_publish(h, np.zeros(4, np.uint8).__dlpack__(), 0, 0,
                                                 None, None, None, 0),
                 lambda: native.producer_interrupt(h), lambda: native.producer_free(h)):
        with pytest.raises(_errors.ClosedError, match="the producer is closed"):
            call()


def test_status_failures_raise_the_packages_exceptions(path):
    h = open_producer(path)
    try:
        # No slot borrowed: the core's own refusal, as the package's exception with the context.
        with pytest.raises(_errors.Error, match="^committing here: "):
            native.producer_commit(h, None, None, None, 0, "committing here")
        native.producer_abort(h, None)  # no context: the status is ignored
    finally:
        native.producer_free(h)
    with pytest.raises(_errors.InvalidArgumentError, match="^ctx: ") as e:
        native.check(1, "ctx")  # CUDAIPC_ERR_INVALID_ARGUMENT
    assert e.value.code == 1
    assert native.check(0, "never raised") is None


def test_setup_calls_check_their_arguments(tmp_path):
    with pytest.raises(ValueError, match="mode 2"):
        native.consumer_new("p", 2, True, -1, "")
    with pytest.raises(ValueError, match="cuda_device -2"):
        native.consumer_new("p", 0, True, -2, "")
    with pytest.raises(TypeError, match="paths must be a list"):
        native.server_new("p", None, -1, 8, 4096, 16, 0o600, -1, "")
    with pytest.raises(TypeError, match="a path must be a str"):
        native.server_new([b"p"], None, -1, 8, 4096, 16, 0o600, -1, "")
    with pytest.raises(ValueError, match="queue_depth 65"):
        native.server_new(["p"], None, -1, 8, 4096, 65, 0o600, -1, "")
    with pytest.raises(ValueError, match="socket_mode"):
        native.server_new(["p"], None, -1, 8, 4096, 16, 0o1000, -1, "")
    with pytest.raises(TypeError, match="directory must be a str"):
        native.server_new([], 3, -1, 8, 4096, 16, 0o600, -1, "")
    with pytest.raises(_errors.Error, match=f"^serving {tmp_path}/none"):
        native.server_new([], str(tmp_path / "none"), -1, 8, 4096, 16, 0o600, -1,
                          f"serving {tmp_path}/none")


def test_metas_calls_check_their_arguments():
    w = native.MetasWriter()
    with pytest.raises(ValueError, match="bytes at NULL"):
        w.begin(None, 16)
    buf = np.zeros(256, np.uint8)
    w.begin(buf.ctypes.data, buf.size)
    with pytest.raises(ValueError, match="kind 0"):
        w.raw(0, b"x", b"body")
    with pytest.raises(TypeError, match="bytes-like"):
        w.raw(1, "a str", b"body")
    with pytest.raises(TypeError, match="an .id, dtype, dims, data. tuple"):
        w.tensors(b"t", [(b"id", b"uint8")])
    with pytest.raises(ValueError, match="at most 16"):
        w.tensors(b"t", [(b"id", b"uint8", (1,) * 17, b"\0")])
    with pytest.raises(ValueError, match="value"):
        w.custom_int64(b"k", 1 << 63)
    with pytest.raises(TypeError, match="AnalyticsArgs"):
        w.analytics(b"a", native.DetectionsArgs())
    with pytest.raises(ValueError, match="bytes at NULL"):
        native.metas_decode(None, 8, None, 0)
    with pytest.raises(TypeError, match="DetectionsArgs"):
        native.metas_detections_area(native.AnalyticsArgs())
    d = native.DetectionsArgs()
    d.capacity = 64
    with pytest.raises(ValueError, match="at NULL"):
        native.metas_detections_area(d)
    with pytest.raises(ValueError, match="capacity 0"):
        native.ReplyBatch(0)
    batch = native.ReplyBatch(2)
    with pytest.raises(ValueError, match="i 2"):
        batch.set_metas(2, 0, 0)
    with pytest.raises(ValueError, match="count 3"):
        batch.send(1, 3, 0, True)
    with pytest.raises(ValueError, match="Events.frame"):
        native.Events().frame(None)


def test_meta_writer_round_trip():
    """Records written through MetasWriter read back through the decode, field for field."""
    buf = np.zeros(4096, np.uint8)
    w = native.MetasWriter()
    w.begin(buf.ctypes.data, buf.size)
    w.custom_begin(b"cudaipc-meta")
    w.custom_int64(b"i", -7)
    w.custom_uint64(b"u", (1 << 64) - 1)
    w.custom_double(b"d", 2.5)
    w.custom_boolean(b"b", True)
    w.custom_string(b"s", "näme".encode())
    w.custom_fraction(b"f", 30000, 1001)
    w.custom_end()
    w.timestamp(b"ts", b"timestamp/x-test", 123, None)
    size = w.finish()
    assert 0 < size <= buf.size
    from cudaipc import _metas_io
    d = _metas_io.decode_area(buf[:size])
    assert d.bad == 0 and d.unknown == 0
    custom = [r for r in d.records if r.kind == 4][0]
    assert dict(custom.fields)["i"] == -7 and dict(custom.fields)["u"] == (1 << 64) - 1
    assert dict(custom.fields)["d"] == 2.5 and dict(custom.fields)["s"] == "näme"


def test_host_round_trip_through_the_raw_calls(path):
    """Publishes (copies of NumPy capsules) and borrowed slots alternate on one host channel; a
    consumer made with consumer_new reads every frame through consumer_next and an Events buffer,
    each frame's bytes the pattern of its index, its times as published."""
    h = open_producer(path)
    c = native.consumer_new(path, _lib.EVERY_FRAME, False, -1, f"consumer of {path}")
    device, stream, meta_size = native.producer_describe(h)
    assert (device, stream, meta_size) == (-1, None, 4096)
    nbytes = int(np.prod(SHAPE)) * 2
    native.producer_set_format(h, f"other/tensors,num_tensors=1,types=int16,dimensions="
                               f"{SHAPE[1]}:{SHAPE[0]},format=static", 2, SHAPE,
                               (SHAPE[1] * 2, 2), nbytes, [], "format")
    for _ in range(200):
        if native.producer_counters(h, "counters")[2] == 1:
            break
        time.sleep(0.01)
    assert native.producer_counters(h, "counters")[2] == 1
    events = native.Events()
    frames = 12
    try:
        for seq in range(1, frames + 1):
            want = pattern(seq, SHAPE, np.int16)
            if seq % 2:
                r = native.producer_publish(h, want.__dlpack__(), 0, _lib.DLPACK_NO_SYNC,
                                            1000 * seq, 10, None, 0)
                assert r == _lib.PUBLISHED
            else:
                address, capacity, result = native.producer_begin(h, "begin")
                assert result == _lib.PUBLISHED and capacity >= nbytes
                capsule = native.slot_capsule(h, 0, _lib.DLPACK_VERSIONED)
                slot = np.from_dlpack(_Capsule(capsule))
                assert slot.ctypes.data == address and slot.shape == SHAPE
                slot[...] = want
                del slot
                native.producer_commit(h, 1000 * seq, 10, None, 0, "commit")
            got = None
            for _ in range(50):
                got = native.consumer_next(c, 10**9, events, None, -1, -2)
                if not isinstance(got, int):
                    break
                native.check(got, "reading")
                if events.type == _lib.EVENT_FORMAT:
                    caps, tensor, generation = events.format
                    assert tensor == (2, SHAPE, (SHAPE[1] * 2, 2)) and caps.startswith("other/")
                    assert native.consumer_memory(c, "memory") == _lib.MEMORY_HOST
                    assert native.consumer_cuda_stream(c) is None
                elif events.type == _lib.EVENT_FRAME:
                    tensor_id, frame_h, dev = events.view
                    assert dev == -1 and native.frame_tensor(frame_h)[1] == SHAPE
                    got = events.frame(None)
                    break
            assert isinstance(got, cudaipc.Frame), got
            with got as f:
                assert f.seq == seq and f.pts == 1000 * seq and f.duration == 10
                assert native.frame_written(f._h)
                assert native.frame_cuda_stream(f._h) is None
                np.testing.assert_array_equal(np.from_dlpack(f).view(np.int16).reshape(SHAPE),
                                              want, err_msg=f"frame {seq}")
        assert native.producer_counters(h, "counters")[:2] == (frames, 0)
        count, seqs = native.consumer_held(c, 4, "held")
        assert (count, seqs) == (0, [])
    finally:
        native.consumer_close(c)
        native.consumer_free(c)
        native.producer_end_of_stream(h, None)
        native.producer_free(h)


def test_a_frame_read_but_not_handed_out_is_released(path):
    """A frame left in an Events buffer (read, never claimed with frame(): an exception came
    between) holds no lease once the buffer reads again or goes: each frame's content checked."""
    h = open_producer(path)
    c = native.consumer_new(path, _lib.EVERY_FRAME, False, -1, f"consumer of {path}")
    nbytes = int(np.prod(SHAPE)) * 2
    native.producer_set_format(h, f"other/tensors,num_tensors=1,types=int16,dimensions="
                               f"{SHAPE[1]}:{SHAPE[0]},format=static", 2, SHAPE,
                               (SHAPE[1] * 2, 2), nbytes, [], "format")

    def read_frame(events):
        for _ in range(50):
            got = native.consumer_next(c, 10**9, events, None, -1, -2)
            native.check(got, "reading")
            if events.type == _lib.EVENT_FRAME:
                return events.view[1]
        raise AssertionError("no frame")

    try:
        events = native.Events()
        for seq in range(1, 7):
            want = pattern(seq, SHAPE, np.int16)
            assert native.producer_publish(h, want.__dlpack__(), 0, _lib.DLPACK_NO_SYNC,
                                           1000 * seq, 10, None, 0) == _lib.PUBLISHED
            frame_h = read_frame(events)
            assert native.frame_tensor(frame_h)[1] == SHAPE
            if seq in (2, 4):
                events = native.Events()  # the old buffer goes with its frame unclaimed
            # Unclaimed, then the next read: at most the one in the buffer is held.
            assert native.consumer_held(c, 4, "held")[0] <= 1, seq
        got = events.frame(None)
        with got as f:
            np.testing.assert_array_equal(np.from_dlpack(f).view(np.int16).reshape(SHAPE),
                                          pattern(6, SHAPE, np.int16))
        del events
        assert native.consumer_held(c, 4, "held") == (0, [])
    finally:
        native.consumer_close(c)
        native.consumer_free(c)
        native.producer_end_of_stream(h, None)
        native.producer_free(h)
