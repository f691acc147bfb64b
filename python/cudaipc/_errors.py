"""The exceptions cudaipc raises. Every one derives from :class:`Error`; the ones with a builtin
meaning (timeouts, lost connections, bad arguments) also derive from that builtin, so code that
already catches ``TimeoutError`` or ``ConnectionError`` keeps working."""

from __future__ import annotations

import builtins


class Error(Exception):
    """Base class of every cudaipc error. ``code`` is the C API status (0 when raised by Python)."""

    code: int = 0

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class InvalidArgumentError(Error, ValueError):
    """An argument (path, dtype, shape, caps, option) the channel cannot take."""


class SystemCallError(Error, OSError):
    """A system call failed (socket, memfd, mmap...); the message names the call and errno."""


class ProtocolError(Error):
    """The peer sent something malformed or unexpected."""


class VersionMismatchError(Error):
    """The producer and the consumer speak different wire versions."""


class PermissionError(Error, builtins.PermissionError):
    """The producer refused this process (another user, not in the allowed group)."""


class TimeoutError(Error, builtins.TimeoutError):
    """Nothing arrived, or no slot was free, within the timeout."""


class InterruptedError(Error, builtins.InterruptedError):
    """``interrupt()`` woke a blocked call."""


class ConnectionError(Error, builtins.ConnectionError):
    """No producer listens on the path, or the producer went away (with ``reconnect=False``)."""


class BusyError(Error):
    """A live producer already holds the path."""


class NoCudaError(Error):
    """A CUDA channel was asked for where no CUDA driver or device is usable."""


class CudaError(Error):
    """A CUDA driver call failed; the message names the call and the driver's error."""


class UnsupportedError(Error):
    """The request is valid but not supported here (e.g. no peer access between two GPUs)."""


class ClosedError(Error, ValueError):
    """The consumer, producer or frame was already closed or released."""


class EndOfStream(Error):
    """The producer ended the stream: ``Consumer.next()`` raises it; iteration just stops."""


class FrameDropped(Error):
    """``Producer.frame()`` found no free slot and the channel's policy is ``"drop"``."""


_BY_CODE = {
    1: InvalidArgumentError,
    2: SystemCallError,
    3: ProtocolError,
    4: VersionMismatchError,
    5: PermissionError,
    6: TimeoutError,
    7: InterruptedError,
    8: ConnectionError,
    9: BusyError,
    10: NoCudaError,
    11: CudaError,
    12: UnsupportedError,
}


def from_code(code: int, message: str) -> Error:
    """The exception for a C API status code."""
    return _BY_CODE.get(code, Error)(message or f"cudaipc error {code}", code)
