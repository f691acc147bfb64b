"""What an analytics record is written from (docs/metas.md, kind 2): publish()'s detections,
classifications, tracks and relations as the arrays cudaipc_metas_add_analytics takes (the forms
detections come in are made arrays by _metas_detections.py), and labels as indexes into one table
of names. The core lays the record out and writes it.

The names table of integer labels is made once for as long as the caller's label_names stay equal
(a table of up to 2 KiB goes into every frame's heap whole; of a larger one, the core writes the
names a frame uses)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import _lib
from ._errors import InvalidArgumentError
from ._metas_analytics import NAME, REL_NAMES
from ._metas_detections import Detections, _host, _name_of, _names

_native = _lib.native
_detections_area = _native.metas_detections_area
_MAX_LUT = 65536  # integer labels below this index a table of names 0..top
_UNSIGNED = {np.dtype(f"<i{k}"): np.dtype(f"<u{k}") for k in (1, 2, 4, 8)}
_MAX = np.maximum.reduce  # without ndarray.max's Python wrapper


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class _Table:
    """A names table as the core takes it: UTF-8 back to back, and where each name starts (one
    offset more than names)."""

    def __init__(self, encoded: List[bytes]) -> None:
        self.encoded = encoded
        lens = np.fromiter((len(b) for b in encoded), np.uint32, len(encoded))
        self.offsets = np.zeros(len(encoded) + 1, np.uint32)
        np.cumsum(lens, out=self.offsets[1:])
        self.names = np.frombuffer(b"".join(encoded) or b"\0", np.uint8).copy()
        self.at = (_address(self.names), _address(self.offsets))

    def __len__(self) -> int:
        return len(self.encoded)


class _Strings:
    """A table being made of strings, each once, in the order first met."""

    def __init__(self, start: Optional[List[bytes]] = None) -> None:
        self.encoded: List[bytes] = list(start or [])
        self.index: Dict[str, int] = {}

    def add(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.encoded)
            self.encoded.append(s.encode("utf-8"))
        return i


class Scratch:
    """Per producer, reused frame after frame: the names table of integer labels, and the staged
    arrays of the one-call detections writer."""

    def __init__(self) -> None:
        self._key: Any = None  # label_names as last seen (a copy: edits in place are seen)
        self._obj: Any = None
        self._table: Optional[_Table] = None
        self.stage = _Stage()

    def table(self, names: Any, top: int) -> _Table:
        """Names 0..top (at least) of integer labels: label_names', else their decimal text."""
        t = self._table
        # The same names as last time: the same list, or an equal one made anew for each reply
        # (`label_names=["object"]` in a model's loop).
        same = t is not None and (self._obj is names or (
            names is not None and type(names) is type(self._obj))) and self._key == names
        if same:
            self._obj = names
            if len(t) > top:
                return t
        else:
            self._key = dict(names) if isinstance(names, Mapping) else \
                (list(names) if names is not None else None)
            self._obj = names
        size = max(top + 1, len(names) if isinstance(names, (list, tuple)) else 0)
        t = self._table = _Table([_name_of(names, v).encode("utf-8") for v in range(size)])
        return t


def label_indexes(labels: Any, label_names: Any, n: int, scratch: Scratch
                  ) -> Tuple[_Table, np.ndarray]:
    """Each box's label as an index into a names table."""
    names = _names(label_names)
    if type(labels) is np.ndarray and labels.dtype.kind in "iu":
        if labels.shape != (n,):
            raise InvalidArgumentError(f"labels of shape {labels.shape} for {n} boxes")
        # One reduction for both checks: negative labels seen as unsigned are huge.
        top = int(_MAX(labels.view(_UNSIGNED.get(labels.dtype, labels.dtype)))) if n else 0
        if top < _MAX_LUT:
            return scratch.table(names, top), labels
        if labels.dtype.kind == "i" and labels.min() < 0:
            raise InvalidArgumentError(f"label {int(labels.min())} is negative")
        distinct = np.unique(labels)
        table = _Table([_name_of(names, int(v)).encode("utf-8") for v in distinct.tolist()])
        return table, np.searchsorted(distinct, labels)
    if isinstance(labels, np.ndarray):
        labels = labels.reshape(-1).tolist()
    if len(labels) != n:
        raise InvalidArgumentError(f"{len(labels)} labels for {n} boxes")
    strings = _Strings()
    index = np.fromiter((strings.add(s if isinstance(s, str) else _name_of(names, int(s)))
                         for s in labels), np.int64, n)
    return _Table(strings.encoded), index


class _Stage:
    """cudaipc_metas_detections_area's inputs, copied into arrays made once, their addresses
    already in one cudaipc_detections: taking a fresh array's address, or passing ten arguments,
    costs more in Python than copying 100 boxes."""

    def __init__(self) -> None:
        self.n = -1
        self.buf: Any = None
        self.args = _native.DetectionsArgs()
        self.analytics = _native.AnalyticsArgs()

    def area(self, buf: np.ndarray, capacity: int) -> None:
        if self.buf is not buf:  # the writer's buffer and the slots' areas never move
            self.buf = buf
            self.args.area = _address(buf)
        self.args.capacity = capacity

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
        self.n = cap


def detections_area(buf: np.ndarray, capacity: int, det: Detections, label_names: Any,
                    scratch: Scratch) -> Optional[int]:
    """The whole area for detections alone (the common case) in one call of the core
    (cudaipc_metas_detections_area), for float32 boxes; its size. None for other boxes, which the
    writer takes."""
    if det.boxes.dtype != np.float32:  # other types are rounded in their own precision
        return None
    st = scratch.stage
    st.area(buf, capacity)
    quick = _stage(st, st.args, det, label_names, scratch)
    size = _detections_area(st.args)
    if size < 0 and quick:
        _restage_labels(st, st.args, det, label_names, scratch)
        size = _detections_area(st.args)
    if size < 0:
        _lib.check(-size)
    return size


def staged_analytics(writer: Any, det: Detections, label_names: Any, scratch: Scratch) -> bool:
    """Detections alone (no classifications, tracks or relations) with float32 boxes as an
    analytics record of `writer`, through the staged arrays; False for other input."""
    if det.boxes.dtype != np.float32 or det.track_ids is not None:
        return False
    st = scratch.stage
    quick = _stage(st, st.analytics, det, label_names, scratch)
    rc = writer.analytics_status(NAME, st.analytics)
    if rc and quick:
        _restage_labels(st, st.analytics, det, label_names, scratch)
        rc = writer.analytics_status(NAME, st.analytics)
    if rc:
        _lib.check(rc)
    return True


def _stage(st: "_Stage", a: Any, det: Detections, label_names: Any, scratch: Scratch) -> bool:
    """Copies the detections into the stage's arrays and points `a` (a cudaipc_detections or
    cudaipc_metas_analytics) at them. True when integer labels were staged unchecked against
    label_names (the core checks that each has a name; when one has none, or is negative, the
    call fails and _restage_labels makes the table that names every label)."""
    boxes, labels, n = det.boxes, det.labels, det.boxes.shape[0]
    table = None
    quick = False
    if labels is not None and n:
        if type(labels) is np.ndarray and labels.dtype.kind in "iu" and labels.shape == (n,) \
                and isinstance(label_names, (list, tuple)):
            table, quick = scratch.table(label_names, 0), True
        else:
            table, labels = label_indexes(labels, label_names, n, scratch)
    st.arrays(n)
    a.n = n
    a.boxes = st.at[0]
    st.boxes[:n] = boxes
    if det.scores is not None:
        st.scores[:n] = det.scores
        a.scores = st.at[1]
    else:
        a.scores = 0
    if det.rotation is not None:
        st.rotation[:n] = det.rotation
        a.rotation = st.at[2]
    else:
        a.rotation = 0
    if table is not None:
        st.labels[:n] = labels
        a.labels, (a.names, a.name_offsets) = st.at[3], table.at
        a.name_count = len(table)
    else:
        a.labels = a.names = a.name_offsets = 0  # no boxes: no label heap either
        a.name_count = 0
    return quick


def _restage_labels(st: "_Stage", a: Any, det: Detections, label_names: Any,
                    scratch: Scratch) -> None:
    n = det.boxes.shape[0]
    table, labels = label_indexes(det.labels, label_names, n, scratch)
    st.labels[:n] = labels
    a.names, a.name_offsets = table.at
    a.name_count = len(table)


class AnalyticsInput:
    """One analytics record's arrays, held until the core has written them: detections (mtds
    0..N-1), then classifications, then tracks, and `relations` (mtd table indexes)."""

    def __init__(self, det: Optional[Detections], classes: Any, track_input: Any,
                 relations: Any, label_names: Any, scratch: Scratch) -> None:
        a = self.args = _native.AnalyticsArgs()
        self.keep: List[np.ndarray] = []
        n = 0 if det is None else det.boxes.shape[0]
        a.n = n
        table: Optional[_Table] = None
        if det is not None and n:
            f32 = det.boxes.dtype == np.float32
            a.boxes_f64 = 0 if f32 else 1
            a.boxes = self._put(det.boxes, np.float32 if f32 else np.float64)
            a.scores = self._put(det.scores, np.float32)
            a.rotation = self._put(det.rotation, np.float32)
            if det.labels is not None:
                table, labels = label_indexes(det.labels, label_names, n, scratch)
                a.labels = self._put(labels, np.int64)
        names = _names(label_names)
        if classes is not None:
            table = self._classes(classes, names, n, table)
        tr = track_input if track_input is not None else \
            (det.track_ids if det is not None else None)
        if tr is not None:
            self._tracks(tr, n)
        if relations is not None:
            rels = _relations_input(relations)
            a.relation_count = rels.shape[0]
            a.relations = self._put(rels, np.uint32)
        if table is not None:
            a.name_count = len(table)
            a.names, a.name_offsets = table.at
            self.keep.append(table)  # type: ignore[arg-type]

    def _put(self, x: Any, dtype: Any) -> int:
        """The address of `x` as a contiguous array of `dtype`, kept; 0 (NULL) for none."""
        if x is None:
            return 0
        arr = np.ascontiguousarray(x, dtype)
        self.keep.append(arr)
        return _address(arr) if arr.size else 0

    def _classes(self, classes: Any, names: Any, n: int, table: Optional[_Table]) -> _Table:
        """Classification k's labels and scores, and the detection it classifies (-1: the
        frame); its labels join the names table."""
        if isinstance(classes, Mapping) or (isinstance(classes, tuple) and len(classes) == 2):
            items, per_detection = [classes], False
        else:
            items, per_detection = list(classes), n > 0
            if per_detection and len(items) != n:
                raise InvalidArgumentError(f"{len(items)} classifications for {n} detections: "
                                           "a list of them is one per detection (None to skip)")
        strings = _Strings(table.encoded if table is not None else None)
        detection, first, scores, labels = [], [0], [], []
        for i, c in enumerate(items):
            if c is None:
                continue
            lab, sc = (c.get("labels"), c.get("scores")) if isinstance(c, Mapping) else c
            if isinstance(lab, (str, int, np.integer)):
                lab = [lab]
            lab = list(_host(lab, "classification labels").reshape(-1).tolist()) \
                if not isinstance(lab, (list, tuple)) else list(lab)
            s = np.ones(len(lab), np.float32) if sc is None else \
                _host(sc, "classification scores").astype(np.float32).reshape(-1)
            if s.shape[0] != len(lab):
                raise InvalidArgumentError(f"classification {i}: {s.shape[0]} scores for "
                                           f"{len(lab)} labels")
            labels += [strings.add(x if isinstance(x, str) else _name_of(names, int(x)))
                       for x in lab]
            scores.append(s)
            first.append(len(labels))
            detection.append(i if per_detection else -1)
        a = self.args
        a.classifications = len(detection)
        a.class_detection = self._put(np.array(detection, np.int32), np.int32)
        a.class_first = self._put(np.array(first, np.uint32), np.uint32)
        a.class_scores = self._put(np.concatenate(scores) if scores else None, np.float32)
        a.class_labels = self._put(np.array(labels, np.int64), np.int64)
        return _Table(strings.encoded)

    def _tracks(self, tr: Any, n: int) -> None:
        """Each track's detection, id, first and last seen and lost: per detection, -1 (or a
        negative id) for none."""
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
        keep = np.flatnonzero(ids >= 0)
        a = self.args
        a.tracks = keep.shape[0]
        a.track_detection = self._put(keep, np.int32)
        a.track_ids = self._put(ids[keep], np.uint64)
        a.first_seen = self._put(cols[0][keep], np.uint64)
        a.last_seen = self._put(cols[1][keep], np.uint64)
        a.lost = self._put(cols[2][keep] != 0, np.uint8)

    def write(self, writer: Any) -> None:
        writer.analytics(NAME, self.args)


def _relations_input(relations: Any) -> np.ndarray:
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
        if a < 0 or b < 0:
            raise InvalidArgumentError(f"relation ({a}, {b}) names a negative mtd index")
        out.append((a, b, int(types)))
    return np.array(out, np.uint32).reshape(-1, 3)
