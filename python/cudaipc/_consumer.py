"""The consuming end of a channel, and the frames it hands out."""

from __future__ import annotations

import ctypes
import gc
import threading
import time
import warnings
from ctypes import byref, c_int, c_uint32, c_uint64, c_void_p
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np

from . import _cuda, _dlpack, _dtypes, _lib
from ._errors import (ClosedError, ConnectionError, EndOfStream, InterruptedError,
                      InvalidArgumentError, TimeoutError)
from ._lib import lib

# next() waits in slices this long, so Ctrl-C (handled between slices) stops a consumer.
_SLICE_NS = 200_000_000
# A next() without timeout that has waited this long while the consumer holds frames warns once:
# held in the waiting thread, they can stall it for good at the producer's lease limit.
_HELD_WARNING_NS = 10_000_000_000


class Format(NamedTuple):
    """A channel's stream format: caps text plus the tensor every frame of it carries."""

    caps: str
    dtype: str  # cudaipc's dtype name ("uint8", "float32", "bfloat16"...)
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # bytes
    generation: int

    @property
    def numpy_dtype(self) -> np.dtype:
        return _dtypes.numpy_dtype(_dtypes.BY_NAME[self.dtype])


def _format_of(t: _lib.Tensor, caps: str, generation: int) -> Format:
    d = _dtypes.BY_CODE.get(t.dtype)
    rank = min(t.rank, _lib.MAX_RANK)
    return Format(caps, d.name if d else f"code {t.dtype}", tuple(t.shape[:rank]),
                  tuple(t.strides[:rank]), generation)


# Raw bindings for the per-frame path: an int result skips building a ctypes pointer object.
_frame_seq = lib.cudaipc_frame_seq
_frame_data = lib.cudaipc_frame_data
_frame_times = lib.cudaipc_frame_times
_frame_publish_time = lib.cudaipc_frame_publish_time
_frame_tensor_address = lib["cudaipc_frame_tensor"]  # a separate function object: own restype
_frame_tensor_address.restype = c_void_p
_frame_tensor_address.argtypes = [c_void_p]
_consumer_next = lib.cudaipc_consumer_next
_TENSOR_SIZE = ctypes.sizeof(_lib.Tensor)
_string_at = ctypes.string_at
# Distinct tensor descriptions a consumer remembers; a stream has one per format, so more means
# something varies per frame and the cache would only grow.
_LAYOUTS_KEPT = 16


class _Layout:
    """What every frame with one tensor description shares (per consumer and format): the
    description, its shape and strides as tuples, and the DLPack template, built once instead of
    per frame."""

    __slots__ = ("tensor", "shape", "strides", "dl")

    def __init__(self, raw: bytes) -> None:
        t = _lib.Tensor.from_buffer_copy(raw)
        rank = min(t.rank, _lib.MAX_RANK)
        self.tensor = t
        self.shape: Tuple[int, ...] = tuple(t.shape[:rank])
        self.strides: Tuple[int, ...] = tuple(t.strides[:rank])
        self.dl: Optional[_dlpack.Layout] = None  # on the first export: not every reader exports

    def dlpack(self, device: Tuple[int, int], read_only: bool) -> _dlpack.Layout:
        dl = self.dl
        if dl is None:
            dl = self.dl = _dlpack.Layout(device, _dtypes.from_code(self.tensor.dtype), self.shape,
                                          self.strides, read_only)
        return dl


class _Held:
    """The frames one consumer has leased and not given back yet (the Frame, or a tensor made from
    it, still holds each): the producer caps them (num_slots - 1), so a wait that ends in vain
    names them."""

    __slots__ = ("lock", "seqs")

    def __init__(self) -> None:
        # Reentrant: a lease's __del__ can run from a garbage collection that starts while this
        # thread is inside add() or remove().
        self.lock = threading.RLock()
        self.seqs: Dict[int, int] = {}  # seq -> leases (seqs restart with a new producer)

    def add(self, seq: int) -> None:
        with self.lock:
            self.seqs[seq] = self.seqs.get(seq, 0) + 1

    def remove(self, seq: int) -> None:
        with self.lock:
            n = self.seqs.get(seq, 0) - 1
            if n > 0:
                self.seqs[seq] = n
            else:
                self.seqs.pop(seq, None)

    def count(self) -> int:
        with self.lock:
            return sum(self.seqs.values())

    def describe(self) -> str:
        with self.lock:
            seqs = sorted(self.seqs)
        shown = ", ".join(str(s) for s in seqs[:8]) + (", ..." if len(seqs) > 8 else "")
        return f"{len(seqs)} frame(s) (seq {shown})"


class _Lease:
    """One frame's slot lease, shared by its Frame and every tensor exported from it: the slot goes
    back to the producer when the last of them lets go."""

    __slots__ = ("handle", "refs", "lock", "sync", "held", "seq")

    def __init__(self, handle: int, sync: Optional[_cuda.StreamSync], held: _Held,
                 seq: int) -> None:
        self.handle: Optional[int] = handle
        self.refs = 1
        self.lock = threading.Lock()
        self.sync = sync
        self.held = held
        self.seq = seq
        held.add(seq)

    def ref(self) -> None:
        with self.lock:
            if self.handle is None:
                raise ClosedError("the frame was released")
            self.refs += 1

    def unref(self, after: Tuple[int, ...] = ()) -> None:
        # The consumer stream waits for the caller's streams first: the core's release records
        # "done reading" on that stream, and the producer's next write into the slot waits for it.
        # The lease ends even when that ordering fails: a lease kept would stall the consumer at
        # its limit for good, so the failure is raised after the release instead.
        failure: Optional[BaseException] = None
        if self.sync is not None:
            for s in after:
                if s != -1:
                    try:
                        self.sync.after_caller(s)
                    except Exception as e:
                        failure = failure or e
        with self.lock:
            self.refs -= 1
            handle = self.handle if self.refs == 0 else None
            if handle is not None:
                self.handle = None
        if handle is not None:
            self._give_back(handle)
        if failure is not None:
            raise failure

    def _give_back(self, handle: int) -> None:
        lib.cudaipc_frame_release(handle)
        self.held.remove(self.seq)

    def __del__(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            self._give_back(handle)


class _HostView:
    """Holds a lease for a NumPy view of a host slot; NumPy keeps it as the array's base."""

    def __init__(self, lease: _Lease, interface: dict) -> None:
        self.__array_interface__ = interface
        self._lease = lease

    def __del__(self) -> None:
        self._lease.unref()


class Frame:
    """A frame leased from the producer: its slot stays untouched until the frame is released
    (``release()``, leaving ``with``, or garbage collection) and every tensor made from it
    (``torch.from_dlpack(frame)``, ``np.from_dlpack(frame)``) is freed.

    Read it through DLPack (``__dlpack__``, zero-copy; the caller's stream waits for the frame on
    the GPU), ``__cuda_array_interface__`` (v3, zero-copy, valid until the frame is released) or
    ``numpy()`` (a host copy; a read-only view without copy for host-memory channels)."""

    __slots__ = ("_seq", "_lease", "_layout", "_tensor", "_data", "_publish_time", "_pts",
                 "_duration", "_flags", "_caps", "_generation", "_sync", "_cuda", "_device_id",
                 "_streams", "__weakref__")

    def __init__(self, handle: int, consumer: "Consumer") -> None:
        self._seq = seq = _frame_seq(handle)
        self._lease: Optional[_Lease] = _Lease(handle, consumer._sync, consumer._held, seq)
        raw = _string_at(_frame_tensor_address(handle), _TENSOR_SIZE)
        layout = consumer._layouts.get(raw)
        if layout is None:
            layout = consumer._add_layout(raw)
        self._layout = layout
        self._tensor = layout.tensor
        self._data = _frame_data(handle)
        self._publish_time = _frame_publish_time(handle)
        pts, _, dur, flags = consumer._times
        _frame_times(handle, *consumer._time_refs)
        self._pts, self._duration, self._flags = pts.value, dur.value, flags.value
        fmt = consumer._format
        self._caps = fmt.caps if fmt else ""
        self._generation = fmt.generation if fmt else 0
        self._sync = consumer._sync
        self._cuda = cuda = consumer._memory == _lib.MEMORY_CUDA
        self._device_id = consumer._sync.device if (cuda and consumer._sync) else 0
        self._streams: List[int] = []  # streams __dlpack__ made wait; release orders after them

    # -- description ---------------------------------------------------------------------------
    @property
    def seq(self) -> int:
        """The producer's frame number (1, 2, ...); a gap means frames were skipped."""
        return self._seq

    @property
    def pts(self) -> Optional[int]:
        """Presentation time in ns, or None when the producer set none."""
        return None if self._pts == _lib.NO_TIME else self._pts

    @property
    def duration(self) -> Optional[int]:
        return None if self._duration == _lib.NO_TIME else self._duration

    @property
    def flags(self) -> int:
        return self._flags

    @property
    def publish_time_ns(self) -> int:
        """The producer's time.monotonic_ns() at publish (same clock in every process)."""
        return self._publish_time

    @property
    def caps(self) -> str:
        """The caps of the format this frame belongs to."""
        return self._caps

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def dtype_name(self) -> str:
        return _dtypes.from_code(self._tensor.dtype).name

    @property
    def dtype(self) -> np.dtype:
        """The element type as a NumPy dtype (bfloat16 needs ml_dtypes)."""
        return _dtypes.numpy_dtype(_dtypes.from_code(self._tensor.dtype))

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._layout.shape

    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in bytes, outermost first (NumPy's convention)."""
        return self._layout.strides

    @property
    def nbytes(self) -> int:
        """Bytes the tensor spans from its first element (all planes, for video)."""
        return self._tensor.size

    @property
    def data_ptr(self) -> int:
        """The first element: a host pointer, or a CUdeviceptr for CUDA channels."""
        return self._data

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"`` (N the device ordinal in this process)."""
        return f"cuda:{self._device_id}" if self._cuda else "cpu"

    @property
    def released(self) -> bool:
        return self._lease is None or self._lease.handle is None

    def _rank(self) -> int:
        return min(self._tensor.rank, _lib.MAX_RANK)

    def _live(self) -> _Lease:
        if self._lease is None or self._lease.handle is None:
            raise ClosedError(f"frame {self._seq} was released")
        return self._lease

    def __repr__(self) -> str:
        state = " released" if self.released else ""
        return (f"<cudaipc.Frame seq={self._seq} {self.dtype_name}{list(self.shape)} "
                f"on {self.device}{state}>")

    # -- lifetime ------------------------------------------------------------------------------
    def release(self, stream: Any = None) -> None:
        """Gives the frame's own hold on the slot back. With `stream` (CUDA), the producer may
        reuse the slot only after the work queued on that stream so far; streams earlier given to
        ``__dlpack__`` are waited for as well. Tensors made from the frame keep their own hold
        until they are freed. Releasing twice does nothing."""
        lease, self._lease = self._lease, None
        if lease is None:
            return
        after = list(self._streams)
        if stream is not None and self._cuda:
            after.append(_cuda.stream_handle(stream))
        lease.unref(tuple(after))

    def __enter__(self) -> "Frame":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        if getattr(self, "_lease", None) is not None:
            self.release()

    # -- DLPack --------------------------------------------------------------------------------
    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_dlpack.CUDA, self._device_id) if self._cuda else (_dlpack.CPU, 0)

    def __dlpack__(self, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        """A DLPack capsule viewing the slot (versioned DLPack 1.x when ``max_version`` allows
        it). For CUDA frames, `stream` (the caller's: an int, None for the legacy default
        stream, -1 for none) waits on the GPU until the frame is readable, and the tensor's
        release is ordered after the work on it."""
        lease = self._live()
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"the frame is on {self.device}; cudaipc exports it only there "
                              "(copy after importing)")
        if copy:
            raise BufferError("cudaipc exports frames without copying (copy=True refused)")
        layout = self._layout.dlpack(device, not self._cuda)
        after: Tuple[int, ...] = ()
        if self._cuda:
            s = -1 if stream == -1 else _cuda.stream_handle(stream)
            if s != -1:
                assert self._sync is not None
                self._sync.caller_waits(s)
                self._streams.append(s)
                after = (s,)
        elif stream not in (None, -1):
            raise BufferError(f"stream {stream!r} given for a frame in host memory")
        lease.ref()
        try:
            return layout.export(self._data, max_version is not None and max_version[0] >= 1,
                                 lambda: lease.unref(after))
        except BaseException:
            lease.unref()
            raise

    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA Array Interface v3 (CUDA frames only). ``stream`` is the consumer's stream, which
        the importer waits for; the memory is valid until the frame is released, so pass your
        stream to ``release(stream=...)`` when your GPU work reads it later."""
        self._live()
        if not self._cuda:
            raise AttributeError("__cuda_array_interface__: the frame is in host memory")
        assert self._sync is not None
        return {
            "shape": self.shape,
            "typestr": self._typestr(),
            "data": (self._data, True),
            "strides": self.strides,
            "version": 3,
            "stream": self._sync.stream,
        }

    def _typestr(self) -> str:
        d = _dtypes.from_code(self._tensor.dtype)
        if d.typestr is None:
            raise InvalidArgumentError(f"{d.name} has no array-interface type; use DLPack")
        return d.typestr

    # -- host access ---------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The frame as a NumPy array: a read-only view of the slot for host-memory channels (it
        holds the slot until the array is freed), a copy for CUDA channels."""
        lease = self._live()
        dtype = self.dtype
        if not self._cuda:
            lease.ref()
            view = _HostView(lease, {
                "shape": self.shape, "typestr": dtype.str, "descr": dtype.descr,
                "data": (self._data, True), "strides": self.strides, "version": 3})
            arr = np.asarray(view)
            # The array interface has no name for types NumPy lacks (bfloat16): view as the dtype.
            return arr if arr.dtype == dtype else arr.view(dtype)
        assert self._sync is not None
        span = np.empty(self._tensor.size, dtype=np.uint8)
        self._sync.copy_to_host(span.ctypes.data, self._data, self._tensor.size)
        return _strided_copy(span, dtype, self.shape, self.strides)


def _strided_copy(span: np.ndarray, dtype: np.dtype, shape: Tuple[int, ...],
                  strides: Tuple[int, ...]) -> np.ndarray:
    view = np.ndarray(shape, dtype=dtype, buffer=span, strides=strides)
    return np.ascontiguousarray(view)


class Consumer:
    """Reads a channel: ``Consumer(path, mode="every-frame"|"latest", timeout=None, device=None,
    reconnect=True)``.

    ``next(timeout)`` returns the next :class:`Frame`; iterating yields frames until the
    producer's end of stream. ``format`` is the current stream format; ``on_format`` (a callable
    taking a :class:`Format`) runs in the reading thread each time it changes, before the first
    frame of the new format. With ``reconnect`` (default) a lost producer is waited for and a new
    one on the same path is joined (``on_disconnect`` is called with the reason); without it,
    ``next`` raises :class:`cudaipc.ConnectionError`. Constructing without reconnect raises
    ConnectionError when no producer listens on the path."""

    def __init__(self, path: str, mode: str = "every-frame", timeout: Optional[float] = None,
                 device: Optional[int] = None, reconnect: bool = True,
                 on_format: Optional[Callable[[Format], None]] = None,
                 on_disconnect: Optional[Callable[[], None]] = None) -> None:
        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"path must be a non-empty str, not {path!r}")
        modes = {"every-frame": _lib.EVERY_FRAME, "latest": _lib.LATEST}
        if mode not in modes:
            raise InvalidArgumentError(f"mode {mode!r} is not 'every-frame' or 'latest'")
        if timeout is not None and timeout < 0:
            raise InvalidArgumentError(f"timeout {timeout} is negative")
        self.path = path
        self.mode = mode
        self.timeout = timeout
        self.reconnect = reconnect
        self.on_format = on_format
        self.on_disconnect = on_disconnect
        self._format: Optional[Format] = None
        self._memory = 0
        self._sync: Optional[_cuda.StreamSync] = None
        self._ended = False
        self._held = _Held()
        opts = _lib.ConsumerOptions()
        lib.cudaipc_consumer_options_init(byref(opts))
        opts.path = path.encode()
        opts.mode = modes[mode]
        opts.reconnect = 1 if reconnect else 0
        opts.cuda_device = -1 if device is None else int(device)
        h = c_void_p()
        _lib.check(lib.cudaipc_consumer_new(byref(opts), byref(h)), f"consumer of {path}")
        self._h: Optional[int] = h.value
        self._event = _lib.Event()
        self._event_ref = byref(self._event)
        # Frame() reads a frame's times into these: the reading thread owns them, as it owns
        # the event.
        self._times = (c_uint64(), c_uint64(), c_uint64(), c_uint32())
        self._time_refs = tuple(byref(v) for v in self._times)
        self._layouts: Dict[bytes, _Layout] = {}

    def _add_layout(self, raw: bytes) -> _Layout:
        if len(self._layouts) >= _LAYOUTS_KEPT:
            self._layouts.clear()
        layout = self._layouts[raw] = _Layout(raw)
        return layout

    # -- state ---------------------------------------------------------------------------------
    @property
    def format(self) -> Optional[Format]:
        """The current stream format, None before the first one arrived."""
        return self._format

    @property
    def closed(self) -> bool:
        return self._h is None

    @property
    def memory(self) -> Optional[str]:
        """``"host"`` or ``"cuda"`` once a producer's format arrived, else None."""
        return {_lib.MEMORY_HOST: "host", _lib.MEMORY_CUDA: "cuda"}.get(self._memory)

    @property
    def held(self) -> int:
        """Frames this consumer handed out whose lease has not ended: the Frame is not released,
        or a tensor or array made from it is still alive. The producer lets a consumer hold at
        most ``num_slots - 1`` at once; at that limit ``next()`` waits for one to end."""
        return self._held.count()

    def _handle(self) -> int:
        if self._h is None:
            raise ClosedError(f"the consumer of {self.path} is closed")
        return self._h

    # -- reading -------------------------------------------------------------------------------
    def next(self, timeout: Optional[float] = None) -> Frame:
        """The next frame. `timeout` in seconds (default: the consumer's; None waits for ever).
        Raises :class:`cudaipc.TimeoutError` when nothing came, :class:`cudaipc.EndOfStream` at
        the end of the stream, :class:`cudaipc.ConnectionError` when the producer went away and
        reconnect is off, :class:`cudaipc.InterruptedError` after ``interrupt()``.

        While this consumer holds ``num_slots - 1`` frames (see ``held``), it waits for one of
        them to be released; a timeout then says which frames are held, and a wait without
        timeout warns (RuntimeWarning) after 10 s."""
        h = self._handle()
        if timeout is None:
            timeout = self.timeout
        if timeout is not None and timeout < 0:
            raise InvalidArgumentError(f"timeout {timeout} is negative")
        start = time.monotonic_ns()
        deadline = None if timeout is None else start + int(timeout * 1e9)
        collected = warned = False
        ev, ev_ref = self._event, self._event_ref
        while True:
            if deadline is None:
                wait = _SLICE_NS
            else:
                wait = max(0, min(_SLICE_NS, deadline - time.monotonic_ns()))
            rc = _consumer_next(h, wait, ev_ref)
            if rc:
                _lib.check(rc, f"reading {self.path}")
            t = ev.type
            if t == _lib.EVENT_FRAME:
                self._ended = False
                return Frame(ev.frame, self)
            if t == _lib.EVENT_FORMAT:
                self._new_format(h, ev)
            elif t == _lib.EVENT_EOS:
                self._ended = True
                raise EndOfStream(f"the producer on {self.path} ended the stream")
            elif t == _lib.EVENT_INTERRUPTED:
                raise InterruptedError(f"reading {self.path} was interrupted")
            elif t == _lib.EVENT_DISCONNECTED:
                if not self.reconnect:
                    raise ConnectionError(f"the producer on {self.path} went away")
                if self.on_disconnect is not None:
                    self.on_disconnect()
            elif t == _lib.EVENT_TIMEOUT:
                held = self._held.count()
                if held and not collected:
                    # A tensor caught in a reference cycle keeps its lease until a collection,
                    # and a thread waiting here allocates nothing that would start one.
                    collected = True
                    gc.collect()
                now = time.monotonic_ns()
                if deadline is not None and now >= deadline:
                    raise TimeoutError(self._nothing_came(f"within {timeout} s"))
                if deadline is None and held and not warned and now - start >= _HELD_WARNING_NS:
                    warned = True
                    warnings.warn(self._nothing_came(f"for {(now - start) / 1e9:.0f} s"),
                                  RuntimeWarning, stacklevel=2)

    def _nothing_came(self, how_long: str) -> str:
        msg = f"no frame from {self.path} {how_long}"
        if self._held.count():
            msg += (f"; this consumer still holds {self._held.describe()}: the producer lets a "
                    "consumer hold at most num_slots - 1 frames at once and next() waits for one "
                    "of them to end (release the frame or leave its `with`, and free every "
                    "tensor or array made from it)")
        return msg

    def _new_format(self, h: int, ev: _lib.Event) -> None:
        caps = (ev.caps or b"").decode("utf-8", "replace")
        self._format = _format_of(ev.tensor, caps, ev.generation)
        # A template's device and read-only flag come from the memory kind, which may change here.
        self._layouts.clear()
        mem = c_int()
        _lib.check(lib.cudaipc_consumer_memory(h, byref(mem)), f"reading {self.path}")
        if mem.value == _lib.MEMORY_CUDA:
            stream = lib.cudaipc_consumer_cuda_stream(h)
            if self._sync is None or self._sync.stream != stream:
                self._sync = _cuda.StreamSync(stream)
        else:
            self._sync = None
        self._memory = mem.value
        if self.on_format is not None:
            self.on_format(self._format)

    def __iter__(self) -> Iterator[Frame]:
        """Frames until the end of stream; each waits up to the consumer's timeout."""
        while True:
            try:
                yield self.next()
            except EndOfStream:
                return

    def interrupt(self) -> None:
        """Wakes a ``next()`` blocked in another thread: it raises InterruptedError."""
        if self._h is not None:
            lib.cudaipc_consumer_interrupt(self._h)

    def close(self) -> None:
        """Disconnects. Frames still held stay readable until they are released."""
        h, self._h = self._h, None
        if h is not None:
            lib.cudaipc_consumer_free(h)

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_h", None) is not None:
            self.close()

    def __repr__(self) -> str:
        return f"<cudaipc.Consumer {self.path} {self.mode}{' closed' if self.closed else ''}>"
