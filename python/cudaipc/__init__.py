"""cudaipc: zero-copy frames (CUDA or host memory) between processes.

>>> import cudaipc, torch
>>> with cudaipc.Consumer("/run/user/1000/cudaipc/cam0") as c:
...     for frame in c:                       # until the producer's end of stream
...         with frame:                       # the slot is leased until released
...             t = torch.from_dlpack(frame)  # zero-copy; ordered on torch's current stream
...             y = model(t)

A :class:`Producer` publishes torch/cupy/NumPy arrays (``publish``) or lends slots to render into
(``frame``). In a PyGObject application, :func:`gst_detections` reads a Gst.Buffer's
detections (a cudaipcfilter's results). See docs/python.md.
"""

from ._consumer import Consumer, Format, Frame
from ._dtypes import NAMES as DTYPES
from ._errors import (BusyError, ClosedError, ConnectionError, CudaError, EndOfStream, Error,
                      FrameDropped, InterruptedError, InvalidArgumentError, NoCudaError,
                      PermissionError, ProtocolError, SystemCallError, TimeoutError,
                      UnsupportedError, VersionMismatchError)
from ._gst_detections import gst_detections
from ._producer import Producer, WritableFrame
from ._server import Request, Server
from . import metas  # noqa: E402  (the record classes: cudaipc.metas.RawRecord, ...)

__version__ = "0.1.0"

__all__ = [
    "Consumer", "Producer", "Frame", "WritableFrame", "Format", "DTYPES", "Server", "Request",
    "Error", "InvalidArgumentError", "SystemCallError", "ProtocolError", "VersionMismatchError",
    "PermissionError", "TimeoutError", "InterruptedError", "ConnectionError", "BusyError",
    "NoCudaError", "CudaError", "UnsupportedError", "ClosedError", "EndOfStream", "FrameDropped",
    "metas", "gst_detections",
]
