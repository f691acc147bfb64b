"""The records of a frame's meta area, in cudaipc's own encoding (docs/metas.md), read and written
without GStreamer: the area and its records, and the small kinds (custom fields, reference
timestamps, serialized and unknown records). Analytics records are in _metas_analytics.py and
tensor records in _metas_tensors.py.

Reading treats the bytes as hostile: they come from another process, which may even change them
while they are read. Every header field is unpacked once into a Python int and checked before it
is used (Python ints do not overflow, so a sum of two u64 offsets is checked as the true sum), no
count sizes an allocation before it is bounded by the bytes that would hold it, and a bad record
raises MetaFormatError, which the area walk turns into a skipped, counted record."""

from __future__ import annotations

import struct
from fractions import Fraction
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np

from ._errors import InvalidArgumentError, ProtocolError

MAGIC = 0x544D4943  # "CIMT"
VERSION = 1
MAX_AREA = 16 * 1024 * 1024
MAX_RECORDS = 65535
MAX_NAME = 1024
KIND_SERIALIZED, KIND_ANALYTICS, KIND_TENSORS, KIND_CUSTOM, KIND_TIMESTAMP = 1, 2, 3, 4, 5
KIND_NAMES = {1: "serialized", 2: "analytics", 3: "tensors", 4: "custom",
              5: "reference timestamp"}
NO_TIME = (1 << 64) - 1

AREA_HEADER = struct.Struct("<IHHII")  # magic, version, record_count, used, reserved
RECORD_HEADER = struct.Struct("<IHH")  # size, kind, name_len
FIELD_HEADER = struct.Struct("<IHBBII")  # field_size, name_len, type, reserved, value_len, rsvd
TIMESTAMP_HEADER = struct.Struct("<QQII")  # timestamp, duration, caps_len, reserved
U32x2 = struct.Struct("<II")
_I64, _U64, _F64 = struct.Struct("<q"), struct.Struct("<Q"), struct.Struct("<d")
_I32, _U32, _F32 = struct.Struct("<i"), struct.Struct("<I"), struct.Struct("<f")
_FRACTION = struct.Struct("<ii")

# Custom field types (kind 4).
F_INT64, F_UINT64, F_DOUBLE, F_BOOLEAN, F_STRING, F_BYTES, F_OTHER = range(1, 8)
F_INT32, F_UINT32, F_FLOAT, F_FRACTION, F_STRUCTURE, F_ARRAY, F_LIST = range(8, 15)
# How deep structures, arrays and lists nest (the record's own fields are depth 0).
MAX_CUSTOM_DEPTH = 8
_INT32_MIN = -(1 << 31)

Buffer = Union[bytes, bytearray, memoryview, np.ndarray]


class MetaFormatError(ProtocolError):
    """A record (or the area) breaks docs/metas.md. Reading a frame's metas never raises it: the
    record is skipped and counted, and the reason lands in ``Frame.meta_errors``."""


def pad8(n: int) -> int:
    return (n + 7) & ~7


def check_name(raw: bytes, what: str, *args: Any) -> str:
    """A name the doc says is UTF-8 without NUL. `what` names it for the error, formatted with
    `args` only then (this runs for every name read)."""
    if b"\0" in raw:
        raise MetaFormatError(f"{what.format(*args)} holds a NUL byte")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MetaFormatError(f"{what.format(*args)} is not UTF-8 ({e.reason} at byte "
                              f"{e.start})") from None


def encode_name(name: str, what: str = "a record's name") -> bytes:
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{what} must be a str, not {type(name).__name__}")
    b = name.encode("utf-8")
    if b"\0" in b:
        raise InvalidArgumentError(f"{what} {name!r} holds a NUL character")
    if len(b) > MAX_NAME:
        raise InvalidArgumentError(f"{what} is {len(b)} bytes, more than the {MAX_NAME} allowed")
    return b


# ---- records as Python sees them -----------------------------------------------------------


class MetaRecord:
    """One record of a frame's meta area: its ``kind`` (docs/metas.md: 1 serialized, 2 analytics,
    3 tensors, 4 custom, 5 reference timestamp; others are listed as :class:`RawRecord`) and
    ``name`` (the GstMeta's API name, or a custom meta's registered name). ``body`` is the
    record's body as it crossed (a read-only view, None for a record made in Python): publishing a
    decoded record again (``publish(..., metas=frame.metas)``) copies it unchanged."""

    kind: int = 0
    name: str = ""
    body: Optional[np.ndarray] = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} kind={self.kind} {self.name!r}>"


class RawRecord(MetaRecord):
    """A record Python does not read: serialized GstMetas (kind 1, ``gst_meta_serialize`` bytes)
    and kinds this version does not know. ``data`` is the body's bytes. Also how to publish any
    record by hand: ``RawRecord(kind, name, data)``."""

    def __init__(self, kind: int, name: str, data: Buffer) -> None:
        if not 1 <= int(kind) <= 0xFFFF:
            raise InvalidArgumentError(f"record kind {kind} is not between 1 and 65535")
        self.kind = int(kind)
        self.name = name
        self.data = bytes(data)


class CustomRecord(MetaRecord):
    """Kind 4: a GstCustomMeta's structure (``name`` its registered name; ``publish(meta=...)``
    uses ``cudaipc-meta``). ``fields`` maps field names to int, float, bool, str, bytes or, for
    GStreamer types Python has no class for, :class:`GstValue`."""

    kind = KIND_CUSTOM

    def __init__(self, name: str, fields: Mapping[str, Any]) -> None:
        self.name = name
        self.fields = dict(fields)

    def __repr__(self) -> str:
        return f"<CustomRecord {self.name!r} {self.fields!r}>"


class GstValue(NamedTuple):
    """A custom field of a type Python has no class for (type 7): its GType's name and the text
    ``gst_value_serialize`` made of it."""

    type_name: str
    text: str


class Structure(NamedTuple):
    """A GstStructure inside a custom field (type 12): its name and its fields."""

    name: str
    fields: Dict[str, Any]


class ValueList(list):
    """A GstValueList (type 14); a plain ``list`` or ``tuple`` is a GstValueArray (type 13)."""


class TimestampRecord(MetaRecord):
    """Kind 5: a GstReferenceTimestampMeta. Times in ns; None for GST_CLOCK_TIME_NONE."""

    kind = KIND_TIMESTAMP

    def __init__(self, caps: str, timestamp: Optional[int], duration: Optional[int] = None,
                 name: str = "GstReferenceTimestampMetaAPI") -> None:
        self.name = name
        self.caps = caps
        self.timestamp = timestamp
        self.duration = duration

    def __repr__(self) -> str:
        return f"<TimestampRecord {self.caps!r} {self.timestamp} +{self.duration}>"


# ---- reading -------------------------------------------------------------------------------


def _u8_slice(body: np.ndarray, start: int, size: int, what: str) -> np.ndarray:
    if start < 0 or size < 0 or start + size > body.shape[0]:
        raise MetaFormatError(f"{what} ({size} bytes at {start}) overruns the {body.shape[0]} "
                              "bytes it lies in")
    return body[start:start + size]


def decode_custom(name: str, body: np.ndarray) -> CustomRecord:
    return CustomRecord(name, dict(_custom_fields(body.tobytes(), 0)))


def _custom_fields(body: bytes, depth: int) -> List[Tuple[str, Any]]:
    """The fields of a custom body (a record's, or a nested value's members at `depth`)."""
    size = len(body)
    if size < 8:
        raise MetaFormatError(f"custom body of {size} bytes is shorter than its 8-byte header")
    count, _ = U32x2.unpack_from(body, 0)
    fields: List[Tuple[str, Any]] = []
    pos = 8
    for i in range(count):  # each field takes >= 16 bytes: a lying count ends at the body's end
        if pos + FIELD_HEADER.size > size:
            raise MetaFormatError(f"custom field {i} of {count} starts past the body's {size} "
                                  "bytes")
        fsize, name_len, ftype, _, value_len, _ = FIELD_HEADER.unpack_from(body, pos)
        need = FIELD_HEADER.size + pad8(name_len + value_len)
        if fsize % 8 or fsize < need or pos + fsize > size:
            raise MetaFormatError(f"custom field {i}: size {fsize} (needs a multiple of 8, at "
                                  f"least {need}, within the body's {size - pos} bytes left)")
        fname = check_name(body[pos + 16:pos + 16 + name_len], "custom field {}'s name", i)
        raw = body[pos + 16 + name_len:pos + 16 + name_len + value_len]
        fields.append((fname, _field_value(ftype, raw, fname, depth)))
        pos += fsize
    return fields


def _field_value(ftype: int, raw: bytes, fname: str, depth: int = 0) -> Any:
    n = len(raw)
    if ftype in (F_INT64, F_UINT64, F_DOUBLE):
        if n != 8:
            raise MetaFormatError(f"custom field {fname!r}: an 8-byte type with {n} bytes")
        return (_I64 if ftype == F_INT64 else _U64 if ftype == F_UINT64 else _F64).unpack(raw)[0]
    if ftype in (F_INT32, F_UINT32, F_FLOAT):
        if n != 4:
            raise MetaFormatError(f"custom field {fname!r}: a 4-byte type with {n} bytes")
        return (_I32 if ftype == F_INT32 else _U32 if ftype == F_UINT32 else _F32).unpack(raw)[0]
    if ftype == F_FRACTION:
        if n != 8:
            raise MetaFormatError(f"custom field {fname!r}: a fraction of {n} bytes")
        num, den = _FRACTION.unpack(raw)
        if den == 0 or _INT32_MIN in (num, den):
            raise MetaFormatError(f"custom field {fname!r}: the fraction {num}/{den}")
        return Fraction(num, den)
    if ftype in (F_STRUCTURE, F_ARRAY, F_LIST):
        if depth + 1 > MAX_CUSTOM_DEPTH:
            raise MetaFormatError(f"custom field {fname!r}: nested deeper than "
                                  f"{MAX_CUSTOM_DEPTH} levels")
        if ftype != F_STRUCTURE:
            members = [v for _, v in _custom_fields(raw, depth + 1)]
            return members if ftype == F_ARRAY else ValueList(members)
        sn = U32x2.unpack_from(raw, 0)[0] if n >= 8 else n
        if n < 8 or 8 + pad8(sn) > n:
            raise MetaFormatError(f"custom field {fname!r}: a structure's name past its end")
        sname = check_name(raw[8:8 + sn], "field {!r}'s structure name", fname)
        return Structure(sname, dict(_custom_fields(raw[8 + pad8(sn):], depth + 1)))
    if ftype == F_BOOLEAN:
        if n != 1:
            raise MetaFormatError(f"custom field {fname!r}: a boolean of {n} bytes")
        return raw != b"\0"
    if ftype == F_STRING:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MetaFormatError(f"custom field {fname!r}: a string that is not UTF-8") from None
    if ftype == F_BYTES:
        return raw
    if ftype == F_OTHER:
        nul = raw.find(b"\0")
        if nul < 0:
            raise MetaFormatError(f"custom field {fname!r}: no NUL after its type's name")
        try:
            return GstValue(check_name(raw[:nul], "field {!r}'s type", fname),
                            raw[nul + 1:].decode("utf-8"))
        except UnicodeDecodeError:
            raise MetaFormatError(f"custom field {fname!r}: text that is not UTF-8") from None
    raise MetaFormatError(f"custom field {fname!r}: unknown type {ftype}")


def decode_timestamp(name: str, body: np.ndarray) -> TimestampRecord:
    size = body.shape[0]
    if size < TIMESTAMP_HEADER.size:
        raise MetaFormatError(f"reference timestamp body of {size} bytes is shorter than 24")
    ts, dur, caps_len, _ = TIMESTAMP_HEADER.unpack_from(body, 0)
    if 24 + caps_len > size:
        raise MetaFormatError(f"reference caps of {caps_len} bytes overrun the body's {size}")
    try:
        caps = bytes(body[24:24 + caps_len]).decode("utf-8")
    except UnicodeDecodeError:
        raise MetaFormatError("reference caps are not UTF-8") from None
    return TimestampRecord(caps, None if ts == NO_TIME else ts, None if dur == NO_TIME else dur,
                           name)


class Decoded:
    """What one frame's area held: the records read, and why the others were left out."""

    __slots__ = ("records", "errors", "unknown", "bad", "_cache")

    def __init__(self) -> None:
        self.records: List[MetaRecord] = []
        self.errors: List[str] = []
        self.unknown = 0
        self.bad = 0
        self._cache: Dict[str, Any] = {}  # the frame-level views (detections...), made once


def _decode_body(kind: int, name: str, body: np.ndarray) -> MetaRecord:
    # Imported here: the analytics and tensor modules import this one.
    if kind == KIND_ANALYTICS:
        from ._metas_analytics import decode_analytics
        return decode_analytics(name, body)
    if kind == KIND_TENSORS:
        from ._metas_tensors import decode_tensors
        return decode_tensors(name, body)
    if kind == KIND_CUSTOM:
        return decode_custom(name, body)
    if kind == KIND_TIMESTAMP:
        return decode_timestamp(name, body)
    return RawRecord(kind, name, body)


def decode_area(area: np.ndarray) -> Decoded:
    """Reads every record of an area (a read-only uint8 array of FrameDesc::metas_bytes bytes).
    Never raises for what the bytes say: a bad record is skipped (by its size when that can be
    trusted, else the walk ends) and counted in ``bad``, an unknown kind in ``unknown``."""
    out = Decoded()
    size = area.shape[0]
    if size == 0:
        return out
    if size < AREA_HEADER.size:
        return _bad_area(out, f"an area of {size} bytes is shorter than its 16-byte header")
    magic, version, count, used, _ = AREA_HEADER.unpack_from(area, 0)
    if magic != MAGIC:
        return _bad_area(out, f"area magic {magic:#010x} is not {MAGIC:#010x} (CIMT)")
    if version != VERSION:
        out.unknown += 1
        out.errors.append(f"area version {version}: this reader knows {VERSION}; all skipped")
        return out
    if used < AREA_HEADER.size or used > size:
        return _bad_area(out, f"area claims {used} bytes in use of the {size} published")
    pos = AREA_HEADER.size
    mv = area.data
    for i in range(count):
        if pos + RECORD_HEADER.size > used:
            return _bad_area(out, f"record {i} of {count} starts past the {used} bytes in use")
        rsize, kind, name_len = RECORD_HEADER.unpack_from(area, pos)
        head = RECORD_HEADER.size + pad8(name_len)
        if rsize % 8 or rsize < head or pos + rsize > used or name_len > MAX_NAME:
            # Its size cannot be trusted, so neither can where the next record starts.
            return _bad_area(out, f"record {i} (kind {kind}) at byte {pos}: size {rsize} with a "
                                  f"name of {name_len} bytes (needs a multiple of 8, at least "
                                  f"{head}, within the {used - pos} bytes left; names <= "
                                  f"{MAX_NAME})")
        try:
            name = check_name(bytes(mv[pos + 8:pos + 8 + name_len]), "record {}'s name", i)
            body = area[pos + head:pos + rsize]
            rec = _decode_body(kind, name, body)
            rec.body = body
            if kind not in KIND_NAMES:
                out.unknown += 1
            out.records.append(rec)
        except MetaFormatError as e:
            out.bad += 1
            out.errors.append(f"record {i} (kind {kind}): {e}")
        except (ValueError, TypeError, OverflowError, IndexError, struct.error) as e:
            # A check this reader lacks must still not escape: the record is bad all the same.
            out.bad += 1
            out.errors.append(f"record {i} (kind {kind}): {type(e).__name__}: {e}")
        pos += rsize
    return out


def _bad_area(out: Decoded, why: str) -> Decoded:
    out.bad += 1
    out.errors.append(why)
    return out


# ---- writing -------------------------------------------------------------------------------


class Encoded:
    """A record laid out for writing: ``layout(offset)`` says its size once it knows where in the
    area it starts (tensor data aligns to the area), ``write(buf, offset)`` writes it."""

    def layout(self, offset: int) -> int:
        raise NotImplementedError

    def write(self, buf: np.ndarray, offset: int) -> None:
        raise NotImplementedError


def write_record_header(buf: np.ndarray, off: int, size: int, kind: int,
                        padded_name: bytes, name_len: int) -> int:
    """The record header and its padded name at `off`; returns where the body starts."""
    RECORD_HEADER.pack_into(buf, off, size, kind, name_len)
    end = off + 8 + len(padded_name)
    buf[off + 8:end] = np.frombuffer(padded_name, np.uint8)
    return end


class BodyRecord(Encoded):
    """A record whose body is bytes already made (raw records, decoded records forwarded, custom
    and timestamp records)."""

    def __init__(self, kind: int, name: str, body: Buffer) -> None:
        self.kind = kind
        b = encode_name(name)
        self.name_len = len(b)
        self.name = b + bytes(pad8(len(b)) - len(b))
        self.body = body if isinstance(body, np.ndarray) else np.frombuffer(body, np.uint8)
        self.size = 8 + len(self.name) + pad8(self.body.nbytes)

    def layout(self, offset: int) -> int:
        return self.size

    def write(self, buf: np.ndarray, offset: int) -> None:
        start = write_record_header(buf, offset, self.size, self.kind, self.name, self.name_len)
        n = self.body.nbytes
        buf[start:start + n] = self.body.reshape(-1).view(np.uint8)
        buf[start + n:offset + self.size] = 0


def custom_body(fields: Mapping[str, Any]) -> bytes:
    """A kind 4 body: Python's bool, int, float, str and bytes (and NumPy's scalars of those)
    become boolean, int64 (uint64 above 2**63 - 1), double, string and bytes fields; Fraction a
    fraction, :class:`Structure` a nested structure, list and tuple an array, :class:`ValueList` a
    list, :class:`GstValue` GStreamer's text of another type."""
    if not isinstance(fields, Mapping):
        raise InvalidArgumentError(f"meta must be a dict of fields, not {type(fields).__name__}")
    return _fields_body(fields.items(), 0)


def _fields_body(items: Iterable[Tuple[str, Any]], depth: int) -> bytes:
    items = list(items)
    parts = [U32x2.pack(len(items), 0)]
    for key, value in items:
        name = encode_name(key, "a meta field's name")
        ftype, raw = _field_bytes(key, value, depth)
        if len(name) > 0xFFFF or len(raw) > 0xFFFFFFFF:
            raise InvalidArgumentError(f"meta field {key!r} is too large")
        n = len(name) + len(raw)
        parts.append(FIELD_HEADER.pack(16 + pad8(n), len(name), ftype, 0, len(raw), 0))
        parts += [name, raw, bytes(pad8(n) - n)]
    return b"".join(parts)


def _field_bytes(key: str, v: Any, depth: int = 0) -> Tuple[int, bytes]:
    if isinstance(v, (bool, np.bool_)):
        return F_BOOLEAN, b"\1" if v else b"\0"
    if isinstance(v, (int, np.integer)):
        v = int(v)
        if -(1 << 63) <= v < (1 << 63):
            return F_INT64, _I64.pack(v)
        if 0 <= v < (1 << 64):
            return F_UINT64, _U64.pack(v)
        raise InvalidArgumentError(f"meta field {key!r}: {v} does not fit 64 bits")
    if isinstance(v, (float, np.floating)):
        return F_DOUBLE, _F64.pack(float(v))
    if isinstance(v, str):
        return F_STRING, v.encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview)):
        return F_BYTES, bytes(v)
    if isinstance(v, GstValue):
        return F_OTHER, encode_name(v.type_name, "a GType name") + b"\0" + v.text.encode()
    if isinstance(v, Fraction):
        if not (_INT32_MIN < v.numerator < (1 << 31) and v.denominator < (1 << 31)):
            raise InvalidArgumentError(f"meta field {key!r}: {v} does not fit 32-bit terms")
        return F_FRACTION, _FRACTION.pack(v.numerator, v.denominator)
    if isinstance(v, (Structure, list, tuple)):
        if depth + 1 > MAX_CUSTOM_DEPTH:
            raise InvalidArgumentError(f"meta field {key!r}: nested deeper than "
                                       f"{MAX_CUSTOM_DEPTH} levels")
        if isinstance(v, Structure):
            sname = encode_name(v.name, "a structure's name")
            return F_STRUCTURE, (U32x2.pack(len(sname), 0) + sname + bytes(pad8(len(sname)) -
                                 len(sname)) + _fields_body(v.fields.items(), depth + 1))
        members = _fields_body((("", m) for m in v), depth + 1)
        return (F_LIST if isinstance(v, ValueList) else F_ARRAY), members
    raise InvalidArgumentError(f"meta field {key!r}: {type(v).__name__} is not carried (int, "
                               "float, bool, str, bytes, Fraction, Structure, list)")


def timestamp_body(rec: TimestampRecord) -> bytes:
    caps = rec.caps.encode("utf-8")
    ts = NO_TIME if rec.timestamp is None else int(rec.timestamp)
    dur = NO_TIME if rec.duration is None else int(rec.duration)
    return TIMESTAMP_HEADER.pack(ts, dur, len(caps), 0) + caps


def record_encoder(rec: Any) -> Encoded:
    """The writer of one item of ``metas=[...]``: a decoded record (its body as it came), or a
    :class:`RawRecord`, :class:`CustomRecord` or :class:`TimestampRecord` made in Python."""
    if isinstance(rec, MetaRecord) and rec.body is not None:
        return BodyRecord(rec.kind, rec.name, rec.body)
    if isinstance(rec, RawRecord):
        return BodyRecord(rec.kind, rec.name, rec.data)
    if isinstance(rec, CustomRecord):
        return BodyRecord(KIND_CUSTOM, rec.name, custom_body(rec.fields))
    if isinstance(rec, TimestampRecord):
        return BodyRecord(KIND_TIMESTAMP, rec.name, timestamp_body(rec))
    from ._metas_analytics import AnalyticsRecord
    from ._metas_tensors import TensorsRecord
    if isinstance(rec, (AnalyticsRecord, TensorsRecord)):
        return rec.encoder()
    raise InvalidArgumentError(f"metas=[...] takes records (cudaipc.metas.RawRecord, "
                               f"CustomRecord, TimestampRecord, or decoded ones), not "
                               f"{type(rec).__name__}")


def layout(records: Iterable[Encoded], capacity: int) -> Tuple[List[Tuple[Encoded, int]], int]:
    """Where each record goes and the area's size; InvalidArgumentError, naming both sizes, when
    they do not fit `capacity`."""
    placed = []
    off = AREA_HEADER.size
    for r in records:
        placed.append((r, off))
        off += r.layout(off)
    if len(placed) > MAX_RECORDS:
        raise InvalidArgumentError(f"{len(placed)} meta records: at most {MAX_RECORDS} a frame")
    if off > capacity:
        too_big(off, capacity)
    return placed, off


def too_big(size: int, capacity: int) -> None:
    raise InvalidArgumentError(
        f"the frame's metas need {size} bytes, more than the channel's meta area of "
        f"{capacity} bytes per slot (Producer(meta_size=...) sets it)" if capacity else
        f"the frame's metas need {size} bytes and the channel has no meta area "
        "(Producer(meta_size=0))")


def write_area(buf: np.ndarray, placed: List[Tuple[Encoded, int]], used: int) -> int:
    AREA_HEADER.pack_into(buf, 0, MAGIC, VERSION, len(placed), used, 0)
    for r, off in placed:
        r.write(buf, off)
    return used


def check_raw_area(data: Buffer, capacity: int) -> np.ndarray:
    """``metas=<bytes>``: an area published as given (not checked: the way to test readers)."""
    arr = data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
    arr = arr.reshape(-1).view(np.uint8)
    if arr.nbytes > capacity:
        raise InvalidArgumentError(f"a raw meta area of {arr.nbytes} bytes is more than the "
                                   f"channel's meta area of {capacity} bytes per slot")
    return arr
