"""Writing kind 2 records (docs/metas.md; _metas_analytics.py reads them): detections,
classifications and tracks as one GstAnalyticsRelationMeta (the forms detections come in are
made arrays by _metas_detections.py).

Detections are written vectorized: the mtd table is one NumPy array over the area's bytes, filled
a column at a time from the boxes, scores and labels arrays (no Python loop per box), starting
from a template of rows copied in one go; the heap holds the label table's names (a small table
whole, the same bytes every frame; of a large one, the frame's distinct labels)."""

from __future__ import annotations

import ctypes
import struct
from operator import itemgetter
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import _lib
from ._errors import InvalidArgumentError
from ._metas import KIND_ANALYTICS, MAGIC, VERSION, Encoded, pad8, too_big
from ._metas_analytics import (C_CONF, C_FLAGS, C_ID, C_PAYLOAD, C_R, C_TYPE, C_X, CLS,
                               CONTAIN, HEADER, IS_PART_OF, MTD_SIZE, NAME, OD, REL_NAMES,
                               REL_SIZE, RELATE_TO, TRACK, _CLASS)
from ._metas_detections import Detections, _host, _name_of, _names


# ---- writing -------------------------------------------------------------------------------


class _Heap:
    """The heap being built: strings once each, payloads 4-byte aligned."""

    def __init__(self) -> None:
        self.parts: List[bytes] = []
        self.size = 0
        self.strings: Dict[str, Tuple[int, int]] = {}

    def string(self, s: str) -> Tuple[int, int]:
        got = self.strings.get(s)
        if got is None:
            b = s.encode("utf-8")
            got = self.strings[s] = (self.size, len(b))
            self.parts.append(b)
            self.size += len(b)
        return got

    def block(self, b: bytes) -> int:
        """Bytes the caller indexes itself (a frame's distinct labels); their offset."""
        off = self.size
        self.parts.append(b)
        self.size += len(b)
        return off

    def payload(self, b: bytes) -> int:
        pad = -self.size % 4
        if pad:
            self.parts.append(bytes(pad))
            self.size += pad
        off = self.size
        self.parts.append(b)
        self.size += len(b)
        return off

    def bytes(self) -> bytes:
        return b"".join(self.parts)


_TRACK = struct.Struct("<QQQ")  # tracking_id, first_seen, last_seen at byte 32 of the mtd

# (detection index, tracking id, first seen, last seen, lost)
TrackRow = Tuple[int, int, int, int, int]
_MAX_LUT = 65536  # integer labels below this go through the vectorized lookup
# A label table whose names take at most this many bytes goes into the heap whole, the same bytes
# every frame (COCO's 91 names take 700): cheaper than finding a frame's distinct labels, and
# well within the area. Larger tables put only the frame's distinct labels in the heap.
WHOLE_TABLE_HEAP = 2048


class _NameTable:
    """Integer labels' names, encoded once for as long as the caller's label_names stay equal:
    the UTF-8 of each, its length as an array, and for small tables the whole table as one heap
    with each label's packed (offset | length << 32) ready to look up."""

    def __init__(self, names: Any) -> None:
        self.names = dict(names) if isinstance(names, Mapping) else \
            (list(names) if names is not None else None)
        self.encoded: List[bytes] = []
        self.lens = np.zeros(0, np.uint64)
        self.heap = b""
        self.packed: Optional[np.ndarray] = None  # set while the table fits WHOLE_TABLE_HEAP
        self.grow(len(names) if isinstance(names, (list, tuple)) else 0)

    def same(self, names: Any) -> bool:
        # Equality, not identity: a list edited in place must not keep its old names.
        return self.names == names if names is not None else self.names is None

    def grow(self, size: int) -> None:
        if size <= len(self.encoded):
            return
        self.encoded += [_name_of(self.names, v).encode("utf-8")
                         for v in range(len(self.encoded), size)]
        self.lens = np.array([len(b) for b in self.encoded], np.uint64)
        total = int(self.lens.sum())
        if total <= WHOLE_TABLE_HEAP:
            self.heap = b"".join(self.encoded)
            self.packed = (np.cumsum(self.lens) - self.lens) | (self.lens << np.uint64(32))
        else:
            self.heap, self.packed = b"", None


class _Scratch:
    """Per producer, reused frame after frame: a template of OD rows (type 1, id = row,
    confidence 1) copied in one go, views of the tables written, and the label lookup table."""

    def __init__(self) -> None:
        self.template = np.zeros((0, 14), np.uint32)
        self.lut = np.zeros(0, np.uint64)
        self.names: Optional[_NameTable] = None
        self._views: Dict[Tuple[int, int], Tuple[np.ndarray, ...]] = {}
        self._c_key: Optional[list] = None
        self._c_obj: Any = None
        self._c_table: Optional[Tuple[np.ndarray, np.ndarray, int, int]] = None

    def views(self, buf: np.ndarray, t0: int) -> Tuple[np.ndarray, ...]:
        """Views of an mtd table at byte `t0` of `buf`, as many rows as fit: words (u32), ints,
        floats, and each row's (label_off, label_len) as one unaligned u64. Made once per buffer
        and place (the writer's buffer and the slots' areas never move)."""
        key = (id(buf), t0)  # the buffer itself is kept in the entry, so its id is not reused
        v = self._views.get(key)
        if v is None or v[0] is not buf:
            rows = (buf.shape[0] - t0) // MTD_SIZE
            words = buf[t0:t0 + MTD_SIZE * rows].view(np.uint32).reshape(rows, 14)
            v = (buf, words, words.view(np.int32), words.view(np.float32),
                 np.ndarray((rows,), np.uint64, buf, t0 + 12, (MTD_SIZE,)))
            if len(self._views) > 256:
                self._views.clear()
            self._views[key] = v
        return v

    def rows(self, n: int) -> np.ndarray:
        if self.template.shape[0] < n:
            cap = max(n, 2 * self.template.shape[0], 64)
            t = np.zeros((cap, 14), np.uint32)
            t[:, C_TYPE] = OD
            t[:, C_ID] = np.arange(cap, dtype=np.uint32)
            t.view(np.float32)[:, C_CONF] = 1.0
            self.template = t
        return self.template[:n]

    def c_names(self, names: Any) -> Optional[Tuple[np.ndarray, np.ndarray, int, int]]:
        """The label names for the C writer: their UTF-8 back to back and the offsets (one more
        than names), made once for as long as `names` stays equal; None when the table is too
        large to go into every frame's heap whole."""
        if self._c_obj is names and self._c_key == names:  # the same list, unchanged
            return self._c_table
        if self._c_key is not None and self._c_key == names:
            self._c_obj = names
            return self._c_table
        encoded = [str(x).encode("utf-8") for x in names]
        total = sum(len(b) for b in encoded)
        self._c_key = list(names)
        self._c_obj = names
        self._c_table = None
        if total <= WHOLE_TABLE_HEAP:
            lens = np.array([len(b) for b in encoded], np.uint32)
            offsets = np.zeros(len(encoded) + 1, np.uint32)
            np.cumsum(lens, out=offsets[1:])
            names_bytes = np.frombuffer(b"".join(encoded) or b"\0", np.uint8).copy()
            self._c_table = (names_bytes, offsets, _address(names_bytes), _address(offsets))
        return self._c_table

    def name_table(self, names: Any, top: int) -> _NameTable:
        t = self.names
        if t is None or not t.same(names):
            t = self.names = _NameTable(names)
        t.grow(top + 1)
        if self.lut.shape[0] <= top:
            self.lut = np.zeros(max(top + 1, 2 * self.lut.shape[0]), np.uint64)
        return t


SCRATCH = _Scratch()
_UNSIGNED = {np.dtype(f"<i{k}"): np.dtype(f"<u{k}") for k in (1, 2, 4, 8)}
_MAX = np.maximum.reduce  # without ndarray.max's Python wrapper


def label_rows(labels: Any, label_names: Any, n: int,
               scratch: _Scratch) -> Tuple[np.ndarray, bytes]:
    """Each box's (label_off | label_len << 32), offsets from the start of the returned string
    bytes, which go first in the heap."""
    names = _names(label_names)
    if type(labels) is np.ndarray and labels.dtype.kind in "iu":
        if labels.shape != (n,):
            raise InvalidArgumentError(f"labels of shape {labels.shape} for {n} boxes")
        # One reduction for both checks: negative labels seen as unsigned are huge.
        top = int(_MAX(labels.view(_UNSIGNED.get(labels.dtype, labels.dtype))))
        if top < _MAX_LUT:
            table = scratch.name_table(names, top)
            if table.packed is not None:
                return table.packed[labels], table.heap
            return _distinct_labels(labels, table, scratch)
        if labels.dtype.kind == "i" and labels.min() < 0:
            raise InvalidArgumentError(f"label {int(labels.min())} is negative")
        labels = labels.tolist()
    if isinstance(labels, np.ndarray):
        labels = labels.reshape(-1).tolist()
    if len(labels) != n:
        raise InvalidArgumentError(f"{len(labels)} labels for {n} boxes")
    heap = _Heap()
    out = np.empty(n, np.uint64)
    for i, s in enumerate(labels):
        off, k = heap.string(s if isinstance(s, str) else _name_of(names, int(s)))
        out[i] = off | (k << 32)
    return out, heap.bytes()


def _distinct_labels(labels: np.ndarray, table: _NameTable,
                     scratch: _Scratch) -> Tuple[np.ndarray, bytes]:
    """A large label table: one string per distinct label of the frame, then every box's label
    looked up at once."""
    present = np.bincount(labels).nonzero()[0]
    lens = table.lens[present]
    ends = np.cumsum(lens)
    got = itemgetter(*present.tolist())(table.encoded)
    lut = scratch.lut
    lut[present] = (ends - lens) | (lens << np.uint64(32))
    return lut[labels], b"".join(got) if present.shape[0] > 1 else got


_NO_RELATIONS = np.zeros((0, 3), np.uint32)
_CORNERS_TO_SIZE = np.array([[1, 0, -1, 0], [0, 1, 0, -1], [0, 0, 1, 0], [0, 0, 0, 1]],
                            np.float32)
# The record's header, its name and the analytics header, in one pack; with the area's header
# before them for an area of detections alone.
_HEAD = struct.Struct(f"<IHH{pad8(len(NAME))}s6I")
_AREA_HEAD = struct.Struct(f"<IHHII IHH{pad8(len(NAME))}s6I")
_NAME = NAME.encode()
_ZEROS = bytes(8)
_BODY_AT = 8 + pad8(len(NAME))  # from the record's start


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class _Stage:
    """The C writer's inputs, copied into arrays made once, their addresses already in one
    cudaipc_detections: taking a fresh array's address, or passing ten arguments, costs more in
    Python than copying 100 boxes."""

    def __init__(self) -> None:
        self.n = -1
        self.buf_key: Any = None
        self.args = _lib.Detections()
        self.args_at = ctypes.addressof(self.args)

    def arrays(self, n: int) -> None:
        if n <= self.n:
            return
        cap = max(n, 128)
        self.boxes = np.empty((cap, 4), np.float32)
        self.scores = np.empty(cap, np.float32)
        self.rotation = np.empty(cap, np.float32)
        self.labels = np.empty(cap, np.int64)
        self.at = tuple(_address(a) for a in (self.boxes, self.scores, self.rotation,
                                              self.labels))
        self.args.boxes = self.at[0]
        self.n = cap

    def area(self, buf: np.ndarray, capacity: int) -> None:
        if self.buf_key is not buf:
            self.buf_key = buf
            self.args.area = _address(buf)
        self.args.capacity = capacity


_STAGE = _Stage()


def _c_detections_area(buf: np.ndarray, capacity: int, det: Detections, label_names: Any,
                       scratch: _Scratch) -> Optional[int]:
    """The C writer (cudaipc_metas_detections_area) for the usual input: float32 boxes, integer
    labels naming a list of label names whose table fits the heap whole (or no labels). None for
    other input, which the NumPy path writes."""
    boxes, labels, n = det.boxes, det.labels, det.boxes.shape[0]
    if boxes.dtype != np.float32:  # the NumPy path rounds other types in their own precision
        return None
    table = None
    if labels is not None and n:
        if type(labels) is not np.ndarray or labels.dtype.kind not in "iu" or \
                not isinstance(label_names, (list, tuple)) or not label_names:
            return None
        table = scratch.c_names(label_names)
        if table is None:
            return None
    st = _STAGE
    st.arrays(n)
    st.area(buf, capacity)
    a = st.args
    a.n = n
    st.boxes[:n] = boxes
    if det.scores is not None:
        st.scores[:n] = det.scores
        a.scores = st.at[1]
    else:
        a.scores = None
    if det.rotation is not None:
        st.rotation[:n] = det.rotation
        a.rotation = st.at[2]
    else:
        a.rotation = None
    if table is not None:
        st.labels[:n] = labels
        a.labels, a.names, a.name_offsets = st.at[3], table[2], table[3]
        a.name_count = table[1].shape[0] - 1
    else:
        a.labels = a.names = a.name_offsets = None  # no boxes: no label heap either
        a.name_count = 0
    size = _lib.detections_area(st.args_at)
    if size < 0:
        _lib.check(-size, "encoding detections")
    return size


def detections_area(buf: np.ndarray, capacity: int, det: Detections, label_names: Any,
                    scratch: _Scratch) -> int:
    """The whole area for detections alone, the common case, kept lean: in C for the usual
    input (float32 boxes, integer labels of a list of names), else every header in one pack,
    then the table's columns. Its size; the same bytes either way."""
    fast = _c_detections_area(buf, capacity, det, label_names, scratch)
    if fast is not None:
        return fast
    n = det.boxes.shape[0]
    strings = b""
    rows = None
    if det.labels is not None and n:
        rows, strings = label_rows(det.labels, label_names, n, scratch)
    heap_at = HEADER.size + MTD_SIZE * n
    body = heap_at + len(strings)
    record = _BODY_AT + pad8(body)
    size = 16 + record
    if size > capacity:
        too_big(size, capacity)
    _AREA_HEAD.pack_into(buf, 0, MAGIC, VERSION, 1, size, 0, record, KIND_ANALYTICS, len(_NAME),
                         _NAME, n, 0, heap_at, len(strings), heap_at, 0)
    t0 = 16 + _BODY_AT + HEADER.size
    if n:
        _write_detections(buf, t0, det, rows, scratch)
    h0 = 16 + _BODY_AT + heap_at
    end = h0 + len(strings)
    mv = buf.data
    mv[h0:end] = strings
    mv[end:size] = _ZEROS[:size - end]  # the record's padding
    return size


def _write_detections(buf: np.ndarray, t0: int, det: Detections, label_rows: Optional[np.ndarray],
                      scratch: _Scratch) -> None:
    """Detections 0..N-1 of the mtd table at byte `t0` of `buf`, a column at a time."""
    n = det.boxes.shape[0]
    _, words, ints, floats, labels = scratch.views(buf, t0)
    words[:n] = scratch.rows(n)  # type OD, id = row, confidence 1, the rest 0
    # [x1 y1 x2 y2] @ M = [x1 y1 x2-x1 y2-y1] in one call, rounded to whole pixels straight
    # into the table's int32 columns by a second.
    np.rint(det.boxes @ _CORNERS_TO_SIZE, out=ints[:n, C_X:C_X + 4], casting="unsafe")
    if det.scores is not None:
        floats[:n, C_CONF] = det.scores
    if det.rotation is not None:
        floats[:n, C_R] = det.rotation
        words[:n, C_FLAGS] = 1
    if label_rows is not None:
        labels[:n] = label_rows  # label_off and label_len as one u64 at byte 12


class AnalyticsEncoder(Encoded):
    """One kind 2 record: detections (mtds 0..N-1), then classifications, then tracks, and the
    relations between them, then those given in `relations` (mtd table indexes). Body: header,
    mtd table, relations, heap."""

    def __init__(self, det: Optional[Detections], classes: Any, track_input: Any,
                 relations: Any, label_names: Any, scratch: _Scratch = SCRATCH) -> None:
        self.scratch = scratch
        self.det = det
        n = self.n = 0 if det is None else det.boxes.shape[0]
        self.heap = heap = _Heap()
        self.label_rows: Optional[np.ndarray] = None  # (N,) u64: label_off | label_len << 32
        if det is not None and det.labels is not None and n:
            self.label_rows, strings = label_rows(det.labels, label_names, n, scratch)
            heap.block(strings)  # first in the heap: the rows' offsets are from its start
        if classes is None and track_input is None and relations is None and \
                (det is None or det.track_ids is None):
            self.classes: List[Tuple[Tuple[int, int], int]] = []
            self.tracks: List[TrackRow] = []
            self.mtds = n
            self.rels = _NO_RELATIONS
        else:
            self._related(classes, track_input, relations, _names(label_names))
        heap_bytes = heap.bytes()
        self.rels_at = HEADER.size + MTD_SIZE * self.mtds
        self.heap_at = self.rels_at + REL_SIZE * len(self.rels)
        self.heap_len = len(heap_bytes)
        body = self.heap_at + self.heap_len
        self.heap_bytes = heap_bytes + bytes(pad8(body) - body)  # the record's end zeroed too
        self.size = 8 + pad8(len(NAME)) + pad8(body)

    def _related(self, classes: Any, track_input: Any, relations: Any, names: Any) -> None:
        n = self.n
        self.classes = self._classes(classes, names, n)
        self.tracks = self._tracks(track_input, self.det, n)
        rels: List[Tuple[int, int, int]] = []
        for j, (_, d) in enumerate(self.classes):
            if d >= 0:
                rels += [(d, n + j, CONTAIN), (n + j, d, IS_PART_OF)]
        t0 = n + len(self.classes)
        for j, (d, _, _, _, _) in enumerate(self.tracks):
            if d >= 0:
                rels.append((d, t0 + j, RELATE_TO))
        self.mtds = t0 + len(self.tracks)
        rels += _relations_input(relations, self.mtds)
        self.rels = np.asarray(rels, np.uint32).reshape(-1, 3)

    def _classes(self, classes: Any, names: Any, n: int) -> List[Tuple[Tuple[int, int], int]]:
        """(heap offset of the payload, payload length, detection index or -1) for each."""
        if classes is None:
            return []
        if isinstance(classes, Mapping) or (isinstance(classes, tuple) and len(classes) == 2):
            items, per_detection = [classes], False
        else:
            items, per_detection = list(classes), n > 0
            if per_detection and len(items) != n:
                raise InvalidArgumentError(f"{len(items)} classifications for {n} detections: "
                                           "a list of them is one per detection (None to skip)")
        out = []
        for i, c in enumerate(items):
            if c is None:
                continue
            labels, scores = (c.get("labels"), c.get("scores")) if isinstance(c, Mapping) else c
            if isinstance(labels, (str, int, np.integer)):
                labels = [labels]
            labels = list(_host(labels, "classification labels").reshape(-1).tolist()) \
                if not isinstance(labels, (list, tuple)) else list(labels)
            sc = np.ones(len(labels), np.float32) if scores is None else \
                _host(scores, "classification scores").astype(np.float32).reshape(-1)
            if sc.shape[0] != len(labels):
                raise InvalidArgumentError(f"classification {i}: {sc.shape[0]} scores for "
                                           f"{len(labels)} labels")
            parts = [struct.pack("<I", len(labels))]
            for label, score in zip(labels, sc.tolist()):
                off, k = self.heap.string(label if isinstance(label, str) else
                                          _name_of(names, int(label)))
                parts.append(_CLASS.pack(score, off, k))
            payload = b"".join(parts)
            out.append(((self.heap.payload(payload), len(payload)), i if per_detection else -1))
        return out

    @staticmethod
    def _tracks(tr: Any, det: Optional[Detections], n: int) -> List[TrackRow]:
        """(detection index, tracking id, first seen, last seen, lost) for each track."""
        if tr is None and (det is None or det.track_ids is None):
            return []
        if tr is None:
            tr = det.track_ids  # type: ignore[union-attr]
        if isinstance(tr, Mapping):
            ids = _host(tr["ids"], "tracks['ids']").reshape(-1).astype(np.int64)
            m = ids.shape[0]
            cols = [_host(tr.get(k, np.zeros(m)), f"tracks[{k!r}]").reshape(-1).astype(np.int64)
                    for k in ("first_seen", "last_seen", "lost")]
        else:
            ids = _host(tr, "tracks").reshape(-1).astype(np.int64)
            m = ids.shape[0]
            cols = [np.zeros(m, np.int64)] * 3
        if m != n:
            raise InvalidArgumentError(f"{m} track ids for {n} detections (-1: not tracked)")
        keep = np.flatnonzero(ids >= 0).tolist()
        return [(i, int(ids[i]), int(cols[0][i]), int(cols[1][i]), int(cols[2][i]))
                for i in keep]

    def layout(self, offset: int) -> int:
        return self.size

    def write(self, buf: np.ndarray, offset: int) -> None:
        n, mtds = self.n, self.mtds
        name = NAME.encode()
        start = offset + 8 + pad8(len(name))
        _HEAD.pack_into(buf, offset, self.size, KIND_ANALYTICS, len(name), name, mtds,
                        len(self.rels), self.heap_at, self.heap_len, self.rels_at, 0)
        t0 = start + HEADER.size
        if n:
            assert self.det is not None
            _write_detections(buf, t0, self.det, self.label_rows, self.scratch)
        if len(self.rels):
            table = buf[t0:t0 + MTD_SIZE * mtds].view(np.uint32).reshape(mtds, 14)
            self._write_related(buf, table, t0, start)
        h0 = start + self.heap_at
        buf.data[h0:h0 + len(self.heap_bytes)] = self.heap_bytes

    def _write_related(self, buf: np.ndarray, table: np.ndarray, t0: int, start: int) -> None:
        n = self.n
        for j, ((off, k), _) in enumerate(self.classes):
            row = table[n + j]
            row[:] = 0
            row[C_TYPE], row[C_ID], row[C_PAYLOAD], row[C_PAYLOAD + 1] = CLS, n + j, off, k
        base = n + len(self.classes)
        for j, (_, tid, first, last, lost) in enumerate(self.tracks):
            table[base + j, :8] = (TRACK, base + j, 1 if lost else 0, 0, 0, 0, 0, 0)
            _TRACK.pack_into(buf, t0 + MTD_SIZE * (base + j) + 32, tid, first, last)
        r0 = start + self.rels_at
        buf[r0:r0 + REL_SIZE * len(self.rels)] = self.rels.view(np.uint8).reshape(-1)


def _relations_input(relations: Any, mtds: int) -> List[Tuple[int, int, int]]:
    if relations is None:
        return []
    out = []
    for item in relations:
        a, b, types = item
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, (int, np.integer)):
            try:
                types = sum(REL_NAMES[t] for t in types)
            except KeyError as e:
                raise InvalidArgumentError(f"relation type {e.args[0]!r} is not one of "
                                           f"{', '.join(REL_NAMES)}") from None
        a, b = int(a), int(b)
        if not (0 <= a < mtds and 0 <= b < mtds):
            raise InvalidArgumentError(f"relation ({a}, {b}) names an mtd outside the "
                                       f"{mtds} published (detections first, then "
                                       "classifications, then tracks)")
        out.append((a, b, int(types)))
    return out
