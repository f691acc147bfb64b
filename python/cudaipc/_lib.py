"""The core's C API (core/include/cudaipc/cudaipc.h) as the package reaches it: the compiled binding
``native`` (python/native: frames, requests, replies, the per-frame calls) and, for what is not in
it yet, ctypes prototypes over the same shared object.

The DLPack capsule calls (``frame_capsule``, ``slot_capsule``, ``publish_capsule``) are PYFUNCTYPE
prototypes, which keep the GIL (the binding gave the core CPython's capsule functions when it
loaded; the core lets the GIL go itself while a publish waits for a slot); everything that may
block is a plain CDLL call, which releases it."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import struct
import sys
import types
from ctypes import (POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint32, c_uint64,
                    c_void_p)

from . import _errors

MAX_RANK = 8
MAX_PLANES = 4
NO_TIME = (1 << 64) - 1

MEMORY_HOST, MEMORY_CUDA = 1, 2
MAX_SLOTS = 32  # CUDAIPC_MAX_SLOTS
ROLE_FRAMES, ROLE_REQUESTS = 1, 2  # cudaipc_role
EVERY_FRAME, LATEST = 0, 1
BLOCK, DROP = 0, 1
PUBLISHED, DROPPED, TIMED_OUT, INTERRUPTED_PUBLISH, NEEDS_FORMAT = 0, 1, 2, 3, 4
# Flags of the DLPack calls, and the DLPack device types.
DLPACK_VERSIONED, DLPACK_NO_SYNC = 1, 2
DL_CPU, DL_CUDA, DL_CUDA_HOST = 1, 2, 3
(EVENT_FRAME, EVENT_FORMAT, EVENT_EOS, EVENT_TIMEOUT, EVENT_INTERRUPTED,
 EVENT_DISCONNECTED) = range(6)


def _load_native() -> types.ModuleType:
    """The compiled binding: the package's own, or the build CUDAIPC_NATIVE names (a developer's
    build directory's python/native/_native*.so, for the package run from the source tree)."""
    path = os.environ.get("CUDAIPC_NATIVE")
    if not path:
        try:
            from . import _native
        except ImportError as e:
            raise ImportError(f"cudaipc: its compiled binding cudaipc._native is missing or does "
                              f"not load ({e}); reinstall the package (pip install builds it for "
                              f"the Python that runs pip)") from e
        return _native
    spec = importlib.util.spec_from_file_location("cudaipc._native", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cudaipc: CUDAIPC_NATIVE={path} is not a Python extension")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["cudaipc._native"] = mod
    spec.loader.exec_module(mod)
    return mod


native = _load_native()


def _load() -> ctypes.CDLL:
    # The modules not yet in the binding reach the core's C API with ctypes, in the binding's own
    # shared object (the same copy of the core: handles pass between both).
    path = native.__file__
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"cudaipc: cannot load the core in {path}: {e}") from e


lib = _load()

_P, _I = c_void_p, c_int


# Raises the package's exception for a C API status (nonzero), with the core's message after the
# context: check(status, context="").
check = native.check


# ---- DLPack capsules made and read by the library ------------------------------------------


# What the core's capsule calls raise (the binding installs CPython's capsule functions in the core
# when it loads); callers turn it into the package's exception for cudaipc_last_error_code().
CapsuleFailed = native.CapsuleFailed


frame_capsule = native.frame_capsule


def capsule_error(e: CapsuleFailed) -> _errors.Error:
    """The package's exception for a failed capsule call."""
    return _errors.from_code(native.last_error_code(), str(e))


class Detections(Structure):
    """cudaipc_detections (cudaipc.h)."""
    _fields_ = [("area", c_void_p), ("capacity", c_uint32), ("n", c_uint32),
                ("boxes", c_void_p), ("scores", c_void_p), ("rotation", c_void_p),
                ("labels", c_void_p), ("names", c_void_p), ("name_offsets", c_void_p),
                ("name_count", c_uint32), ("reserved", c_uint32)]


# A whole meta area of detections alone, in one call (the common publish(detections=...)):
# (cudaipc_detections*) -> the area's size, or -status.
detections_area = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(
    ("cudaipc_metas_detections_area", lib))


class Analytics(Structure):
    """cudaipc_metas_analytics (cudaipc.h)."""
    _fields_ = [("n", c_uint32), ("boxes_f64", c_uint32), ("boxes", c_void_p),
                ("scores", c_void_p), ("rotation", c_void_p), ("labels", c_void_p),
                ("classifications", c_uint32), ("tracks", c_uint32),
                ("class_detection", c_void_p), ("class_first", c_void_p),
                ("class_scores", c_void_p), ("class_labels", c_void_p),
                ("track_detection", c_void_p), ("track_ids", c_void_p),
                ("first_seen", c_void_p), ("last_seen", c_void_p), ("lost", c_void_p),
                ("relations", c_void_p), ("relation_count", c_uint32),
                ("name_count", c_uint32), ("names", c_void_p), ("name_offsets", c_void_p)]


# cudaipc_metas_tensor_in: id and dtype as (offset, size) in the call's text, dims, order, data
# pointer and size, dims[16].
TENSOR_IN = struct.Struct("=6IQQ16Q")

# The meta codec (cudaipc.h, "Meta areas"): decode into a buffer, and a writer's calls. Names and
# values go as bytes with their sizes.
_W, _B, _U = c_void_p, ctypes.c_char_p, c_uint32
_METAS = {
    "cudaipc_metas_decode": (ctypes.c_int64, [_P, _U, _P, c_uint64]),
    "cudaipc_metas_writer_new": (_I, [POINTER(c_void_p)]),
    "cudaipc_metas_writer_free": (None, [_W]),
    "cudaipc_metas_writer_begin": (_I, [_W, _P, _U]),
    "cudaipc_metas_writer_finish": (ctypes.c_int64, [_W]),
    "cudaipc_metas_add_raw": (_I, [_W, _U, _B, _U, _P, _U]),
    "cudaipc_metas_add_timestamp": (_I, [_W, _B, _U, c_uint64, c_uint64, _B, _U]),
    "cudaipc_metas_add_tensors": (_I, [_W, _B, _U, _P, _U, _B, _U]),
    "cudaipc_metas_add_analytics": (_I, [_W, _B, _U, _P]),
    "cudaipc_metas_custom_begin": (_I, [_W, _B, _U]),
    "cudaipc_metas_custom_int64": (_I, [_W, _B, _U, c_int64]),
    "cudaipc_metas_custom_uint64": (_I, [_W, _B, _U, c_uint64]),
    "cudaipc_metas_custom_double": (_I, [_W, _B, _U, ctypes.c_double]),
    "cudaipc_metas_custom_boolean": (_I, [_W, _B, _U, _I]),
    "cudaipc_metas_custom_fraction": (_I, [_W, _B, _U, c_int32, c_int32]),
    "cudaipc_metas_custom_string": (_I, [_W, _B, _U, _B, _U]),
    "cudaipc_metas_custom_bytes": (_I, [_W, _B, _U, _B, _U]),
    "cudaipc_metas_custom_other": (_I, [_W, _B, _U, _B, _U, _B, _U]),
    "cudaipc_metas_custom_begin_structure": (_I, [_W, _B, _U, _B, _U]),
    "cudaipc_metas_custom_begin_array": (_I, [_W, _B, _U, _I]),
    "cudaipc_metas_custom_end_nested": (_I, [_W]),
    "cudaipc_metas_custom_end": (_I, [_W]),
}
for _name, (_res, _args) in _METAS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
