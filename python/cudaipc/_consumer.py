"""The consuming end of a channel, and the frames it hands out.

A frame's per-frame steps are the compiled binding's (python/native): ``next()`` is one call that
reads the frame and makes its object (``cudaipc_consumer_next_frame``), its export one call that
makes the DLPack capsule with the caller's stream ordered after the frame on the GPU, and its
release one more. Leases are counted in the library: an exported tensor holds its frame's lease
until the importer deletes it, and that deleter (compiled, like the capsule's destructor) orders
the release after the stream the export named. No Python runs when a tensor dies."""

from __future__ import annotations

import gc
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, NamedTuple, Optional, Tuple

import numpy as np

from . import _dtypes, _lib, _metas_io
from ._device import cuda_ordinal
from ._errors import (ClosedError, ConnectionError, EndOfStream, InterruptedError,
                      InvalidArgumentError, TimeoutError)

# next() waits in slices this long, so Ctrl-C (handled between slices) stops a consumer.
_SLICE_NS = 200_000_000
# A next() without timeout that has waited this long while the consumer holds frames warns once:
# held in the waiting thread, they can stall it for good at the producer's lease limit.
_HELD_WARNING_NS = 10_000_000_000

CPU, CUDA = _lib.DL_CPU, _lib.DL_CUDA  # DLDeviceType


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


# A tensor description as the binding gives it: (dtype code, shape, byte strides).
TensorTuple = Tuple[int, Tuple[int, ...], Tuple[int, ...]]


def _format_of(t: TensorTuple, caps: str, generation: int) -> Format:
    code, shape, strides = t
    d = _dtypes.BY_CODE.get(code)
    return Format(caps, d.name if d else f"code {code}", shape, strides, generation)


# The per-frame calls, bound once: attribute lookups cost more than the calls' own work.
_native = _lib.native
_consumer_next = _native.consumer_next
_frame_capsule = _native.frame_capsule
_EVENT_FRAME = _lib.EVENT_FRAME
_VERSIONED = _lib.DLPACK_VERSIONED
_CapsuleFailed = _lib.CapsuleFailed
_np_from_dlpack = getattr(np, "from_dlpack", None)  # public from NumPy 1.23


class _Shared(_native.Shared):
    """What the frames of one format and tensor description share (built when either changes,
    never per frame): the description as Python values, where the frames live, and the torch
    tensors, cupy arrays and NumPy arrays of its slots (``views``, ``cupy_views``,
    ``numpy_views``: the binding makes each once, for frame.torch(), frame.cupy() and a host
    frame's numpy(); they and ``host_dlpack`` are the base's fields, which it reads per frame)."""

    __slots__ = ("tensor_id", "device_id", "cuda", "dl_device", "caps", "generation", "dtype",
                 "shape", "strides", "meta_stats")

    def __init__(self, tensor_id: int, device_id: int, tensor: Optional[TensorTuple],
                 fmt: Optional[Format], meta_stats: Optional[_metas_io.MetaStats] = None) -> None:
        self.meta_stats = meta_stats or _metas_io.MetaStats()
        self.views = None
        self.cupy_views = None
        self.numpy_views = None
        self.tensor_id = tensor_id
        self.device_id = device_id
        self.cuda = device_id >= 0
        self.dl_device = (CUDA, device_id) if self.cuda else (CPU, 0)
        self.caps = fmt.caps if fmt else ""
        self.generation = fmt.generation if fmt else 0
        if tensor is not None:
            code, shape, strides = tensor
            self.dtype: Optional[_dtypes.DType] = _dtypes.from_code(code)
            self.shape: Tuple[int, ...] = shape
            self.strides: Tuple[int, ...] = strides
        else:
            self.dtype, self.shape, self.strides = None, (), ()
        # numpy() of a host frame as a slot view made through np.from_dlpack: every NumPy that
        # has it (1.23+) imports ints and floats whose strides count whole items (bool and
        # bfloat16, or byte strides, take the array interface, per frame).
        d = self.dtype
        self.host_dlpack = (_np_from_dlpack is not None and not self.cuda and d is not None and
                            d.dl_code in (0, 1, 2) and
                            all(st % d.itemsize == 0 for st in self.strides))


class _HostView:
    """A NumPy view of a host slot: holds the frame's lease through an unconsumed DLPack capsule
    (its compiled destructor gives the lease back when NumPy frees the view)."""

    __slots__ = ("__array_interface__", "_capsule")

    def __init__(self, capsule: Any, interface: dict) -> None:
        self._capsule = capsule
        self.__array_interface__ = interface


class _SlotExport:
    """A slot view's capsule as ``cupy.from_dlpack`` and ``np.from_dlpack`` take it (they ask an
    object for one)."""

    __slots__ = ("_capsule", "_device")

    def __init__(self, capsule: Any, device: Tuple[int, int]) -> None:
        self._capsule, self._device = capsule, device

    def __dlpack__(self, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        # No stream order here: the view is made once per slot, and each frame.cupy() orders its
        # frame's reads on the caller's stream.
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise BufferError("a slot view is exported once")
        return capsule

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self._device


def _cupy_slot_view(capsule: Any, device: int) -> Any:
    """The cupy array of a slot (the binding's frame.cupy(), once per slot)."""
    import cupy

    with cupy.cuda.Device(device):
        return cupy.from_dlpack(_SlotExport(capsule, (CUDA, device)))


def _numpy_slot_view(capsule: Any) -> np.ndarray:
    """The read-only NumPy array of a host slot (the binding's numpy(), once per slot). The slot
    view's capsule is DLPack's unversioned one, which has no read-only flag: set here, so the
    aliases handed out cannot be made writeable either."""
    arr = _np_from_dlpack(_SlotExport(capsule, (CPU, 0)))
    arr.flags.writeable = False
    return arr


class Frame(_native.Frame):
    """A frame leased from the producer: its slot stays untouched until the frame is released
    (``release()``, leaving ``with``, or garbage collection) and every tensor made from it
    (``torch.from_dlpack(frame)``, ``np.from_dlpack(frame)``) is freed.

    Read it through DLPack (``__dlpack__``, zero-copy; the caller's stream waits for the frame on
    the GPU), ``torch()``, ``cupy()`` and, for host-memory channels, ``numpy()`` (zero-copy views
    of the frame's slot, valid until the frame is released), ``__cuda_array_interface__`` (v3,
    zero-copy, valid until the frame is released) or ``numpy()`` of a CUDA frame (a host copy).

    What it carries beside its pixels (docs/metas.md) is read when first asked, once:
    ``metas`` (every record), ``tensors``, ``detections``, ``classifications``, ``tracks``,
    ``custom`` and ``meta``. Ask while the frame is held; the arrays they hand out that view the
    meta area (tensors, masks) keep the frame's lease until they are freed, as a DLPack export
    (``np.from_dlpack(frame)``) does."""

    # The handle (_h), the description (seq, pts, dts, duration, flags, publish_time_ns, nbytes,
    # data_ptr, released), release(), the DLPack export (__dlpack__, __dlpack_device__, torch())
    # and the context manager are the binding's (python/native/frame.cpp); _s is the format's
    # _Shared, _m the metas once decoded. Frames are made by the binding only.
    __slots__ = ()

    # -- description ---------------------------------------------------------------------------
    @property
    def caps(self) -> str:
        """The caps of the format this frame belongs to."""
        return self._s.caps

    @property
    def generation(self) -> int:
        return self._s.generation

    @property
    def dtype_name(self) -> str:
        return self._dtype().name

    @property
    def dtype(self) -> np.dtype:
        """The element type as a NumPy dtype (bfloat16 needs ml_dtypes)."""
        return _dtypes.numpy_dtype(self._dtype())

    def _dtype(self) -> _dtypes.DType:
        d = self._s.dtype
        if d is None:
            raise InvalidArgumentError(f"frame {self.seq} came without a tensor description")
        return d

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._s.shape

    @property
    def strides(self) -> Tuple[int, ...]:
        """Strides in bytes, outermost first (NumPy's convention)."""
        return self._s.strides

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"`` (N the device ordinal in this process)."""
        s = self._s
        return f"cuda:{s.device_id}" if s.cuda else "cpu"

    @property
    def written(self) -> bool:
        """False for a CUDA frame the producer died before writing: the consumer let work ordered
        after it run anyway (so nothing hangs), and that work read an unwritten slot; drop its
        results. True otherwise. Ask after your GPU work on the frame has run; raises once the
        frame is released."""
        return _native.frame_written(self._live())

    def _live(self) -> int:
        h = self._h
        if h is None:
            raise ClosedError(f"frame {self.seq} was released")
        return h

    # -- metas ---------------------------------------------------------------------------------
    def _decoded(self) -> _metas_io.Decoded:
        m = self._m
        if m is None:
            m = self._m = _metas_io.read(self._live(), self._s.meta_stats)
        return m

    def _view(self, key: str, make: Callable[[_metas_io.Decoded], Any]) -> Any:
        d = self._decoded()
        v = d._cache.get(key)
        if v is None:
            v = d._cache[key] = make(d)
        return v

    @property
    def metas(self) -> list:
        """Every record of the frame's meta area, in order: :class:`cudaipc.metas.AnalyticsRecord`,
        ``TensorsRecord``, ``CustomRecord``, ``TimestampRecord``, and ``RawRecord`` for
        serialized GstMetas and kinds this version does not read. Records that break the format
        are left out (``meta_errors`` says why; ``Consumer.stats`` counts them)."""
        return self._decoded().records

    @property
    def meta_errors(self) -> list:
        """Why records of this frame's meta area were skipped (empty when none was)."""
        return self._decoded().errors

    @property
    def metas_area(self) -> np.ndarray:
        """The meta area's bytes as the producer wrote them: a read-only view (empty without
        metas) that keeps the frame's lease while it lives."""
        return _metas_io.frame_area(self._live())

    @property
    def tensors(self) -> dict:
        """The GstTensorMeta tensors: id -> read-only array viewing the meta area (no copy),
        typed and shaped (see cudaipc.metas.TensorInfo for types NumPy lacks)."""
        return self._view("tensors", _metas_io.tensors)

    @property
    def detections(self) -> dict:
        """The object detections of the analytics records, as arrays (empty ones without):
        ``boxes`` (N, 4) float32 x1 y1 x2 y2 (x2, y2 exclusive), ``xywh`` (N, 4) int32 as
        GStreamer holds them, ``labels`` (list of str), ``scores`` float32, ``rotation`` float32
        radians, ``oriented`` bool, ``ids`` (mtd ids) uint32, ``track_ids`` int64 (-1: none)."""
        return self._view("detections", lambda d: _metas_io.frame_detections(d))

    @property
    def classifications(self) -> list:
        """Each classification: a dict ``labels`` (list of str), ``scores`` (float32 array),
        ``id`` (its mtd id) and ``detection`` (the index in ``detections`` it classifies, -1 for
        the whole frame)."""
        return self._view("classifications", lambda d: _metas_io.frame_classifications(d))

    @property
    def tracks(self) -> dict:
        """The tracking mtds as arrays: ``ids`` uint64, ``first_seen``/``last_seen`` uint64 ns,
        ``lost`` bool, ``detection`` int64 (index in ``detections``, -1 for none), ``mtd_ids``."""
        return self._view("tracks", lambda d: _metas_io.frame_tracks(d))

    @property
    def custom(self) -> dict:
        """Custom metas: name -> fields (dict)."""
        return self._view("custom", _metas_io.custom)

    @property
    def meta(self) -> dict:
        """The fields published with ``meta={...}`` (the custom meta named ``cudaipc-meta``)."""
        return self.custom.get(_metas_io.CUSTOM_NAME, {})

    def __repr__(self) -> str:
        state = " released" if self._h is None else ""
        name = self._s.dtype.name if self._s.dtype else "?"
        return f"<cudaipc.Frame seq={self.seq} {name}{list(self.shape)} on {self.device}{state}>"

    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA Array Interface v3 (CUDA frames only). ``stream`` is the consumer's stream, which
        the importer waits for; the memory is valid until the frame is released, so pass your
        stream to ``release(stream=...)`` when your GPU work reads it later. Handing the
        consumer's stream out makes each later release of this consumer ask the driver whether
        that stream has run the reads queued on it (frame.torch() and DLPack do not)."""
        h = self._live()
        s = self._s
        if not s.cuda:
            raise AttributeError("__cuda_array_interface__: the frame is in host memory")
        return {
            "shape": s.shape,
            "typestr": self._typestr(),
            "data": (self.data_ptr, True),
            "strides": s.strides,
            "version": 3,
            "stream": _native.frame_cuda_stream(h),
        }

    def _typestr(self) -> str:
        d = self._dtype()
        if d.typestr is None:
            raise InvalidArgumentError(f"{d.name} has no array-interface type; use DLPack")
        return d.typestr

    # -- host access ---------------------------------------------------------------------------
    def _numpy_other(self) -> np.ndarray:
        """numpy() (the binding's) where no slot view serves it: a host frame of a type NumPy's
        DLPack import lacks (a view that holds the slot until freed), a CUDA frame (a copy)."""
        s = self._s
        h = self._live()
        dtype = self.dtype
        if not s.cuda:
            try:
                capsule = _frame_capsule(h, 0, _VERSIONED)
            except _CapsuleFailed as e:
                raise _lib.capsule_error(e) from None
            view = _HostView(capsule, {
                "shape": s.shape, "typestr": dtype.str, "descr": dtype.descr,
                "data": (self.data_ptr, True), "strides": s.strides, "version": 3})
            arr = np.asarray(view)
            # The array interface has no name for types NumPy lacks (bfloat16): view as the dtype.
            return arr if arr.dtype == dtype else arr.view(dtype)
        span = np.empty(self.nbytes, dtype=np.uint8)
        _native.frame_copy_to_host(h, span.__array_interface__["data"][0], self.nbytes)
        view = np.ndarray(s.shape, dtype=dtype, buffer=span, strides=s.strides)
        return np.ascontiguousarray(view)


class Consumer(_native.Consumer):
    """Reads a channel: ``Consumer(path, mode="every-frame"|"latest", timeout=None, device=None,
    reconnect=True)``.

    ``next(timeout)`` returns the next :class:`Frame`; iterating yields frames until the
    producer's end of stream. ``format`` is the current stream format; ``on_format`` (a callable
    taking a :class:`Format`) runs in the reading thread each time it changes, before the first
    frame of the new format. With ``reconnect`` (default) a lost producer is waited for and a new
    one on the same path is joined (``on_disconnect`` is called with the reason); without it,
    ``next`` raises :class:`cudaipc.ConnectionError`. Constructing without reconnect raises
    ConnectionError when no producer listens on the path. A path where no producer can ever be
    raises at once, reconnect or not: :class:`cudaipc.InvalidArgumentError` for a regular file
    or a directory, :class:`cudaipc.ProtocolError` for a listener that does not speak cudaipc.
    `device` (CUDA channels: where frames are read; None: the producer's device) is an ordinal,
    ``"cuda"``, ``"cuda:N"`` or a ``torch.device``."""

    def __init__(self, path: str, mode: str = "every-frame", timeout: Optional[float] = None,
                 device: Any = None, reconnect: bool = True,
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
        self._meta_stats = _metas_io.MetaStats()
        self._shared = _Shared(-1, -1, None, None, self._meta_stats)
        h = _native.consumer_new(path, modes[mode], bool(reconnect),
                                 -1 if device is None else cuda_ordinal(device),
                                 f"consumer of {path}")
        # _h: while open; _handle_kept: until this object dies (held frames are counted there,
        # and frames outlive close()).
        self._h: Optional[int] = h
        self._handle_kept: Optional[int] = h
        # The reading thread owns it: one thread at a time calls next(), as the core's consumer
        # requires; threads that call it at once take turns (the base's reading turn, which a
        # callback of next() that closes takes again).
        self._events = _native.Events()

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
    def cuda_stream(self) -> Optional[int]:
        """The CUstream the consumer orders its own reads on (CUDA channels, once a format came):
        what ``__cuda_array_interface__`` names. Reads queued on it are covered by each frame's
        release, which from then on asks the driver whether the stream has run them."""
        h = self._h
        return None if h is None else _native.consumer_cuda_stream(h)

    @property
    def stats(self) -> dict:
        """Meta records of the frames whose metas were read (they are read when first asked):
        ``metas-received``, ``metas-unknown`` (kinds this version does not read, listed as raw
        records) and ``metas-bad`` (records that broke docs/metas.md, skipped)."""
        return self._meta_stats.as_dict()

    @property
    def held(self) -> int:
        """Frames this consumer handed out whose lease has not ended: the Frame is not released,
        or a tensor or array made from it is still alive. The producer lets a consumer hold at
        most ``num_slots - 1`` at once; at that limit ``next()`` waits for one to end."""
        return len(self._held_seqs(0))

    def counters(self) -> Dict[str, int]:
        """What this consumer has read: ``delivered`` and ``skipped`` frames (latest mode passes
        over the ones a newer frame replaced) and its producer's ``producer_published`` and
        ``producer_dropped``, since it connected to that producer; for CUDA channels, over every
        connection, ``gpu_waits`` (frames not yet written when taken, so the GPU waited for them)
        and ``gpu_releases`` (releases its stream wrote after reads still queued). Each GPU one
        costs a switch between the processes' contexts on a GPU without MPS."""
        names = ("delivered", "skipped", "producer_published", "producer_dropped", "gpu_waits",
                 "gpu_releases")
        got = _native.consumer_counters(self._handle(), f"counters of {self.path}")
        return dict(zip(names, got))

    def _held_seqs(self, capacity: int) -> list:
        h = self._handle_kept
        if h is None:
            return []
        count, seqs = _native.consumer_held(h, capacity, "held frames")
        return seqs if capacity else [0] * count

    def _handle(self) -> int:
        if self._h is None:
            raise ClosedError(f"the consumer of {self.path} is closed")
        return self._h

    # -- reading -------------------------------------------------------------------------------
    # next(timeout=None) is the base's, in C (python/native/consumer_base.cpp): a frame of the
    # description known comes back from there; anything else goes on in _next_slow.

    def _next_refused(self, why: str, timeout: Optional[float]) -> None:
        """What next() raises before it reads (called from the base's next)."""
        if why == "closed":
            raise ClosedError(f"the consumer of {self.path} is closed")
        if why == "invalid":
            raise InvalidArgumentError(f"timeout {timeout} is negative or not a number")
        raise TimeoutError(f"no frame from {self.path} within {timeout} s (another thread "
                           f"was reading it all that time)")

    def _next_slow(self, rc: int, timeout: Optional[float], deadline: Optional[int]) -> Frame:
        """Everything but a frame of the known description on next()'s first read (formats,
        timeouts, the end of stream, errors), on next()'s reading turn; `deadline` in
        time.monotonic_ns() (None: none)."""
        try:
            return self._next_events(rc, timeout, deadline)
        except InterruptedError:
            if self._h is None:  # close() from another thread woke this wait
                raise ClosedError(f"the consumer of {self.path} was closed") from None
            raise

    def _next_events(self, rc: int, timeout: Optional[float], deadline: Optional[int]) -> Frame:
        h = self._handle()
        start = time.monotonic_ns()
        collected = warned = False
        ev = self._events
        while True:
            if rc:
                _lib.check(rc, f"reading {self.path}")
            t = ev.type
            if t == _EVENT_FRAME:
                tensor_id, frame, device_id = ev.view
                shared = self._shared
                if tensor_id != shared.tensor_id or device_id != shared.device_id:
                    shared = self._new_shared(tensor_id, frame, device_id)
                return ev.frame(shared)
            if t == _lib.EVENT_FORMAT:
                self._new_format(h, ev)
            elif t == _lib.EVENT_EOS:
                raise EndOfStream(f"the producer on {self.path} ended the stream")
            elif t == _lib.EVENT_INTERRUPTED:
                raise InterruptedError(f"reading {self.path} was interrupted")
            elif t == _lib.EVENT_DISCONNECTED:
                if not self.reconnect:
                    raise ConnectionError(f"the producer on {self.path} went away")
                if self.on_disconnect is not None:
                    self.on_disconnect()
            elif t == _lib.EVENT_TIMEOUT:
                held = self.held
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
                                  RuntimeWarning, stacklevel=3)
            if deadline is None:
                wait = _SLICE_NS
            else:
                wait = max(0, min(_SLICE_NS, deadline - time.monotonic_ns()))
            if self._h is None:  # a callback (on_format, on_disconnect) closed the consumer
                raise ClosedError(f"the consumer of {self.path} was closed")
            got = _consumer_next(h, wait, ev, None, -1, -2)
            rc = got if type(got) is int else 0

    def _nothing_came(self, how_long: str) -> str:
        msg = f"no frame from {self.path} {how_long}"
        seqs = self._held_seqs(9)
        if seqs:
            count = self.held
            shown = ", ".join(str(s) for s in seqs[:8]) + (", ..." if count > 8 else "")
            msg += (f"; this consumer still holds {count} frame(s) (seq {shown}): the producer "
                    "lets a consumer hold at most num_slots - 1 frames at once and next() waits "
                    "for one of them to end (release the frame or leave its `with`, and free "
                    "every tensor or array made from it)")
        return msg

    def _new_format(self, h: int, ev: Any) -> None:
        caps, tensor, generation = ev.format
        self._format = _format_of(tensor, caps, generation)
        self._memory = _native.consumer_memory(h, f"reading {self.path}")
        # Frames of the new format get a new _Shared (caps, generation) at their first frame.
        self._shared = _Shared(-1, -1, None, None, self._meta_stats)
        if self.on_format is not None:
            self.on_format(self._format)

    def _new_shared(self, tensor_id: int, frame: int, device_id: int) -> _Shared:
        # Read once per tensor description: the frame's own, which may differ from the format's.
        tensor = _native.frame_tensor(frame)
        self._shared = _Shared(tensor_id, device_id, tensor, self._format, self._meta_stats)
        return self._shared

    # Iterating is the binding's (python/native/consumer_base.cpp): frames until the end of
    # stream, each waiting up to the consumer's timeout; the consumer is its own iterator.
    if TYPE_CHECKING:
        def __iter__(self) -> Iterator[Frame]: ...

        def __next__(self) -> Frame: ...

    def interrupt(self) -> None:
        """Wakes a ``next()`` blocked in another thread: it raises InterruptedError."""
        if self._h is not None:
            _native.consumer_interrupt(self._h)

    def close(self) -> None:
        """Disconnects. Frames still held stay readable until they are released. A ``next()``
        waiting in another thread is woken (it raises ClosedError) and waited for first."""
        h, self._h = self._h, None
        if h is None:
            return
        # The core's consumer must not go from under a next() that runs in it.
        while not self._take_turn(0.005):
            _native.consumer_interrupt(h)
        try:
            _native.consumer_close(h)
        finally:
            self._give_turn()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self, _free: Callable[[int], None] = _native.consumer_free) -> None:
        h = getattr(self, "_handle_kept", None)
        if h is not None:
            self._h = self._handle_kept = None
            _free(h)

    def __repr__(self) -> str:
        return f"<cudaipc.Consumer {self.path} {self.mode}{' closed' if self.closed else ''}>"
