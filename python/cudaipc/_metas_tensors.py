"""Kind 3 records (GstTensorMeta, docs/metas.md): tensors by id, each with a data type named as
GStreamer names it, dims, a dims order and its data in the area.

Reading hands out each tensor's data as a read-only NumPy view of the area, no copy, typed where
NumPy (or ml_dtypes, for bfloat16 and the float8 types) has the type. Without ml_dtypes those, and
always int4/uint4 (packed two to a byte, which no NumPy dtype is) and string, come as raw uint8
bytes: ``TensorInfo.dtype`` names the type either way."""

from __future__ import annotations

import struct
import sys
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from ._errors import InvalidArgumentError
from ._metas import (KIND_TENSORS, Encoded, MetaFormatError, MetaRecord, U32x2, check_name,
                     encode_name, pad8, write_record_header)

NAME = "GstTensorMetaAPI"
MAX_TENSORS = 256
MAX_DIMS = 16
DATA_ALIGN = 64
ENTRY = struct.Struct("<IHHIIQQ")  # entry_size, id_len, dtype_len, num_dims, order, off, size
_DIMS = [struct.Struct(f"<{n}Q") for n in range(17)]
ROW_MAJOR, COL_MAJOR = 0, 1

# GStreamer's data type names and their element size in bits (0: not fixed).
BITS = {
    "int4": 4, "int8": 8, "int16": 16, "int32": 32, "int64": 64,
    "uint4": 4, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64,
    "float16": 16, "float32": 32, "float64": 64, "bfloat16": 16, "string": 0, "bool": 8,
    "complex64": 64, "complex128": 128, "float8e4m3fn": 8, "float8e4m3fnuz": 8,
    "float8e5m2": 8, "float8e5m2fnuz": 8,
}
# Types NumPy has itself; ml_dtypes adds these others under its own names.
_NUMPY = {n for n in BITS if n not in ("int4", "uint4", "string", "bfloat16") and
          not n.startswith("float8")}
_ML = {"bfloat16": "bfloat16", "float8e4m3fn": "float8_e4m3fn",
       "float8e4m3fnuz": "float8_e4m3fnuz", "float8e5m2": "float8_e5m2",
       "float8e5m2fnuz": "float8_e5m2fnuz", "int4": "int4", "uint4": "uint4"}
_FROM_ML = {v: k for k, v in _ML.items()}


def _ml_dtypes() -> Any:
    try:
        import ml_dtypes  # type: ignore[import-not-found]
        return ml_dtypes
    except ImportError:
        return None


_VIEWED: Dict[str, Optional[np.dtype]] = {}


def numpy_dtype(name: str) -> Optional[np.dtype]:
    """The NumPy dtype a tensor of GStreamer type `name` is viewed as; None where its data stays
    raw bytes (int4/uint4 are packed, string has no element size, ml_dtypes may be missing)."""
    try:
        return _VIEWED[name]
    except KeyError:
        d = _VIEWED[name] = _numpy_dtype(name)
        return d


def _numpy_dtype(name: str) -> Optional[np.dtype]:
    if name in _NUMPY:
        return np.dtype(name).newbyteorder("<")
    if name in ("int4", "uint4", "string"):
        return None
    ml = _ml_dtypes()
    return np.dtype(getattr(ml, _ML[name])) if ml is not None else None


_GST_NAMES: Dict[np.dtype, str] = {}


def gst_name(dtype: np.dtype) -> str:
    """GStreamer's name of a NumPy (or ml_dtypes) dtype (dtype.name is slow: remembered)."""
    try:
        return _GST_NAMES[dtype]
    except KeyError:
        name = _GST_NAMES[dtype] = _gst_name(dtype)
        return name


def _gst_name(dtype: np.dtype) -> str:
    name = dtype.name
    if name in _NUMPY and dtype.kind in "biufc":
        return name
    if name in _FROM_ML:
        return _FROM_ML[name]
    raise InvalidArgumentError(f"tensor dtype {dtype} has no GStreamer tensor type (they are "
                               f"{', '.join(BITS)})")


def data_size(name: str, dims: Tuple[int, ...]) -> Optional[int]:
    """Bytes `dims` elements of `name` take (4-bit types: half a byte each, rounded up)."""
    bits = BITS[name]
    if not bits:
        return None
    n = 1
    for d in dims:
        n *= d
    return (n * bits + 7) // 8


class TensorInfo(NamedTuple):
    """One tensor of a kind 3 record. ``array`` is ``data`` viewed with the tensor's NumPy dtype
    and dims (column-major ones as Fortran-ordered arrays), or ``data`` itself where it stays raw
    bytes (see the module's note). Both are read-only views of the frame's meta area."""

    id: str
    dtype: str
    dims: Tuple[int, ...]
    order: str  # "row-major" | "column-major"
    data: np.ndarray  # uint8, the tensor's bytes
    array: np.ndarray


def _view(name: str, dims: Tuple[int, ...], order: int, data: np.ndarray) -> np.ndarray:
    dt = numpy_dtype(name)
    if dt is None:
        return data
    return data.view(dt).reshape(dims, order="F" if order == COL_MAJOR else "C")


class TensorsRecord(MetaRecord):
    """Kind 3: a GstTensorMeta's tensors, in order. ``arrays`` maps ids to arrays (the first
    tensor of an id, should two share one). Made in Python, ``TensorsRecord({"id": array})``
    publishes them (``publish(tensors=...)`` does so)."""

    kind = KIND_TENSORS

    def __init__(self, tensors: Any = None, name: str = NAME) -> None:
        self.name = name
        self.tensors: List[TensorInfo] = []
        self._given = tensors  # made in Python: encoded when published

    @property
    def arrays(self) -> Dict[str, np.ndarray]:
        out: Dict[str, np.ndarray] = {}
        for t in self.tensors:
            out.setdefault(t.id, t.array)
        return out

    def encoder(self) -> "TensorsEncoder":
        return TensorsEncoder(self._given or {}, self.name)

    def __repr__(self) -> str:
        return f"<TensorsRecord {[(t.id, t.dtype, t.dims) for t in self.tensors]}>"


def decode_tensors(name: str, body: np.ndarray) -> TensorsRecord:
    size = body.shape[0]
    if size < 8:
        raise MetaFormatError(f"tensors body of {size} bytes is shorter than its 8-byte header")
    count, _ = U32x2.unpack_from(body, 0)
    if count > MAX_TENSORS:
        raise MetaFormatError(f"{count} tensors: at most {MAX_TENSORS} a record")
    rec = TensorsRecord(None, name)
    mv = body.data
    pos = 8
    for i in range(count):
        if pos + ENTRY.size > size:
            raise MetaFormatError(f"tensor {i} of {count} starts past the body's {size} bytes")
        esize, id_len, dt_len, ndims, order, off, dsize = ENTRY.unpack_from(body, pos)
        if ndims > MAX_DIMS:
            raise MetaFormatError(f"tensor {i}: {ndims} dims, at most {MAX_DIMS}")
        strings = pad8(id_len + dt_len)
        need = ENTRY.size + strings + 8 * ndims
        if esize % 8 or esize < need or pos + esize > size:
            raise MetaFormatError(f"tensor {i}: entry size {esize} (needs a multiple of 8, at "
                                  f"least {need}, within the {size - pos} bytes left)")
        s = pos + ENTRY.size
        tid = check_name(bytes(mv[s:s + id_len]), "tensor {}'s id", i)
        dtype = check_name(bytes(mv[s + id_len:s + id_len + dt_len]), "tensor {}'s type", i)
        if dtype not in BITS:
            raise MetaFormatError(f"tensor {i} ({tid!r}): unknown data type {dtype!r}")
        if order not in (ROW_MAJOR, COL_MAJOR):
            raise MetaFormatError(f"tensor {i} ({tid!r}): dims order {order} is neither 0 nor 1")
        dims = _DIMS[ndims].unpack_from(body, s + strings)
        if off + dsize > size:
            raise MetaFormatError(f"tensor {i} ({tid!r}): {dsize} bytes of data at {off} overrun "
                                  f"the body's {size}")
        want = data_size(dtype, dims)
        if want is not None and want != dsize:
            raise MetaFormatError(f"tensor {i} ({tid!r}): {dsize} bytes of data for dims "
                                  f"{list(dims)} of {dtype}, which take {want}")
        data = body[off:off + dsize]
        rec.tensors.append(TensorInfo(tid, dtype, dims, "column-major" if order else "row-major",
                                      data, _view(dtype, dims, order, data)))
        pos += esize
    return rec


# ---- writing -------------------------------------------------------------------------------


def host_array(obj: Any, what: str, *args: Any) -> np.ndarray:
    """A C-contiguous, little-endian host array of `obj`: NumPy arrays as they are, torch tensors
    (CUDA ones copied to the host: one .cpu()), CuPy arrays (.get()) and anything else np.asarray
    takes."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        name = str(t.dtype)[len("torch."):].replace("_", "")
        if name in _NUMPY:
            return t.numpy()
        ml = _ml_dtypes()
        if name in _ML and ml is not None:
            # NumPy's view of torch's bytes (torch has no NumPy name for these), then the type.
            raw = t.view({1: torch.uint8, 2: torch.int16}[t.element_size()]).numpy()
            return raw.view(getattr(ml, _ML[name]))
        raise InvalidArgumentError(f"{what.format(*args)}: torch dtype {t.dtype} is not "
                                   "carried (bfloat16 and float8 need ml_dtypes)")
    if type(obj) is np.ndarray and obj.dtype.byteorder != ">" and obj.flags.c_contiguous:
        return obj
    if not isinstance(obj, np.ndarray) and hasattr(obj, "get") and \
            hasattr(obj, "__cuda_array_interface__"):
        obj = obj.get()  # CuPy: to the host
    arr = np.asarray(obj)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    # Not np.ascontiguousarray, which makes 0-d arrays 1-d.
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _packed4(arr: np.ndarray) -> np.ndarray:
    """ml_dtypes' int4/uint4 (a byte each) packed two to a byte, the first element in the low
    nibble (ONNX's order, which GStreamer's 4-bit tensors follow)."""
    flat = arr.reshape(-1).view(np.uint8) & 0x0F
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.uint8)])
    return flat[0::2] | (flat[1::2] << 4)


_ENTRY_FIXED = struct.Struct("<IHHII")  # entry_size, id_len, dtype_len, num_dims, dims_order
_Q2 = struct.Struct("<QQ")  # data_offset, data_size
_ZEROS = bytes(DATA_ALIGN + 8)


class _Tensor(NamedTuple):
    head: bytes  # the entry up to data_offset
    tail: bytes  # id, type, padding, dims
    data: np.ndarray  # uint8, contiguous


class TensorsEncoder(Encoded):
    """Writes one kind 3 record of a dict id -> array; the data lands on 64-byte boundaries of
    the area, the entries before it. Each entry is made as bytes once, so writing is one copy of
    the entries and one per tensor's data."""

    def __init__(self, tensors: Mapping[str, Any], name: str = NAME) -> None:
        if not isinstance(tensors, Mapping):
            raise InvalidArgumentError(f"tensors must be a dict of id -> array, not "
                                       f"{type(tensors).__name__}")
        if len(tensors) > MAX_TENSORS:
            raise InvalidArgumentError(f"{len(tensors)} tensors: at most {MAX_TENSORS} a frame")
        b = encode_name(name)
        self.name_len = len(b)
        self.name = b + bytes(pad8(len(b)) - len(b))
        self.items: List[_Tensor] = []
        self.entries = 8
        for tid, obj in tensors.items():
            arr = host_array(obj, "tensor {!r}", tid)
            nd = arr.ndim
            if nd > MAX_DIMS:
                raise InvalidArgumentError(f"tensor {tid!r}: {nd} dims, at most {MAX_DIMS}")
            dt = gst_name(arr.dtype)
            data = _packed4(arr) if dt in ("int4", "uint4") else arr.reshape(-1).view(np.uint8)
            ident = encode_name(tid if type(tid) is str else str(tid), "a tensor's id")
            if len(ident) > 0xFFFF:
                raise InvalidArgumentError(f"tensor id {tid!r} is too long")
            dtb = dt.encode()
            n = len(ident) + len(dtb)
            esize = ENTRY.size + pad8(n) + 8 * nd
            self.items.append(_Tensor(
                _ENTRY_FIXED.pack(esize, len(ident), len(dtb), nd, ROW_MAJOR),
                ident + dtb + _ZEROS[:pad8(n) - n] + _DIMS[nd].pack(*arr.shape), data))
            self.entries += esize
        self.offsets: List[int] = []
        self.size = 0

    def layout(self, offset: int) -> int:
        body_at = offset + 8 + len(self.name)
        end = self.entries
        self.offsets = []
        for t in self.items:
            end = -(-(body_at + end) // DATA_ALIGN) * DATA_ALIGN - body_at
            self.offsets.append(end)
            end += t.data.nbytes
        self.size = 8 + len(self.name) + pad8(end)
        return self.size

    def write(self, buf: np.ndarray, offset: int) -> None:
        start = write_record_header(buf, offset, self.size, KIND_TENSORS, self.name,
                                    self.name_len)
        mv = buf.data
        parts = [U32x2.pack(len(self.items), 0)]
        for t, off in zip(self.items, self.offsets):
            parts += [t.head, _Q2.pack(off, t.data.nbytes), t.tail]
        entries = b"".join(parts)
        gap = start + len(entries)
        mv[start:gap] = entries
        # Data, and zeros in the gaps that align it.
        for t, off in zip(self.items, self.offsets):
            at = start + off
            mv[gap:at] = _ZEROS[:at - gap]
            gap = at + t.data.nbytes
            buf[at:gap] = t.data
        end = offset + self.size
        mv[gap:end] = _ZEROS[:end - gap]
