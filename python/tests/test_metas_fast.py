"""publish(detections=...)'s compiled writer (cudaipc_metas_detections_area): for the input it
takes (float32 boxes, integer labels of a list of names, or none) it writes the same bytes as
the NumPy encoder, for any number of boxes, with and without scores and rotations; other input
goes the NumPy way."""

from __future__ import annotations

import numpy as np
import pytest

from cudaipc import _metas_analytics_write as W
from cudaipc import _metas_detections as D
from cudaipc import metas
from cudaipc._metas_io import frame_detections

NAMES = ["person", "bicycle", "car", "ball", "ü-label"]


def both(det, names=NAMES):
    d = D.detections_input(det)
    a, b = np.zeros(1 << 16, np.uint8), np.zeros(1 << 16, np.uint8)
    fast = W._c_detections_area(a, a.shape[0], d, names, W._Scratch())
    orig = W._c_detections_area
    W._c_detections_area = lambda *args: None
    try:
        slow = W.detections_area(b, b.shape[0], d, names, W._Scratch())
    finally:
        W._c_detections_area = orig
    return fast, a, slow, b


@pytest.mark.parametrize("n", [0, 1, 7, 100, 500])
@pytest.mark.parametrize("scores", [True, False])
@pytest.mark.parametrize("rotation", [True, False])
def test_same_bytes_as_numpy(n, scores, rotation):
    rng = np.random.default_rng(n * 4 + scores * 2 + rotation)
    det = {"boxes": (rng.random((n, 4)) * 700 - 30).astype(np.float32),
           "labels": rng.integers(0, len(NAMES), n)}
    if scores:
        det["scores"] = rng.random(n).astype(np.float32)
    if rotation:
        det["rotation"] = rng.random(n).astype(np.float32)
    fast, a, slow, b = both(det)
    assert fast is not None, "the compiled writer did not take this input"
    assert fast == slow and bytes(a[:fast]) == bytes(b[:slow])
    # and it reads back as what was given, box by box
    got = frame_detections(metas.decode(bytes(a[:fast])))
    boxes = det["boxes"]
    want = np.rint(np.stack([boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0],
                             boxes[:, 3] - boxes[:, 1]], axis=1)).astype(np.int32)
    np.testing.assert_array_equal(got["xywh"].reshape(-1, 4), want.reshape(-1, 4))
    assert got["labels"] == [NAMES[i] for i in det["labels"]]
    if scores:
        np.testing.assert_array_equal(got["scores"], det["scores"])


def test_other_input_goes_the_numpy_way():
    det = {"boxes": np.ones((3, 4), np.float64), "labels": [0, 1, 2]}
    fast, _, slow, _ = both(det)
    assert fast is None and slow > 0
    det = {"boxes": np.ones((3, 4), np.float32), "labels": ["a", "b", "c"]}
    fast, _, slow, _ = both(det)
    assert fast is None and slow > 0


def test_refusals_name_the_cause():
    d = D.detections_input({"boxes": np.ones((2, 4), np.float32), "labels": np.array([0, 9])})
    buf = np.zeros(4096, np.uint8)
    with pytest.raises(Exception, match="label 9 of box 1 has no name"):
        W._c_detections_area(buf, buf.shape[0], d, NAMES, W._Scratch())
    d = D.detections_input({"boxes": np.ones((100, 4), np.float32),
                            "labels": np.zeros(100, np.int64)})
    with pytest.raises(Exception, match=r"need \d+ bytes, more than the channel's meta area of 512"):
        W._c_detections_area(buf, 512, d, NAMES, W._Scratch())


@pytest.mark.parametrize("n", [0, 1, 100])
@pytest.mark.parametrize("names", [NAMES, None])
def test_detections_with_a_dict_same_area_as_the_record_path(n, names):
    """detections= with meta= (a model answering cudaipcfilter): the detections' area with the
    custom record appended is byte for byte the area the records path lays out."""
    from cudaipc._metas_io import CUSTOM_NAME, MetaWriter
    from cudaipc._metas import KIND_CUSTOM, BodyRecord, custom_body

    rng = np.random.default_rng(n)
    det = {"boxes": (rng.random((n, 4)) * 500).astype(np.float32),
           "labels": rng.integers(0, len(NAMES), n), "scores": rng.random(n).astype(np.float32)}
    meta = {"pts": 1234567 + n, "model": "test", "ok": True}
    w = MetaWriter(1 << 16)
    a = np.zeros(1 << 16, np.uint8)
    size = w.encode(a, detections=det, meta=meta, label_names=names)
    b = np.zeros(1 << 16, np.uint8)
    records = [W.AnalyticsEncoder(D.detections_input(det), None, None, None, names, W._Scratch()),
               BodyRecord(KIND_CUSTOM, CUSTOM_NAME, custom_body(meta))]
    want = w._records(b, records)
    assert size == want and bytes(a[:size]) == bytes(b[:want])
    decoded = metas.decode(bytes(a[:size]))
    assert frame_detections(decoded)["labels"] == (
        [NAMES[i] for i in det["labels"]] if names else [str(i) for i in det["labels"]]) or n == 0


def test_detections_with_a_dict_too_big_for_the_area_says_so():
    from cudaipc._errors import InvalidArgumentError
    from cudaipc._metas_io import MetaWriter

    det = {"boxes": np.ones((100, 4), np.float32), "labels": np.zeros(100, np.int64)}
    w = MetaWriter(1 << 16)
    size = w.encode(np.zeros(1 << 16, np.uint8), detections=det, label_names=NAMES)
    w2 = MetaWriter(size + 8)  # room for the detections, not for the dict after them
    with pytest.raises(InvalidArgumentError, match="meta area"):
        w2.encode(np.zeros(size + 8, np.uint8), detections=det, label_names=NAMES,
                  meta={"a long field name": "x" * 64})
