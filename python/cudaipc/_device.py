"""``device=`` arguments as torch users write them: an ordinal, ``"cuda"``, ``"cuda:N"`` or a
``torch.device``, for every class of the package that takes one."""

from __future__ import annotations

import operator
import sys
from typing import Any

from ._errors import InvalidArgumentError

_FORMS = "a CUDA device ordinal (0), 'cuda', 'cuda:N' or a torch.device('cuda', N)"


def _current() -> int:
    # torch's "cuda" is its current device, which is 0 until the program sets another (and
    # torch then is loaded and initialised: nothing is imported or initialised here).
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return int(torch.cuda.current_device())
    except Exception:  # noqa: BLE001  (a torch without CUDA: its default is ours)
        pass
    return 0


def _ordinal(index: Any, device: Any) -> int:
    if index is None:
        return _current()
    if isinstance(index, bool):
        raise InvalidArgumentError(f"device {device!r} is not {_FORMS}")
    try:
        n = operator.index(index)
    except TypeError:
        raise InvalidArgumentError(f"device {device!r} is not {_FORMS}") from None
    if n < 0:
        raise InvalidArgumentError(f"device {device!r} is negative: give {_FORMS}")
    return n


def cuda_ordinal(device: Any) -> int:
    """The CUDA device ordinal `device` names; InvalidArgumentError (a ValueError) saying which
    forms are taken for anything else, "cpu" included."""
    if isinstance(device, str):
        text = device.strip()
        if text.isdigit():
            return int(text)
        kind, sep, index = text.partition(":")
        if kind != "cuda" or (sep and not index.isdigit()):
            raise InvalidArgumentError(f"device {device!r} is not {_FORMS}")
        return int(index) if sep else _current()
    kind = getattr(device, "type", None)
    if isinstance(kind, str) and hasattr(device, "index"):  # torch.device, without importing it
        if kind != "cuda":
            raise InvalidArgumentError(f"device {device!r} is not {_FORMS}")
        return _ordinal(device.index, device)
    return _ordinal(device, device)
