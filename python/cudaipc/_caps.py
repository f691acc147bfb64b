"""Caps for what a producer publishes: derived from shape and dtype as NNStreamer ``other/tensors``
(docs/caps.md), or given as raw-video caps, checked against the tensor so a ``cudaipcsrc``
downstream accepts the stream."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

from . import _dtypes
from ._errors import InvalidArgumentError

# Single-plane video formats: (dtype, channels or None for (H, W)).
_PACKED = {
    "RGBA": ("uint8", 4), "BGRA": ("uint8", 4), "RGBx": ("uint8", 4), "BGRx": ("uint8", 4),
    "RGB": ("uint8", 3), "BGR": ("uint8", 3),
    "GRAY8": ("uint8", None), "GRAY16_LE": ("uint16", None),
}
_PLANAR_RGB = ("RGBP", "BGRP")


def tensor_caps(dtype: _dtypes.DType, shape: Sequence[int], framerate: str) -> str:
    """other/tensors caps for a dense tensor; dimensions innermost first, as NNStreamer writes."""
    if not 1 <= len(shape) <= 8:
        raise InvalidArgumentError(f"other/tensors carries rank 1 to 8, not {len(shape)} "
                                   f"(shape {tuple(shape)})")
    dims = ":".join(str(int(n)) for n in reversed(shape))
    return (f"other/tensors, format=(string)static, num_tensors=(int)1, "
            f"types=(string){dtype.name}, dimensions=(string){dims}, "
            f"framerate=(fraction){framerate}")


def _split_fields(text: str) -> Tuple[List[str], bool]:
    """A structure's text split at its top-level commas: not inside quotes (with their backslash
    escapes) nor inside a list, array or range ({ }, < >, [ ]), whose members are comma-separated
    too. Also whether it ended inside a quote or a bracket (then it is not caps)."""
    parts: List[str] = []
    cur, quoted, escaped, depth = "", False, False, 0
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif not quoted and ch in "{<[":
            depth += 1
        elif not quoted and ch in "}>]":
            depth -= 1
        elif ch == "," and not quoted and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    parts.append(cur.strip())
    return parts, quoted or depth != 0


def parse(caps: str) -> Tuple[str, Dict[str, str]]:
    """The media type and the fields of a one-structure caps string, values without their type."""
    parts, _ = _split_fields(caps.strip().split("\n", 1)[0])
    fields: Dict[str, str] = {}
    for p in parts[1:]:
        if "=" not in p:
            continue
        key, value = p.split("=", 1)
        value = re.sub(r"^\([a-zA-Z]+\)", "", value.strip()).strip('"')
        fields[key.strip()] = value
    return parts[0].split("(", 1)[0].strip(), fields


_MEDIA = re.compile(r"[a-zA-Z][a-zA-Z0-9.+_-]*/[a-zA-Z0-9][a-zA-Z0-9.+_-]*")
_FIELD = re.compile(r"[a-zA-Z][a-zA-Z0-9_.-]*\s*=\s*(\([a-zA-Z]+\))?\s*\S.*", re.S)


def check_syntax(caps: str) -> None:
    """Refuses caps GStreamer could not parse as one structure: a media type (type/subtype)
    followed by name=value fields. What this accepts, a cudaipcsrc reads; what it refuses would
    fail only at the first consumer."""
    if not isinstance(caps, str) or not caps.strip():
        raise InvalidArgumentError(f"caps must be a non-empty str, not {caps!r}")
    parts, unclosed = _split_fields(caps.strip().rstrip(";").strip())
    media = parts[0].split("(", 1)[0].strip()
    if unclosed or not _MEDIA.fullmatch(media):
        raise InvalidArgumentError(
            f"caps {caps!r}: not a caps string (a media type such as video/x-raw or "
            f"other/tensors, then name=value fields, e.g. video/x-raw,format=RGBA,width=640,"
            f"height=480)")
    for p in parts[1:]:
        if not _FIELD.fullmatch(p):
            raise InvalidArgumentError(f"caps {caps!r}: {p!r} is not a name=value field")


def video_planes(caps: str, dtype: _dtypes.DType, shape: Sequence[int],
                 strides: Sequence[int]) -> List[Tuple[int, int]]:
    """Checks a raw-video caps string against the tensor and returns its planes (offset, pitch);
    an empty list for caps that are not raw video."""
    media, f = parse(caps)
    if media != "video/x-raw":
        return []
    fmt = f.get("format", "")
    try:
        width, height = int(f["width"]), int(f["height"])
    except (KeyError, ValueError):
        raise InvalidArgumentError(f"video caps need an integer width and height: {caps!r}")
    if fmt in _PACKED:
        want_dtype, channels = _PACKED[fmt]
        want = (height, width) + ((channels,) if channels else ())
        if dtype.name != want_dtype or tuple(shape) != want:
            raise InvalidArgumentError(
                f"caps format={fmt} {width}x{height} need a {want_dtype} tensor of shape {want}, "
                f"not {dtype.name} {tuple(shape)}")
        inner = dtype.itemsize * (channels or 1)
        if tuple(strides[1:]) != ((channels and (inner, dtype.itemsize)) or (inner,)):
            raise InvalidArgumentError(f"format={fmt} needs packed rows (strides {tuple(strides)})")
        return [(0, int(strides[0]))]
    if fmt in _PLANAR_RGB:
        want = (3, height, width)
        if dtype.name != "uint8" or tuple(shape) != want:
            raise InvalidArgumentError(f"caps format={fmt} {width}x{height} need a uint8 tensor "
                                       f"of shape {want}, not {dtype.name} {tuple(shape)}")
        return [(p * int(strides[0]), int(strides[1])) for p in range(3)]
    raise InvalidArgumentError(
        f"video format={fmt or '?'} cannot be published from Python: use one of "
        f"{', '.join(list(_PACKED) + list(_PLANAR_RGB))}, or other/tensors caps")


def tensor_caps_check(caps: str, dtype: _dtypes.DType, shape: Sequence[int]) -> None:
    """Explicit other/tensors caps must name the tensor's type and dimensions."""
    media, f = parse(caps)
    if media != "other/tensors":
        return
    if f.get("types") and f["types"] != dtype.name:
        raise InvalidArgumentError(f"caps say types={f['types']} but the tensor is {dtype.name}")
    dims = f.get("dimensions")
    if dims:
        got = [int(x) for x in re.split(r"[:.]", dims) if x]
        want = list(reversed([int(n) for n in shape]))
        while len(got) > len(want) and got[-1] == 1:
            got.pop()
        while len(want) > len(got) and want[-1] == 1:
            want.pop()
        if got != want:
            raise InvalidArgumentError(f"caps say dimensions={dims} but the tensor's shape is "
                                       f"{tuple(shape)}")


def framerate_text(framerate: Optional[object]) -> str:
    if framerate is None:
        return "0/1"
    if isinstance(framerate, tuple):
        return f"{int(framerate[0])}/{int(framerate[1])}"
    text = str(framerate)
    if re.fullmatch(r"\d+/\d+", text):
        return text
    if re.fullmatch(r"\d+", text):
        return f"{text}/1"
    raise InvalidArgumentError(f"framerate {framerate!r} is not N/D or an integer")
