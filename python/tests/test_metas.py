"""The meta area's encoding (docs/metas.md) in Python, without a channel: one small record of each
kind written byte for byte as the doc lays it out (offsets and values computed here by hand, not
by the package, so the Python side and the C++ codec cannot drift apart unnoticed), malformed
areas skipped and counted, and a seeded fuzz of mutations that must never raise or hand out a
view outside the area."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import cudaipc
from cudaipc import metas as M


def area(*records: bytes) -> bytes:
    used = 16 + sum(len(r) for r in records)
    # u32 magic "CIMT", u16 version 1, u16 record_count, u32 used, u32 reserved
    return struct.pack("<IHHII", 0x544D4943, 1, len(records), used, 0) + b"".join(records)


def record(kind: int, name: bytes, body: bytes) -> bytes:
    padded = name + bytes(-len(name) % 8)
    body = body + bytes(-len(body) % 8)
    return struct.pack("<IHH", 8 + len(padded) + len(body), kind, len(name)) + padded + body


# ---- the byte layout, by hand --------------------------------------------------------------


def test_area_header_bytes():
    got = M.encode(meta={"a": 1})
    assert got[:4] == b"CIMT"  # 0x544D4943 little-endian
    assert struct.unpack_from("<HHII", got, 4) == (1, 1, len(got), 0)


def test_custom_record_bytes():
    body = struct.pack("<II", 1, 0)  # field_count 1, reserved
    # field_size = 16 + pad8(name 1 + value 8) = 32; name_len 1; type 1 (int64); value_len 8
    body += struct.pack("<IHBBII", 32, 1, 1, 0, 8, 0) + b"a" + struct.pack("<q", -5) + bytes(7)
    want = area(record(4, b"cudaipc-meta", body))
    assert len(want) == 16 + 8 + 16 + 40
    assert M.encode(meta={"a": -5}) == want
    (rec,) = M.decode(want).records
    assert (rec.kind, rec.name, rec.fields) == (4, "cudaipc-meta", {"a": -5})


def test_custom_field_types_bytes():
    fields = {"i": 7, "u": 1 << 63, "d": 0.25, "b": True, "s": "é", "y": b"\x00\xff",
              "o": M.GstValue("GstFraction", "30/1")}
    got = M.encode(meta=fields)
    pos = 16 + 8 + 16 + 8  # area header, record header, name, CustomHeader
    want = [("i", 1, struct.pack("<q", 7)), ("u", 2, struct.pack("<Q", 1 << 63)),
            ("d", 3, struct.pack("<d", 0.25)), ("b", 4, b"\x01"), ("s", 5, "é".encode()),
            ("y", 6, b"\x00\xff"), ("o", 7, b"GstFraction\x0030/1")]
    for name, ftype, value in want:
        n = len(name) + len(value)
        size = 16 + n + (-n % 8)
        assert struct.unpack_from("<IHBBII", got, pos) == (size, 1, ftype, 0, len(value), 0)
        assert got[pos + 16:pos + 16 + n] == name.encode() + value
        assert got[pos + 16 + n:pos + size] == bytes(size - 16 - n)  # zero padding
        pos += size
    assert pos == len(got)
    assert M.decode(got).records[0].fields == fields


def test_custom_nested_and_sized_fields_bytes():
    from fractions import Fraction
    body = struct.pack("<II", 4, 0)
    body += struct.pack("<IHBBII", 24, 1, 8, 0, 4, 0) + b"i" + struct.pack("<i", -3) + bytes(3)
    body += struct.pack("<IHBBII", 32, 1, 11, 0, 8, 0) + b"f" + struct.pack("<ii", 30000, 1001) \
        + bytes(7)
    # a structure "st" holding one uint32 field "n"; its value: u32 name_len, u32 0, name, pad
    inner = struct.pack("<II", 1, 0) + struct.pack("<IHBBII", 24, 1, 9, 0, 4, 0) + b"n" + \
        struct.pack("<I", 9) + bytes(3)
    sval = struct.pack("<II", 2, 0) + b"st" + bytes(6) + inner
    body += struct.pack("<IHBBII", 16 + 8 + len(sval), 1, 12, 0, len(sval), 0) + b"s" + sval + \
        bytes(7)
    # an array of two float32 members (nameless)
    members = struct.pack("<II", 2, 0) + (struct.pack("<IHBBII", 24, 0, 10, 0, 4, 0) +
                                          struct.pack("<f", 0.5) + bytes(4)) * 2
    body += struct.pack("<IHBBII", 16 + 8 + len(members), 1, 13, 0, len(members), 0) + b"a" + \
        members + bytes(7)
    (rec,) = M.decode(area(record(4, b"cudaipc-meta", body))).records
    assert rec.fields == {"i": -3, "f": Fraction(30000, 1001),
                          "s": M.Structure("st", {"n": 9}), "a": [0.5, 0.5]}
    assert isinstance(rec.fields["a"], list) and not isinstance(rec.fields["a"], M.ValueList)


def test_custom_nested_round_trip_and_limits():
    from fractions import Fraction
    fields = {"fr": Fraction(-1, 3), "st": M.Structure("roi", {"x": 1, "name": "car"}),
              "arr": [1, [2, 3], M.Structure("p", {"q": True})], "lst": M.ValueList(["a", "b"])}
    (rec,) = M.decode(M.encode(meta=fields)).records
    assert rec.fields == fields
    assert isinstance(rec.fields["lst"], M.ValueList)
    deep: object = 1
    for _ in range(8):
        deep = [deep]
    assert M.decode(M.encode(meta={"d": deep})).records[0].fields == {"d": deep}
    with pytest.raises(cudaipc.InvalidArgumentError, match="nested deeper"):
        M.encode(meta={"d": [deep]})


def test_custom_fraction_and_depth_from_a_peer_are_refused():
    for num, den in ((1, 0), (-(1 << 31), 1), (1, -(1 << 31))):
        body = struct.pack("<II", 1, 0) + struct.pack("<IHBBII", 32, 1, 11, 0, 8, 0) + b"f" + \
            struct.pack("<ii", num, den) + bytes(7)
        d = M.decode(area(record(4, b"cudaipc-meta", body)))
        assert d.records == [] and "fraction" in d.errors[0]
    # 9 arrays inside each other, written by hand as a peer could.
    inner = struct.pack("<II", 0, 0)
    for _ in range(9):
        inner = struct.pack("<II", 1, 0) + struct.pack("<IHBBII", 16 + len(inner), 0, 13, 0,
                                                        len(inner), 0) + inner
    d = M.decode(area(record(4, b"cudaipc-meta", inner)))
    assert d.records == [] and "nested deeper" in d.errors[0]


def test_timestamp_record_bytes():
    caps = b"timestamp/x-ntp"
    body = struct.pack("<QQII", 5, (1 << 64) - 1, len(caps), 0) + caps
    want = area(record(5, b"GstReferenceTimestampMetaAPI", body))
    assert M.encode(metas=[M.TimestampRecord("timestamp/x-ntp", 5, None)]) == want
    (rec,) = M.decode(want).records
    assert (rec.caps, rec.timestamp, rec.duration) == ("timestamp/x-ntp", 5, None)


def test_serialized_and_unknown_record_bytes():
    want = area(record(1, b"GstFooMetaAPI", b"xyz"), record(77, b"future", b"\x01\x02"))
    got = M.encode(metas=[M.RawRecord(1, "GstFooMetaAPI", b"xyz"),
                          M.RawRecord(77, "future", b"\x01\x02")])
    assert got == want
    d = M.decode(want)
    assert [(r.kind, r.name) for r in d.records] == [(1, "GstFooMetaAPI"), (77, "future")]
    assert bytes(d.records[0].body[:3]) == b"xyz"  # the body as it crossed, padding included
    assert d.unknown == 1 and d.bad == 0


def test_tensors_record_bytes():
    got = M.encode(tensors={"t": np.array([1.0, 2.0], np.float32)})
    # Record at 16: header 8, name "GstTensorMetaAPI" 16, body at area byte 40.
    assert struct.unpack_from("<IHH", got, 16) == (120, 3, 16)
    assert got[24:40] == b"GstTensorMetaAPI"
    assert struct.unpack_from("<II", got, 40) == (1, 0)  # tensor_count, reserved
    # entry: size 32 + pad8(1 + 7) + 8 * 1 dims = 48; id_len, dtype_len, num_dims, order,
    # data_offset: the first 64-byte boundary of the area after the entries (area 40 + 56 = 96
    # -> 128), from the body's start: 88; data_size 8
    assert struct.unpack_from("<IHHIIQQ", got, 48) == (48, 1, 7, 1, 0, 88, 8)
    assert got[80:88] == b"tfloat32"
    assert struct.unpack_from("<Q", got, 88) == (2,)
    assert got[96:128] == bytes(32)  # zeros up to the aligned data
    assert struct.unpack_from("<2f", got, 128) == (1.0, 2.0)
    assert len(got) == 16 + 120
    (rec,) = M.decode(got).records
    np.testing.assert_array_equal(rec.arrays["t"], [1.0, 2.0])


def test_analytics_record_bytes():
    got = M.encode(detections={"boxes": np.array([[10, 20, 30, 60]], np.float32),
                               "labels": ["cat"], "scores": np.array([0.5], np.float32)})
    name = b"GstAnalyticsRelationMetaAPI"  # 27 bytes, padded to 32
    # body: header 24 + 1 mtd of 56 = 80; no relations (at 80, 0 bytes); heap "cat" at 80
    assert struct.unpack_from("<IHH", got, 16) == (8 + 32 + 88, 2, 27)
    assert got[24:24 + 27] == name and got[51:56] == bytes(5)
    b = 56  # the body
    assert struct.unpack_from("<6I", got, b) == (1, 0, 80, 3, 80, 0)
    # type 1, id 0, flags 0, label_off 0, label_len 3, payload 0 0, reserved, x y w h, r, conf
    want = (1, 0, 0, 0, 3, 0, 0, 0, 10, 20, 20, 40, 0.0, 0.5)
    assert struct.unpack_from("<8I4i2f", got, b + 24) == want
    assert got[b + 80:b + 88] == b"cat" + bytes(5)
    assert len(got) == b + 88


def test_analytics_relations_bytes():
    got = M.encode(detections={"boxes": np.array([[0, 0, 4, 4]], np.float32),
                               "labels": ["a"], "track_ids": np.array([9])},
                   classifications=[{"labels": ["b"], "scores": [0.25]}])
    b = 56
    mtds, rels, heap_off, heap_size, rel_off, _ = struct.unpack_from("<6I", got, b)
    assert (mtds, rels, rel_off) == (3, 3, 24 + 3 * 56)
    assert heap_off == rel_off + 3 * 12
    # mtd 1: classification (type 2, id 1), its payload in the heap
    t, mid, _, _, _, poff, plen, _ = struct.unpack_from("<8I", got, b + 24 + 56)
    assert (t, mid, plen) == (2, 1, 4 + 12)
    n, conf, loff, llen = struct.unpack_from("<IfII", got, b + heap_off + poff)
    assert (n, conf) == (1, 0.25)
    assert got[b + heap_off + loff:b + heap_off + loff + llen] == b"b"
    # mtd 2: tracking (type 3), tracking_id at byte 32 of the mtd
    assert struct.unpack_from("<2I", got, b + 24 + 112) == (3, 2)
    assert struct.unpack_from("<3Q", got, b + 24 + 112 + 32) == (9, 0, 0)
    # detection CONTAIN classification, classification IS_PART_OF detection, detection
    # RELATE_TO track
    assert [struct.unpack_from("<3I", got, b + rel_off + 12 * i) for i in range(3)] == \
        [(0, 1, 4), (1, 0, 2), (0, 2, 8)]


def segmentation_area() -> bytes:
    """An analytics record with one instance segmentation mtd (GRAY8 2x3 mask, stride 4)."""
    ids = struct.pack("<2I", 5, 6)  # region ids, 8 bytes: already a multiple of 8
    mask = bytes([1, 2, 3, 0, 4, 5, 6, 0])
    payload = struct.pack("<IiiIIIIIII", 1, 7, 8, 30, 20, 2, 3, 2, 4, 25) + ids + mask
    heap_off = 24 + 56
    mtd = struct.pack("<8I", 4, 0, 0, 0, 0, 0, len(payload), 0) + bytes(24)
    body = struct.pack("<6I", 1, 0, heap_off, len(payload), heap_off, 0) + mtd + payload
    return area(record(2, b"GstAnalyticsRelationMetaAPI", body))


def test_segmentation_decoded():
    (rec,) = M.decode(segmentation_area()).records
    (seg,) = rec.mtds
    assert isinstance(seg, M.Segmentation)
    assert (seg.seg_type, seg.x, seg.y, seg.w, seg.h, seg.mask_format) == (1, 7, 8, 30, 20, 25)
    assert seg.region_ids.tolist() == [5, 6]
    np.testing.assert_array_equal(seg.mask, [[1, 2, 3], [4, 5, 6]])


# ---- encoding: the forms taken -------------------------------------------------------------


def test_detection_forms_agree():
    boxes = np.array([[1.4, 2.6, 100.5, 50.0], [0, 0, 8, 8]])
    want = M.decode(M.encode(detections={"boxes": boxes, "labels": np.array([1, 0]),
                                         "scores": np.array([0.5, 0.25])},
                             label_names=["bg", "dog"])).records[0].mtds
    as_yolo = np.concatenate([boxes, [[0.5, 1], [0.25, 0]]], axis=1)  # x1 y1 x2 y2 score label
    as_dicts = [{"box": boxes[0], "label": "dog", "score": 0.5},
                {"box": boxes[1], "label": "bg", "score": 0.25}]
    for form in (as_yolo, as_dicts):
        got = M.decode(M.encode(detections=form, label_names={0: "bg", 1: "dog"})).records[0]
        assert got.mtds == want
    # x = rint(1.4) = 1, w = rint(100.5 - 1.4) = 99; y = rint(2.6) = 3, h = rint(47.4) = 47
    assert (want[0].x, want[0].y, want[0].w, want[0].h, want[0].label) == (1, 3, 99, 47, "dog")
    got = M.decode(M.encode(detections=np.array([[0.5, 1.5, 2.5, 5.5]]))).records[0].mtds[0]
    assert (got.x, got.y, got.w, got.h) == (0, 2, 2, 4)  # half to even


@pytest.mark.parametrize("det, names", [
    ({"boxes": np.array([[1.5, 2, 30, 40.7]]), "labels": np.array([2]),
      "scores": np.array([0.5])}, ["a", "b", "c"]),
    ({"boxes": np.zeros((3, 4), np.float32), "labels": ["x", "yy", "x"],
      "rotation": np.ones(3, np.float32)}, None),
    ({"boxes": np.arange(8).reshape(2, 4), "labels": np.array([700, 3])},
     [f"name {i}" for i in range(1000)]),
    (np.zeros((0, 4)), None),
])
def test_lean_detections_path_writes_the_general_paths_bytes(det, names):
    w = cudaipc._metas_io.MetaWriter(65536)
    buf = w.buffer()
    buf[:] = 0xAB  # what an earlier frame left: padding must not show it
    n = w.encode(buf, detections=det, label_names=names)
    lean = buf[:n].tobytes()
    buf[:] = 0xCD
    # An empty relations list takes the general analytics writer for the same detections.
    assert w.encode(buf, detections=det, label_names=names, relations=[]) == n
    assert buf[:n].tobytes() == lean
    assert M.decode(lean).bad == 0


def test_label_names_edited_in_place_are_seen():
    names = ["a", "b"]
    det = {"boxes": np.zeros((1, 4), np.float32), "labels": np.array([1])}
    w = cudaipc._metas_io.MetaWriter(4096)
    buf = w.buffer()
    for want in ("b", "B"):
        names[1] = want
        n = w.encode(buf, detections=det, label_names=names)
        assert M.decode(buf[:n].tobytes()).records[0].mtds[0].label == want


def test_large_label_table_heap_holds_only_the_frames_labels():
    names = [f"class number {i}" for i in range(1000)]
    got = M.encode(detections={"boxes": np.zeros((3, 4)), "labels": np.array([7, 900, 7])},
                   label_names=names)
    (rec,) = M.decode(got).records
    assert [m.label for m in rec.mtds] == [names[7], names[900], names[7]]
    assert rec.heap.shape[0] == len(names[7]) + len(names[900])


@pytest.mark.parametrize("bad, match", [
    ({"boxes": np.zeros((2, 3))}, "boxes are"),
    ({"boxes": np.zeros((2, 4)), "scores": np.zeros(3)}, "3 values for 2 boxes"),
    ({"boxes": np.zeros((2, 4)), "labels": np.array([0, -1])}, "negative"),
    (np.zeros((2, 5)), r"\(N, 4\) or \(N, 6\)"),
    ([{"label": "x"}], "no 'box'"),
])
def test_bad_detections_refused(bad, match):
    with pytest.raises(cudaipc.InvalidArgumentError, match=match):
        M.encode(detections=bad)


def test_bad_meta_fields_refused():
    with pytest.raises(cudaipc.InvalidArgumentError, match="'x': dict is not carried"):
        M.encode(meta={"x": {"y": 1}})
    with pytest.raises(cudaipc.InvalidArgumentError, match="does not fit 64 bits"):
        M.encode(meta={"x": 1 << 64})
    with pytest.raises(cudaipc.InvalidArgumentError, match="NUL"):
        M.encode(meta={"a\0b": 1})


def test_oversized_names_both_sizes():
    with pytest.raises(cudaipc.InvalidArgumentError) as e:
        M.encode(capacity=256, tensors={"t": np.zeros(100, np.float32)})
    assert "need 528 bytes" in str(e.value) and "256 bytes per slot" in str(e.value)


# ---- reading malformed areas ---------------------------------------------------------------

GOOD = record(4, b"cudaipc-meta", struct.pack("<II", 1, 0) +
              struct.pack("<IHBBII", 24, 1, 4, 0, 1, 0) + b"k\x01" + bytes(6))


@pytest.mark.parametrize("bad, why", [
    (record(4, b"n\xff", struct.pack("<II", 0, 0)), "not UTF-8"),
    (record(4, b"n\0", struct.pack("<II", 0, 0)), "NUL"),
    (record(4, b"n", struct.pack("<II", 1, 0)), "starts past"),
    (record(4, b"n", struct.pack("<II", 1, 0) + struct.pack("<IHBBII", 16, 1, 1, 0, 8, 0)),
     "size 16"),
    (record(4, b"n", struct.pack("<II", 1, 0) + struct.pack("<IHBBII", 24, 1, 99, 0, 1, 0) +
            b"k\0" + bytes(6)), "unknown type 99"),
    (record(4, b"n", struct.pack("<II", 1, 0) + struct.pack("<IHBBII", 24, 1, 1, 0, 4, 0) +
            b"kaaaa" + bytes(3)), "8-byte type with 4"),
    (record(5, b"n", struct.pack("<QQII", 0, 0, 99, 0)), "overrun"),
    (record(3, b"n", struct.pack("<II", 300, 0)), "at most 256"),
    (record(3, b"n", struct.pack("<II", 1, 0) + struct.pack("<IHHIIQQ", 48, 1, 7, 17, 0, 0, 0)),
     "17 dims"),
    (record(3, b"n", struct.pack("<II", 1, 0) + struct.pack("<IHHIIQQ", 48, 1, 7, 1, 0, 0, 8) +
            b"tfloat32" + struct.pack("<Q", 3)), "take 12"),
    (record(3, b"n", struct.pack("<II", 1, 0) + struct.pack("<IHHIIQQ", 48, 1, 7, 1, 0, 1 << 40,
                                                            4) +
            b"tfloat32" + struct.pack("<Q", 1)), "overrun"),
    (record(3, b"n", struct.pack("<II", 1, 0) + struct.pack("<IHHIIQQ", 48, 1, 7, 1, 2, 0, 4) +
            b"tfloat99" + struct.pack("<Q", 1)), "unknown data type"),
    (record(2, b"n", struct.pack("<6I", 1 << 30, 0, 0, 0, 0, 0)), "overrun"),
    (record(2, b"n", struct.pack("<6I", 0, 1, 24, 0, 24, 0) + struct.pack("<3I", 0, 1, 4)),
     "names mtd 1 of 0"),
    (record(2, b"n", struct.pack("<6I", 1, 0, 24, 0, 80, 0) + bytes(56)), "heap"),
    (record(2, b"n", struct.pack("<6I", 1, 0, 80, 0, 80, 0) +
            struct.pack("<8I", 1, 0, 0, 0, 5, 0, 0, 0) + bytes(24)), "label ends at 5"),
    (record(2, b"n", struct.pack("<6I", 1, 0, 80, 8, 80, 0) +
            struct.pack("<8I", 2, 0, 0, 0, 0, 0, 8, 0) + bytes(24) + struct.pack("<2I", 9, 0)),
     "9 classes"),
])
def test_bad_record_skipped_and_counted(bad, why):
    d = M.decode(area(GOOD, bad, GOOD))
    assert [r.name for r in d.records] == ["cudaipc-meta", "cudaipc-meta"]
    assert d.bad == 1 and len(d.errors) == 1 and why in d.errors[0], d.errors


@pytest.mark.parametrize("mutate, why, kept", [
    (lambda a: b"XIMT" + a[4:], "magic", 0),
    (lambda a: a[:4] + struct.pack("<H", 2) + a[6:], None, 0),  # another version: unknown
    (lambda a: a[:8] + struct.pack("<I", len(a) + 1) + a[12:], "in use", 0),
    (lambda a: a[:6] + struct.pack("<H", 3) + a[8:], "record 1 of 3 starts past", 1),
    (lambda a: a[:16] + struct.pack("<I", 12) + a[20:], "size 12", 0),
    (lambda a: a[:16] + struct.pack("<I", 1 << 20) + a[20:], "size 1048576", 0),
    (lambda a: a[:22] + struct.pack("<H", 2000) + a[24:], "names <= 1024", 0),
    (lambda a: a[:10], "shorter than its 16-byte header", 0),
])
def test_bad_area_skipped_and_counted(mutate, why, kept):
    d = M.decode(mutate(area(GOOD)))
    assert len(d.records) == kept
    if why is None:
        assert d.unknown == 1 and d.bad == 0
    else:
        assert d.bad == 1 and why in d.errors[0], d.errors


def test_record_count_lower_than_records_reads_only_those():
    a = bytearray(area(GOOD, GOOD))
    struct.pack_into("<H", a, 6, 1)
    assert len(M.decode(bytes(a)).records) == 1


# ---- fuzz ----------------------------------------------------------------------------------


def full_area() -> bytes:
    rng = np.random.default_rng(1)
    return M.encode(
        detections={"boxes": rng.uniform(0, 100, (5, 4)), "labels": np.arange(5),
                    "scores": rng.random(5), "rotation": rng.random(5),
                    "track_ids": np.array([1, -1, 3, -1, 5])},
        classifications=[{"labels": ["x", "y"], "scores": [0.5, 0.5]}, None, None,
                         {"labels": ["z"], "scores": [1]}, None],
        tensors={"a": np.arange(12, dtype=np.float32).reshape(3, 4),
                 "b": np.arange(3, dtype=np.int64), "c": np.zeros((2, 0), np.uint8)},
        meta={"i": 1, "s": "str", "y": b"by", "b": False, "d": 2.5},
        metas=[M.TimestampRecord("timestamp/x", 1, 2), M.RawRecord(1, "GstX", b"12345")]) + \
        segmentation_area()[16:]


def fuzz_base() -> bytes:
    """full_area with the segmentation record counted and the size fixed."""
    a = bytearray(full_area())
    count = struct.unpack_from("<H", a, 6)[0]
    struct.pack_into("<HI", a, 6, count + 1, len(a))
    return bytes(a)


def views_inside(obj, root: np.ndarray, lo: int, hi: int, seen=None) -> None:
    """Every NumPy array reachable from a decoded record that views `root` (the buffer the area
    lies in) lies within [lo, hi): the area's bytes."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        base = obj
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        if base is root:
            start = obj.__array_interface__["data"][0]
            if obj.size:
                span = sum((n - 1) * abs(s) for n, s in zip(obj.shape, obj.strides)) + \
                    obj.itemsize
                assert lo <= start and start + span <= hi, "a view outside the area"
        return
    if isinstance(obj, (list, tuple)):
        for x in obj:
            views_inside(x, root, lo, hi, seen)
    elif isinstance(obj, dict):
        for x in obj.values():
            views_inside(x, root, lo, hi, seen)
    elif hasattr(obj, "__dict__"):
        for x in vars(obj).values():
            views_inside(x, root, lo, hi, seen)


def exercise(d) -> None:
    """What a frame's accessors do with decoded records: nothing may raise."""
    from cudaipc import _metas_io
    _metas_io.frame_detections(d)
    _metas_io.frame_classifications(d)
    _metas_io.frame_tracks(d)
    _metas_io.tensors(d)
    _metas_io.custom(d)
    for r in d.records:
        if isinstance(r, M.AnalyticsRecord):
            r.mtds


def test_fuzz_never_raises_nor_views_outside(seed=7, rounds=3000):
    base = fuzz_base()
    good = M.decode(base)
    assert good.bad == 0 and len(good.records) == 6, good.errors
    rng = np.random.default_rng(seed)
    # The area sits inside a larger buffer, so a read past it would find bytes, not a fault:
    # views must be checked to stay inside.
    pad = 4096
    buf = np.full(len(base) + 2 * pad, 0xAB, np.uint8)
    lo = buf.ctypes.data + pad
    interesting = [0, 1, 7, 8, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, len(base), len(base) - 8]
    for _ in range(rounds):
        a = bytearray(base)
        for _ in range(int(rng.integers(1, 4))):
            how = rng.integers(4)
            at = int(rng.integers(0, len(a) - 4))
            if how == 0:
                a[at] ^= 1 << int(rng.integers(8))
            elif how == 1:
                struct.pack_into("<I", a, at & ~3, interesting[int(rng.integers(len(interesting)))])
            elif how == 2:
                a[at] = int(rng.integers(256))
            else:
                del a[int(rng.integers(16, len(a))):]  # truncated
        n = len(a)
        buf[pad:pad + n] = np.frombuffer(bytes(a), np.uint8)
        view = buf[pad:pad + n]
        view.flags.writeable = False
        d = M.decode(view)
        exercise(d)
        views_inside(d.records, buf, lo, lo + n)
