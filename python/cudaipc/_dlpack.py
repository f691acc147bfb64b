"""DLPack structures (the 1.x ABI, versioned and legacy) built with ctypes: capsules out of frames
and slots, and reading the tensor out of a capsule an object hands to a producer."""

from __future__ import annotations

import ctypes
import sys
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8,
                    c_uint16, c_uint32, c_uint64, c_void_p)
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from . import _dtypes
from ._errors import InvalidArgumentError

CPU, CUDA = 1, 2  # DLDeviceType
FLAG_READ_ONLY = 1
VERSION = (1, 0)


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


_DELETER = CFUNCTYPE(None, c_void_p)
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", _DELETER),
]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", _DELETER),
        ("flags", c_uint64),
        ("dl_tensor", DLTensor),
    ]


_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]
_api.PyCapsule_IsValid.restype = c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_SetName.restype = c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_GetName.restype = c_void_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_cap_valid_raw = ctypes.PYFUNCTYPE(c_int, c_void_p, c_char_p)(("PyCapsule_IsValid", _api))
_cap_pointer_raw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(("PyCapsule_GetPointer", _api))

# Capsule names are read through their pointers for the capsule's life: these buffers never die.
NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")
USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")


class _Export:
    """Everything one exported capsule points into, kept alive until its deleter runs."""

    __slots__ = ("managed", "layout", "on_delete")

    def __init__(self, managed: Any, layout: "Layout",
                 on_delete: Optional[Callable[[], None]]) -> None:
        self.managed = managed
        self.layout = layout
        self.on_delete = on_delete


_exports: Dict[int, _Export] = {}
# Reentrant: a garbage collection started while export() holds it can free a tensor whose deleter
# takes it again on the same thread.
_exports_lock = threading.RLock()


def _run_deleter(address: int) -> None:
    with _exports_lock:
        exp = _exports.pop(address, None)
    if exp is not None and exp.on_delete is not None:
        try:
            exp.on_delete()
        except Exception as e:  # a deleter cannot raise; say it, since a lease may be stuck
            print(f"cudaipc: releasing an exported frame failed: {e}", file=sys.stderr)


@_DELETER
def _deleter(ptr: int) -> None:
    # The importer (torch, cupy, numpy) calls this from C when its tensor dies, on any thread;
    # ctypes takes the GIL for the call.
    if ptr:
        _run_deleter(ptr)


_cap_name_raw = ctypes.PYFUNCTYPE(c_void_p, c_void_p)(("PyCapsule_GetName", _api))
_NAME_ADDRESSES = {ctypes.addressof(NAME_VERSIONED): NAME_VERSIONED,
                   ctypes.addressof(NAME_LEGACY): NAME_LEGACY}


@CFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule: int) -> None:
    # A capsule no importer consumed still owns its tensor: delete it as the importer would have.
    # The argument is the raw PyObject*: a py_object argument would resurrect a dying capsule.
    # Only our own name buffers mark a capsule still unconsumed (an importer renames it to a
    # string of its own), so one look at the name pointer tells, which keeps the common case (a
    # consumed capsule) to a single call.
    name = _NAME_ADDRESSES.get(_cap_name_raw(capsule) or 0)
    if name is not None:
        p = _cap_pointer_raw(capsule, name)
        if p:
            _run_deleter(p)


# The two callbacks are reached from C for as long as any capsule lives, including while the
# interpreter shuts down and module globals are cleared: hold an extra reference to each.
_api.Py_IncRef.argtypes = [ctypes.py_object]
_api.Py_IncRef(_deleter)
_api.Py_IncRef(_capsule_destructor)

# Raw addresses instead of converted arguments: PyCapsule_New runs once per export.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, c_void_p, c_void_p)(
    ("PyCapsule_New", _api))
_DESTRUCTOR_ADDRESS = ctypes.cast(_capsule_destructor, c_void_p).value
_NAME_LEGACY_ADDRESS = ctypes.addressof(NAME_LEGACY)
_NAME_VERSIONED_ADDRESS = ctypes.addressof(NAME_VERSIONED)
_POINTER_SIZE = ctypes.sizeof(c_void_p)
_BYTEORDER = sys.byteorder


def _split_at_data(managed: Any, offset: int) -> Tuple[bytes, bytes]:
    raw = ctypes.string_at(ctypes.addressof(managed), ctypes.sizeof(managed))
    return raw[:offset], raw[offset + _POINTER_SIZE:]


class Layout:
    """The part of a capsule that is the same for every buffer of one device, dtype, shape and
    strides: built once (per format, for a consumer), so that an export only copies a template
    with the data pointer spliced in instead of filling ctypes structures field by field."""

    __slots__ = ("shape_arr", "strides_arr", "error", "_legacy", "_versioned")

    def __init__(self, device: Tuple[int, int], dtype: _dtypes.DType, shape: Sequence[int],
                 byte_strides: Sequence[int], read_only: bool) -> None:
        ndim = len(shape)
        self.shape_arr = (c_int64 * max(ndim, 1))(*shape)
        self.strides_arr = (c_int64 * max(ndim, 1))()
        # An export raises this (not the layout): the frame stays usable in other ways.
        self.error: Optional[str] = None
        for i, s in enumerate(byte_strides):
            if s % dtype.itemsize:
                self.error = (f"stride {s} bytes is not a multiple of the {dtype.name} item size "
                              f"{dtype.itemsize}; DLPack counts strides in elements")
                break
            self.strides_arr[i] = s // dtype.itemsize
        templates = []
        for versioned in (False, True):
            managed: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
            t = managed.dl_tensor
            t.device.device_type, t.device.device_id = device
            t.ndim = ndim
            t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype.dl_code, dtype.itemsize * 8, 1
            t.shape = ctypes.cast(self.shape_arr, POINTER(c_int64))
            t.strides = ctypes.cast(self.strides_arr, POINTER(c_int64))
            t.byte_offset = 0
            managed.deleter = _deleter
            if versioned:
                managed.version.major, managed.version.minor = VERSION
                managed.flags = FLAG_READ_ONLY if read_only else 0
            offset = type(managed).dl_tensor.offset + DLTensor.data.offset
            templates.append(_split_at_data(managed, offset))
        self._legacy, self._versioned = templates

    def export(self, data: int, versioned: bool,
               on_delete: Optional[Callable[[], None]]) -> Any:
        """A DLPack capsule viewing `data`; `on_delete` runs once when the importer frees it (or
        the capsule dies unconsumed)."""
        if self.error is not None:
            raise BufferError(self.error)
        head, tail = self._versioned if versioned else self._legacy
        cls = DLManagedTensorVersioned if versioned else DLManagedTensor
        managed = cls.from_buffer_copy(head + (data or 0).to_bytes(_POINTER_SIZE, _BYTEORDER)
                                       + tail)
        address = ctypes.addressof(managed)
        with _exports_lock:
            _exports[address] = _Export(managed, self, on_delete)
        try:
            return _capsule_new(address,
                                _NAME_VERSIONED_ADDRESS if versioned else _NAME_LEGACY_ADDRESS,
                                _DESTRUCTOR_ADDRESS)
        except BaseException:
            with _exports_lock:
                _exports.pop(address, None)
            raise


def export(data: int, device: Tuple[int, int], dtype: _dtypes.DType, shape: Sequence[int],
           byte_strides: Sequence[int], versioned: bool, read_only: bool,
           on_delete: Optional[Callable[[], None]]) -> Any:
    """A DLPack capsule viewing `data`; `on_delete` runs once when the importer frees it (or the
    capsule dies unconsumed)."""
    return Layout(device, dtype, shape, byte_strides, read_only).export(data, versioned,
                                                                        on_delete)


def wants_versioned(max_version: Optional[Tuple[int, int]]) -> bool:
    return max_version is not None and tuple(max_version)[0] >= 1


class Imported:
    """A tensor read out of a DLPack capsule; ``close()`` hands it back to its owner."""

    def __init__(self, capsule: Any) -> None:
        if _api.PyCapsule_IsValid(capsule, NAME_VERSIONED):
            name, used, versioned = NAME_VERSIONED, USED_VERSIONED, True
        elif _api.PyCapsule_IsValid(capsule, NAME_LEGACY):
            name, used, versioned = NAME_LEGACY, USED_LEGACY, False
        else:
            raise InvalidArgumentError("__dlpack__ returned something that is not a DLPack "
                                       "capsule (or one already consumed)")
        ptr = _api.PyCapsule_GetPointer(capsule, name)
        cls = DLManagedTensorVersioned if versioned else DLManagedTensor
        self._managed = ctypes.cast(ptr, POINTER(cls)).contents
        if versioned and self._managed.version.major != 1:
            raise InvalidArgumentError(
                f"DLPack version {self._managed.version.major} is not one cudaipc reads")
        # The tensor is ours from here on: the capsule must not delete it too.
        _api.PyCapsule_SetName(capsule, used)
        t = self._managed.dl_tensor
        self.device = (t.device.device_type, t.device.device_id)
        self.dtype = _dtypes.from_dlpack(t.dtype.code, t.dtype.bits, t.dtype.lanes)
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        if t.strides:
            self.strides = tuple(t.strides[i] * self.dtype.itemsize for i in range(t.ndim))
        else:
            self.strides = contiguous_strides(self.shape, self.dtype.itemsize)
        self.data = (t.data or 0) + t.byte_offset
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._managed.deleter:
                self._managed.deleter(ctypes.addressof(self._managed))

    def __del__(self) -> None:
        self.close()


def contiguous_strides(shape: Sequence[int], itemsize: int) -> Tuple[int, ...]:
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))
