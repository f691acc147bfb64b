"""The few CUDA driver calls the package needs, through ctypes on libcuda.so.1: no CUDA toolkit at
run time, and nothing loaded until a CUDA channel is used."""

from __future__ import annotations

import ctypes
import sys
import threading
from ctypes import POINTER, byref, c_int, c_size_t, c_uint, c_void_p
from typing import Optional

from ._errors import CudaError, NoCudaError

# DLPack / array-API stream values that are CUstream handles as they are: CU_STREAM_LEGACY and
# CU_STREAM_PER_THREAD.
STREAM_LEGACY = 1
STREAM_PER_THREAD = 2
_EVENT_DISABLE_TIMING = 0x2
_NOT_READY = 600
_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


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
            "cuEventCreate": [POINTER(c_void_p), c_uint],
            "cuEventDestroy_v2": [c_void_p],
            "cuEventRecord": [c_void_p, c_void_p],
            "cuEventQuery": [c_void_p],
            "cuEventSynchronize": [c_void_p],
            "cuStreamWaitEvent": [c_void_p, c_void_p, c_uint],
            "cuStreamGetCtx": [c_void_p, POINTER(c_void_p)],
            "cuStreamSynchronize": [c_void_p],
            "cuCtxPushCurrent_v2": [c_void_p],
            "cuCtxPopCurrent_v2": [POINTER(c_void_p)],
            "cuCtxGetDevice": [POINTER(c_int)],
            "cuMemcpyDtoHAsync_v2": [c_void_p, c_size_t, c_size_t, c_void_p],
            "cuPointerGetAttribute": [c_void_p, c_int, c_size_t],
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


class StreamSync:
    """Orders work between one stream the core owns (a consumer's reads or a producer's writes) and
    streams callers name, on the GPU: an event recorded on one, waited on by the other. One event
    serves every pair, since cuStreamWaitEvent captures the event's state when it is called."""

    def __init__(self, stream: int) -> None:
        self.d = driver()
        self.stream = stream
        ctx = c_void_p()
        self.d.check(self.d.lib.cuStreamGetCtx(c_void_p(stream), byref(ctx)), "cuStreamGetCtx")
        self.ctx = ctx.value
        self.lock = threading.Lock()
        ev = c_void_p()
        with self.current():
            self.d.check(self.d.lib.cuEventCreate(byref(ev), _EVENT_DISABLE_TIMING),
                         "cuEventCreate")
            dev = c_int()
            self.d.check(self.d.lib.cuCtxGetDevice(byref(dev)), "cuCtxGetDevice")
        self.event = ev.value
        self.device = dev.value
        self._free: list = []  # completed events for wait_later

    def current(self) -> "_Current":
        return _Current(self.d, self.ctx)

    def wait(self, waiter: int, signaller: int) -> None:
        """Work queued on `waiter` from now on runs after what `signaller` has queued so far."""
        if waiter == signaller:
            return
        with self.lock, self.current():
            self.d.check(self.d.lib.cuEventRecord(c_void_p(self.event), c_void_p(signaller)),
                         "cuEventRecord")
            self.d.check(self.d.lib.cuStreamWaitEvent(c_void_p(waiter), c_void_p(self.event), 0),
                         "cuStreamWaitEvent")

    def caller_waits(self, caller: int) -> None:
        self.wait(caller, self.stream)

    def after_caller(self, caller: int) -> None:
        self.wait(self.stream, caller)

    def mark(self) -> int:
        """An event recorded on the core's stream now, to poll with done()."""
        with self.lock, self.current():
            ev = c_void_p(self._free.pop()) if self._free else c_void_p()
            if not ev.value:
                self.d.check(self.d.lib.cuEventCreate(byref(ev), _EVENT_DISABLE_TIMING),
                             "cuEventCreate")
            self.d.check(self.d.lib.cuEventRecord(ev, c_void_p(self.stream)), "cuEventRecord")
            return ev.value  # type: ignore[return-value]

    def done(self, event: int, block: bool = False) -> bool:
        with self.current():
            if block:
                self.d.check(self.d.lib.cuEventSynchronize(c_void_p(event)), "cuEventSynchronize")
            else:
                rc = self.d.lib.cuEventQuery(c_void_p(event))
                if rc == _NOT_READY:
                    return False
                self.d.check(rc, "cuEventQuery")
        with self.lock:
            self._free.append(event)
        return True

    def synchronize(self) -> None:
        with self.current():
            self.d.check(self.d.lib.cuStreamSynchronize(c_void_p(self.stream)),
                         "cuStreamSynchronize")

    def copy_to_host(self, dst: int, src: int, nbytes: int) -> None:
        """Device-to-host copy ordered after the core's stream, complete on return."""
        with self.current():
            self.d.check(self.d.lib.cuMemcpyDtoHAsync_v2(c_void_p(dst), src, nbytes,
                                                         c_void_p(self.stream)),
                         "cuMemcpyDtoHAsync")
            self.d.check(self.d.lib.cuStreamSynchronize(c_void_p(self.stream)),
                         "cuStreamSynchronize")

    def __del__(self) -> None:
        if sys.is_finalizing():
            return  # the driver may be gone; the process's exit frees the events
        try:
            with self.current():
                for ev in [self.event] + self._free:
                    self.d.lib.cuEventDestroy_v2(c_void_p(ev))
        except Exception:
            pass


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
