"""The few CUDA driver calls the package makes itself, through ctypes on libcuda.so.1: no CUDA
toolkit at run time, and nothing loaded until a CUDA frame is copied to the host. Stream ordering
is the library's (cudaipc.h); this is only the host copy of ``Frame.numpy()``."""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, byref, c_int, c_size_t, c_uint, c_void_p
from typing import Optional

from ._errors import CudaError, NoCudaError

# DLPack / array-API stream values that are CUstream handles as they are: CU_STREAM_LEGACY and
# CU_STREAM_PER_THREAD.
STREAM_LEGACY = 1
STREAM_PER_THREAD = 2


class Driver:
    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise NoCudaError(f"the CUDA driver libcuda.so.1 cannot be loaded: {e}") from e
        protos = {
            "cuInit": [c_uint],
            "cuGetErrorName": [c_int, POINTER(ctypes.c_char_p)],
            "cuGetErrorString": [c_int, POINTER(ctypes.c_char_p)],
            "cuStreamGetCtx": [c_void_p, POINTER(c_void_p)],
            "cuStreamSynchronize": [c_void_p],
            "cuCtxPushCurrent_v2": [c_void_p],
            "cuCtxPopCurrent_v2": [POINTER(c_void_p)],
            "cuMemcpyDtoHAsync_v2": [c_void_p, c_size_t, c_size_t, c_void_p],
        }
        for name, args in protos.items():
            f = getattr(self.lib, name)
            f.restype = c_int
            f.argtypes = args
        self.check(self.lib.cuInit(0), "cuInit")

    def check(self, rc: int, call: str) -> None:
        if rc == 0:
            return
        name = ctypes.c_char_p()
        text = ctypes.c_char_p()
        self.lib.cuGetErrorName(rc, byref(name))
        self.lib.cuGetErrorString(rc, byref(text))
        raise CudaError(f"{call} failed: {(name.value or b'?').decode()} "
                        f"({(text.value or b'').decode()})", 11)


_driver: Optional[Driver] = None
_driver_lock = threading.Lock()


def driver() -> Driver:
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = Driver()
        return _driver


def copy_to_host(stream: int, dst: int, src: int, nbytes: int) -> None:
    """Device-to-host copy ordered after `stream` (a consumer's: after the frame landed), complete
    on return. Not on any per-frame path: ``Frame.numpy()`` of a CUDA frame."""
    d = driver()
    ctx = c_void_p()
    d.check(d.lib.cuStreamGetCtx(c_void_p(stream), byref(ctx)), "cuStreamGetCtx")
    with _Current(d, ctx.value):  # type: ignore[arg-type]
        d.check(d.lib.cuMemcpyDtoHAsync_v2(c_void_p(dst), src, nbytes, c_void_p(stream)),
                "cuMemcpyDtoHAsync")
        d.check(d.lib.cuStreamSynchronize(c_void_p(stream)), "cuStreamSynchronize")


class _Current:
    """Makes a context current on this thread for a few calls, then restores the previous one."""

    def __init__(self, d: Driver, ctx: int) -> None:
        self.d = d
        self.ctx = ctx

    def __enter__(self) -> None:
        self.d.check(self.d.lib.cuCtxPushCurrent_v2(c_void_p(self.ctx)), "cuCtxPushCurrent")

    def __exit__(self, *exc: object) -> None:
        old = c_void_p()
        self.d.check(self.d.lib.cuCtxPopCurrent_v2(byref(old)), "cuCtxPopCurrent")


def stream_handle(stream: object) -> int:
    """A caller's stream as a CUstream value: an int (DLPack's convention: None and 1 the legacy
    default stream, 2 the per-thread one), or an object with ``cuda_stream`` (torch) or ``ptr``
    (cupy)."""
    if stream is None:
        return STREAM_LEGACY
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    if isinstance(stream, int):
        if stream == 0:
            # The array API standard disallows 0: it is ambiguous between legacy and per-thread.
            raise ValueError("stream 0 is ambiguous: pass 1 (legacy default) or 2 (per-thread)")
        return stream
    raise TypeError(f"cannot use {stream!r} as a CUDA stream")
