"""A DLPack importer for the tests, in the way cupy's DLPackMemory is one: it takes the tensor out
of a capsule (renaming it "used_..."), reads where it lives, and calls the tensor's deleter itself
when it lets go (close(), or when collected). ctypes on the 1.x ABI, versioned and legacy: the
package makes its capsules in C, and this reads them as a third-party importer would."""

from __future__ import annotations

import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8,
                    c_uint16, c_uint32, c_uint64, c_void_p)
from typing import Any

from cudaipc import _dtypes

CPU, CUDA = 1, 2  # DLDeviceType


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


_DELETER = CFUNCTYPE(None, c_void_p)


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", _DELETER)]


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
_api.PyCapsule_IsValid.restype = c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
_api.PyCapsule_SetName.restype = c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]

# A capsule keeps reading its name through the pointer it was given: these buffers never die.
_NAME_LEGACY = ctypes.create_string_buffer(b"dltensor")
_NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
_USED_LEGACY = ctypes.create_string_buffer(b"used_dltensor")
_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")


class Imported:
    """A tensor read out of a DLPack capsule; ``close()`` hands it back to its owner."""

    def __init__(self, capsule: Any) -> None:
        if _api.PyCapsule_IsValid(capsule, _NAME_VERSIONED):
            name, used, versioned = _NAME_VERSIONED, _USED_VERSIONED, True
        elif _api.PyCapsule_IsValid(capsule, _NAME_LEGACY):
            name, used, versioned = _NAME_LEGACY, _USED_LEGACY, False
        else:
            raise ValueError("not a DLPack capsule (or one already consumed)")
        ptr = _api.PyCapsule_GetPointer(capsule, name)
        cls = DLManagedTensorVersioned if versioned else DLManagedTensor
        self._managed = ctypes.cast(ptr, POINTER(cls)).contents
        if versioned:
            assert self._managed.version.major == 1, self._managed.version.major
        # The tensor is ours from here on: the capsule must not delete it too.
        _api.PyCapsule_SetName(capsule, used)
        t = self._managed.dl_tensor
        self.device = (t.device.device_type, t.device.device_id)
        self.read_only = bool(versioned and self._managed.flags & 1)
        self.dtype = _dtypes.from_dlpack(t.dtype.code, t.dtype.bits, t.dtype.lanes)
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        if t.strides:
            self.strides = tuple(t.strides[i] * self.dtype.itemsize for i in range(t.ndim))
        else:
            self.strides = _dtypes.contiguous_strides(self.shape, self.dtype.itemsize)
        self.data = (t.data or 0) + t.byte_offset
        self._closed = False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._managed.deleter:
                self._managed.deleter(ctypes.addressof(self._managed))

    def __del__(self) -> None:
        self.close()
