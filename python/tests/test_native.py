"""The compiled binding (cudaipc._native, issue #39) on host channels, against a consumer of the
reply channel: frames and requests are its objects; reply() answers NumPy detections and a dict of
plain fields in C, and hands every other form to the Python path, each reply carrying exactly what
was given for its own frame (boxes, scores, labels by name, rotation, fields); a released frame
keeps its description and refuses exports; a request is answered once."""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
import pytest

import cudaipc
from cudaipc import _lib


def serve(tmp_path):
    path = str(tmp_path / "m")
    req = cudaipc.Producer(path, memory="host", num_slots=16, role="requests")
    srv = cudaipc.Server(path)
    req.wait_for_consumers(1, timeout=10)
    replies = cudaipc.Consumer(path + ".reply", timeout=10)
    return req, srv, replies


def request(req, srv, i):
    req.publish(np.full(16, i, np.uint8), pts=1000 + i)
    r = srv.next(5)
    assert r is not None
    assert int(r.numpy()[0]) == i and r.frame.pts == 1000 + i
    return r


def test_frames_and_requests_are_the_bindings(tmp_path):
    req, srv, replies = serve(tmp_path)
    with req, srv, replies:
        r = request(req, srv, 3)
        assert isinstance(r, _lib.native.Request) and isinstance(r.frame, _lib.native.Frame)
        assert isinstance(r.frame, cudaipc.Frame) and isinstance(r, cudaipc.Request)
        assert r.__dlpack_device__() == (1, 0)
        assert np.from_dlpack(r)[0] == 3
        seq = r.frame.seq
        assert r.reply()
        # Released: the description stays, the exports and a second answer are refused.
        assert r.frame.released and r.frame.seq == seq and r.frame.pts == 1003
        with pytest.raises(cudaipc.ClosedError, match="released"):
            r.frame.__dlpack__()
        with pytest.raises(cudaipc.ClosedError):
            r.reply()
        with replies.next(5) as f:
            assert f.metas == []


@pytest.mark.parametrize("labels_dtype", [np.int64, np.int32])
def test_numpy_detections_and_fields_cross_for_each_frame(tmp_path, labels_dtype):
    req, srv, replies = serve(tmp_path)
    names = ["person", "car", "dog"]
    with req, srv, replies:
        for i in range(12):
            r = request(req, srv, i)
            n = i % 4  # 0 to 3 boxes
            boxes = np.array([[i, 2 * k, i + 10 + k, 30 + k] for k in range(n)],
                             np.float32).reshape(n, 4)
            det = {"boxes": boxes, "scores": np.linspace(0.1, 0.9, n).astype(np.float32),
                   "labels": np.array([(i + k) % 3 for k in range(n)], labels_dtype)}
            if i % 2:
                det["rotation"] = np.full(n, 0.25, np.float32)
            meta = None if i % 3 == 0 else {"frame": i, "big": 2 ** 63 + i, "ok": bool(i % 2),
                                            "t": i / 4, "who": f"cam{i}", "raw": bytes([i, 0])}
            assert r.reply(detections=det, meta=meta, label_names=list(names))
            with replies.next(5) as f:
                d = f.detections
                np.testing.assert_array_equal(d["boxes"].reshape(-1, 4), boxes)
                np.testing.assert_allclose(d["scores"], det["scores"], rtol=1e-6)
                assert d["labels"] == [names[(i + k) % 3] for k in range(n)]
                if i % 2 and n:
                    np.testing.assert_allclose(d["rotation"], 0.25)
                if meta is None:
                    assert f.meta == {}
                else:
                    assert f.meta == meta


def test_other_forms_take_the_python_path_with_the_same_result(tmp_path):
    """A Fraction and a list in meta=, labels past label_names (named in decimal), labels as
    strings, classifications: the Python path answers them, each reply its own frame's."""
    req, srv, replies = serve(tmp_path)
    with req, srv, replies:
        r = request(req, srv, 1)
        assert r.reply(meta={"rate": Fraction(30000, 1001), "xs": [1, 2, 3]})
        with replies.next(5) as f:
            assert f.meta == {"rate": Fraction(30000, 1001), "xs": [1, 2, 3]}
        r = request(req, srv, 2)
        assert r.reply(detections={"boxes": np.array([[1, 2, 3, 4]], np.float32),
                                   "labels": np.array([5])}, label_names=["a"])
        with replies.next(5) as f:
            assert f.detections["labels"] == ["5"]
        r = request(req, srv, 3)
        assert r.reply(detections={"boxes": np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float64),
                                   "labels": ["cat", "dog"]})
        with replies.next(5) as f:
            np.testing.assert_array_equal(f.detections["boxes"], [[1, 2, 3, 4], [5, 6, 7, 8]])
            assert f.detections["labels"] == ["cat", "dog"]
        r = request(req, srv, 4)
        with pytest.raises(cudaipc.InvalidArgumentError):
            r.reply(meta={"bad": object()})
        assert r.frame.released  # refused results still release the frame


class _Boxes(np.ndarray):
    """A NumPy subclass: read through the buffer protocol, not NumPy's own head."""


def test_numpy_results_in_every_layout_reply_their_own_values(tmp_path):
    """reply() reads aligned C-contiguous arrays of a dtype it has met from NumPy's C head (once
    it agreed with NumPy's own buffer); arrays in other layouts (strided, Fortran order,
    byte-swapped, unaligned, a subclass) are read through the buffer protocol or the Python path,
    as are dtypes it has not met: each reply carries exactly its own frame's boxes, scores and
    labels, and the arrays read in place are the ones expected."""
    names = ["a", "b", "c", "d"]

    def plain(i):
        return np.array([[i, i + 1, i + 2, i + 3]], np.float32)

    def empty(i):
        return np.zeros((0, 4), np.float32)

    def strided(i):
        return (np.arange(32, dtype=np.float32) + i).reshape(4, 8)[:, ::2]

    def fortran(i):
        return np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4) + i)

    def swapped(i):
        return (np.arange(8, dtype=np.float32) + i).reshape(2, 4).astype(">f4")

    def unaligned(i):
        raw = np.zeros(33, np.uint8)
        a = np.frombuffer(raw.data, np.float32, count=8, offset=1).reshape(2, 4)
        assert not a.flags.aligned
        raw[1:] = (np.arange(8, dtype=np.float32) + i).view(np.uint8)
        return a

    def subclass(i):
        return (np.arange(8, dtype=np.float32) + i).reshape(2, 4).view(_Boxes)

    def reshaped(i):
        a = np.arange(12, dtype=np.float32) + i
        a.resize((3, 4))  # its shape changed in place: the head's dimensions and flags with it
        return a

    def sliced(i):
        return (np.arange(24, dtype=np.float32) + i).reshape(6, 4)[2:5]

    def readonly(i):
        a = np.arange(8, dtype=np.float32).reshape(2, 4) + i
        a.flags.writeable = False
        return a

    def wide(i):
        return np.arange(8, dtype=np.float64).reshape(2, 4) + i

    # Arrays read in place per reply: the boxes first, then scores and labels where the boxes are
    # a float32 the C path writes (others leave it at the boxes: the Python path answers).
    in_place = {plain: 3, empty: 3, strided: 0, fortran: 0, swapped: 0, unaligned: 2, subclass: 2,
                reshaped: 3, sliced: 3, readonly: 3, wide: 1}
    forms = [plain, empty, strided, fortran, swapped, unaligned, subclass, reshaped, sliced,
             readonly, wide]
    req, srv, replies = serve(tmp_path)
    with req, srv, replies:
        # The first three replies meet float64, float32, int64 and int32 (read through their
        # buffers then, whatever replies this process made before); every later array of those
        # dtypes in place where its layout allows.
        warm = {-3: wide, -2: plain, -1: plain}
        for i in range(-3, 2 * len(forms)):
            boxes = warm[i](i) if i < 0 else forms[i % len(forms)](i)
            n = boxes.shape[0]
            labels = (np.arange(n) + i) % len(names)
            det = {"boxes": boxes, "scores": (np.arange(n, dtype=np.float32) + i) / 100,
                   "labels": labels.astype(np.int32 if i % 2 else np.int64)}
            before = _lib.native.numpy_read_in_place()
            r = request(req, srv, i % 256)
            assert r.reply(detections=det, meta={"i": i}, label_names=names)
            if i >= 0:
                form = forms[i % len(forms)]
                assert _lib.native.numpy_read_in_place() - before == in_place[form], form.__name__
            with replies.next(5) as f:
                d = f.detections
                np.testing.assert_array_equal(np.asarray(d.get("boxes", [])).reshape(-1, 4),
                                              np.asarray(boxes, np.float32))
                np.testing.assert_allclose(d.get("scores", []), det["scores"], rtol=1e-6)
                assert d.get("labels", []) == [names[int(k)] for k in labels]
                assert f.meta == {"i": i}


@pytest.mark.skipif(sys.version_info < (3, 12),
                    reason="a Python class exports a buffer (__buffer__) from CPython 3.12 on")
def test_a_result_whose_export_empties_the_dict_leaves_the_reply_its_own_values(tmp_path):
    """reply() holds every result it read from the dict: scores whose buffer export takes the
    boxes out of the dict (and memory of their size is allocated again meanwhile) leave the
    reply the boxes it was given, each frame's own."""
    det: dict = {}
    refill: list = []

    class Scores:
        def __init__(self, values):
            self.values = values

        def __buffer__(self, flags):
            det.pop("boxes")  # the dict held the boxes' only reference
            refill.append([np.full((3, 4), -1, np.float32) for _ in range(16)])
            return memoryview(self.values)

        def __release_buffer__(self, view):
            view.release()

    req, srv, replies = serve(tmp_path)
    with req, srv, replies:
        for i in range(6):
            det.clear()
            det["boxes"] = np.arange(12, dtype=np.float32).reshape(3, 4) + i
            det["scores"] = Scores(np.full(3, i / 10, np.float32))
            r = request(req, srv, i)
            assert r.reply(detections=det)
            assert "boxes" not in det
            with replies.next(5) as f:
                np.testing.assert_array_equal(
                    f.detections["boxes"].reshape(-1, 4),
                    np.arange(12, dtype=np.float32).reshape(3, 4) + i)
                np.testing.assert_allclose(f.detections["scores"], i / 10, rtol=1e-6)


def test_a_reply_too_big_for_the_area_says_so_and_releases(tmp_path):
    path = str(tmp_path / "m")
    with cudaipc.Producer(path, memory="host", num_slots=8, role="requests") as req, \
            cudaipc.Server(path, reply_meta_size=256) as srv:
        req.wait_for_consumers(1, timeout=10)
        r = request(req, srv, 7)
        boxes = np.zeros((64, 4), np.float32)
        with pytest.raises(cudaipc.Error, match="256"):
            r.reply(detections={"boxes": boxes})
        assert r.frame.released


def test_the_package_has_one_binding():
    """Issue #39: the compiled binding is the package's only way into C. No module of the package
    imports ctypes (the bench's ctypes row loads the binding's exported C API itself), and the
    package's modules load no other shared object than the binding."""
    import ast
    import os

    root = os.path.dirname(cudaipc.__file__)
    offenders = []
    for name in sorted(os.listdir(root)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(root, name)) as f:
            tree = ast.parse(f.read(), name)
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{name}:{node.lineno} imports {n}" for n in names
                          if n.split(".")[0] in ("ctypes", "cffi")]
    assert not offenders, offenders
    assert _lib.native.__name__ == "cudaipc._native"


_RECONFIGURED = r'''
import gc, os, sys
import numpy as np
import cudaipc
from cudaipc import _consumer, _cuda, _errors, _lib, _server

def configure(frame_class):
    _lib.native.configure(frame_class, _server.Request, _errors.from_code, _cuda.stream_handle,
                          cudaipc.ClosedError, _errors.EndOfStream, _consumer._numpy_slot_view)

def read(path, p, c, seq, frame_class):
    p.publish(np.full(16, seq, np.uint8), meta={"seq": seq})
    f = c.next()
    assert type(f) is frame_class, type(f)
    assert f.seq == seq and int(f.numpy()[0]) == seq and f.meta == {"seq": seq}, f
    f.release()

path = sys.argv[1]
with cudaipc.Producer(path, memory="host") as p, cudaipc.Consumer(path, timeout=10) as c:
    p.wait_for_consumers()
    seq = 0
    for kind in ("plain", "with a dict", "with __del__", "plain"):
        body = {"__slots__": ()} if kind != "with a dict" else {}
        if kind == "with __del__":
            body["__del__"] = lambda self: None
        cls = type("Frame", (cudaipc.Frame,), body)
        configure(cls)
        for _ in range(12):  # more than the spares kept, each class's own made again
            seq += 1
            read(path, p, c, seq, cls)
        del cls
    configure(cudaipc.Frame)
    gc.collect()
    for _ in range(12):
        seq += 1
        read(path, p, c, seq, cudaipc.Frame)
print("ok")
'''


def test_frames_of_each_class_configured_and_a_clean_exit(tmp_path):
    """The binding keeps ended frame objects for the next frames: configured with other Frame
    classes in turn (plain ones, one with an instance dict, one with __del__), each frame is of
    the class configured with its own content, and the interpreter ends cleanly after the classes
    are gone."""
    import subprocess

    r = subprocess.run([sys.executable, "-c", _RECONFIGURED, str(tmp_path / "ch")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
