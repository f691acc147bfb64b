"""The core's meta codec through the C API (cudaipc.h, "Meta areas"): a decode's tables as NumPy
views, and a writer taking Python's values field by field. The core checks every byte of a peer's
area and lays out every byte written; this module only moves values across."""

from __future__ import annotations

import struct
from fractions import Fraction
from typing import Any, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from . import _lib
from ._errors import InvalidArgumentError
from ._metas import GstValue, Structure, ValueList, encode_name

_native = _lib.native

# cudaipc_metas_decoded: size, record_count, unknown, bad, the counts of mtds, classes,
# segmentations, relations, tensors, fields; error_count, errors_size; the tables' offsets.
HEADER = struct.Struct("<20I")
RECORD = np.dtype([("kind", "<u2"), ("known", "<u2"), ("name_offset", "<u4"),
                   ("name_size", "<u4"), ("body_offset", "<u4"), ("body_size", "<u4"),
                   ("first", "<u4"), ("count", "<u4"), ("first_relation", "<u4"),
                   ("relation_count", "<u4"), ("heap_offset", "<u4"), ("heap_size", "<u4"),
                   ("reserved", "<u4"), ("timestamp", "<u8"), ("duration", "<u8")])
MTD = np.dtype([("type", "<u4"), ("id", "<u4"), ("flags", "<u4"), ("detection", "<i4"),
                ("x", "<i4"), ("y", "<i4"), ("w", "<i4"), ("h", "<i4"), ("rotation", "<f4"),
                ("confidence", "<f4"), ("label_offset", "<u4"), ("label_size", "<u4"),
                ("first", "<u4"), ("count", "<u4"), ("track", "<i4"), ("reserved", "<u4"),
                ("tracking_id", "<u8"), ("first_seen", "<u8"), ("last_seen", "<u8")])
CLASS = np.dtype([("confidence", "<f4"), ("label_offset", "<u4"), ("label_size", "<u4")])
SEGMENTATION = np.dtype([(k, "<i4" if k in ("x", "y") else "<u4") for k in (
    "seg_type", "x", "y", "w", "h", "region_count", "regions_offset", "mask_width",
    "mask_height", "mask_stride", "mask_format", "mask_offset")])
TENSOR = np.dtype([("id_offset", "<u4"), ("id_size", "<u4"), ("dtype_offset", "<u4"),
                   ("dtype_size", "<u4"), ("num_dims", "<u4"), ("dims_order", "<u4"),
                   ("data_offset", "<u8"), ("data_size", "<u8"), ("dims", "<u8", (16,))])
FIELD = np.dtype({"names": ["type", "members", "name_offset", "name_size", "text_offset",
                            "text_size", "type_name_offset", "type_name_size", "i", "u", "d",
                            "den", "reserved"],
                  "formats": ["<u4"] * 8 + ["<i8", "<u8", "<f8", "<i4", "<u4"],
                  "offsets": [0, 4, 8, 12, 16, 20, 24, 28, 32, 32, 32, 40, 44],
                  "itemsize": 48})
assert (RECORD.itemsize, MTD.itemsize, TENSOR.itemsize) == (64, 88, 168)


class Tables:
    """One decode: its counts, the rows of each table (NumPy views of the decode's buffer), and
    the messages of what was left out."""

    __slots__ = ("records", "mtds", "classes", "segmentations", "relations", "tensors", "fields",
                 "errors", "unknown", "bad")

    def __init__(self, buf: np.ndarray) -> None:
        (_, nrec, self.unknown, self.bad, nmtd, ncls, nseg, nrel, nten, nfld, nerr, esize,
         orec, omtd, ocls, oseg, orel, oten, ofld, oerr) = HEADER.unpack_from(buf, 0)
        self.records = np.frombuffer(buf, RECORD, nrec, orec)
        self.mtds = np.frombuffer(buf, MTD, nmtd, omtd)
        self.classes = np.frombuffer(buf, CLASS, ncls, ocls)
        self.segmentations = np.frombuffer(buf, SEGMENTATION, nseg, oseg)
        self.relations = np.frombuffer(buf, "<u4", 3 * nrel, orel).reshape(nrel, 3)
        self.tensors = np.frombuffer(buf, TENSOR, nten, oten)
        self.fields = np.frombuffer(buf, FIELD, nfld, ofld)
        self.errors = bytes(buf[oerr:oerr + esize]).decode("utf-8", "replace") \
            .split("\0")[:nerr] if nerr else []


_decode = _native.metas_decode
_guess = [4096]  # the buffer a decode starts with: the last one's need (a stream's frames agree)


def decode(area: np.ndarray) -> Tables:
    """The core's decode of a read-only uint8 area (never raises for what its bytes say)."""
    address = area.__array_interface__["data"][0]
    size = area.shape[0]
    cap = _guess[0]
    buf = np.empty(cap, np.uint8)
    need = _decode(address, size, buf.__array_interface__["data"][0], cap)
    if need > cap:
        _guess[0] = need
        buf = np.empty(need, np.uint8)
        need = _decode(address, size, buf.__array_interface__["data"][0], need)
    if need < 0:
        _lib.check(-need, "decoding a meta area")
    return Tables(buf)


# ---- writing -------------------------------------------------------------------------------

_I64_MIN, _U64_END, _I32_END = -(1 << 63), 1 << 64, 1 << 31


class Writer:
    """A cudaipc_metas_writer (the binding's MetasWriter): an area begun on a buffer, records
    added in order, finished to its size (InvalidArgumentError naming what the records needed when
    they do not fit)."""

    def __init__(self) -> None:
        self.h = _native.MetasWriter()

    def begin(self, address: Optional[int], capacity: int) -> None:
        self.h.begin(address if capacity else None, capacity)

    def finish(self) -> int:
        return self.h.finish()

    def raw(self, kind: int, name: str, body: Any) -> None:
        b = encode_name(name)
        data = body if isinstance(body, (bytes, bytearray)) else \
            np.ascontiguousarray(body).reshape(-1).view(np.uint8)
        self.h.raw(kind, b, data)

    def timestamp(self, name: str, caps: str, timestamp: Optional[int],
                  duration: Optional[int]) -> None:
        b, c = encode_name(name), encode_name(caps, "a timestamp's caps")
        self.h.timestamp(b, c, None if timestamp is None else int(timestamp),
                         None if duration is None else int(duration))

    def tensors(self, name: str, items: List[Tuple[bytes, bytes, Tuple[int, ...], np.ndarray]]
                ) -> None:
        """(id, data type name, dims, data as contiguous uint8) of each tensor."""
        b = encode_name(name)
        for ident, _, dims, _ in items:
            if len(dims) > 16:
                raise InvalidArgumentError(f"tensor {ident.decode(errors='replace')!r}: "
                                           f"{len(dims)} dims, at most 16")
        self.h.tensors(b, items)

    def analytics(self, name: str, args: Any) -> None:
        _check(self.analytics_status(name, args))

    def analytics_status(self, name: str, args: Any) -> int:
        """cudaipc_metas_add_analytics of an AnalyticsArgs: its status."""
        return self.h.analytics(encode_name(name), args)

    def custom(self, name: str, fields: Mapping[str, Any]) -> None:
        """Kind 4: Python's bool, int, float, str and bytes (and NumPy's scalars of those)
        become boolean, int64 (uint64 above 2**63 - 1), double, string and bytes fields;
        Fraction a fraction, Structure a nested structure, list and tuple an array, ValueList a
        list, GstValue GStreamer's text of another type."""
        if not isinstance(fields, Mapping):
            raise InvalidArgumentError(f"meta must be a dict of fields, not "
                                       f"{type(fields).__name__}")
        b = encode_name(name)
        h = self.h
        h.custom_begin(b)
        _fields(h, fields.items())
        h.custom_end()


def _fields(h: Any, items: Iterable[Tuple[str, Any]]) -> None:
    """Each field added to `h` (a MetasWriter); a failure raises with the core's message."""
    for key, v in items:
        k = encode_name(key, "a meta field's name")
        if isinstance(v, (bool, np.bool_)):
            h.custom_boolean(k, bool(v))
        elif isinstance(v, (int, np.integer)):
            v = int(v)
            if _I64_MIN <= v < -_I64_MIN:
                h.custom_int64(k, v)
            elif 0 <= v < _U64_END:
                h.custom_uint64(k, v)
            else:
                raise InvalidArgumentError(f"meta field {key!r}: {v} does not fit 64 bits")
        elif isinstance(v, (float, np.floating)):
            h.custom_double(k, float(v))
        elif isinstance(v, str):
            h.custom_string(k, v.encode("utf-8"))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            h.custom_bytes(k, bytes(v))
        elif isinstance(v, GstValue):
            h.custom_other(k, encode_name(v.type_name, "a GType name"), v.text.encode("utf-8"))
        elif isinstance(v, Fraction):
            if not (-_I32_END < v.numerator < _I32_END and v.denominator < _I32_END):
                raise InvalidArgumentError(f"meta field {key!r}: {v} does not fit 32-bit terms")
            h.custom_fraction(k, v.numerator, v.denominator)
        elif isinstance(v, Structure):
            h.custom_begin_structure(k, encode_name(v.name, "a structure's name"))
            _fields(h, v.fields.items())
            h.custom_end_nested()
        elif isinstance(v, (list, tuple)):
            h.custom_begin_array(k, isinstance(v, ValueList))
            _fields(h, (("", m) for m in v))
            h.custom_end_nested()
        else:
            raise InvalidArgumentError(f"meta field {key!r}: {type(v).__name__} is not carried "
                                       "(int, float, bool, str, bytes, Fraction, Structure, "
                                       "list)")


def _check(rc: int) -> None:
    if rc:
        _lib.check(rc)

