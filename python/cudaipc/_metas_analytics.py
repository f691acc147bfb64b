"""Kind 2 records (GstAnalyticsRelationMeta, docs/metas.md): a table of 56-byte mtds (object
detections, classifications, tracks, segmentations), the relations between them and a heap of
their strings and variable parts.

Classifications relate to their detection the way GStreamer's analytics elements and tests relate
them: detection CONTAIN classification and classification IS_PART_OF detection; tracks: detection
RELATE_TO track (as its IoU tracker does). This module reads them; _metas_analytics_write.py
writes them.

The box convention both ways: ``boxes`` are (N, 4) x1, y1, x2, y2 in pixels (torchvision's), x2
and y2 exclusive; the record holds GStreamer's integer x, y, w, h, made as x = rint(x1),
w = rint(x2 - x1) (half to even; whole-pixel boxes cross exactly), and read back as x1 = x,
x2 = x + w."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ._errors import InvalidArgumentError
from ._metas import KIND_ANALYTICS, MetaFormatError, MetaRecord, pad8

NAME = "GstAnalyticsRelationMetaAPI"
HEADER = struct.Struct("<IIIIII")  # mtd_count, relation_count, heap_off, heap_size, rel_off, rsvd
MTD_SIZE, REL_SIZE = 56, 12
OD, CLS, TRACK, SEG = 1, 2, 3, 4
MTD_TYPES = {OD: "object detection", CLS: "classification", TRACK: "tracking",
             SEG: "segmentation"}
IS_PART_OF, CONTAIN, RELATE_TO, N_TO_N = 2, 4, 8, 16
REL_NAMES = {"is-part-of": IS_PART_OF, "contain": CONTAIN, "relate-to": RELATE_TO,
             "n-to-n": N_TO_N}
_SEG = struct.Struct("<IiiIIIIIII")  # seg_type x y w h region_count mask_w mask_h stride format
_CLASS = struct.Struct("<fII")  # confidence, label_off, label_len
_U32 = struct.Struct("<I")
# Bytes per mask pixel of the GstVideoFormats a mask comes in (GRAY8, GRAY16_LE, GRAY16_BE).
_MASK_BPP = {25: 1, 26: 2, 27: 2}

# The 56-byte mtd, as the table is read (a copy, checked as a whole) ...
MTD = np.dtype([("type", "<u4"), ("id", "<u4"), ("flags", "<u4"), ("label_off", "<u4"),
                ("label_len", "<u4"), ("payload_off", "<u4"), ("payload_len", "<u4"),
                ("reserved", "<u4"), ("x", "<i4"), ("y", "<i4"), ("w", "<i4"), ("h", "<i4"),
                ("r", "<f4"), ("confidence", "<f4")])
# ... and its tracking variant, over the same bytes.
TRACK_MTD = np.dtype({"names": ["tracking_id", "first_seen", "last_seen"],
                      "formats": ["<u8"] * 3, "offsets": [32, 40, 48], "itemsize": MTD_SIZE})
assert MTD.itemsize == MTD_SIZE
# Columns of the table viewed as (rows, 14) 32-bit words, for writing.
C_TYPE, C_ID, C_FLAGS, C_LABEL, C_PAYLOAD, C_X, C_R, C_CONF = 0, 1, 2, 3, 5, 8, 12, 13


# ---- decoded mtds --------------------------------------------------------------------------


class Detection(NamedTuple):
    index: int  # in the record's mtd table (what relations name)
    id: int  # the mtd's id in the producer's GstAnalyticsRelationMeta
    x: int
    y: int
    w: int
    h: int
    rotation: float  # radians; 0 unless oriented
    confidence: float
    oriented: bool
    label: str


class Classification(NamedTuple):
    index: int
    id: int
    labels: List[str]
    scores: np.ndarray  # float32


class Track(NamedTuple):
    index: int
    id: int
    tracking_id: int
    first_seen: int  # ns
    last_seen: int
    lost: bool


class Segmentation(NamedTuple):
    index: int
    id: int
    seg_type: int  # 0 semantic, 1 instance
    x: int
    y: int
    w: int
    h: int
    region_ids: np.ndarray  # uint32
    mask_format: int  # GstVideoFormat (25 GRAY8, 26 GRAY16_LE)
    mask: np.ndarray  # (mask_height, mask_width) view; raw (height, stride) bytes if unknown


class UnknownMtd(NamedTuple):
    index: int
    id: int
    type: int


class AnalyticsRecord(MetaRecord):
    """Kind 2: a GstAnalyticsRelationMeta. ``mtds`` lists its mtds in table order
    (:class:`Detection`, :class:`Classification`, :class:`Track`, :class:`Segmentation`,
    :class:`UnknownMtd` for types this reader skips); ``relations`` is an (R, 3) uint32 array of
    (from, to, types) with from/to indexes into ``mtds`` and types GstAnalyticsRelTypes bits."""

    kind = KIND_ANALYTICS

    def __init__(self, name: str, table: np.ndarray, heap: np.ndarray, relations: np.ndarray,
                 parsed: Dict[int, Any]) -> None:
        self.name = name
        self.table = table  # a checked copy of the mtd table
        self.heap = heap  # a view of the record's heap (labels read at checked offsets)
        self.relations = relations
        self._parsed = parsed  # classifications and segmentations, read once when checked
        self._mtds: Optional[List[Any]] = None
        self._heap_bytes: Optional[bytes] = None

    @property
    def mtds(self) -> List[Any]:
        if self._mtds is None:
            self._mtds = [self._mtd(i) for i in range(len(self.table))]
        return self._mtds

    def heap_bytes(self) -> bytes:
        """The heap as bytes, copied once (labels are read from it at checked offsets)."""
        if self._heap_bytes is None:
            self._heap_bytes = bytes(self.heap)
        return self._heap_bytes

    def _label(self, off: int, n: int) -> str:
        return bytes(self.heap[off:off + n]).decode("utf-8", "replace")

    def _mtd(self, i: int) -> Any:
        row = self.table[i]
        t, mid = int(row["type"]), int(row["id"])
        if t == OD:
            return Detection(i, mid, int(row["x"]), int(row["y"]), int(row["w"]), int(row["h"]),
                             float(row["r"]), float(row["confidence"]),
                             bool(row["flags"] & 1),
                             self._label(int(row["label_off"]), int(row["label_len"])))
        if t == TRACK:
            tr = self.table[i:i + 1].view(TRACK_MTD)[0]
            return Track(i, mid, int(tr["tracking_id"]), int(tr["first_seen"]),
                         int(tr["last_seen"]), bool(row["flags"] & 1))
        if t == CLS:
            labels, scores = self._parsed[i]
            return Classification(i, mid, labels, scores)
        if t == SEG:
            return Segmentation(i, mid, *self._parsed[i])
        return UnknownMtd(i, mid, t)

    def encoder(self) -> Any:
        raise InvalidArgumentError("an AnalyticsRecord made in Python is published through "
                                   "publish(detections=..., classifications=..., tracks=...)")

    def __repr__(self) -> str:
        return f"<AnalyticsRecord {len(self.table)} mtds, {len(self.relations)} relations>"


# ---- reading -------------------------------------------------------------------------------


def decode_analytics(name: str, body: np.ndarray) -> AnalyticsRecord:
    size = body.shape[0]
    if size < HEADER.size:
        raise MetaFormatError(f"analytics body of {size} bytes is shorter than its 24-byte header")
    mtd_count, rel_count, heap_off, heap_size, rel_off, _ = HEADER.unpack_from(body, 0)
    table_end = HEADER.size + mtd_count * MTD_SIZE
    if table_end > size:
        raise MetaFormatError(f"{mtd_count} mtds overrun the body's {size} bytes")
    if heap_off < table_end or heap_off + heap_size > size:
        raise MetaFormatError(f"heap of {heap_size} bytes at {heap_off} is not between the mtd "
                              f"table's end ({table_end}) and the body's ({size})")
    if rel_off + rel_count * REL_SIZE > size:
        raise MetaFormatError(f"{rel_count} relations at {rel_off} overrun the body's {size} "
                              "bytes")
    # Copies (one memcpy each): what is checked below is what is used (the producer may rewrite
    # its bytes while they are read).
    table = np.frombuffer(body, np.uint8, mtd_count * MTD_SIZE, HEADER.size).copy().view(MTD)
    words = table.view("<u4").reshape(mtd_count, 14)
    rels = np.frombuffer(body, np.uint8, rel_count * REL_SIZE, rel_off).copy().view("<u4") \
        .reshape(rel_count, 3)
    if rel_count and int(rels[:, :2].max()) >= mtd_count:
        raise MetaFormatError(f"a relation names mtd {int(rels[:, :2].max())} of {mtd_count}")
    heap = body[heap_off:heap_off + heap_size]
    types = words[:, 0]
    is_od = types == OD
    labels = words[:, 3:5] if is_od.all() else words[is_od, 3:5]
    if len(labels):
        end = int((labels[:, 0].astype(np.uint64) + labels[:, 1]).max())
        if end > heap_size:
            raise MetaFormatError(f"a detection's label ends at {end}, past the heap's "
                                  f"{heap_size} bytes")
    parsed: Dict[int, Any] = {}
    others = np.flatnonzero((types == CLS) | (types == SEG)).tolist() if not is_od.all() else []
    for i in others:
        row = table[i]
        off, n = int(row["payload_off"]), int(row["payload_len"])
        if off + n > heap_size:
            raise MetaFormatError(f"mtd {i}'s payload ({n} bytes at {off}) overruns the heap's "
                                  f"{heap_size}")
        payload = heap[off:off + n]
        parsed[i] = _classes(payload, heap, i) if int(row["type"]) == CLS else \
            _segmentation(payload, i)
    return AnalyticsRecord(name, table, heap, rels, parsed)


def _classes(payload: np.ndarray, heap: np.ndarray, i: int) -> Tuple[List[str], np.ndarray]:
    size = payload.shape[0]
    if size < 4:
        raise MetaFormatError(f"classification {i}: a payload of {size} bytes")
    (n,) = _U32.unpack_from(payload, 0)
    if 4 + n * _CLASS.size > size:
        raise MetaFormatError(f"classification {i}: {n} classes overrun its {size}-byte payload")
    entries = np.frombuffer(payload, np.dtype([("c", "<f4"), ("o", "<u4"), ("n", "<u4")]), n, 4)
    entries = entries.copy()
    ends = entries["o"].astype(np.uint64) + entries["n"]
    if n and int(ends.max()) > heap.shape[0]:
        raise MetaFormatError(f"classification {i}: a label past the heap's {heap.shape[0]} "
                              "bytes")
    labels = [bytes(heap[o:o + k]).decode("utf-8", "replace")
              for o, k in zip(entries["o"].tolist(), entries["n"].tolist())]
    return labels, entries["c"].astype(np.float32)


def _segmentation(payload: np.ndarray, i: int) -> tuple:
    size = payload.shape[0]
    if size < 40:
        raise MetaFormatError(f"segmentation {i}: a payload of {size} bytes, shorter than 40")
    st, x, y, w, h, regions, mw, mh, stride, fmt = _SEG.unpack_from(payload, 0)
    ids_end = 40 + pad8(regions * 4)
    if ids_end + stride * mh > size:
        raise MetaFormatError(f"segmentation {i}: {regions} regions and a {stride}x{mh} mask "
                              f"overrun its {size}-byte payload")
    bpp = _MASK_BPP.get(fmt)
    if bpp is not None and stride < mw * bpp:
        raise MetaFormatError(f"segmentation {i}: stride {stride} < {mw} pixels of {bpp} bytes")
    region_ids = np.frombuffer(payload, "<u4", regions, 40).copy()
    rows = payload[ids_end:ids_end + stride * mh].reshape(mh, stride)
    if bpp is None:
        mask = rows
    else:
        dt = np.uint8 if bpp == 1 else np.dtype(">u2" if fmt == 27 else "<u2")
        mask = rows[:, :mw * bpp].view(dt) if mh and mw else np.zeros((mh, mw), dt)
    return st, x, y, w, h, region_ids, fmt, mask


# ---- frame-level views ---------------------------------------------------------------------


def _links(rec: AnalyticsRecord, kind: int) -> Dict[int, int]:
    """mtd index of each `kind` mtd -> index of the detection it is related to (a relation of
    any type, either way; the first one found)."""
    r = rec.relations
    if not len(r):
        return {}
    types = rec.table["type"]
    r = r[r[:, 2] != 0]
    a, b = r[:, 0], r[:, 1]
    ta, tb = types[a], types[b]
    fwd = (ta == OD) & (tb == kind)  # detection -> x
    bwd = (ta == kind) & (tb == OD)  # x -> detection
    xs = np.concatenate([b[fwd], a[bwd]]).tolist()
    ods = np.concatenate([a[fwd], b[bwd]]).tolist()
    out: Dict[int, int] = {}
    for x, od in zip(xs, ods):
        out.setdefault(x, od)
    return out


def detections(records: Sequence[AnalyticsRecord]) -> Dict[str, Any]:
    """Every detection of the frame's analytics records as arrays (see Frame.detections)."""
    parts: List[Dict[str, Any]] = []
    for rec in records:
        table = rec.table
        is_od = table["type"] == OD
        every = bool(is_od.all())
        rows = np.arange(len(table)) if every else np.flatnonzero(is_od)
        od = table if every else table[rows]  # all detections: no copy
        # x y w h are 4 consecutive i32 of the row: one strided view, then x2 = x + w.
        xywh = od.view(np.int32).reshape(-1, 14)[:, 8:12].copy()
        boxes = xywh.astype(np.float32)
        boxes[:, 2:] += boxes[:, :2]
        labels = _labels(rec, od)
        track_ids = np.full(len(rows), -1, np.int64)
        links = _links(rec, TRACK)
        if links:
            pos = {m: k for k, m in enumerate(rows.tolist())}
            tracks = table.view(TRACK_MTD)["tracking_id"].astype(np.int64)
            for t, d in links.items():
                track_ids[pos[d]] = tracks[t]
        parts.append({"boxes": boxes, "xywh": xywh, "labels": labels,
                      "scores": od["confidence"].astype(np.float32),
                      "rotation": od["r"].astype(np.float32),
                      "oriented": (od["flags"] & 1).astype(bool),
                      "ids": od["id"].astype(np.uint32), "track_ids": track_ids})
    if not parts:
        return _empty_detections()
    if len(parts) == 1:
        return parts[0]
    return {k: (sum((p[k] for p in parts), []) if k == "labels" else
                np.concatenate([p[k] for p in parts])) for k in parts[0]}


# Decoded labels by heap: a producer that sends the same label heap every frame (cudaipc's own
# writer does, for label tables up to 2 KiB) has its labels decoded once.
_LABELS: Dict[bytes, Dict[int, str]] = {}


def _labels(rec: AnalyticsRecord, od: np.ndarray) -> List[str]:
    """Each detection's label, each distinct (offset, length) decoded once: the pairs as one u64
    key each (label_off, label_len are 8 consecutive bytes of the row), then one C-level map over
    the boxes."""
    if not len(od):
        return []
    heap = rec.heap_bytes()
    names = _LABELS.get(heap)
    if names is None:
        names = {}
        if len(heap) <= 4096:  # larger heaps (masks) are not kept
            if len(_LABELS) >= 64:
                _LABELS.clear()
            _LABELS[heap] = names
    keys = od.view(np.uint8).reshape(-1, MTD_SIZE)[:, 12:20].copy().view("<u8").ravel().tolist()
    for k in set(keys).difference(names):
        off = k & 0xFFFFFFFF
        names[k] = heap[off:off + (k >> 32)].decode("utf-8", "replace")
    return list(map(names.__getitem__, keys))


def _empty_detections() -> Dict[str, Any]:
    return {"boxes": np.zeros((0, 4), np.float32), "xywh": np.zeros((0, 4), np.int32),
            "labels": [], "scores": np.zeros(0, np.float32),
            "rotation": np.zeros(0, np.float32), "oriented": np.zeros(0, bool),
            "ids": np.zeros(0, np.uint32), "track_ids": np.zeros(0, np.int64)}


def _detection_numbers(records: Sequence[AnalyticsRecord]) -> List[Dict[int, int]]:
    """Per record, mtd index -> the detection's index in Frame.detections' arrays."""
    out, base = [], 0
    for rec in records:
        rows = np.flatnonzero(rec.table["type"] == OD).tolist()
        out.append({m: base + k for k, m in enumerate(rows)})
        base += len(rows)
    return out


def classifications(records: Sequence[AnalyticsRecord]) -> List[Dict[str, Any]]:
    out = []
    for rec, numbers in zip(records, _detection_numbers(records)):
        links = _links(rec, CLS)
        for i in np.flatnonzero(rec.table["type"] == CLS).tolist():
            labels, scores = rec._parsed[i]
            d = links.get(i)
            out.append({"labels": labels, "scores": scores, "id": int(rec.table["id"][i]),
                        "detection": -1 if d is None else numbers[d]})
    return out


def tracks(records: Sequence[AnalyticsRecord]) -> Dict[str, np.ndarray]:
    cols: Dict[str, List[Any]] = {k: [] for k in ("ids", "first_seen", "last_seen", "lost",
                                                  "detection", "mtd_ids")}
    for rec, numbers in zip(records, _detection_numbers(records)):
        links = _links(rec, TRACK)
        rows = np.flatnonzero(rec.table["type"] == TRACK)
        tr = rec.table.view(TRACK_MTD)[rows]
        cols["ids"].append(tr["tracking_id"])
        cols["first_seen"].append(tr["first_seen"])
        cols["last_seen"].append(tr["last_seen"])
        cols["lost"].append((rec.table["flags"][rows] & 1).astype(bool))
        cols["mtd_ids"].append(rec.table["id"][rows])
        cols["detection"].append(np.array([numbers[links[i]] if i in links else -1
                                           for i in rows.tolist()], np.int64))
    dtypes = {"ids": np.uint64, "first_seen": np.uint64, "last_seen": np.uint64, "lost": bool,
              "detection": np.int64, "mtd_ids": np.uint32}
    return {k: np.concatenate(v).astype(dtypes[k]) if v else np.zeros(0, dtypes[k])
            for k, v in cols.items()}
