"""publish(detections=...)'s one-call writer (cudaipc_metas_detections_area): for the input it
takes (float32 boxes, with labels or none) it writes the same bytes as the core's general
analytics writer (the path any other input, or detections with relations, takes), for any number
of boxes, with and without scores and rotations."""

from __future__ import annotations

import numpy as np
import pytest

from cudaipc import metas
from cudaipc._metas_io import frame_detections

NAMES = ["person", "bicycle", "car", "ball", "ü-label"]


def both(det, names=NAMES):
    """The area of the one-call path, and of the general one (an empty relations list sends the
    same detections through cudaipc_metas_add_analytics)."""
    return (metas.encode(detections=det, label_names=names),
            metas.encode(detections=det, label_names=names, relations=[]))


@pytest.mark.parametrize("n", [0, 1, 7, 100, 500])
@pytest.mark.parametrize("scores", [True, False])
@pytest.mark.parametrize("rotation", [True, False])
def test_same_bytes_as_the_general_writer(n, scores, rotation):
    rng = np.random.default_rng(n * 4 + scores * 2 + rotation)
    det = {"boxes": (rng.random((n, 4)) * 700 - 30).astype(np.float32),
           "labels": rng.integers(0, len(NAMES), n)}
    if scores:
        det["scores"] = rng.random(n).astype(np.float32)
    if rotation:
        det["rotation"] = rng.random(n).astype(np.float32)
    fast, general = both(det)
    assert fast == general
    # and it reads back as what was given, box by box
    got = frame_detections(metas.decode(fast))
    boxes = det["boxes"]
    want = np.rint(np.stack([boxes[:, 0], boxes[:, 1], boxes[:, 2] - boxes[:, 0],
                             boxes[:, 3] - boxes[:, 1]], axis=1)).astype(np.int32)
    np.testing.assert_array_equal(got["xywh"].reshape(-1, 4), want.reshape(-1, 4))
    assert got["labels"] == [NAMES[i] for i in det["labels"]]
    if scores:
        np.testing.assert_array_equal(got["scores"], det["scores"])


def test_other_input_reads_back_as_given():
    det = {"boxes": np.array([[0.4, 1.5, 2.5, 9.6]] * 3), "labels": [0, 1, 2]}
    got = frame_detections(metas.decode(metas.encode(detections=det, label_names=NAMES)))
    assert got["labels"] == NAMES[:3] and got["xywh"].tolist() == [[0, 2, 2, 8]] * 3
    det = {"boxes": np.ones((3, 4), np.float32), "labels": ["a", "b", "a"]}
    fast, general = both(det, None)
    assert fast == general
    assert frame_detections(metas.decode(fast))["labels"] == ["a", "b", "a"]


def test_labels_past_the_names_are_their_decimal_text_and_sizes_are_named():
    det = {"boxes": np.ones((2, 4), np.float32), "labels": np.array([0, 9])}
    got = frame_detections(metas.decode(metas.encode(detections=det, label_names=NAMES)))
    assert got["labels"] == ["person", "9"]
    det = {"boxes": np.ones((100, 4), np.float32), "labels": np.zeros(100, np.int64)}
    with pytest.raises(Exception, match=r"need \d+ bytes, more than the channel's meta area of 512"):
        metas.encode(capacity=512, detections=det, label_names=NAMES)


@pytest.mark.parametrize("n", [0, 1, 100])
@pytest.mark.parametrize("names", [NAMES, None])
def test_detections_with_a_dict_same_area_as_the_record_path(n, names):
    """detections= with meta= (a model answering cudaipcfilter): the same area as the detections
    and a custom record of the dict written through the general paths."""
    rng = np.random.default_rng(n)
    det = {"boxes": (rng.random((n, 4)) * 500).astype(np.float32),
           "labels": rng.integers(0, len(NAMES), n), "scores": rng.random(n).astype(np.float32)}
    meta = {"pts": 1234567 + n, "model": "test", "ok": True}
    got = metas.encode(detections=det, meta=meta, label_names=names)
    want = metas.encode(detections=det, label_names=names, relations=[],
                        metas=[metas.CustomRecord("cudaipc-meta", meta)])
    assert got == want
    decoded = metas.decode(got)
    assert decoded.records[1].fields == meta
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
