"""The core's dtype numbering (tensor.hpp) against NumPy dtypes, DLPack codes and the names
GStreamer's other/tensors caps use."""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ._errors import InvalidArgumentError


class DType(NamedTuple):
    code: int  # the core's wire value
    name: str  # NNStreamer's name, also the NumPy name where NumPy has the type
    itemsize: int
    dl_code: int  # DLPack DLDataTypeCode
    typestr: Optional[str]  # array-interface typestr; None where NumPy has no such type


# DLPack codes: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6.
_TABLE = [
    DType(1, "int8", 1, 0, "|i1"),
    DType(2, "int16", 2, 0, "<i2"),
    DType(3, "int32", 4, 0, "<i4"),
    DType(4, "int64", 8, 0, "<i8"),
    DType(5, "uint8", 1, 1, "|u1"),
    DType(6, "uint16", 2, 1, "<u2"),
    DType(7, "uint32", 4, 1, "<u4"),
    DType(8, "uint64", 8, 1, "<u8"),
    DType(9, "float16", 2, 2, "<f2"),
    DType(10, "float32", 4, 2, "<f4"),
    DType(11, "float64", 8, 2, "<f8"),
    DType(12, "bfloat16", 2, 4, None),
    DType(13, "bool", 1, 6, "|b1"),
]
BY_CODE = {d.code: d for d in _TABLE}
BY_NAME = {d.name: d for d in _TABLE}
_BY_DLPACK = {(d.dl_code, d.itemsize * 8): d for d in _TABLE}
NAMES = tuple(d.name for d in _TABLE)


def from_code(code: int) -> DType:
    try:
        return BY_CODE[code]
    except KeyError:
        raise InvalidArgumentError(f"unknown dtype code {code} from the producer") from None


def from_dlpack(code: int, bits: int, lanes: int) -> DType:
    d = _BY_DLPACK.get((code, bits))
    if d is None or lanes != 1:
        raise InvalidArgumentError(
            f"DLPack dtype (code {code}, {bits} bits, {lanes} lanes) has no cudaipc dtype; "
            f"cudaipc carries {', '.join(NAMES)}")
    return d


def from_any(dtype: object) -> DType:
    """A DType from a NumPy dtype, a name ('float32', 'bfloat16') or anything np.dtype takes;
    torch dtypes are taken by name."""
    if isinstance(dtype, DType):
        return dtype
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    if name in BY_NAME:
        return BY_NAME[name]
    try:
        npd = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgumentError(
            f"dtype {dtype!r} is not one cudaipc carries ({', '.join(NAMES)})") from None
    if npd.name in BY_NAME and npd.byteorder in "=|<":
        return BY_NAME[npd.name]
    raise InvalidArgumentError(
        f"dtype {npd} is not one cudaipc carries ({', '.join(NAMES)}; little-endian)")


def numpy_dtype(d: DType) -> np.dtype:
    if d.typestr is not None:
        return np.dtype(d.typestr)
    try:  # bfloat16: NumPy has none; ml_dtypes (shipped with JAX and TensorFlow) adds one
        import ml_dtypes  # type: ignore[import-not-found]

        return np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        raise InvalidArgumentError(
            "NumPy has no bfloat16: install ml_dtypes, or read the frame through DLPack "
            "(torch.from_dlpack)") from None


def contiguous_strides(shape: Sequence[int], itemsize: int) -> Tuple[int, ...]:
    """Byte strides of a C-contiguous array of `shape`."""
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))
