"""Kind 2 records (GstAnalyticsRelationMeta, docs/metas.md) as Python sees them: object
detections, classifications, tracks and segmentations, the relations between them, and the
frame-level arrays made of them (Frame.detections, .classifications, .tracks). The core decodes
the record (cudaipc_metas_decode): each mtd comes as a checked row, with the detection each
classification and track belongs to already found; _metas_analytics_write.py writes them.

Classifications relate to their detection the way GStreamer's analytics elements and tests relate
them: detection CONTAIN classification and classification IS_PART_OF detection; tracks: detection
RELATE_TO track (as its IoU tracker does).

The box convention both ways: ``boxes`` are (N, 4) x1, y1, x2, y2 in pixels (torchvision's), x2
and y2 exclusive; the record holds GStreamer's integer x, y, w, h, made as x = rint(x1),
w = rint(x2 - x1) (half to even; whole-pixel boxes cross exactly), and read back as x1 = x,
x2 = x + w."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from ._errors import InvalidArgumentError
from ._metas import KIND_ANALYTICS, MetaRecord

NAME = "GstAnalyticsRelationMetaAPI"
OD, CLS, TRACK, SEG = 1, 2, 3, 4
MTD_TYPES = {OD: "object detection", CLS: "classification", TRACK: "tracking",
             SEG: "segmentation"}
IS_PART_OF, CONTAIN, RELATE_TO, N_TO_N = 2, 4, 8, 16
REL_NAMES = {"is-part-of": IS_PART_OF, "contain": CONTAIN, "relate-to": RELATE_TO,
             "n-to-n": N_TO_N}
# NumPy's type of a mask pixel, by the mask's GstVideoFormat (GRAY8, GRAY16_LE, GRAY16_BE).
_MASK_DTYPES = {25: np.dtype(np.uint8), 26: np.dtype("<u2"), 27: np.dtype(">u2")}
# A decoded mtd row (cudaipc_metas_mtd) as 22 int32 words: x, y, w, h are words 4 to 7.
_WORDS, _XYWH = 22, slice(4, 8)


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
                 classes: np.ndarray, segmentations: np.ndarray, area: np.ndarray,
                 heap_offset: int) -> None:
        self.name = name
        self.table = table  # the core's rows (cudaipc_metas_mtd), one per mtd
        self.heap = heap  # a view of the record's heap
        self.relations = relations
        self._classes = classes  # the decode's class and segmentation tables
        self._segmentations = segmentations
        self._area = area
        self._heap_offset = heap_offset  # the heap's place in the area
        self._mtds: Optional[List[Any]] = None
        self._heap_bytes: Optional[bytes] = None

    @property
    def mtds(self) -> List[Any]:
        if self._mtds is None:
            self._mtds = [self._mtd(i, row) for i, row in enumerate(self.table.tolist())]
        return self._mtds

    def heap_bytes(self) -> bytes:
        """The heap as bytes, copied once (labels are read from it at checked offsets)."""
        if self._heap_bytes is None:
            self._heap_bytes = bytes(self.heap)
        return self._heap_bytes

    def _text(self, off: int, n: int) -> str:
        """Bytes of the area the core checked lie there, as text (UTF-8; a producer rewriting
        them meanwhile yields replacement characters)."""
        heap = self._heap_offset
        return self.heap_bytes()[off - heap:off - heap + n].decode("utf-8", "replace") if n \
            else ""

    def class_entries(self, first: int, count: int) -> tuple:
        rows = self._classes[first:first + count]
        labels = [self._text(o, n) for o, n in zip(rows["label_offset"].tolist(),
                                                   rows["label_size"].tolist())]
        return labels, rows["confidence"].astype(np.float32)

    def _mtd(self, i: int, row: tuple) -> Any:
        (t, mid, flags, _, x, y, w, h, r, conf, lo, ls, first, count, _, _, tid, fs, ls_) = row
        if t == OD:
            return Detection(i, mid, x, y, w, h, r, conf, bool(flags & 1), self._text(lo, ls))
        if t == TRACK:
            return Track(i, mid, tid, fs, ls_, bool(flags & 1))
        if t == CLS:
            labels, scores = self.class_entries(first, count)
            return Classification(i, mid, labels, scores)
        if t == SEG:
            return Segmentation(i, mid, *self._segmentation(first))
        return UnknownMtd(i, mid, t)

    def _segmentation(self, k: int) -> tuple:
        (st, x, y, w, h, regions, regions_at, mw, mh, stride, fmt, mask_at) = \
            self._segmentations[k].tolist()
        area = self._area
        region_ids = area[regions_at:regions_at + 4 * regions].copy().view("<u4")
        rows = area[mask_at:mask_at + stride * mh].reshape(mh, stride)
        dt = _MASK_DTYPES.get(fmt)
        if dt is None:
            mask = rows  # a format this reader has no pixel type for: the raw rows
        elif mh and mw:
            mask = rows[:, :mw * dt.itemsize].view(dt)
        else:
            mask = np.zeros((mh, mw), dt)
        return st, x, y, w, h, region_ids, fmt, mask

    def encoder(self) -> Any:
        raise InvalidArgumentError("an AnalyticsRecord made in Python is published through "
                                   "publish(detections=..., classifications=..., tracks=...)")

    def __repr__(self) -> str:
        return f"<AnalyticsRecord {len(self.table)} mtds, {len(self.relations)} relations>"


# ---- frame-level views ---------------------------------------------------------------------


def _ranks(records: Sequence[AnalyticsRecord]) -> List[int]:
    """Per record, the index in Frame.detections' arrays of its first detection."""
    out, base = [], 0
    for rec in records:
        out.append(base)
        base += int(np.count_nonzero(rec.table["type"] == OD))
    return out


def detections(records: Sequence[AnalyticsRecord]) -> Dict[str, Any]:
    """Every detection of the frame's analytics records as arrays (see Frame.detections)."""
    parts: List[Dict[str, Any]] = []
    for rec in records:
        table = rec.table
        is_od = table["type"] == OD
        od = table if is_od.all() else table[is_od]  # all detections: no copy
        # x y w h are 4 consecutive i32 of the row: one strided view, then x2 = x + w.
        xywh = od.view(np.int32).reshape(-1, _WORDS)[:, _XYWH].copy()
        boxes = xywh.astype(np.float32)
        boxes[:, 2:] += boxes[:, :2]
        track = od["track"]
        track_ids = np.full(len(od), -1, np.int64)
        linked = track >= 0
        if linked.any():
            track_ids[linked] = table["tracking_id"][track[linked]].astype(np.int64)
        parts.append({"boxes": boxes, "xywh": xywh, "labels": _labels(rec, od),
                      "scores": od["confidence"].astype(np.float32),
                      "rotation": od["rotation"].astype(np.float32),
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
    """Each detection's label, each distinct (offset in the heap, length) decoded once: the pairs
    as one u64 key each, then one C-level map over the boxes."""
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
    sizes = od["label_size"].astype(np.uint64)
    offsets = (od["label_offset"] - np.uint32(rec._heap_offset)).astype(np.uint64)
    keys = (offsets * (sizes != 0) | (sizes << np.uint64(32))).tolist()
    for k in set(keys).difference(names):
        off = k & 0xFFFFFFFF
        names[k] = heap[off:off + (k >> 32)].decode("utf-8", "replace")
    return list(map(names.__getitem__, keys))


def _empty_detections() -> Dict[str, Any]:
    return {"boxes": np.zeros((0, 4), np.float32), "xywh": np.zeros((0, 4), np.int32),
            "labels": [], "scores": np.zeros(0, np.float32),
            "rotation": np.zeros(0, np.float32), "oriented": np.zeros(0, bool),
            "ids": np.zeros(0, np.uint32), "track_ids": np.zeros(0, np.int64)}


def classifications(records: Sequence[AnalyticsRecord]) -> List[Dict[str, Any]]:
    out = []
    for rec, base in zip(records, _ranks(records)):
        t = rec.table
        for row in t[t["type"] == CLS].tolist():
            labels, scores = rec.class_entries(row[12], row[13])
            d = row[3]
            out.append({"labels": labels, "scores": scores, "id": row[1],
                        "detection": -1 if d < 0 else base + d})
    return out


def tracks(records: Sequence[AnalyticsRecord]) -> Dict[str, np.ndarray]:
    cols: Dict[str, List[Any]] = {k: [] for k in ("ids", "first_seen", "last_seen", "lost",
                                                  "detection", "mtd_ids")}
    for rec, base in zip(records, _ranks(records)):
        tr = rec.table[rec.table["type"] == TRACK]
        cols["ids"].append(tr["tracking_id"])
        cols["first_seen"].append(tr["first_seen"])
        cols["last_seen"].append(tr["last_seen"])
        cols["lost"].append((tr["flags"] & 1).astype(bool))
        cols["mtd_ids"].append(tr["id"])
        d = tr["detection"].astype(np.int64)
        cols["detection"].append(np.where(d >= 0, d + base, -1))
    dtypes = {"ids": np.uint64, "first_seen": np.uint64, "last_seen": np.uint64, "lost": bool,
              "detection": np.int64, "mtd_ids": np.uint32}
    return {k: np.concatenate(v).astype(dtypes[k]) if v else np.zeros(0, dtypes[k])
            for k, v in cols.items()}
