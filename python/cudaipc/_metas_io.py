"""Where metas meet a channel: the producer's writer (publish keywords -> an area, in a buffer
reused frame after frame or in the borrowed slot's own area) and a frame's reader (the area,
decoded once when first asked, its views keeping the frame's lease)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from . import _lib
from ._errors import InvalidArgumentError
from ._metas import (KIND_ANALYTICS, KIND_CUSTOM, KIND_TENSORS, MAX_AREA,
                     CustomRecord, Decoded, MetaRecord, RawRecord, TimestampRecord,
                     custom_values)
from ._metas_analytics import AnalyticsRecord, classifications, detections, tracks
from ._metas_analytics_write import AnalyticsInput, Scratch, detections_area, staged_analytics
from ._metas_capi import Writer, decode as core_decode
from ._metas_detections import detections_input
from ._metas_tensors import NAME as TENSORS_NAME
from ._metas_tensors import TensorsRecord, decoded as tensors_decoded, tensor_items

CUSTOM_NAME = "cudaipc-meta"
# The keywords publish() and frame() take for metas.
__all__ = ["MAX_AREA", "KEYWORDS", "Decoded", "MetaWriter", "MetaStats", "encode", "decode",
           "read"]
KEYWORDS = ("tensors", "detections", "classifications", "tracks", "relations", "meta", "metas",
            "label_names")
_ALIGN = 64


def _aligned(nbytes: int) -> np.ndarray:
    """A zeroed uint8 buffer starting on a 64-byte boundary, as slot areas do: tensor data aligns
    to the area, so the copy keeps it aligned in the slot."""
    raw = np.zeros(nbytes + _ALIGN, np.uint8)
    skip = -raw.ctypes.data % _ALIGN
    return raw[skip:skip + nbytes]


class _Area:
    """A writable uint8 array interface over memory the core owns (a slot's meta area)."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, size: int) -> None:
        self.__array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (address, False),
                                    "version": 3}


class MetaWriter:
    """A producer's: encodes the metas of a frame, with the core's writer, into its reusable
    buffer (``publish``) or into the borrowed slot's area (``frame()``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._buf: Optional[np.ndarray] = None
        self.address = 0  # the buffer's, once made
        self._slot_views: Dict[int, np.ndarray] = {}
        self.scratch = Scratch()
        self._w: Optional[Writer] = None

    def buffer(self) -> np.ndarray:
        if self._buf is None:
            self._buf = _aligned(self.capacity)
            self.address = self._buf.ctypes.data
        return self._buf

    def slot_view(self, address: int, capacity: int) -> np.ndarray:
        """A writable view of a slot's meta area (made once per slot: the areas never move)."""
        v = self._slot_views.get(address)
        if v is None or v.shape[0] != capacity:
            v = np.asarray(_Area(address, capacity))
            self._slot_views[address] = v
        return v

    def encode(self, buf: np.ndarray, tensors: Any = None, detections: Any = None,
               classifications: Any = None, tracks: Any = None, relations: Any = None,
               meta: Optional[Mapping[str, Any]] = None, metas: Any = None,
               label_names: Any = None) -> int:
        """Writes the frame's area into `buf`; returns its size in bytes (0: no metas)."""
        cap = self.capacity
        if isinstance(metas, (bytes, bytearray, memoryview, np.ndarray)):
            if any(x is not None for x in (tensors, detections, classifications, tracks,
                                           relations, meta)):
                raise InvalidArgumentError("metas=<bytes> is a whole area, published as given: "
                                           "it does not mix with the other meta keywords")
            raw = np.frombuffer(metas, np.uint8) if not isinstance(metas, np.ndarray) else \
                metas.reshape(-1).view(np.uint8)
            if raw.nbytes > cap:
                raise InvalidArgumentError(f"a raw meta area of {raw.nbytes} bytes is more than "
                                           f"the channel's meta area of {cap} bytes per slot")
            buf[:raw.nbytes] = raw  # published as given, unchecked: the way to test readers
            return raw.nbytes
        det = None if detections is None else detections_input(detections)
        if det is not None and det.track_ids is None and meta is None and tensors is None and \
                metas is None and classifications is None and tracks is None and \
                relations is None:
            # A detector's usual answer: its boxes alone, in one call.
            used = detections_area(buf, cap, det, label_names, self.scratch)
            if used is not None:
                return used
        w = self._w
        if w is None:
            w = self._w = Writer()
        w.begin(buf.__array_interface__["data"][0], cap)
        if det is not None and classifications is None and tracks is None and \
                relations is None and staged_analytics(w, det, label_names, self.scratch):
            pass  # a detector's boxes (and a dict, say): the staged arrays, as above
        elif det is not None or classifications is not None or tracks is not None or \
                relations is not None:
            AnalyticsInput(det, classifications, tracks, relations, label_names,
                           self.scratch).write(w)
        if tensors is not None and (len(tensors) or not isinstance(tensors, Mapping)):
            w.tensors(TENSORS_NAME, tensor_items(tensors))  # (none: no record)
        if meta is not None:
            w.custom(CUSTOM_NAME, meta)
        if metas is not None:
            if isinstance(metas, (str, Mapping)) or not hasattr(metas, "__iter__"):
                raise InvalidArgumentError("metas takes a list of records, or bytes of a whole "
                                           "area")
            for r in metas:
                _write_record(w, r)
        return w.finish()


def _write_record(w: Writer, rec: Any) -> None:
    """One item of ``metas=[...]``: a decoded record (its body as it came), or a
    :class:`RawRecord`, :class:`CustomRecord`, :class:`TimestampRecord` or
    :class:`TensorsRecord` made in Python."""
    if isinstance(rec, MetaRecord) and rec.body is not None:
        w.raw(rec.kind, rec.name, rec.body)
    elif isinstance(rec, RawRecord):
        w.raw(rec.kind, rec.name, rec.data)
    elif isinstance(rec, CustomRecord):
        w.custom(rec.name, rec.fields)
    elif isinstance(rec, TimestampRecord):
        w.timestamp(rec.name, rec.caps, rec.timestamp, rec.duration)
    elif isinstance(rec, TensorsRecord):
        rec.write(w)
    elif isinstance(rec, AnalyticsRecord):
        rec.encoder()  # raises: say how to publish analytics instead
    else:
        raise InvalidArgumentError(f"metas=[...] takes records (cudaipc.metas.RawRecord, "
                                   f"CustomRecord, TimestampRecord, or decoded ones), not "
                                   f"{type(rec).__name__}")


def encode(capacity: int = 16 * 1024 * 1024, **kw: Any) -> bytes:
    """The area publish(**kw) would write, as bytes (for tests and other transports)."""
    w = MetaWriter(capacity)
    buf = np.zeros(capacity, np.uint8)
    n = w.encode(buf, **kw)
    return buf[:n].tobytes()


def decode(data: Any) -> Decoded:
    """Decodes an area given as bytes (a frame's own: ``Frame.metas``). Never raises for what the
    bytes say; ``errors`` lists what was skipped."""
    arr = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else \
        data.reshape(-1).view(np.uint8)
    return decode_area(arr)


def decode_area(area: np.ndarray) -> Decoded:
    """Every record of an area (a read-only uint8 array of FrameDesc::metas_bytes bytes), as the
    core read it: records that break the format are left out, counted in ``bad`` with the reason
    in ``errors``; kinds this version does not read come as RawRecords, counted in ``unknown``."""
    out = Decoded()
    if not area.shape[0]:
        return out
    t = core_decode(area)
    out.errors, out.unknown, out.bad = t.errors, t.unknown, t.bad
    if not t.records.shape[0]:
        return out
    text = area.data
    fields = t.fields.tolist() if t.fields.shape[0] else []
    records = out.records
    for kind, known, no, ns, bo, bs, first, count, fr, nr, ho, hs, _, ts, dur in \
            t.records.tolist():
        name = str(text[no:no + ns], "utf-8", "replace")
        body = area[bo:bo + bs]
        try:
            rec = _record(t, kind, known, name, body, first, count, fr, nr, ho, hs, ts, dur,
                          fields, text, area)
        except (ValueError, OverflowError) as e:
            # What the core accepts but NumPy cannot view (a tensor of dims past its sizes): the
            # record is left out as bad, as a malformed one is.
            out.bad += 1
            out.errors.append(f"record {name!r} (kind {kind}): {type(e).__name__}: {e}")
            continue
        rec.body = body
        records.append(rec)
    return out


def _record(t: Any, kind: int, known: int, name: str, body: np.ndarray, first: int, count: int,
            fr: int, nr: int, ho: int, hs: int, ts: int, dur: int, fields: List[tuple],
            text: memoryview, area: np.ndarray) -> MetaRecord:
    """One of the core's record rows as Python's record."""
    if not known:
        return RawRecord(kind, name, body)
    if kind == KIND_ANALYTICS:
        return AnalyticsRecord(name, t.mtds[first:first + count], area[ho:ho + hs],
                               t.relations[fr:fr + nr], t.classes, t.segmentations, area, ho)
    if kind == KIND_TENSORS:
        return tensors_decoded(name, t.tensors[first:first + count].tolist(), text, area)
    if kind == KIND_CUSTOM:
        return CustomRecord(name, dict(custom_values(fields, first, count, text)[0]))
    return TimestampRecord(str(text[ho:ho + hs], "utf-8", "replace"),  # KIND_TIMESTAMP
                           None if ts == _lib.NO_TIME else ts,
                           None if dur == _lib.NO_TIME else dur, name)


# ---- reading a frame -----------------------------------------------------------------------


class MetaStats:
    """A consumer's counts, as cudaipcsrc names them: records read, records of kinds (or an
    area version) this reader does not know, records (or areas) that broke the format."""

    __slots__ = ("received", "unknown", "bad")

    def __init__(self) -> None:
        self.received = self.unknown = self.bad = 0

    def as_dict(self) -> Dict[str, int]:
        return {"metas-received": self.received, "metas-unknown": self.unknown,
                "metas-bad": self.bad}


class _Keeper:
    """The base of every view of a frame's area: an unconsumed DLPack capsule of the frame holds
    its lease (and the mapping the area lies in) until the last view is freed."""

    __slots__ = ("__array_interface__", "_capsule")

    def __init__(self, capsule: Any, address: int, size: int) -> None:
        self._capsule = capsule
        self.__array_interface__ = {"shape": (size,), "typestr": "|u1",
                                    "data": (address, True), "version": 3}


_frame_metas = _lib.native.frame_metas
_EMPTY = np.zeros(0, np.uint8)
_EMPTY.flags.writeable = False


def frame_area(handle: int) -> np.ndarray:
    """A frame's area as a read-only uint8 view that keeps the frame's lease while it lives."""
    address, size = _frame_metas(handle)
    if not address or not size:
        return _EMPTY
    try:
        capsule = _lib.frame_capsule(handle, 0, _lib.DLPACK_VERSIONED | _lib.DLPACK_NO_SYNC)
    except _lib.CapsuleFailed:
        # A layout DLPack cannot express: a copy instead of a view, valid for ever.
        copy = np.asarray(_Keeper(None, address, size)).copy()
        copy.flags.writeable = False
        return copy
    return np.asarray(_Keeper(capsule, address, size))


def read(handle: int, stats: MetaStats) -> Decoded:
    d = decode_area(frame_area(handle))
    stats.received += len(d.records)
    stats.unknown += d.unknown
    stats.bad += d.bad
    return d


def _analytics(d: Decoded) -> List[AnalyticsRecord]:
    return [r for r in d.records if isinstance(r, AnalyticsRecord)]


def frame_detections(d: Decoded) -> Dict[str, Any]:
    return detections(_analytics(d))


def frame_classifications(d: Decoded) -> List[Dict[str, Any]]:
    return classifications(_analytics(d))


def frame_tracks(d: Decoded) -> Dict[str, np.ndarray]:
    return tracks(_analytics(d))


def tensors(d: Decoded) -> Dict[str, np.ndarray]:
    out: Dict[str, np.ndarray] = {}
    for r in d.records:
        if isinstance(r, TensorsRecord):
            for k, v in r.arrays.items():
                out.setdefault(k, v)
    return out


def custom(d: Decoded) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for r in d.records:
        if isinstance(r, CustomRecord):
            out.setdefault(r.name, r.fields)
    return out
