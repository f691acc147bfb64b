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

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _cuda, _errors, _lib, _metas_io
from ._server_gpu import GpuReplies
from ._consumer import Frame, _format_of, _numpy_slot_view, _Shared
from ._device import cuda_ordinal
from ._errors import ClosedError, InterruptedError, InvalidArgumentError



_native = _lib.native
_reply = _native.server_reply
_ERR_TIMEOUT = 6      # CUDAIPC_ERR_TIMEOUT: the reply was given up (the filter is gone or stuck)
_ERR_INTERRUPTED = 7  # CUDAIPC_ERR_INTERRUPTED
_EV_EOS, _EV_DISCONNECTED, _EV_JOINED, _EV_LEFT = 1, 2, 3, 4  # cudaipc_server_event_type
_MAX_BATCH = 1024
_SLICE = 0.1          # seconds a wait lasts in C before Python sees Ctrl-C

log = logging.getLogger("cudaipc.server")


class Request(_lib.native.Request):
    """One frame waiting for its results. Exports the frame like a :class:`Frame` does
    (``torch.from_dlpack(req)``, ``req.torch()``, ``req.numpy()``: the last two, like the
    frame's, view its slot until the request is answered); its metas are ``req.frame.metas``
    and friends;
    ``req.pipeline`` and ``req.path`` say which pipeline sent it. Answer it once with
    :meth:`reply`; a request dropped unanswered is released, and the filter applies its
    ``on-missing`` policy to that frame when its timeout passes."""

    # frame, pipeline, the DLPack export (__dlpack__, __dlpack_device__, torch()) and reply()'s
    # common answers are the binding's (python/native/server.cpp, results.cpp); reply() hands any
    # other answer to _reply_py below. Requests are made by the binding only.
    __slots__ = ()

    @property
    def seq(self) -> int:
        return self.frame.seq

    @property
    def path(self) -> str:
        """The request channel (the filter's socket-path) this request came on."""
        return self._server._paths.get(self.pipeline) or self._server._path_of(self.pipeline)

    @property
    def __cuda_array_interface__(self) -> dict:
        return self.frame.__cuda_array_interface__

    def numpy(self) -> Any:
        return self.frame.numpy()

    def _reply_py(self, *, stream: Any = None, tensors: Any = None, detections: Any = None,
                  classifications: Any = None, tracks: Any = None, relations: Any = None,
                  meta: Any = None, metas: Any = None, label_names: Any = None,
                  after: Any = None) -> bool:
        """reply() for the answers the binding leaves to Python (other forms of results)."""
        server = self._server
        frame = self.frame
        h = frame._h
        if h is None:
            raise ClosedError(f"request {frame.seq} was already answered or released")
        with server._replying:  # its meta writer and GPU buffer are one per server
            w = server._writer
            if detections is not None and classifications is None and tracks is None and \
                    relations is None:
                g = server._gpu
                dev = g.pack(0, h, detections, label_names)
                if dev >= 0:
                    # Results still on the GPU: one call queues the copies, the reply and the
                    # release; the core sends the reply once the model's stream has run them.
                    if tensors is not None or meta is not None or metas is not None:
                        try:
                            size = w.encode(w.buffer(), tensors, None, None, None, None, meta,
                                            metas, None)
                        except BaseException:
                            frame.release(stream, after=after)
                            raise
                        g.set_metas(0, w.address if size else 0, size)
                    try:
                        frame._order_event(after)
                    except (TypeError, ValueError):
                        frame.release(stream)  # no event: released as without one
                        raise
                    raw, device = g.stream_of(stream, dev)
                    frame._order_views(raw)  # its torch() reads on another stream: waited for
                    rc, sent = g.send(server._handle(), 1, raw, device)
                    if sent:
                        frame._h = None
                        frame._m = None
                    else:
                        frame.release(raw)
                    if rc:
                        _lib.check(rc, f"replying to frame {frame.seq} of {self.path}")
                    return True
            try:
                size = w.encode(w.buffer(), tensors, detections, classifications, tracks,
                                relations, meta, metas, label_names)
                rc = _reply(server._handle(), h, w.address if size else None, size)
            finally:
                frame.release(stream, after=after)
            if rc == _ERR_TIMEOUT:
                return False
            if rc:
                _lib.check(rc, f"replying to frame {frame.seq} of {self.path}")
            return True

    def __repr__(self) -> str:
        return f"<cudaipc.Request pipeline {self.pipeline} {self.frame!r}>"


class Server(_lib.native.Server):
    """``Server(paths=None, directory=None, device=None, reply_slots=8, reply_meta_size=65536,
    queue_depth=16, socket_mode=0o600, allowed_gid=None)``: serves the cudaipcfilters whose ``socket-path`` is `paths` (one path or a
    list), and with `directory` every channel that appears there (a pipeline whose channel is
    removed leaves), from now until ``close()``, across restarts of the pipelines (each is waited
    for) and of this process (the filters pick a new server up within one timeout).

    Iterating yields :class:`Request` objects until ``close()`` or ``interrupt()`` (from another
    thread too: either ends the loop); ``next(timeout)`` returns one;
    ``batch(max_batch, timeout, max_delay)`` up to `max_batch` at once, fairly across pipelines,
    for batched inference. A path another server serves raises :class:`cudaipc.BusyError`; what
    can never be a filter's channel (a regular file or a directory at a path, a missing directory,
    a cudaipcsink's channel) raises :class:`cudaipc.InvalidArgumentError` naming it and the cause.
    A path with nothing there yet is a pipeline still to start: logged ("waiting for a pipeline on
    PATH", logger ``cudaipc.server``, INFO) and waited for.
    `device` is the CUDA device the model reads on (default: each pipeline's own), as torch names
    it (1, ``"cuda:1"``, ``torch.device("cuda", 1)``); `queue_depth`
    how many requests of each pipeline are read ahead; `socket_mode` and `allowed_gid` who may
    connect to the reply channels (as a Producer's: the owner, and a group let in)."""

    def __init__(self, paths: Union[str, Sequence[str], None] = None, *,
                 directory: Optional[str] = None, device: Any = None,
                 reply_slots: int = 8, reply_meta_size: int = 65536,
                 queue_depth: int = 16, socket_mode: int = 0o600,
                 allowed_gid: Optional[int] = None) -> None:
        self._h = None
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
        what = ", ".join(plist + ([f"{directory}/*"] if directory else []))
        self._h = _native.server_new(plist, directory,
                                     -1 if device is None else cuda_ordinal(device),
                                     int(reply_slots), int(reply_meta_size), int(queue_depth),
                                     int(socket_mode), -1 if allowed_gid is None else
                                     int(allowed_gid), f"serving {what}")
        self._reply_meta_size = int(reply_meta_size)  # the binding's reply area
        # The Python path's reply buffers, one per server: threads that reply at once take turns.
        self._replying = threading.RLock()
        self._writer = _metas_io.MetaWriter(int(reply_meta_size))
        self._gpu = GpuReplies(_MAX_BATCH)
        self._meta_stats = _metas_io.MetaStats()
        self._shared: Dict[int, _Shared] = {}  # per pipeline: its frames' description
        self._paths: Dict[int, str] = {i + 1: p for i, p in enumerate(plist)}
        self._say_waiting()

    def _say_waiting(self) -> None:
        """Logs the paths no pipeline publishes on yet: a wait, not a failure, but not a silent
        one."""
        for p in self.pipelines:
            if not p["connected"]:
                log.info("waiting for a pipeline on %s (start a cudaipcfilter with "
                         "socket-path=%s)", p["path"], p["path"])
        if self.directory is not None and not any(p["connected"] for p in self.pipelines):
            log.info("waiting for pipelines in %s (start cudaipcfilters with socket-paths "
                     "there)", self.directory)

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
        n = _native.server_add(self._handle(), path, f"serving {path}")
        self._paths[n] = path
        return n

    @property
    def pipelines(self) -> List[Dict[str, Any]]:
        """The pipelines served now: ``id``, ``path``, ``connected`` (a pipeline publishes on the
        channel), ``queued`` (requests read ahead, not yet handed out), ``requests``,
        ``replies`` and ``replies_lost`` (given up: the filter was gone or stuck)."""
        keys = ("id", "path", "connected", "queued", "requests", "replies", "replies_lost")
        return [dict(zip(keys, p)) for p in _native.server_pipelines(self._handle())]

    # _take(max_batch, max_delay_ns, timeout_ns) is the binding's (python/native/server.cpp): one
    # cudaipc_server_batch, its requests made Request objects in C; it calls the two below.

    def _batch_failed(self, rc: int) -> None:
        if rc == _ERR_INTERRUPTED:
            raise InterruptedError(f"serving {self.path} was interrupted")
        _lib.check(rc, f"serving {self.path}")

    def _say_events(self) -> None:
        """Logs what happened to the pipelines (logger ``cudaipc.server``)."""
        while True:
            ev = _native.server_next_event(self._handle())
            if ev is None:
                return
            kind, pipeline, path, why = ev
            self._paths.setdefault(pipeline, path)
            if kind == _EV_DISCONNECTED:
                self._shared.pop(pipeline, None)
                log.info("the pipeline on %s went away%s; waiting for the next", path,
                         f" ({why})" if why else "")
            elif kind == _EV_EOS:
                log.debug("the pipeline on %s ended its stream", path)
            elif kind == _EV_JOINED:
                self._paths[pipeline] = path
                log.info("serving %s (a new channel in %s)", path, self.directory)
            elif kind == _EV_LEFT:
                self._shared.pop(pipeline, None)
                self._paths.pop(pipeline, None)
                log.info("%s was removed: no longer served", path)

    def _describe(self, pipeline: int, h: int, tensor_id: int, device_id: int) -> _Shared:
        # Once per pipeline format and tensor description, never per frame.
        caps, generation = _native.request_format(h)
        tensor = _native.frame_tensor(h)
        fmt = _format_of(tensor, caps, generation)
        shared = _Shared(tensor_id, device_id, tensor, fmt, self._meta_stats)
        if pipeline not in self._shared:  # its first request, or the first since it went away
            log.info("a pipeline on %s sends requests (%s)", self._paths.get(pipeline) or
                     self._path_of(pipeline), fmt.caps)
        self._shared[pipeline] = shared
        return shared

    def _wait(self, max_batch: int, max_delay: float, timeout: Optional[float]) -> List[Request]:
        if not 1 <= max_batch <= _MAX_BATCH:
            raise InvalidArgumentError(f"a batch of {max_batch} requests (1..{_MAX_BATCH})")
        if max_delay < 0:
            raise InvalidArgumentError(f"max_delay {max_delay} is negative")
        if timeout is not None and not timeout >= 0:
            raise InvalidArgumentError(f"timeout {timeout} is negative or not a number")
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

    # next(timeout=None) is the binding's (python/native/server.cpp): the next request of any
    # pipeline, or None when none came within `timeout` seconds (None: wait); it waits in C, in
    # slices, and leaves a timeout it cannot take to _wait, which says why.
    if TYPE_CHECKING:
        def next(self, timeout: Optional[float] = None) -> Optional[Request]: ...

    def batch(self, max_batch: int, timeout: Optional[float] = None,
              max_delay: float = 0.0) -> List[Request]:
        """Up to `max_batch` requests: waits up to `timeout` seconds (None: for ever) for the
        first, then until `max_batch` are waiting or the oldest has waited `max_delay` seconds.
        Pipelines take turns, one request each per turn (a busy pipeline cannot starve another);
        each pipeline's requests come in its order. Answer each; the filter pairs every reply
        with its own frame. An empty list when nothing came within `timeout`."""
        return self._wait(int(max_batch), float(max_delay), timeout)

    def reply_batch(self, requests: Sequence[Request], detections: Any, *,
                    counts: Optional[Sequence[int]] = None, label_names: Any = None,
                    stream: Any = None) -> None:
        """Answers a batch in one call: `detections` a list of one dict per request (torchvision's
        list), or with `counts` one dict of the whole batch's detections, request i's being the
        next counts[i] (boxes, scores, labels, rotation). Detections that are torch tensors on the
        GPU are handed to the core without a torch call or a copy here (it copies them on `stream`,
        default torch's current one, and sends each reply once that stream has run them); any
        other result goes through :meth:`Request.reply`. Every request is answered and released,
        in order."""
        reqs = list(requests)
        if counts is not None:
            counts = [int(c) for c in counts]
            if len(counts) != len(reqs):
                raise InvalidArgumentError(f"{len(counts)} counts for {len(reqs)} requests")
            per: List[Any] = [detections] * len(reqs)
        else:
            per = list(detections)
            if len(per) != len(reqs):
                raise InvalidArgumentError(f"{len(per)} detections for {len(reqs)} requests")
        with self._replying:  # the GPU replies' buffer is one per server
            g = self._gpu
            self._handle()
            packed: List[Request] = []
            device = -1
            start = 0
            try:
                for i, r in enumerate(reqs):
                    fh = r.frame._h
                    if fh is None:
                        raise ClosedError(f"request {r.frame.seq} was already answered or released")
                    c = None if counts is None else counts[i]
                    if len(packed) == _MAX_BATCH:
                        self._send_packed(packed, stream, device)
                        packed = []
                    dev = g.pack(len(packed), fh, per[i], label_names, start, c)
                    if dev >= 0 and packed and dev != device:
                        # One call's replies go after one stream of one device: these go first.
                        self._send_packed(packed, stream, device)
                        packed = []
                        dev = g.pack(0, fh, per[i], label_names, start, c)
                    if dev >= 0:
                        device = dev
                        packed.append(r)
                    else:
                        d = per[i]
                        if c is not None:
                            d = {k: v[start:start + c] for k, v in d.items()}
                        r.reply(detections=d, label_names=label_names, stream=stream)
                    start += c or 0
            except BaseException:
                for r in packed:
                    r.frame.release()
                raise
            if packed:
                self._send_packed(packed, stream, device)

    def _send_packed(self, packed: List[Request], stream: Any, device: int) -> None:
        g = self._gpu
        raw, guard = g.stream_of(stream, device)
        for r in packed:
            r.frame._order_views(raw)  # their torch() reads on another stream: waited for too
        rc, sent = g.send(self._handle(), len(packed), raw, guard)
        for r in packed[:sent]:
            r.frame._h = None
            r.frame._m = None
        if rc:
            # The one that failed and those after it were neither answered nor released.
            for r in packed[sent:]:
                r.frame.release(raw)
            _lib.check(rc, f"replying to frame {packed[sent].frame.seq} of {packed[sent].path}")

    # Iterating is the binding's (python/native/server.cpp): a request at a time, waiting for
    # ever, until the server is closed or interrupted; the server is its own iterator.
    if TYPE_CHECKING:
        def __iter__(self) -> Iterator[Request]: ...

        def __next__(self) -> Request: ...

    def interrupt(self) -> None:
        """Wakes a ``next()`` or ``batch()`` blocked in another thread (it raises
        InterruptedError)."""
        if self._h is not None:
            _native.server_interrupt(self._h)

    def close(self) -> None:
        """Stops serving: the reply channels close (the filters pass frames per on-missing).
        Requests still held stay readable until released."""
        self._close()  # the binding's: a next() or batch() waiting in another thread ends first

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if self._h is not None:
            self.close()

    def __repr__(self) -> str:
        return f"<cudaipc.Server {self.path}{' closed' if self._h is None else ''}>"



# The binding makes frames and requests of these classes, and a host frame's numpy() views with
# the consumer's helper.
_lib.native.configure(Frame, Request, _errors.from_code, _cuda.stream_handle, ClosedError,
                      _errors.EndOfStream, _numpy_slot_view)
