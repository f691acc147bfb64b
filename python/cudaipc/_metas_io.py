"""Where metas meet a channel: the producer's writer (publish keywords -> an area, in a buffer
reused frame after frame or in the borrowed slot's own area) and a frame's reader (the area,
decoded once when first asked, its views keeping the frame's lease)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_uint32
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from . import _lib
from ._errors import InvalidArgumentError
from ._metas import (AREA_HEADER, KIND_CUSTOM, MAX_AREA, BodyRecord, CustomRecord, Decoded,
                     Encoded, check_raw_area, custom_body, decode_area, layout, record_encoder,
                     too_big, write_area)
from ._metas_analytics import AnalyticsRecord, classifications, detections, tracks
from ._metas_analytics_write import AnalyticsEncoder, _Scratch, detections_area
from ._metas_detections import detections_input
from ._metas_tensors import TensorsEncoder, TensorsRecord

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


class MetaWriter:
    """A producer's: encodes the metas of a frame into its reusable buffer (``publish``) or into
    the borrowed slot's area (``frame()``), with the detection scratch arrays kept between
    frames."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._buf: Optional[np.ndarray] = None
        self.address = 0  # the buffer's, once made
        self._slot_views: Dict[int, np.ndarray] = {}
        self.scratch = _Scratch()

    def buffer(self) -> np.ndarray:
        if self._buf is None:
            self._buf = _aligned(self.capacity)
            self.address = self._buf.ctypes.data
        return self._buf

    def slot_view(self, address: int, capacity: int) -> np.ndarray:
        """A writable view of a slot's meta area (made once per slot: the areas never move)."""
        v = self._slot_views.get(address)
        if v is None or v.shape[0] != capacity:
            v = np.ctypeslib.as_array((ctypes.c_uint8 * capacity).from_address(address))
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
            raw = check_raw_area(metas, cap)
            buf[:raw.nbytes] = raw
            return raw.nbytes
        if tensors is None and metas is None and classifications is None and \
                tracks is None and relations is None and detections is not None:
            # A detector's usual answer: its boxes, perhaps with a dict of its own (a model
            # serving cudaipcfilter names the frame's timestamp that way).
            det = detections_input(detections)
            if det.track_ids is None:
                used = detections_area(buf, cap, det, label_names, self.scratch)
                if meta is None:
                    return used
                if used:
                    return self._append_custom(buf, used, meta)
            records = [AnalyticsEncoder(det, None, None, None, label_names, self.scratch)]
            if meta is not None:
                records.append(BodyRecord(KIND_CUSTOM, CUSTOM_NAME, custom_body(meta)))
            return self._records(buf, records)
        records: List[Encoded] = []
        if detections is not None or classifications is not None or tracks is not None or \
                relations is not None:
            det = None if detections is None else detections_input(detections)
            records.append(AnalyticsEncoder(det, classifications, tracks, relations, label_names,
                                            self.scratch))
        if tensors is not None and (len(tensors) or not isinstance(tensors, Mapping)):
            records.append(TensorsEncoder(tensors))  # (no record for no tensors)
        if meta is not None:
            records.append(BodyRecord(KIND_CUSTOM, CUSTOM_NAME, custom_body(meta)))
        if metas is not None:
            if isinstance(metas, (str, Mapping)) or not hasattr(metas, "__iter__"):
                raise InvalidArgumentError("metas takes a list of records, or bytes of a whole "
                                           "area")
            records += [record_encoder(r) for r in metas]
        return self._records(buf, records)

    def _append_custom(self, buf: np.ndarray, used: int, meta: Mapping[str, Any]) -> int:
        """The custom record after an area's last record, as layout() would have placed it."""
        rec = BodyRecord(KIND_CUSTOM, CUSTOM_NAME, custom_body(meta))
        magic, version, count, _, flags = AREA_HEADER.unpack_from(buf, 0)
        if used + rec.size > self.capacity:
            too_big(used + rec.size, self.capacity)
        rec.write(buf, used)
        AREA_HEADER.pack_into(buf, 0, magic, version, count + 1, used + rec.size, flags)
        return used + rec.size

    def _records(self, buf: np.ndarray, records: List[Encoded]) -> int:
        if not records:
            return 0
        placed, used = layout(records, self.capacity)
        return write_area(buf, placed, used)


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


_frame_metas = _lib.lib.cudaipc_frame_metas
_EMPTY = np.zeros(0, np.uint8)
_EMPTY.flags.writeable = False


def frame_area(handle: int) -> np.ndarray:
    """A frame's area as a read-only uint8 view that keeps the frame's lease while it lives."""
    size = c_uint32()
    address = _frame_metas(handle, byref(size))
    if not address or not size.value:
        return _EMPTY
    try:
        capsule = _lib.frame_capsule(handle, 0, _lib.DLPACK_VERSIONED | _lib.DLPACK_NO_SYNC)
    except _lib.CapsuleFailed:
        # A layout DLPack cannot express: a copy instead of a view, valid for ever.
        copy = np.ctypeslib.as_array((ctypes.c_uint8 * size.value).from_address(address)).copy()
        copy.flags.writeable = False
        return copy
    return np.asarray(_Keeper(capsule, address, size.value))


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
