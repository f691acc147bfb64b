"""CUDA streams as the package takes them from callers: DLPack's ints and torch's or cupy's stream
objects, as the CUstream values the binding passes to the core (which makes every CUDA call)."""

from __future__ import annotations

# DLPack / array-API stream values that are CUstream handles as they are: CU_STREAM_LEGACY and
# CU_STREAM_PER_THREAD.
STREAM_LEGACY = 1
STREAM_PER_THREAD = 2


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
