"""Replies from the GPU (cudaipc.h, cudaipc_server_reply_results): a detector's torch tensors on
the GPU are handed to the core as they are (addresses, dtypes, strides), one C call per reply or
per batch. The core copies them on the model's stream into page-locked memory it keeps and sends
each reply once that stream has run the copies. The model's thread never waits for its GPU and
makes no torch call per reply beyond reading the tensors' description (issue #35)."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Tuple

from . import _cuda, _lib
from ._errors import InvalidArgumentError
from ._metas_analytics_write import Scratch

_DETECTIONS, _HOST = 1, 2
_KEYS = frozenset(("boxes", "scores", "labels", "rotation"))
_FLOATS: Dict[Any, int] = {}
_INTS: Dict[Any, int] = {}


def _dtypes(torch: Any) -> None:
    _FLOATS.update({torch.float32: 10, torch.float16: 9, torch.bfloat16: 12, torch.float64: 11})
    _INTS.update({torch.int64: 4, torch.int32: 3})


def _raw_stream(torch: Any) -> Any:
    f = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if f is not None:
        return f
    return lambda dev: torch.cuda.current_stream(dev).cuda_stream


class GpuReplies:
    """A server's packing of replies whose detections are torch tensors on the GPU: a buffer of
    cudaipc_reply_results made once (the binding's ReplyBatch), the label names' table cached."""

    def __init__(self, capacity: int) -> None:
        self._batch = _lib.native.ReplyBatch(capacity)
        self._capacity = capacity
        self._scratch = Scratch()
        self._torch: Any = None
        self._current: Any = None

    def _setup(self) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None and self._torch is None:
            _dtypes(torch)
            self._current = _raw_stream(torch)
            self._torch = torch
        return torch

    def set_metas(self, i: int, address: int, size: int) -> None:
        """Reply `i`'s records ready on the host (a meta area the core copies)."""
        self._batch.set_metas(i, address, size)

    def pack(self, i: int, h: int, det: Any, label_names: Any, start: int = 0,
             count: Optional[int] = None) -> int:
        """Writes reply `i` of the buffer: `det` a dict of CUDA tensors (boxes [N, 4], optional
        scores, labels, rotation of N), or its detections [start, start + count) only; the device
        index of its boxes, or -1 when `det` is not such (the host path takes it)."""
        torch = self._torch
        if torch is None:
            torch = self._setup()
            if torch is None:
                return -1
        if type(det) is not dict or not _KEYS.issuperset(det):
            return -1
        boxes = det.get("boxes")
        if type(boxes) is not torch.Tensor or not boxes.is_cuda or boxes.dim() != 2:
            return -1
        total, four = boxes.shape
        bdt = _FLOATS.get(boxes.dtype)
        if four != 4 or bdt is None:
            return -1
        n = total if count is None else count
        if start < 0 or n < 0 or start + n > total:
            raise InvalidArgumentError(f"detections [{start}, {start + n}) of {total}")
        dev = boxes.get_device()
        bs = boxes.stride()
        if bs[1] < 1 or (total > 1 and bs[0] < 1):
            return -1  # an expanded tensor: the host path copies it
        arrays = [0, 0, 0]
        strides = [1, 1, 1]
        dtypes = [0, 0, 0]
        for k, key in enumerate(("scores", "labels", "rotation")):
            v = det.get(key)
            if v is None:
                continue
            if type(v) is not torch.Tensor or not v.is_cuda or v.get_device() != dev or \
                    v.numel() != total:
                return -1
            dt = (_INTS if k == 1 else _FLOATS).get(v.dtype)
            if dt is None:
                return -1
            if v.dim() != 1:
                v = v.reshape(-1)  # a view for [N, 1]: no copy
            st = v.stride(0)
            if st < 1 and total > 1:
                return -1  # an expanded tensor: the host path copies it
            arrays[k] = v.data_ptr() + (start * st * v.element_size() if start else 0)
            strides[k] = st
            dtypes[k] = dt
        names = offsets = 0  # none: NULL
        count = 0
        if arrays[1] and n:
            if not isinstance(label_names, (list, tuple)):
                return -1
            # Labels past the list are named by the core in decimal, as the host path does.
            table = self._scratch.table(label_names, 0)
            names, offsets = table.at
            count = len(table)
        at = boxes.data_ptr() + (start * bs[0] * boxes.element_size() if start else 0)
        self._batch.pack(i, h, n, at, arrays[0], arrays[1], arrays[2], bs[0], bs[1], strides[0],
                         strides[1], strides[2], bdt, dtypes[0], dtypes[1], dtypes[2], names,
                         offsets, count, _DETECTIONS)
        return dev

    def stream_of(self, stream: Any, dev: int) -> Tuple[int, Any]:
        """The CUstream the replies go after (`stream`, else torch's current one on `dev`), and
        the device to make current while they are queued (None: the current one is right)."""
        if stream is None:
            raw = self._current(dev)
        else:
            raw = getattr(stream, "cuda_stream", None)
            if raw is None:
                raw = _cuda.stream_handle(stream)
        if raw:
            return raw, None
        # torch's default stream is the legacy one: the results' device must be current.
        torch = self._torch
        return _cuda.STREAM_LEGACY, None if dev == torch.cuda.current_device() else dev

    def send(self, server: int, count: int, stream: int, device: Optional[int]) -> Tuple[int, int]:
        """Queues the replies packed and releases their requests; (status, replies queued)."""
        if device is None:
            return self._batch.send(server, count, stream, True)
        with self._torch.cuda.device(device):
            return self._batch.send(server, count, stream, True)
