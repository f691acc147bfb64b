"""The model side of cudaipcfilter: a process that answers each frame of one or many pipelines
with results.

>>> with cudaipc.Server(path) as s:
...     for req in s:                                   # one frame of the pipeline
...         boxes = detect(torch.from_dlpack(req))      # zero-copy view of the frame
...         req.reply(detections=boxes)                 # its results, attached to that frame

>>> with cudaipc.Server([cam0, cam1, cam2]) as s:       # or Server(directory=...)
...     while True:
...         reqs = s.batch(16, max_delay=0.005)         # frames of every pipeline, fairly
...         out = model(torch.stack([torch.from_dlpack(r) for r in reqs]))
...         for r, o in zip(reqs, out):
...             r.reply(detections=o)

The core's server (cudaipc.h, ``cudaipc_server_*``) reads every pipeline ahead on a thread of its
own, so requests wait ready while the model runs; batches take turns across pipelines; a reply
the filter has no room for is published later by the core, never making the model wait. A
request is a :class:`cudaipc.Frame` of its pipeline (``req.frame``); a reply publishes the results
on the reply channel the server made beside the filter's (``<path>.reply``) and releases the
frame. docs/elements.md, docs/python.md.
"""

from __future__ import annotations

import ctypes
import logging
import struct
import time
from ctypes import POINTER, Structure, byref, c_char_p, c_int32, c_int64, c_uint32, c_uint64, \
    c_void_p
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _lib, _metas_io
from ._server_gpu import GpuReplies, gpu_detections
from ._consumer import Frame, _format_of, _Shared
from ._errors import ClosedError, InterruptedError, InvalidArgumentError

lib = _lib.lib


class _Options(Structure):
    """cudaipc_server_options (cudaipc.h)."""
    _fields_ = [("paths", POINTER(c_char_p)), ("path_count", c_uint32), ("reply_slots", c_uint32),
                ("directory", c_char_p), ("scan_interval_ns", c_uint64), ("cuda_device", c_int32),
                ("reply_meta_size", c_uint32), ("queue_depth", c_uint32),
                ("socket_mode", c_uint32), ("allowed_gid", c_int64)]


class _Event(Structure):
    """cudaipc_server_event (cudaipc.h)."""
    _fields_ = [("type", ctypes.c_int), ("pipeline", c_uint32), ("path", c_char_p),
                ("message", c_char_p)]


class _PipelineInfo(Structure):
    """cudaipc_server_pipeline (cudaipc.h)."""
    _fields_ = [("id", c_uint32), ("connected", c_uint32), ("queued", c_uint32),
                ("reserved", c_uint32), ("requests", c_uint64), ("replies", c_uint64),
                ("replies_lost", c_uint64), ("path", c_char_p)]


# cudaipc_request_view: a cudaipc_frame_view (_lib.VIEW), then the pipeline's number.
_REQUEST = struct.Struct(_lib.VIEW.format + "II")
_FRAME_FIELDS = len(_lib.VIEW.unpack(bytes(_lib.VIEW.size)))

_P = c_void_p
for _name, (_res, _args) in {
    "cudaipc_server_options_init": (None, [POINTER(_Options)]),
    "cudaipc_server_new": (ctypes.c_int, [POINTER(_Options), POINTER(c_void_p)]),
    "cudaipc_server_free": (None, [_P]),
    "cudaipc_server_add": (ctypes.c_int, [_P, c_char_p, POINTER(c_uint32)]),
    "cudaipc_server_batch": (ctypes.c_int, [_P, c_uint32, c_uint64, c_uint64, _P,
                                            POINTER(c_uint32), POINTER(c_uint32)]),
    "cudaipc_server_next_event": (ctypes.c_int, [_P, POINTER(_Event)]),
    "cudaipc_server_reply": (ctypes.c_int, [_P, _P, _P, c_uint32]),
    "cudaipc_request_format": (ctypes.c_int, [_P, POINTER(c_char_p), POINTER(c_uint64),
                                              POINTER(c_void_p)]),
    "cudaipc_server_interrupt": (None, [_P]),
    "cudaipc_server_pipelines": (ctypes.c_int, [_P, POINTER(_PipelineInfo), c_uint32,
                                                POINTER(c_uint32)]),
}.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
_batch = lib.cudaipc_server_batch
_reply = lib.cudaipc_server_reply
_ERR_TIMEOUT = 6      # CUDAIPC_ERR_TIMEOUT: the reply was given up (the filter is gone or stuck)
_ERR_INTERRUPTED = 7  # CUDAIPC_ERR_INTERRUPTED
_EV_EOS, _EV_DISCONNECTED, _EV_JOINED, _EV_LEFT = 1, 2, 3, 4  # cudaipc_server_event_type
_MAX_BATCH = 1024
_SLICE = 0.1          # seconds a wait lasts in C before Python sees Ctrl-C

log = logging.getLogger("cudaipc.server")


class Request:
    """One frame waiting for its results. Exports the frame like a :class:`Frame` does
    (``torch.from_dlpack(req)``, ``req.numpy()``); its metas are ``req.frame.metas`` and friends;
    ``req.pipeline`` and ``req.path`` say which pipeline sent it. Answer it once with
    :meth:`reply`; a request dropped unanswered is released, and the filter applies its
    ``on-missing`` policy to that frame when its timeout passes."""

    __slots__ = ("frame", "pipeline", "_server")

    def __init__(self, frame: Frame, pipeline: int, server: "Server") -> None:
        self.frame = frame
        self.pipeline = pipeline
        self._server = server

    @property
    def seq(self) -> int:
        return self.frame.seq

    @property
    def path(self) -> str:
        """The request channel (the filter's socket-path) this request came on."""
        return self._server._paths.get(self.pipeline) or self._server._path_of(self.pipeline)

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
        tensors of a torch stream are ordered on it as they are exported). Detections that are
        torch tensors on the GPU (boxes, scores, integer labels, rotation) are not waited for:
        they are copied to page-locked memory on `stream` (default: torch's current stream) and
        the core sends the reply once that stream has run the copies, so the model's thread goes
        on at once; other results on the GPU are copied to the host here. Never waits for the
        filter: a reply it has no room
        for is sent later, in order, by the core. Returns False when the reply was given up at
        once (the filter holds every reply slot and more replies wait for it: it is gone or
        stuck), or the request's pipeline has left (its reply channel is closed; results left on
        the GPU are queued first, then counted lost in ``replies_lost``)."""
        server = self._server
        frame = self.frame
        h = frame._h
        if h is None:
            raise ClosedError(f"request {frame.seq} was already answered or released")
        w = server._writer
        gpu = gpu_detections(detections, label_names) if classifications is None and \
            tracks is None and relations is None else None
        if gpu is not None:
            # Results still on the GPU: the core sends them once the model's stream has run the
            # copies queued here; this thread goes on at once.
            try:
                size = w.encode(w.buffer(), tensors, None, None, None, None, meta, metas, None)
                stream = server._gpu.reply(server._handle(), frame, gpu, stream, label_names,
                                           w.address, size)
            finally:
                frame.release(stream)
            return True
        try:
            size = w.encode(w.buffer(), tensors, detections, classifications, tracks, relations,
                            meta, metas, label_names)
            rc = _reply(server._handle(), h, w.address if size else None, size)
        finally:
            frame.release(stream)
        if rc == _ERR_TIMEOUT:
            return False
        if rc:
            _lib.check(rc, f"replying to frame {frame.seq} of {self.path}")
        return True

    def __repr__(self) -> str:
        return f"<cudaipc.Request pipeline {self.pipeline} {self.frame!r}>"


class Server:
    """``Server(paths=None, directory=None, device=None, reply_slots=8, reply_meta_size=65536,
    queue_depth=16, socket_mode=0o600, allowed_gid=None)``: serves the cudaipcfilters whose ``socket-path`` is `paths` (one path or a
    list), and with `directory` every channel that appears there (a pipeline whose channel is
    removed leaves), from now until ``close()``, across restarts of the pipelines (each is waited
    for) and of this process (the filters pick a new server up within one timeout).

    Iterating yields :class:`Request` objects until ``close()``; ``next(timeout)`` returns one;
    ``batch(max_batch, timeout, max_delay)`` up to `max_batch` at once, fairly across pipelines,
    for batched inference. A path another server serves raises :class:`cudaipc.BusyError`.
    `device` is the CUDA device the model reads on (default: each pipeline's own); `queue_depth`
    how many requests of each pipeline are read ahead; `socket_mode` and `allowed_gid` who may
    connect to the reply channels (as a Producer's: the owner, and a group let in)."""

    def __init__(self, paths: Union[str, Sequence[str], None] = None, *,
                 directory: Optional[str] = None, device: Optional[int] = None,
                 reply_slots: int = 8, reply_meta_size: int = 65536,
                 queue_depth: int = 16, socket_mode: int = 0o600,
                 allowed_gid: Optional[int] = None) -> None:
        self._h: Optional[int] = None
        if paths is None:
            plist: List[str] = []
        elif isinstance(paths, str):
            plist = [paths]
        else:
            plist = list(paths)
        for p in plist:
            if not isinstance(p, str) or not p:
                raise InvalidArgumentError(f"a path must be a non-empty str, not {p!r}")
        if directory is not None and (not isinstance(directory, str) or not directory):
            raise InvalidArgumentError(f"directory must be a non-empty str, not {directory!r}")
        if not plist and directory is None:
            raise InvalidArgumentError("a server needs a filter's socket path or a directory")
        if not 0 <= int(reply_meta_size) <= _metas_io.MAX_AREA:
            raise InvalidArgumentError(f"reply_meta_size {reply_meta_size} is not between 0 and "
                                       f"{_metas_io.MAX_AREA} bytes")
        if not 1 <= int(reply_slots) <= 32:
            raise InvalidArgumentError(f"reply_slots {reply_slots} is not between 1 and 32")
        if not 1 <= int(queue_depth) <= 64:
            raise InvalidArgumentError(f"queue_depth {queue_depth} is not between 1 and 64")
        if not 0 <= int(socket_mode) <= 0o777:
            raise InvalidArgumentError(f"socket_mode {socket_mode:o} is not a permission mode")
        if allowed_gid is not None and not 0 <= int(allowed_gid) < 2 ** 32:
            raise InvalidArgumentError(f"allowed_gid {allowed_gid} is not a group id")
        self.path = plist[0] if plist else directory
        self.directory = directory
        o = _Options()
        lib.cudaipc_server_options_init(byref(o))
        encoded = [p.encode() for p in plist]
        arr = (c_char_p * max(1, len(encoded)))(*encoded)
        o.paths = arr
        o.path_count = len(encoded)
        o.directory = directory.encode() if directory is not None else None
        o.cuda_device = -1 if device is None else int(device)
        o.reply_slots = int(reply_slots)
        o.reply_meta_size = int(reply_meta_size)
        o.queue_depth = int(queue_depth)
        o.socket_mode = int(socket_mode)
        o.allowed_gid = -1 if allowed_gid is None else int(allowed_gid)
        h = c_void_p()
        what = ", ".join(plist + ([f"{directory}/*"] if directory else []))
        _lib.check(lib.cudaipc_server_new(byref(o), byref(h)), f"serving {what}")
        self._h = h.value
        self._writer = _metas_io.MetaWriter(int(reply_meta_size))
        self._gpu = GpuReplies()
        self._meta_stats = _metas_io.MetaStats()
        self._shared: Dict[int, _Shared] = {}  # per pipeline: its frames' description
        self._paths: Dict[int, str] = {i + 1: p for i, p in enumerate(plist)}
        self._views = (ctypes.c_uint8 * (_REQUEST.size * _MAX_BATCH))()
        self._count = c_uint32()
        self._events = c_uint32()
        self._refs = (ctypes.addressof(self._views), byref(self._count), byref(self._events))

    def _handle(self) -> int:
        h = self._h
        if h is None:
            raise ClosedError(f"the server of {self.path} is closed")
        return h

    def _path_of(self, pipeline: int) -> str:
        for p in self.pipelines:
            self._paths[p["id"]] = p["path"]
        return self._paths.get(pipeline, "")

    def add(self, path: str) -> int:
        """Serves one more filter from now on; its pipeline number."""
        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"path must be a non-empty str, not {path!r}")
        n = c_uint32()
        _lib.check(lib.cudaipc_server_add(self._handle(), path.encode(), byref(n)),
                   f"serving {path}")
        self._paths[n.value] = path
        return n.value

    @property
    def pipelines(self) -> List[Dict[str, Any]]:
        """The pipelines served now: ``id``, ``path``, ``connected`` (a pipeline publishes on the
        channel), ``queued`` (requests read ahead, not yet handed out), ``requests``,
        ``replies`` and ``replies_lost`` (given up: the filter was gone or stuck)."""
        h = self._handle()
        count = c_uint32()
        _lib.check(lib.cudaipc_server_pipelines(h, None, 0, byref(count)), "listing pipelines")
        arr = (_PipelineInfo * max(1, count.value + 8))()
        _lib.check(lib.cudaipc_server_pipelines(h, arr, len(arr), byref(count)),
                   "listing pipelines")
        return [{"id": p.id, "path": (p.path or b"").decode("utf-8", "replace"),
                 "connected": bool(p.connected), "queued": p.queued, "requests": p.requests,
                 "replies": p.replies, "replies_lost": p.replies_lost}
                for p in arr[:min(count.value, len(arr))]]

    def _take(self, max_batch: int, max_delay_ns: int, timeout_ns: int) -> List[Request]:
        addr, count_ref, events_ref = self._refs
        self._count.value = 0
        rc = _batch(self._handle(), max_batch, max_delay_ns, timeout_ns, addr, count_ref,
                    events_ref)
        views = self._views
        unpack = _REQUEST.unpack_from
        count = self._count.value
        out: List[Request] = []
        try:
            # Every handle handed out becomes a Request first (each owns its lease from then
            # on), even when the call failed part-way.
            for i in range(count):
                v = unpack(views, i * _REQUEST.size)
                pipeline = v[_FRAME_FIELDS]
                fv = v[:_FRAME_FIELDS]
                shared = self._shared.get(pipeline)
                if shared is None or fv[1] != shared.tensor_id or fv[11] != shared.device_id:
                    shared = self._describe(pipeline, fv)
                out.append(Request(Frame(fv[2], fv, shared), pipeline, self))
        except BaseException:
            for i in range(len(out), count):
                lib.cudaipc_frame_release(unpack(views, i * _REQUEST.size)[2])
            raise
        if rc:
            if rc == _ERR_INTERRUPTED:
                raise InterruptedError(f"serving {self.path} was interrupted")
            _lib.check(rc, f"serving {self.path}")
        if self._events.value:
            self._say_events()
        return out

    def _say_events(self) -> None:
        """Logs what happened to the pipelines (logger ``cudaipc.server``)."""
        ev = _Event()
        while True:
            _lib.check(lib.cudaipc_server_next_event(self._handle(), byref(ev)), "server events")
            if not ev.type:
                return
            path = (ev.path or b"").decode("utf-8", "replace")
            self._paths.setdefault(ev.pipeline, path)
            if ev.type == _EV_DISCONNECTED:
                why = (ev.message or b"").decode("utf-8", "replace")
                self._shared.pop(ev.pipeline, None)
                log.info("the pipeline on %s went away%s; waiting for the next", path,
                         f" ({why})" if why else "")
            elif ev.type == _EV_EOS:
                log.debug("the pipeline on %s ended its stream", path)
            elif ev.type == _EV_JOINED:
                self._paths[ev.pipeline] = path
                log.info("serving %s (a new channel in %s)", path, self.directory)
            elif ev.type == _EV_LEFT:
                self._shared.pop(ev.pipeline, None)
                self._paths.pop(ev.pipeline, None)
                log.info("%s was removed: no longer served", path)

    def _describe(self, pipeline: int, fv: tuple) -> _Shared:
        # Once per pipeline format and tensor description, never per frame.
        h = fv[2]
        caps = c_char_p()
        generation = c_uint64()
        stream = c_void_p()
        _lib.check(lib.cudaipc_request_format(h, byref(caps), byref(generation), byref(stream)),
                   "a request's format")
        tensor = lib.cudaipc_frame_tensor(h).contents
        fmt = _format_of(tensor, (caps.value or b"").decode("utf-8", "replace"), generation.value)
        shared = _Shared(fv[1], fv[11], tensor, fmt, stream.value, self._meta_stats)
        self._shared[pipeline] = shared
        return shared

    def _wait(self, max_batch: int, max_delay: float, timeout: Optional[float]) -> List[Request]:
        if not 1 <= max_batch <= _MAX_BATCH:
            raise InvalidArgumentError(f"a batch of {max_batch} requests (1..{_MAX_BATCH})")
        if max_delay < 0:
            raise InvalidArgumentError(f"max_delay {max_delay} is negative")
        if timeout is not None and timeout < 0:
            raise InvalidArgumentError(f"timeout {timeout} is negative")
        delay_ns = int(max_delay * 1e9)
        if timeout is not None and timeout <= _SLICE:
            return self._take(max_batch, delay_ns, int(timeout * 1e9))
        # Long waits go in slices, so Ctrl-C reaches Python.
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _SLICE if deadline is None else min(_SLICE, deadline - time.monotonic())
            out = self._take(max_batch, delay_ns, max(0, int(left * 1e9)))
            if out or (deadline is not None and time.monotonic() >= deadline):
                return out

    def next(self, timeout: Optional[float] = None) -> Optional[Request]:
        """The next request of any pipeline, or None when none came within `timeout` seconds
        (None: wait)."""
        out = self._wait(1, 0.0, timeout)
        return out[0] if out else None

    def batch(self, max_batch: int, timeout: Optional[float] = None,
              max_delay: float = 0.0) -> List[Request]:
        """Up to `max_batch` requests: waits up to `timeout` seconds (None: for ever) for the
        first, then until `max_batch` are waiting or the oldest has waited `max_delay` seconds.
        Pipelines take turns, one request each per turn (a busy pipeline cannot starve another);
        each pipeline's requests come in its order. Answer each; the filter pairs every reply
        with its own frame. An empty list when nothing came within `timeout`."""
        return self._wait(int(max_batch), float(max_delay), timeout)

    def __iter__(self) -> Iterator[Request]:
        while self._h is not None:
            try:
                out = self._take(1, 0, int(_SLICE * 1e9))
            except InterruptedError:
                return
            if out:
                yield out[0]

    def interrupt(self) -> None:
        """Wakes a ``next()`` or ``batch()`` blocked in another thread (it raises
        InterruptedError)."""
        if self._h is not None:
            lib.cudaipc_server_interrupt(self._h)

    def close(self) -> None:
        """Stops serving: the reply channels close (the filters pass frames per on-missing).
        Requests still held stay readable until released."""
        h, self._h = self._h, None
        if h is not None:
            lib.cudaipc_server_free(h)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_h", None) is not None:
            self.close()

    def __repr__(self) -> str:
        return f"<cudaipc.Server {self.path}{' closed' if self._h is None else ''}>"

