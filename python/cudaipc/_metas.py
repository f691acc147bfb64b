"""The records of a frame's meta area (docs/metas.md) as Python sees them: the record classes, and
the Python forms of the small kinds' values (custom fields, reference timestamps, serialized and
unknown records). Analytics records are in _metas_analytics.py and tensor records in
_metas_tensors.py.

The bytes are the core's to read and write (cudaipc.h, "Meta areas"; _metas_capi.py calls it):
the core checks a peer's area, hostile, and hands over rows of checked values; this package turns
them into Python values and never parses the area's bytes itself."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

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

# Custom field types (kind 4).
F_INT64, F_UINT64, F_DOUBLE, F_BOOLEAN, F_STRING, F_BYTES, F_OTHER = range(1, 8)
F_INT32, F_UINT32, F_FLOAT, F_FRACTION, F_STRUCTURE, F_ARRAY, F_LIST = range(8, 15)
_INT32_MIN = -(1 << 31)

Buffer = Union[bytes, bytearray, memoryview, np.ndarray]


class MetaFormatError(ProtocolError):
    """A record (or the area) breaks docs/metas.md. Reading a frame's metas never raises it: the
    record is skipped and counted, and the reason lands in ``Frame.meta_errors``."""


def encode_name(name: Any, what: str = "a record's name") -> bytes:
    """A name as the core takes it (UTF-8); the core checks it (no NUL, its length)."""
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{what} must be a str, not {type(name).__name__}")
    return name.encode("utf-8")


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


class Decoded:
    """What one frame's area held: the records read, and why the others were left out."""

    __slots__ = ("records", "errors", "unknown", "bad", "_cache")

    def __init__(self) -> None:
        self.records: List[MetaRecord] = []
        self.errors: List[str] = []
        self.unknown = 0
        self.bad = 0
        self._cache: Dict[str, Any] = {}  # the frame-level views (detections...), made once



# ---- custom fields: the core's rows as Python values ---------------------------------------

_NESTED = (F_STRUCTURE, F_ARRAY, F_LIST)


def custom_values(rows: List[tuple], at: int, count: int, text: memoryview
                  ) -> Tuple[List[Tuple[str, Any]], int]:
    """`count` fields from row `at` of a decode's field table (rows as tuples, a nested field's
    members after it), as (name, value) pairs; and the row after them. Strings are read where the
    core checked them, in the area (`text`); a producer rewriting them meanwhile gets replacement
    characters, never an exception."""
    out: List[Tuple[str, Any]] = []
    for _ in range(count):
        t, members, no, ns, to, ts, tno, tns, i, u, d, den, _ = rows[at]
        at += 1
        name = str(text[no:no + ns], "utf-8", "replace") if ns else ""
        v: Any
        if t in _NESTED:
            sub, at = custom_values(rows, at, members, text)
            if t == F_STRUCTURE:
                v = Structure(str(text[to:to + ts], "utf-8", "replace"), dict(sub))
            elif t == F_ARRAY:
                v = [x for _, x in sub]
            else:
                v = ValueList(x for _, x in sub)
        elif t == F_INT64 or t == F_INT32:
            v = i
        elif t == F_UINT64 or t == F_UINT32:
            v = u
        elif t == F_DOUBLE or t == F_FLOAT:
            v = d
        elif t == F_BOOLEAN:
            v = bool(i)
        elif t == F_STRING:
            v = str(text[to:to + ts], "utf-8", "replace")
        elif t == F_BYTES:
            v = bytes(text[to:to + ts])
        elif t == F_OTHER:
            v = GstValue(str(text[tno:tno + tns], "utf-8", "replace"),
                         str(text[to:to + ts], "utf-8", "replace"))
        else:  # F_FRACTION: the core refused zero denominators
            v = Fraction(i, den)
        out.append((name, v))
    return out, at
