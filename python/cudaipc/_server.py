"""The model side of cudaipcfilter: a process that answers each frame of a pipeline with results.

>>> with cudaipc.Server(path) as s:
...     for req in s:                                   # one frame of the pipeline
...         boxes = detect(torch.from_dlpack(req))      # zero-copy view of the frame
...         req.reply(detections=boxes)                 # its results, attached to that frame

Requests are the filter's frames, read like any consumer's (``req.frame`` is a
:class:`cudaipc.Frame`); a reply publishes the results on the reply channel this server creates
beside the filter's (``<path>.reply``) and releases the frame. docs/elements.md, docs/python.md.
"""

from __future__ import annotations

import ctypes
import logging
from ctypes import byref, c_uint32, c_void_p
from typing import Any, Iterator, List, Optional

from . import _lib, _metas_io
from ._consumer import Consumer, Frame
from ._errors import ClosedError, EndOfStream, InvalidArgumentError, TimeoutError

lib = _lib.lib
lib.cudaipc_reply_channel_new.restype = ctypes.c_int
lib.cudaipc_reply_channel_new.argtypes = [ctypes.c_char_p, c_uint32, c_uint32,
                                          ctypes.POINTER(c_void_p)]
lib.cudaipc_reply_publish.restype = ctypes.c_int
lib.cudaipc_reply_publish.argtypes = [c_void_p, c_void_p, c_void_p, c_uint32]
_reply_publish = lib.cudaipc_reply_publish
_ERR_TIMEOUT = 6  # CUDAIPC_ERR_TIMEOUT: no reply slot came free

log = logging.getLogger("cudaipc.server")


class Request:
    """One frame waiting for its results. Exports the frame like a :class:`Frame` does
    (``torch.from_dlpack(req)``, ``req.numpy()``); its metas are ``req.frame.metas`` and friends.
    Answer it once with :meth:`reply`; a request dropped unanswered is released, and the filter
    applies its ``on-missing`` policy to that frame when its timeout passes."""

    __slots__ = ("frame", "_server")

    def __init__(self, frame: Frame, server: "Server") -> None:
        self.frame = frame
        self._server = server

    @property
    def seq(self) -> int:
        return self.frame.seq

    def __dlpack__(self, *args: Any, **kw: Any) -> Any:
        return self.frame.__dlpack__(*args, **kw)

    def __dlpack_device__(self) -> Any:
        return self.frame.__dlpack_device__()

    @property
    def __cuda_array_interface__(self) -> dict:
        return self.frame.__cuda_array_interface__

    def numpy(self) -> Any:
        return self.frame.numpy()

    def reply(self, *, stream: Any = None, tensors: Any = None, detections: Any = None,
              classifications: Any = None, tracks: Any = None, relations: Any = None,
              meta: Any = None, metas: Any = None, label_names: Any = None) -> bool:
        """Sends the frame's results (the meta keywords of :meth:`Producer.publish`) and releases
        the frame, after the work queued on `stream` so far when one is given (CUDA: no CPU wait;
        tensors of a torch stream are ordered on it as they are exported). Results on the GPU
        are copied to the host to be sent. Returns False when the filter did not take the reply
        within 100 ms (it is gone or stuck)."""
        server = self._server
        frame = self.frame
        h = frame._h
        if h is None:
            raise ClosedError(f"request {frame.seq} was already answered or released")
        w = server._writer
        size = w.encode(w.buffer(), tensors, detections, classifications, tracks, relations,
                        meta, metas, label_names)
        rc = _reply_publish(server._handle(), h, w.address if size else None, size)
        frame.release(stream)
        if rc == _ERR_TIMEOUT:
            return False
        if rc:
            _lib.check(rc, f"replying to frame {frame.seq}")
        return True

    def __repr__(self) -> str:
        return f"<cudaipc.Request {self.frame!r}>"


class Server:
    """``Server(path, device=None, reply_slots=8, reply_meta_size=65536)``: serves the
    cudaipcfilter whose ``socket-path`` is `path`, from now until ``close()``, across restarts of
    the pipeline (it waits for the next one) and of this process (the filter picks a new server up
    within one timeout). Iterating yields :class:`Request` objects until ``close()``;
    ``next(timeout)`` returns one; ``batch(n, timeout)`` up to `n` at once for batched inference.
    A second server on the same path raises :class:`cudaipc.BusyError`."""

    def __init__(self, path: str, device: Optional[int] = None, reply_slots: int = 8,
                 reply_meta_size: int = 65536) -> None:
        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"path must be a non-empty str, not {path!r}")
        if not 0 <= int(reply_meta_size) <= _metas_io.MAX_AREA:
            raise InvalidArgumentError(f"reply_meta_size {reply_meta_size} is not between 0 and "
                                       f"{_metas_io.MAX_AREA} bytes")
        if not 1 <= int(reply_slots) <= 32:
            raise InvalidArgumentError(f"reply_slots {reply_slots} is not between 1 and 32")
        self.path = path
        h = c_void_p()
        _lib.check(lib.cudaipc_reply_channel_new(path.encode(), int(reply_slots),
                                                 int(reply_meta_size), byref(h)),
                   f"reply channel of {path}")
        self._h: Optional[int] = h.value
        self._writer = _metas_io.MetaWriter(lib.cudaipc_producer_meta_size(self._h))
        try:
            self.requests = Consumer(path, mode="every-frame", device=device, reconnect=True,
                                     on_disconnect=self._disconnected)
        except BaseException:
            self.close()
            raise

    def _disconnected(self) -> None:
        log.info("the pipeline on %s went away; waiting for the next one", self.path)

    def _handle(self) -> int:
        if self._h is None:
            raise ClosedError(f"the server of {self.path} is closed")
        return self._h

    def next(self, timeout: Optional[float] = None) -> Optional[Request]:
        """The next request, or None when none came within `timeout` seconds (None: wait) or the
        pipeline ended its stream."""
        self._handle()
        try:
            return Request(self.requests.next(timeout), self)
        except (TimeoutError, EndOfStream):
            return None

    def batch(self, n: int, timeout: Optional[float] = None) -> List[Request]:
        """Up to `n` requests: waits (up to `timeout`) for the first, then takes the ones already
        waiting. Answer each; the filter pairs every reply with its own frame."""
        if n < 1:
            raise InvalidArgumentError(f"a batch of {n} requests")
        first = self.next(timeout)
        if first is None:
            return []
        out = [first]
        while len(out) < n:
            more = self.next(0)
            if more is None:
                break
            out.append(more)
        return out

    def __iter__(self) -> Iterator[Request]:
        while self._h is not None:
            req = self.next(0.1)
            if req is not None:
                yield req

    def interrupt(self) -> None:
        """Wakes a ``next()`` blocked in another thread (it raises InterruptedError)."""
        self.requests.interrupt()

    def close(self) -> None:
        """Stops serving: the reply channel closes (the filter passes frames per on-missing)."""
        r = getattr(self, "requests", None)
        if r is not None:
            r.close()
        h, self._h = self._h, None
        if h is not None:
            lib.cudaipc_producer_free(h)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_h", None) is not None:
            self.close()
