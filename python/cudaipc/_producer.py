"""The producing end of a channel."""

from __future__ import annotations

import collections
import time
from ctypes import byref, c_int, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any, Deque, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import _caps, _cuda, _dlpack, _dtypes, _lib
from ._errors import (ClosedError, FrameDropped, InterruptedError, InvalidArgumentError,
                      TimeoutError)
from ._lib import lib


class _Source(NamedTuple):
    data: int
    cuda: bool
    device: int
    dtype: _dtypes.DType
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    nbytes: int
    keep: Any  # what must stay alive (and be closed) until the copy has run


def _close(keep: Any) -> None:
    close = getattr(keep, "close", None)
    if close is not None and isinstance(keep, _dlpack.Imported):
        close()


def _dense_bytes(shape: Sequence[int], itemsize: int) -> int:
    n = itemsize
    for d in shape:
        n *= d
    return n


class Producer:
    """Publishes a channel: ``Producer(path, memory="cuda"|"host", num_slots=4,
    policy="block"|"drop", device=0, block_timeout=1.0, caps=None, framerate=None)``.

    ``publish(obj)`` copies any DLPack or CUDA-array-interface object (torch, cupy, NumPy) into a
    slot; ``frame()`` lends a slot to render in place. The stream's caps are NNStreamer
    ``other/tensors`` derived from shape and dtype unless `caps` names others (e.g.
    ``"video/x-raw,format=RGBA,width=640,height=480,framerate=30/1"``, checked against the
    tensor), so a ``cudaipcsrc`` pipeline can play the channel. A shape or dtype change starts a
    new format that consumers see before its first frame. Closing (or leaving ``with`` without an
    exception) ends the stream first."""

    def __init__(self, path: str, memory: str = "cuda", num_slots: int = 4,
                 policy: str = "block", device: int = 0, block_timeout: float = 1.0,
                 caps: Optional[str] = None, framerate: Any = None) -> None:
        if not isinstance(path, str) or not path:
            raise InvalidArgumentError(f"path must be a non-empty str, not {path!r}")
        kinds = {"host": _lib.MEMORY_HOST, "cuda": _lib.MEMORY_CUDA}
        if memory not in kinds:
            raise InvalidArgumentError(f"memory {memory!r} is not 'cuda' or 'host'")
        policies = {"block": _lib.BLOCK, "drop": _lib.DROP}
        if policy not in policies:
            raise InvalidArgumentError(f"policy {policy!r} is not 'block' or 'drop'")
        if not 1 <= int(num_slots) <= 64:
            raise InvalidArgumentError(f"num_slots {num_slots} is not between 1 and 64")
        if block_timeout <= 0:
            raise InvalidArgumentError(f"block_timeout {block_timeout} is not positive")
        self.path = path
        self.memory = memory
        self.policy = policy
        self.caps = caps
        self.framerate = _caps.framerate_text(framerate)
        opts = _lib.ProducerOptions()
        lib.cudaipc_producer_options_init(byref(opts))
        opts.path = path.encode()
        opts.slots = int(num_slots)
        opts.memory = kinds[memory]
        opts.on_full = policies[policy]
        opts.block_timeout_ns = int(block_timeout * 1e9)
        opts.cuda_device = int(device)
        h = c_void_p()
        _lib.check(lib.cudaipc_producer_new(byref(opts), byref(h)), f"producer on {path}")
        self._h: Optional[int] = h.value
        self._cuda = memory == "cuda"
        self._sync: Optional[_cuda.StreamSync] = None
        if self._cuda:
            try:
                self._sync = _cuda.StreamSync(lib.cudaipc_producer_cuda_stream(self._h))
            except BaseException:
                self.close(eos=False)
                raise
        self.device = self._sync.device if self._sync else None
        self._format_key: Any = None
        self._format_nbytes = 0
        self._format: Optional[Tuple[_dtypes.DType, Tuple[int, ...], Tuple[int, ...]]] = None
        # Sources whose asynchronous copy into a slot may still be running: (event, source).
        self._pending: Deque[Tuple[int, Any]] = collections.deque()

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
        return self._sync.stream if self._sync else None

    # -- format --------------------------------------------------------------------------------
    def set_format(self, shape: Sequence[int], dtype: Any, caps: Optional[str] = None) -> None:
        """Announces the format of the next frames (publish() and frame() do this on their own
        when the shape or dtype changes)."""
        d = _dtypes.from_any(dtype)
        shape = tuple(int(n) for n in shape)
        self._ensure_format(d, shape, _dlpack.contiguous_strides(shape, d.itemsize), caps)

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
        t = _lib.Tensor()
        t.dtype = d.code
        t.rank = len(shape)
        for i, (n, s) in enumerate(zip(shape, strides)):
            t.shape[i] = n
            t.strides[i] = s
        t.byte_offset = 0
        t.size = nbytes
        t.num_planes = len(planes)
        for i, (off, pitch) in enumerate(planes):
            t.planes[i].offset = off
            t.planes[i].pitch = pitch
        _lib.check(lib.cudaipc_producer_set_format(h, text.encode(), byref(t), 0),
                   f"format of {self.path}")
        self._format_key = key
        self._format_nbytes = nbytes
        self._format = (d, shape, strides)
        return nbytes

    # -- copying in ----------------------------------------------------------------------------
    def _source(self, obj: Any) -> _Source:
        if isinstance(obj, np.ndarray) or not (hasattr(obj, "__dlpack__") or
                                               hasattr(obj, "__cuda_array_interface__")):
            arr = np.ascontiguousarray(obj)  # a copy only where obj is not C-contiguous
            d = _dtypes.from_any(arr.dtype)
            return _Source(arr.ctypes.data, False, 0, d, tuple(arr.shape),
                           tuple(arr.strides), arr.nbytes, arr)
        if hasattr(obj, "__dlpack__"):
            dev_type, dev_id = obj.__dlpack_device__()
            on_gpu = dev_type in (_dlpack.CUDA,)
            kw = {}
            if on_gpu:
                self._require_gpu_source(dev_id)
                assert self._sync is not None
                # The object's owner makes our stream wait for its own (DLPack's contract).
                kw["stream"] = self._sync.stream
            elif dev_type not in (_dlpack.CPU, 3):  # 3: kDLCUDAHost, host-readable
                raise InvalidArgumentError(f"cannot publish from DLPack device type {dev_type}")
            try:
                capsule = obj.__dlpack__(max_version=_dlpack.VERSION, **kw)
            except TypeError:  # a producer from before DLPack 1.0
                capsule = obj.__dlpack__(**kw)
            imp = _dlpack.Imported(capsule)
            try:
                self._require_dense(imp.shape, imp.strides, imp.dtype, on_gpu)
            except BaseException:
                imp.close()
                raise
            return _Source(imp.data, on_gpu, dev_id, imp.dtype, imp.shape, imp.strides,
                           _dense_bytes(imp.shape, imp.dtype.itemsize), imp)
        cai = obj.__cuda_array_interface__
        self._require_gpu_source(None)
        assert self._sync is not None
        d = _dtypes.from_any(np.dtype(cai["typestr"]))
        shape = tuple(int(n) for n in cai["shape"])
        strides = tuple(cai.get("strides") or _dlpack.contiguous_strides(shape, d.itemsize))
        self._require_dense(shape, strides, d, True)
        stream = cai.get("stream")
        if stream:
            self._sync.after_caller(int(stream))
        return _Source(int(cai["data"][0]), True, self._sync.device, d, shape, strides,
                       _dense_bytes(shape, d.itemsize), obj)

    def _require_gpu_source(self, dev_id: Optional[int]) -> None:
        if not self._cuda:
            raise InvalidArgumentError(
                f"{self.path} is a host-memory channel: publish host arrays (e.g. tensor.cpu())")
        assert self._sync is not None
        if dev_id is not None and dev_id != self._sync.device:
            raise InvalidArgumentError(f"the tensor is on cuda:{dev_id}, the channel on "
                                       f"cuda:{self._sync.device}")

    @staticmethod
    def _require_dense(shape: Tuple[int, ...], strides: Tuple[int, ...], d: _dtypes.DType,
                       gpu: bool) -> None:
        want = _dlpack.contiguous_strides(shape, d.itemsize)
        if any(s != w for n, s, w in zip(shape, strides, want) if n > 1):
            raise InvalidArgumentError(
                f"publish needs a C-contiguous tensor; shape {shape} has byte strides {strides} "
                f"(call .contiguous(){'' if gpu else ' or numpy.ascontiguousarray'})")

    def publish(self, obj: Any, pts: Optional[int] = None, duration: Optional[int] = None,
                caps: Optional[str] = None) -> bool:
        """Copies `obj` into a free slot and publishes it. GPU sources are copied on the GPU after
        the work queued on the object's stream (no CPU wait); the source is held until the copy has
        run. Returns False when the ``drop`` policy dropped the frame; raises
        :class:`cudaipc.TimeoutError` when ``block`` found no free slot in time. `pts` and
        `duration` are in ns."""
        h = self._handle()
        self._reap(block=False)
        src = self._source(obj)
        try:
            self._ensure_format(src.dtype, src.shape,
                                _dlpack.contiguous_strides(src.shape, src.dtype.itemsize), caps)
            info = self._info(pts, duration)
            result = c_int()
            _lib.check(lib.cudaipc_producer_publish(h, c_void_p(src.data), src.nbytes,
                                                    byref(info), 1 if src.cuda else 0,
                                                    byref(result)), f"publishing on {self.path}")
        except BaseException:
            self._after_copy(src)
            raise
        self._after_copy(src)
        return self._status(result.value)

    def _after_copy(self, src: _Source) -> None:
        if self._sync is not None and (src.cuda or self._cuda):
            self._pending.append((self._sync.mark(), src.keep))
        else:
            _close(src.keep)

    def _reap(self, block: bool) -> None:
        while self._pending:
            event, keep = self._pending[0]
            assert self._sync is not None
            if not self._sync.done(event, block=block):
                return
            self._pending.popleft()
            _close(keep)

    def _info(self, pts: Optional[int], duration: Optional[int]) -> _lib.FrameInfo:
        info = _lib.FrameInfo()
        info.pts = _lib.NO_TIME if pts is None else int(pts)
        info.dts = _lib.NO_TIME
        info.duration = _lib.NO_TIME if duration is None else int(duration)
        return info

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
              caps: Optional[str] = None) -> "WritableFrame":
        """A slot to render into: ``with producer.frame(shape, dtype) as f:
        torch.from_dlpack(f).copy_(x)``. Leaving the ``with`` publishes it (after the GPU work
        queued on the streams given to ``__dlpack__``); an exception aborts it. shape and dtype
        default to the current format's."""
        self._handle()
        if shape is None or dtype is None:
            if self._format is None:
                raise InvalidArgumentError("frame() needs shape and dtype before the first format")
            d0, shape0, _ = self._format
            shape = shape0 if shape is None else shape
            dtype = d0 if dtype is None else dtype
        return WritableFrame(self, _dtypes.from_any(dtype), tuple(int(n) for n in shape), pts,
                             duration, caps)

    # -- stream control ------------------------------------------------------------------------
    def end_of_stream(self) -> None:
        """Consumers see end of stream after the frames published so far."""
        _lib.check(lib.cudaipc_producer_end_of_stream(self._handle()), f"EOS on {self.path}")

    def interrupt(self) -> None:
        """Wakes a publish() blocked on a full ring in another thread (it raises
        InterruptedError), and makes later ones raise too until ``clear_interrupt()``."""
        if self._h is not None:
            lib.cudaipc_producer_interrupt(self._h)

    def clear_interrupt(self) -> None:
        if self._h is not None:
            lib.cudaipc_producer_clear_interrupt(self._h)

    def counters(self) -> Tuple[int, int, int]:
        """(frames published, frames dropped, consumers connected)."""
        pub, drop, cons = c_uint64(), c_uint64(), c_uint32()
        _lib.check(lib.cudaipc_producer_counters(self._handle(), byref(pub), byref(drop),
                                                 byref(cons)), f"counters of {self.path}")
        return pub.value, drop.value, cons.value

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
        """Ends the stream (unless eos=False), waits for pending copies and closes the channel.
        Consumers read the frames already published, then see the end of stream."""
        h = self._h
        if h is None:
            return
        try:
            if eos:
                lib.cudaipc_producer_end_of_stream(h)
            if self._sync is not None:
                self._reap(block=True)
        finally:
            self._h = None
            lib.cudaipc_producer_free(h)

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        self.close(eos=exc_type is None)

    def __del__(self) -> None:
        if getattr(self, "_h", None) is not None:
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
                 pts: Optional[int], duration: Optional[int], caps: Optional[str]) -> None:
        self._p = producer
        self._dtype = dtype
        self.shape = shape
        self.strides = _dlpack.contiguous_strides(shape, dtype.itemsize)
        self._pts, self._duration, self._caps = pts, duration, caps
        self._addr = 0
        self._open = False
        self._streams: List[int] = []

    @property
    def dtype(self) -> np.dtype:
        return _dtypes.numpy_dtype(self._dtype)

    @property
    def device(self) -> str:
        return f"cuda:{self._p.device}" if self._p._cuda else "cpu"

    @property
    def data_ptr(self) -> int:
        return self._addr

    def __enter__(self) -> "WritableFrame":
        p = self._p
        h = p._handle()
        nbytes = p._ensure_format(self._dtype, self.shape, self.strides, self._caps)
        addr, cap, result = c_size_t(), c_uint64(), c_int()
        _lib.check(lib.cudaipc_producer_begin(h, byref(addr), byref(cap), byref(result)),
                   f"borrowing a slot on {p.path}")
        if result.value == _lib.DROPPED:
            raise FrameDropped(f"no free slot on {p.path}; the drop policy dropped the frame")
        p._status(result.value)
        if cap.value < nbytes:
            lib.cudaipc_producer_abort(h)
            raise InvalidArgumentError(f"slot of {cap.value} bytes is smaller than the frame's "
                                       f"{nbytes}")
        self._addr = addr.value
        self._open = True
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        if not self._open:
            return
        self._open = False
        p = self._p
        h = p._handle()
        if exc_type is not None:
            _lib.check(lib.cudaipc_producer_abort(h), f"aborting a frame on {p.path}")
            return
        if p._sync is not None:
            for s in self._streams:
                if s != -1:
                    p._sync.after_caller(s)
        info = p._info(self._pts, self._duration)
        _lib.check(lib.cudaipc_producer_commit(h, byref(info)), f"publishing on {p.path}")

    def _live(self) -> None:
        if not self._open:
            raise ClosedError("the slot is lent only inside the producer.frame() 'with' block")

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_dlpack.CUDA, self._p.device or 0) if self._p._cuda else (_dlpack.CPU, 0)

    def __dlpack__(self, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None,
                   copy: Optional[bool] = None) -> Any:
        self._live()
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError("the slot is exported only on its own device")
        if copy:
            raise BufferError("a slot is exported without copying (copy=True refused)")
        if self._p._cuda:
            s = -1 if stream == -1 else _cuda.stream_handle(stream)
            if s != -1:
                assert self._p._sync is not None
                # Consumers may still read this slot's previous frame: the core queued waits for
                # them on its stream at begin; the caller's writes come after those.
                self._p._sync.caller_waits(s)
            self._streams.append(s)
        return _dlpack.export(self._addr, device, self._dtype, self.shape, self.strides,
                              _dlpack.wants_versioned(max_version), read_only=False,
                              on_delete=None)

    @property
    def __cuda_array_interface__(self) -> dict:
        self._live()
        if not self._p._cuda or self._dtype.typestr is None:
            raise AttributeError("__cuda_array_interface__: not a CUDA slot of a NumPy type")
        assert self._p._sync is not None
        return {"shape": self.shape, "typestr": self._dtype.typestr,
                "data": (self._addr, False), "strides": self.strides, "version": 3,
                "stream": self._p._sync.stream}

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
