"""The producing end of a channel.

``publish(tensor)`` costs one foreign call: the library reads the tensor's DLPack capsule, makes
the copy wait on the GPU for the stream the tensor was made on (torch's or cupy's current stream,
or the one given), copies it into a slot, publishes, and keeps the tensor until the producer's
stream has run the copy. ``frame()`` costs three (borrow, export, commit), the commit waiting on
the GPU for the streams the slot was exported to."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _caps, _cuda, _dtypes, _lib, _metas_io
from ._device import cuda_ordinal
from ._errors import (ClosedError, FrameDropped, InterruptedError, InvalidArgumentError,
                      NoCudaError, TimeoutError)
_native = _lib.native
_publish_capsule = _native.producer_publish
_slot_capsule = _native.slot_capsule
_check = _native.check
_NO_SYNC = _lib.DLPACK_NO_SYNC
_NEEDS_FORMAT = _lib.NEEDS_FORMAT
_VERSION = (1, 0)


def _dense_bytes(shape: Sequence[int], itemsize: int) -> int:
    n = itemsize
    for d in shape:
        n *= d
    return n


class _Frameworks:
    """How to read a tensor of a framework the package knows without the generic DLPack stream
    handshake, whose exporters order the copy with a new event per call (torch's __dlpack__ makes
    a torch.cuda.Event in Python): the capsule, exported unsynchronised, and the framework's current
    stream, which the library orders the copy after itself (nothing when it is idle)."""

    def __init__(self) -> None:
        self.torch_tensor: Optional[type] = None
        self.torch_to_dlpack: Optional[Callable[[Any], Any]] = None
        self.torch_stream: Optional[Callable[[int], int]] = None

    def torch(self, obj: Any) -> bool:
        t = self.torch_tensor
        if t is None:
            torch = sys.modules.get("torch")
            if torch is None:
                return False
            import torch.utils.dlpack  # noqa: F401  (the C exporter, without __dlpack__'s checks)
            t = self.torch_tensor = torch.Tensor
            self.torch_to_dlpack = torch.utils.dlpack.to_dlpack
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            self.torch_stream = raw if raw is not None else (
                lambda dev: torch.cuda.current_stream(dev).cuda_stream)
        return isinstance(obj, t)

    def current_stream(self, obj: Any, dev_id: int) -> Optional[int]:
        """The current stream of the framework `obj` belongs to on device `dev_id`, as a CUstream
        value (the legacy default stream is 1), or None for a framework not known here."""
        if self.torch(obj):
            assert self.torch_stream is not None
            s = self.torch_stream(dev_id)
        else:
            cupy = sys.modules.get("cupy")
            if cupy is None or not isinstance(obj, cupy.ndarray):
                return None
            with cupy.cuda.Device(dev_id):
                s = cupy.cuda.get_current_stream().ptr
        return s or _cuda.STREAM_LEGACY


_FRAMEWORKS = _Frameworks()


def _numpy_capsule(arr: np.ndarray) -> Any:
    """A DLPack capsule of a C-contiguous NumPy array: NumPy's own when it can make one, else one
    made here (dtypes DLPack has no NumPy name for, like ml_dtypes' bfloat16; read-only arrays
    before NumPy 2.1; non-native byte order, refused below with the reason)."""
    try:
        return arr.__dlpack__(max_version=_VERSION)
    except TypeError:  # NumPy before 2.1: no versioned capsules
        try:
            return arr.__dlpack__()
        except BufferError:
            pass
    except BufferError:
        pass
    d = _dtypes.from_any(arr.dtype)
    return _lib.native.wrap_capsule(arr.ctypes.data, _lib.DL_CPU, 0, d.code, arr.shape,
                                    arr.strides, _lib.DLPACK_VERSIONED | _lib.DLPACK_READ_ONLY,
                                    arr)


class Producer:
    """Publishes a channel: ``Producer(path, memory="cuda"|"host", num_slots=4,
    policy="block"|"drop", device=0, block_timeout=1.0, caps=None, framerate=None,
    meta_size=65536, role="frames")``.

    `num_slots` is 1 to 32 (a channel's most); `device` the CUDA device of the slots, as torch
    names it (0, ``"cuda"``, ``"cuda:1"``, ``torch.device("cuda", 1)``). `role` ``"requests"``
    makes the channel one a :class:`cudaipc.Server` answers, as a ``cudaipcfilter``'s is (a
    server turns any other away); ``"frames"`` is every other channel.

    ``publish(obj)`` copies any DLPack or CUDA-array-interface object (torch, cupy, NumPy) into a
    slot; ``frame()`` lends a slot to render in place. The stream's caps are NNStreamer
    ``other/tensors`` derived from shape and dtype unless `caps` names others (e.g.
    ``"video/x-raw,format=RGBA,width=640,height=480,framerate=30/1"``, checked against the
    tensor), so a ``cudaipcsrc`` pipeline can play the channel. A shape or dtype change starts a
    new format that consumers see before its first frame. Closing (or leaving ``with`` without an
    exception) ends the stream first.

    Each slot has ``meta_size`` bytes of meta area (host memory, 0 to 16 MiB) for what a frame
    carries beside its pixels (docs/metas.md): ``publish`` and ``frame`` take ``tensors=``,
    ``detections=``, ``classifications=``, ``tracks=``, ``relations=``, ``meta=`` and
    ``metas=`` (see ``publish``)."""

    def __init__(self, path: str, memory: str = "cuda", num_slots: int = 4,
                 policy: str = "block", device: Any = 0, block_timeout: float = 1.0,
                 caps: Optional[str] = None, framerate: Any = None,
                 meta_size: int = 65536, role: str = "frames") -> None:
        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"path must be a non-empty str, not {path!r}")
        kinds = {"host": _lib.MEMORY_HOST, "cuda": _lib.MEMORY_CUDA}
        if memory not in kinds:
            raise InvalidArgumentError(f"memory {memory!r} is not 'cuda' or 'host'")
        policies = {"block": _lib.BLOCK, "drop": _lib.DROP}
        if policy not in policies:
            raise InvalidArgumentError(f"policy {policy!r} is not 'block' or 'drop'")
        if not 1 <= int(num_slots) <= _lib.MAX_SLOTS:
            raise InvalidArgumentError(f"num_slots {num_slots} is not between 1 and "
                                       f"{_lib.MAX_SLOTS}")
        roles = {"frames": _lib.ROLE_FRAMES, "requests": _lib.ROLE_REQUESTS}
        if role not in roles:
            raise InvalidArgumentError(f"role {role!r} is not 'frames' or 'requests'")
        device_ordinal = cuda_ordinal(device)
        if block_timeout <= 0:
            raise InvalidArgumentError(f"block_timeout {block_timeout} is not positive")
        if not 0 <= int(meta_size) <= _metas_io.MAX_AREA:
            raise InvalidArgumentError(f"meta_size {meta_size} is not between 0 and "
                                       f"{_metas_io.MAX_AREA} bytes")
        if caps is not None:
            _caps.check_syntax(caps)  # here, not at the first consumer that cannot parse it
        self.path = path
        self.memory = memory
        self.policy = policy
        self.caps = caps
        self.framerate = _caps.framerate_text(framerate)
        try:
            h = _native.producer_new(path, int(num_slots), kinds[memory], policies[policy],
                                     int(block_timeout * 1e9), device_ordinal, int(meta_size),
                                     roles[role], f"producer on {path}")
        except NoCudaError as e:
            # Say what to use instead, as the elements do ("Use ipc-mode=host on the sink").
            raise NoCudaError(f'{e}. Use memory="host" for a channel in host memory '
                              f'(no GPU needed)', e.code) from None
        self._h: Optional[int] = h
        self._cuda = memory == "cuda"
        device_of, stream_of, meta_size_of = _native.producer_describe(h)
        self.device: Optional[int] = device_of if self._cuda else None
        self._stream: Optional[int] = stream_of if self._cuda else None
        self._format_key: Any = None
        self._format_caps: Any = ()  # the `caps` the current format was made with (None: derived)
        self._format_nbytes = 0
        self._format: Optional[Tuple[_dtypes.DType, Tuple[int, ...], Tuple[int, ...]]] = None
        # The contexts of the per-frame calls' errors, made once.
        self._publishing = f"publishing on {path}"
        self._borrowing = f"borrowing a slot on {path}"
        self.meta_size: int = meta_size_of
        self._metas: Optional[_metas_io.MetaWriter] = None  # made at the first frame with metas

    def _handle(self) -> int:
        if self._h is None:
            raise ClosedError(f"the producer on {self.path} is closed")
        return self._h

    @property
    def closed(self) -> bool:
        return self._h is None

    @property
    def cuda_stream(self) -> Optional[int]:
        """The CUstream slot writes are ordered on (CUDA channels)."""
        return self._stream

    # -- format --------------------------------------------------------------------------------
    def set_format(self, shape: Sequence[int], dtype: Any, caps: Optional[str] = None) -> None:
        """Announces the format of the next frames (publish() and frame() do this on their own
        when the shape or dtype changes)."""
        d = _dtypes.from_any(dtype)
        shape = tuple(int(n) for n in shape)
        self._ensure_format(d, shape, _dtypes.contiguous_strides(shape, d.itemsize), caps)

    def _ensure_format(self, d: _dtypes.DType, shape: Tuple[int, ...],
                       strides: Tuple[int, ...], caps: Optional[str]) -> int:
        caps = caps or self.caps
        key = (d.code, shape, strides, caps)
        if key == self._format_key:
            return self._format_nbytes
        h = self._handle()
        if any(n < 1 for n in shape) or not 1 <= len(shape) <= _lib.MAX_RANK:
            raise InvalidArgumentError(f"shape {shape}: cudaipc carries rank 1 to "
                                       f"{_lib.MAX_RANK}, every dimension at least 1")
        if caps:
            planes = _caps.video_planes(caps, d, shape, strides)
            _caps.tensor_caps_check(caps, d, shape)
            text = caps
        else:
            planes = []
            text = _caps.tensor_caps(d, shape, self.framerate)
        nbytes = _dense_bytes(shape, d.itemsize)
        _native.producer_set_format(h, text, d.code, shape, strides, nbytes,
                                    [(int(off), int(pitch)) for off, pitch in planes],
                                    f"format of {self.path}")
        self._format_key = key
        self._format_caps = caps
        self._format_nbytes = nbytes
        self._format = (d, shape, strides)
        return nbytes

    def _format_for(self, capsule: Any, caps: Optional[str]) -> None:
        """Sets the format a tensor the library found unlike the current one needs."""
        code, shape, strides = _native.capsule_describe(capsule, self._publishing)
        self._ensure_format(_dtypes.from_code(code), shape, strides, caps)

    # -- copying in ----------------------------------------------------------------------------
    def _capsule(self, obj: Any, stream: Any) -> Tuple[Any, int, int]:
        """(DLPack capsule of `obj`, the CUstream the copy waits for, flags)."""
        fw = _FRAMEWORKS
        if fw.torch(obj):
            dev = obj.get_device()
            assert fw.torch_to_dlpack is not None
            capsule = fw.torch_to_dlpack(obj)
            if dev < 0:
                return capsule, 0, _NO_SYNC
            if stream is not None:
                return capsule, _cuda.stream_handle(stream), 0
            assert fw.torch_stream is not None
            return capsule, fw.torch_stream(dev) or _cuda.STREAM_LEGACY, 0
        if isinstance(obj, np.ndarray) or not (hasattr(obj, "__dlpack__") or
                                               hasattr(obj, "__cuda_array_interface__")):
            arr = np.ascontiguousarray(obj)  # a copy only where obj is not C-contiguous
            _dtypes.from_any(arr.dtype)  # refuses what cudaipc cannot carry, naming it
            if not 1 <= arr.ndim <= _lib.MAX_RANK:
                raise InvalidArgumentError(f"shape {arr.shape}: cudaipc carries rank 1 to "
                                           f"{_lib.MAX_RANK}, every dimension at least 1")
            return _numpy_capsule(arr), 0, _NO_SYNC
        if hasattr(obj, "__dlpack__"):
            dev_type, dev_id = obj.__dlpack_device__()
            if dev_type != _lib.DL_CUDA:
                return self._dlpack_of(obj, None), 0, _NO_SYNC
            self._require_cuda()
            if stream is not None:
                return self._dlpack_of(obj, -1), _cuda.stream_handle(stream), 0
            s = fw.current_stream(obj, dev_id)
            if s is not None:
                try:
                    return self._dlpack_of(obj, -1), s, 0
                except (ValueError, BufferError):
                    pass  # an exporter that refuses "no synchronisation" (stream -1)
            # DLPack's own handshake: the exporter orders our stream after its own.
            return self._dlpack_of(obj, self._stream), 0, _NO_SYNC
        cai = obj.__cuda_array_interface__
        self._require_cuda()
        d = _dtypes.from_any(np.dtype(cai["typestr"]))
        shape = tuple(int(n) for n in cai["shape"])
        strides = tuple(cai.get("strides") or _dtypes.contiguous_strides(shape, d.itemsize))
        capsule = _lib.native.wrap_capsule(int(cai["data"][0]), _lib.DL_CUDA, self.device or 0,
                                           d.code, shape, strides,
                                           _lib.DLPACK_VERSIONED | _lib.DLPACK_READ_ONLY, obj)
        s = stream if stream is not None else cai.get("stream")
        if s is None:
            return capsule, 0, _NO_SYNC  # v3: no stream means no ordering needed
        return capsule, _cuda.stream_handle(s), 0

    @staticmethod
    def _dlpack_of(obj: Any, stream: Optional[int]) -> Any:
        kw = {} if stream is None else {"stream": stream}
        try:
            return obj.__dlpack__(max_version=_VERSION, **kw)
        except TypeError:  # an exporter from before DLPack 1.0
            return obj.__dlpack__(**kw)

    def _require_cuda(self) -> None:
        if not self._cuda:
            raise InvalidArgumentError(
                f"{self.path} is a host-memory channel: publish host arrays (e.g. tensor.cpu())")

    def publish(self, obj: Any, pts: Optional[int] = None, duration: Optional[int] = None,
                caps: Optional[str] = None, stream: Any = None, *, tensors: Any = None,
                detections: Any = None, classifications: Any = None, tracks: Any = None,
                relations: Any = None, meta: Optional[Mapping[str, Any]] = None,
                metas: Any = None, label_names: Any = None) -> bool:
        """Copies `obj` into a free slot and publishes it. GPU sources are copied on the GPU after
        the work queued on their stream (torch's or cupy's current stream, `stream` when given;
        the CPU never waits), and held until the copy has run. Returns False when the ``drop``
        policy dropped the frame; raises :class:`cudaipc.TimeoutError` when ``block`` found no
        free slot in time. `pts` and `duration` are in ns.

        The frame's metas (docs/metas.md, docs/python.md), written into the slot's meta area:

        - ``tensors={"id": array, ...}``: a GstTensorMeta (NumPy arrays, torch tensors, CUDA ones
          copied to the host once).
        - ``detections=``: a GstAnalyticsRelationMeta's object detections: a torchvision-style
          dict ``{"boxes": (N, 4) x1 y1 x2 y2, "labels": (N,) ints or strs, "scores": (N,)}``
          (optional ``"rotation"`` in radians, ``"track_ids"``), an (N, 4) or (N, 6)
          ``x1 y1 x2 y2 score label`` array, or a list of dicts ``{"box", "label", "score"}``.
          ``label_names`` (a list, or a dict int -> str) names integer labels.
        - ``classifications=``: a dict ``{"labels": [...], "scores": [...]}`` classifies the
          frame; a list of them, one per detection (None to skip), classifies each detection.
        - ``tracks=``: per detection, track ids ((N,), -1 for none) or a dict ``{"ids",
          "first_seen", "last_seen", "lost"}``.
        - ``relations=[(from, to, types), ...]``: more relations between mtds (detections
          first, then classifications, then tracks; types as GstAnalyticsRelTypes bits or
          names "contain", "is-part-of", "relate-to", "n-to-n").
        - ``meta={...}``: flat fields (int, float, bool, str, bytes) as a GstCustomMeta named
          ``cudaipc-meta``.
        - ``metas=[record, ...]``: records as they are (``cudaipc.metas`` classes, or a frame's
          own ``frame.metas`` to forward them); ``metas=<bytes>`` publishes a whole area as given.

        Metas that do not fit ``meta_size`` raise InvalidArgumentError naming both sizes, and
        the frame is not published."""
        h = self._h
        if h is None:
            raise ClosedError(f"the producer on {self.path} is closed")
        if tensors is None and detections is None and meta is None and metas is None and \
                classifications is None and tracks is None and relations is None:
            metas_at, metas_size = None, 0
        else:
            w = self._writer()
            buf = w.buffer()
            metas_size = w.encode(buf, tensors, detections, classifications, tracks, relations,
                                  meta, metas, label_names)
            metas_at = w.address if metas_size else None
        capsule, s, flags = self._capsule(obj, stream)
        want_caps = caps or self.caps
        if want_caps != self._format_caps:
            self._format_for(capsule, caps)
        r = _publish_capsule(h, capsule, s, flags, pts, duration, metas_at, metas_size)
        if r == _NEEDS_FORMAT:
            self._format_for(capsule, caps)
            r = _publish_capsule(h, capsule, s, flags, pts, duration, metas_at, metas_size)
        if r < 0:
            _check(-r, self._publishing)
        return r == _lib.PUBLISHED or self._status(r)

    def _writer(self) -> _metas_io.MetaWriter:
        w = self._metas
        if w is None:
            w = self._metas = _metas_io.MetaWriter(self.meta_size)
        return w

    def _status(self, s: int) -> bool:
        if s == _lib.PUBLISHED:
            return True
        if s == _lib.DROPPED:
            return False
        if s == _lib.TIMED_OUT:
            raise TimeoutError(f"no free slot on {self.path} within the block timeout: "
                               "a consumer is holding frames or reading slowly")
        raise InterruptedError(f"publishing on {self.path} was interrupted")

    # -- in place ------------------------------------------------------------------------------
    def frame(self, shape: Optional[Sequence[int]] = None, dtype: Any = None,
              pts: Optional[int] = None, duration: Optional[int] = None,
              caps: Optional[str] = None, **metas: Any) -> "WritableFrame":
        """A slot to render into: ``with producer.frame(shape, dtype) as f:
        torch.from_dlpack(f).copy_(x)``. Leaving the ``with`` publishes it (after the GPU work
        queued on the streams given to ``__dlpack__``); an exception aborts it. shape and dtype
        default to the current format's. The meta keywords of ``publish`` (``detections=``...)
        are taken here or by ``f.set_metas(...)`` inside the ``with``; they are encoded straight
        into the slot's meta area when the frame is published."""
        self._handle()
        if shape is None or dtype is None:
            if self._format is None:
                raise InvalidArgumentError("frame() needs shape and dtype before the first format")
            d0, shape0, _ = self._format
            shape = shape0 if shape is None else shape
            dtype = d0 if dtype is None else dtype
        return WritableFrame(self, _dtypes.from_any(dtype), tuple(int(n) for n in shape), pts,
                             duration, caps, metas)

    # -- stream control ------------------------------------------------------------------------
    def end_of_stream(self) -> None:
        """Consumers see end of stream after the frames published so far."""
        _native.producer_end_of_stream(self._handle(), f"EOS on {self.path}")

    def interrupt(self) -> None:
        """Wakes a publish() blocked on a full ring in another thread (it raises
        InterruptedError), and makes later ones raise too until ``clear_interrupt()``."""
        h = self._h
        if h is not None:
            try:
                _native.producer_interrupt(h)
            except ClosedError:
                pass  # closed by another thread since: nothing waits in it any more

    def clear_interrupt(self) -> None:
        h = self._h
        if h is not None:
            try:
                _native.producer_clear_interrupt(h)
            except ClosedError:
                pass

    def counters(self) -> Tuple[int, int, int]:
        """(frames published, frames dropped, consumers connected)."""
        return _native.producer_counters(self._handle(), f"counters of {self.path}")

    @property
    def consumers(self) -> int:
        return self.counters()[2]

    def wait_for_consumers(self, n: int = 1, timeout: float = 10.0) -> None:
        """Waits until at least `n` consumers are connected."""
        deadline = time.monotonic() + timeout
        while self.consumers < n:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{self.consumers} of {n} consumers connected to {self.path} "
                                   f"within {timeout} s")
            time.sleep(0.005)

    def close(self, eos: bool = True) -> None:
        """Ends the stream (unless eos=False) and closes the channel once the copies still in
        flight have run (their sources are released then). Consumers read the frames already
        published, then see the end of stream. A ``publish()`` or ``frame()`` waiting for a slot
        on another thread is woken and raises :class:`cudaipc.ClosedError`; a ``frame()`` being
        written on another thread is waited for (up to 10 s) and not published (its commit
        raises ClosedError); the producer goes once they have left."""
        h = self._h
        if h is None:
            return
        self._h = None
        try:
            # The binding wakes and waits for the calls in the producer (a frame() open on another
            # thread: until it leaves its `with`), then ends the stream and frees it.
            _native.producer_free(h, eos)
        except ClosedError:
            pass  # another thread's close() got there first

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        self.close(eos=exc_type is None)

    def __del__(self) -> None:
        if getattr(self, "_h", None) is not None and not sys.is_finalizing():
            try:
                self.close(eos=False)
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<cudaipc.Producer {self.path} {self.memory}{' closed' if self.closed else ''}>"


class WritableFrame:
    """A slot lent for writing (``Producer.frame()``): export it with DLPack (torch, cupy), CUDA
    array interface, or ``numpy()`` (host channels), write, and leave the ``with`` to publish.
    Do not keep tensors made from it past the ``with``: the slot then belongs to consumers."""

    def __init__(self, producer: Producer, dtype: _dtypes.DType, shape: Tuple[int, ...],
                 pts: Optional[int], duration: Optional[int], caps: Optional[str],
                 metas: Optional[Dict[str, Any]] = None) -> None:
        self._p = producer
        self._metas: Dict[str, Any] = {}
        if metas:
            self.set_metas(**metas)
        self._dtype = dtype
        self.shape = shape
        self.strides = _dtypes.contiguous_strides(shape, dtype.itemsize)
        self._pts, self._duration, self._caps = pts, duration, caps
        self._addr = 0
        self._open = False
        self._h: Optional[int] = None  # the producer's handle while the slot is borrowed

    @property
    def dtype(self) -> np.dtype:
        return _dtypes.numpy_dtype(self._dtype)

    def set_metas(self, **metas: Any) -> None:
        """The frame's metas, with ``publish``'s keywords (``tensors=``, ``detections=``,
        ``classifications=``, ``tracks=``, ``relations=``, ``meta=``, ``metas=``,
        ``label_names=``): encoded into the slot's own meta area when the ``with`` ends. A later
        call replaces the keywords it names."""
        unknown = set(metas) - set(_metas_io.KEYWORDS)
        if unknown:
            raise TypeError(f"unknown meta keyword(s): {', '.join(sorted(unknown))} (they are "
                            f"{', '.join(_metas_io.KEYWORDS)})")
        self._metas.update(metas)

    @property
    def device(self) -> str:
        return f"cuda:{self._p.device}" if self._p._cuda else "cpu"

    @property
    def data_ptr(self) -> int:
        return self._addr

    def __enter__(self) -> "WritableFrame":
        p = self._p
        h = self._h = p._handle()  # the commit or abort reaches the binding even after a close
        nbytes = p._ensure_format(self._dtype, self.shape, self.strides, self._caps)
        address, capacity, result = _native.producer_begin(h, p._borrowing)
        if result == _lib.DROPPED:
            raise FrameDropped(f"no free slot on {p.path}; the drop policy dropped the frame")
        if result != _lib.PUBLISHED:
            p._status(result)
        if capacity < nbytes:
            _native.producer_abort(h, None)
            raise InvalidArgumentError(f"slot of {capacity} bytes is smaller than the frame's "
                                       f"{nbytes}")
        self._addr = address
        self._open = True
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if not self._open:
            return
        self._open = False
        p = self._p
        h = self._h
        if exc_type is not None:
            _native.producer_abort(h, f"aborting a frame on {p.path}")
            return
        metas_at, metas_size = None, 0
        if any(v is not None for v in self._metas.values()):
            try:
                metas_at, metas_size = self._encode_in_place(h)
            except BaseException:
                _native.producer_abort(h, None)
                raise
        # The commit waits on the GPU for every stream __dlpack__ exported the slot to.
        _native.producer_commit(h, self._pts, self._duration, metas_at, metas_size,
                                p._publishing)

    def _encode_in_place(self, h: int) -> Tuple[Optional[int], int]:
        """Encodes the frame's metas straight into the borrowed slot's meta area: (its address,
        bytes used), nothing copied at the commit."""
        address, cap = _native.producer_slot_metas(h)
        w = self._p._writer()
        if not address:
            # No area (meta_size 0): encoding into the writer's empty buffer raises, naming sizes.
            w.encode(w.buffer(), **self._metas)
            return None, 0
        n = w.encode(w.slot_view(address, cap), **self._metas)
        return (address, n) if n else (None, 0)

    def _live(self) -> None:
        if not self._open:
            raise ClosedError("the slot is lent only inside the producer.frame() 'with' block")

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_lib.DL_CUDA, self._p.device or 0) if self._p._cuda else (_lib.DL_CPU, 0)

    def __dlpack__(self, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        self._live()
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError("the slot is exported only on its own device")
        if copy:
            raise BufferError("a slot is exported without copying (copy=True refused)")
        flags = _lib.DLPACK_VERSIONED if max_version is not None and max_version[0] >= 1 else 0
        s = 0
        if self._p._cuda:
            if stream == -1:
                flags |= _NO_SYNC
            else:
                # The writes come after the consumers still reading the slot's previous frame
                # (the producer's stream waits for them), and the commit after the writes.
                s = _cuda.stream_handle(stream)
        # A failure raises the package's exception for the core's status (the binding's).
        return _slot_capsule(self._p._handle(), s, flags)

    @property
    def __cuda_array_interface__(self) -> dict:
        self._live()
        if not self._p._cuda or self._dtype.typestr is None:
            raise AttributeError("__cuda_array_interface__: not a CUDA slot of a NumPy type")
        return {"shape": self.shape, "typestr": self._dtype.typestr,
                "data": (self._addr, False), "strides": self.strides, "version": 3,
                "stream": self._p._stream}

    def numpy(self) -> np.ndarray:
        """A writable NumPy view of a host slot (host channels only)."""
        self._live()
        if self._p._cuda:
            raise InvalidArgumentError("the slot is in GPU memory: write it through DLPack")
        d = self.dtype
        holder = _Interface({"shape": self.shape, "typestr": d.str, "descr": d.descr,
                             "data": (self._addr, False), "strides": self.strides,
                             "version": 3})
        arr = np.asarray(holder)
        return arr if arr.dtype == d else arr.view(d)


class _Interface:
    def __init__(self, interface: dict) -> None:
        self.__array_interface__ = interface
