"""Replies from the GPU (cudaipc.h, cudaipc_server_reply_after): a detector's torch tensors on the
GPU are copied into page-locked host memory on the model's stream, and the core encodes and sends
the reply once that stream has run them. The model's thread never waits for its GPU: it queues
the copies and goes on to the next batch (issue #30)."""

from __future__ import annotations

import contextlib
import ctypes
import sys
import time
from ctypes import POINTER, byref, c_uint32, c_uint64, c_void_p
from typing import Any, Dict, List, Optional

from . import _cuda, _lib
from ._metas_analytics_write import Scratch

lib = _lib.lib
for _name, (_res, _args) in {
    "cudaipc_server_reply_after": (ctypes.c_int, [c_void_p, c_void_p, c_void_p,
                                                  POINTER(_lib.Detections), c_void_p, c_uint32,
                                                  POINTER(c_uint64)]),
    "cudaipc_server_replies_done": (c_uint64, [c_void_p]),
}.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
_reply_after = lib.cudaipc_server_reply_after
_done = lib.cudaipc_server_replies_done
_RING = 16  # replies whose staged results may be in flight at once; more wait for the oldest
_KEYS = frozenset(("boxes", "scores", "labels", "rotation"))
_NO_GUARD = contextlib.nullcontext()


class _Slot:
    """Page-locked host arrays one reply's detections land in, and the reply's ticket."""

    __slots__ = ("cap", "boxes", "scores", "labels", "rotation", "ptr", "ticket", "args",
                 "args_ref", "table")

    def __init__(self, torch: Any, cap: int) -> None:
        self.cap = cap
        self.boxes = torch.empty((cap, 4), dtype=torch.float32, pin_memory=True)
        self.scores = torch.empty(cap, dtype=torch.float32, pin_memory=True)
        self.labels = torch.empty(cap, dtype=torch.int64, pin_memory=True)
        self.rotation = torch.empty(cap, dtype=torch.float32, pin_memory=True)
        self.ptr = (self.boxes.data_ptr(), self.scores.data_ptr(), self.labels.data_ptr(),
                    self.rotation.data_ptr())
        self.ticket = 0
        self.table: Any = None  # the label names the core reads, kept until the ticket is done
        self.args = _lib.Detections()
        self.args_ref = byref(self.args)


def gpu_detections(det: Any, label_names: Any) -> Optional[Dict[str, Any]]:
    """A torchvision-style dict whose tensors are all on one CUDA device (boxes, and optional
    scores, integer labels, rotation; nothing else), with its label names a list when it has
    labels, else None (the host path takes it)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(det, dict) or not _KEYS.issuperset(det):
        return None
    if det.get("labels") is not None and not isinstance(label_names, (list, tuple)):
        return None
    boxes = det.get("boxes")
    if not isinstance(boxes, torch.Tensor) or boxes.device.type != "cuda" or \
            boxes.dim() != 2 or boxes.shape[1] != 4 or not boxes.dtype.is_floating_point:
        return None
    n = boxes.shape[0]
    for k in ("scores", "labels", "rotation"):
        v = det.get(k)
        if v is None:
            continue
        if not isinstance(v, torch.Tensor) or v.device != boxes.device or v.numel() != n:
            return None
        if k == "labels" and v.dtype.is_floating_point:
            return None
    return det


class GpuReplies:
    """A server's staging ring for replies from the GPU."""

    def __init__(self) -> None:
        self._slots: List[Optional[_Slot]] = [None] * _RING
        self._next = 0
        self._scratch = Scratch()
        self._ticket = c_uint64()
        self._ticket_ref = byref(self._ticket)

    def _slot(self, server: int, torch: Any, n: int) -> _Slot:
        i = self._next
        self._next = (i + 1) % _RING
        slot = self._slots[i]
        if slot is not None and slot.ticket and _done(server) < slot.ticket:
            # Every slot holds a reply still on its way: the GPU is _RING replies behind.
            while _done(server) < slot.ticket:
                time.sleep(0.0001)
        if slot is None or slot.cap < n:
            slot = self._slots[i] = _Slot(torch, max(n, 256))
        return slot

    @staticmethod
    def _copies(slot: _Slot, n: int, boxes: Any, scores: Any, labels: Any, rotation: Any) -> None:
        a = slot.args
        slot.boxes[:n].copy_(boxes, non_blocking=True)
        if scores is not None:
            slot.scores[:n].copy_(scores.reshape(-1), non_blocking=True)
            a.scores = slot.ptr[1]
        if labels is not None and n:
            slot.labels[:n].copy_(labels.reshape(-1), non_blocking=True)
            a.labels = slot.ptr[2]
        if rotation is not None:
            slot.rotation[:n].copy_(rotation.reshape(-1), non_blocking=True)
            a.rotation = slot.ptr[3]

    def reply(self, server: int, frame: Any, det: Dict[str, Any], stream: Any,
              label_names: Any, area: int, size: int) -> Any:
        """Queues the copies and the reply; the stream (a torch.cuda.Stream) the frame's release
        is ordered after."""
        torch = sys.modules["torch"]
        boxes = det["boxes"]
        current = torch.cuda.current_stream(boxes.device)
        s = stream if isinstance(stream, torch.cuda.Stream) else current
        n = int(boxes.shape[0])
        slot = self._slot(server, torch, n)
        a = slot.args
        a.n = n
        a.boxes = slot.ptr[0]
        a.scores = a.labels = a.rotation = a.names = a.name_offsets = None
        a.name_count = 0
        scores, labels, rotation = det.get("scores"), det.get("labels"), det.get("rotation")
        slot.table = None
        if labels is not None and n:
            # Labels past the list are named by the core in decimal, as the host path does.
            slot.table = self._scratch.table(label_names, 0)
            a.names, a.name_offsets = slot.table.at
            a.name_count = len(slot.table)
        # torch names its default stream 0, the C API's "no stream" (host results): the legacy
        # default stream is CU_STREAM_LEGACY there, the current device's; the results' device
        # is made current so that it is theirs.
        other_device = boxes.device.index != torch.cuda.current_device()
        with torch.cuda.device(boxes.device) if other_device else _NO_GUARD:
            if s != current:  # the copies go on the results' stream
                with torch.cuda.stream(s):
                    self._copies(slot, n, boxes, scores, labels, rotation)
            else:
                self._copies(slot, n, boxes, scores, labels, rotation)
            rc = _reply_after(server, frame._h, s.cuda_stream or _cuda.STREAM_LEGACY,
                              slot.args_ref, area or None, size, self._ticket_ref)
        if rc:
            _lib.check(rc, f"replying to frame {frame.seq}")
        slot.ticket = self._ticket.value
        return s
