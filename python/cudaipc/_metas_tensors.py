"""Kind 3 records (GstTensorMeta, docs/metas.md): tensors by id, each with a data type named as
GStreamer names it, dims, a dims order and its data in the area. The core reads and writes the
record (cudaipc_metas_decode, cudaipc_metas_add_tensors); this module has the Python forms: NumPy
dtypes and arrays.

Reading hands out each tensor's data as a read-only NumPy view of the area, no copy, typed where
NumPy (or ml_dtypes, for bfloat16 and the float8 types) has the type. Without ml_dtypes those, and
always int4/uint4 (packed two to a byte, which no NumPy dtype is) and string, come as raw uint8
bytes: ``TensorInfo.dtype`` names the type either way."""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from ._errors import InvalidArgumentError
from ._metas import KIND_TENSORS, MetaRecord

NAME = "GstTensorMetaAPI"
MAX_TENSORS = 256
MAX_DIMS = 16
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

    def write(self, writer: Any) -> None:
        """Publishes the tensors it was made with (``metas=[TensorsRecord({...})]``)."""
        writer.tensors(self.name, tensor_items(self._given or {}))

    def __repr__(self) -> str:
        return f"<TensorsRecord {[(t.id, t.dtype, t.dims) for t in self.tensors]}>"


def decoded(name: str, rows: list, text: memoryview, area: np.ndarray) -> TensorsRecord:
    """A record of the core's tensor rows (cudaipc_metas_tensor, as tuples): each tensor's data a
    read-only view of the area, where the core checked it lies."""
    rec = TensorsRecord(None, name)
    for ido, ids, dto, dts, nd, order, off, size, dims in rows:
        dtype = str(text[dto:dto + dts], "utf-8", "replace")
        shape = tuple(dims[:nd])
        data = area[off:off + size]
        rec.tensors.append(TensorInfo(str(text[ido:ido + ids], "utf-8", "replace"), dtype, shape,
                                      "column-major" if order else "row-major", data,
                                      _view(dtype, shape, order, data)))
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


def tensor_items(tensors: Mapping[str, Any]) -> List[Tuple[bytes, bytes, Tuple[int, ...],
                                                              np.ndarray]]:
    """What the writer takes of a dict id -> array: each tensor's id, GStreamer's name of its type,
    its dims and its bytes (int4/uint4 packed two to a byte)."""
    if not isinstance(tensors, Mapping):
        raise InvalidArgumentError(f"tensors must be a dict of id -> array, not "
                                   f"{type(tensors).__name__}")
    if len(tensors) > MAX_TENSORS:
        raise InvalidArgumentError(f"{len(tensors)} tensors: at most {MAX_TENSORS} a frame")
    items = []
    for tid, obj in tensors.items():
        arr = host_array(obj, "tensor {!r}", tid)
        if arr.ndim > MAX_DIMS:
            raise InvalidArgumentError(f"tensor {tid!r}: {arr.ndim} dims, at most {MAX_DIMS}")
        dt = gst_name(arr.dtype)
        data = _packed4(arr) if dt in ("int4", "uint4") else arr.reshape(-1).view(np.uint8)
        items.append(((tid if type(tid) is str else str(tid)).encode("utf-8"), dt.encode(),
                      arr.shape, data))
    return items
