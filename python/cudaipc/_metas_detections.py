"""What publish(detections=...) takes, as arrays: a torchvision-style dict (NumPy or torch, CUDA
tensors copied to the host in one go), an (N, 4) or (N, 6) array, or a list of dicts; and the names
of integer labels. _metas_analytics_write.py writes what this returns."""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from ._errors import InvalidArgumentError


def _host(x: Any, what: str) -> np.ndarray:
    """A host NumPy array of an array, list or tensor (a CUDA tensor copied once)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if hasattr(x, "__cuda_array_interface__") and hasattr(x, "get"):
        return x.get()  # CuPy
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{what}: {e}") from None


def _names(label_names: Any) -> Any:
    if label_names is None or isinstance(label_names, (list, tuple, Mapping)):
        return label_names
    raise InvalidArgumentError("label_names must be a list or a dict of int -> str")


def _name_of(names: Any, v: int) -> str:
    if names is None:
        return str(v)
    try:
        s = names[v]
    except (IndexError, KeyError):
        return str(v)
    return s if isinstance(s, str) else str(s)


class Detections(NamedTuple):
    boxes: np.ndarray  # (N, 4) float, x1 y1 x2 y2
    scores: Optional[np.ndarray]
    labels: Any  # (N,) integer array, list of str, or None
    rotation: Optional[np.ndarray]
    track_ids: Optional[np.ndarray]


def _torch_stack(d: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """A torchvision dict on the GPU in one device-to-host copy: boxes, scores and integer labels
    side by side as float32 (labels exact below 2**24), then split on the host."""
    torch = sys.modules.get("torch")
    boxes = d.get("boxes")
    if torch is None or not isinstance(boxes, torch.Tensor) or boxes.device.type == "cpu":
        return None
    cols = [boxes.detach().reshape(-1, 4).float()]
    keys = []
    for k in ("scores", "labels", "rotation"):
        v = d.get(k)
        if isinstance(v, torch.Tensor) and v.device == boxes.device:
            cols.append(v.detach().reshape(-1, 1).float())
            keys.append(k)
    host = torch.cat(cols, 1).cpu().numpy()
    out = dict(d)
    out["boxes"] = host[:, :4]
    for j, k in enumerate(keys):
        out[k] = host[:, 4 + j].astype(np.int64) if k == "labels" else host[:, 4 + j]
    return out


def detections_input(det: Any) -> Detections:
    """The forms ``publish(detections=...)`` takes, as arrays: a torchvision-style dict
    {"boxes": (N, 4), "labels": (N,) ints or strs, "scores": (N,), optional "rotation" (N,)
    radians and "track_ids" (N,), -1 for none}; an (N, 4) array of boxes; an (N, 6) array
    x1, y1, x2, y2, score, label (as YOLO models give them); or a list of dicts {"box", "label",
    "score", "rotation", "track_id"}."""
    if type(det) is dict:
        fast = _numpy_dict(det)
        if fast is not None:
            return fast
    if isinstance(det, Mapping):
        det = _torch_stack(det) or det
        if "boxes" not in det:
            raise InvalidArgumentError("detections as a dict need 'boxes' ((N, 4) x1 y1 x2 y2)")
        boxes = _host(det["boxes"], "detections['boxes']")
        n = boxes.shape[0] if boxes.ndim else 0
        labels = det.get("labels")
        if labels is not None and not (isinstance(labels, (list, tuple)) and labels and
                                       isinstance(labels[0], str)):
            labels = _host(labels, "detections['labels']")
        return Detections(_boxes(boxes), _column(det.get("scores"), n, "scores"),
                          labels, _column(det.get("rotation"), n, "rotation"),
                          _column(det.get("track_ids"), n, "track_ids"))
    if isinstance(det, (list, tuple)) and (not det or isinstance(det[0], Mapping)):
        return _from_dicts(det)
    arr = _host(det, "detections")
    if arr.ndim != 2 or arr.shape[1] not in (4, 6):
        raise InvalidArgumentError(f"detections as an array are (N, 4) or (N, 6), not "
                                   f"{arr.shape}")
    if arr.shape[1] == 4:
        return Detections(_boxes(arr), None, None, None, None)
    return Detections(_boxes(arr[:, :4]), arr[:, 4], arr[:, 5].astype(np.int64), None, None)


def _numpy_dict(det: Dict[str, Any]) -> Optional[Detections]:
    """The common case at little cost: a dict of NumPy arrays of the right shapes, taken as
    they are (anything else goes the general way, which converts and explains)."""
    boxes = det.get("boxes")
    if type(boxes) is not np.ndarray or boxes.ndim != 2 or boxes.shape[1] != 4 or \
            boxes.dtype.kind not in "fiu":
        return None
    n = boxes.shape[0]
    cols = (det.get("scores"), det.get("labels"), det.get("rotation"), det.get("track_ids"))
    for c in cols:
        if c is not None and (type(c) is not np.ndarray or c.shape != (n,)):
            return None
    return Detections(boxes, *cols)


def _boxes(b: np.ndarray) -> np.ndarray:
    if b.size == 0:
        return np.zeros((0, 4), np.float32)
    if b.ndim != 2 or b.shape[1] != 4:
        raise InvalidArgumentError(f"boxes are (N, 4) x1 y1 x2 y2, not {b.shape}")
    if b.dtype.kind not in "fiu":
        raise InvalidArgumentError(f"boxes of {b.dtype}: numbers needed")
    return b


def _column(v: Any, n: int, what: str) -> Optional[np.ndarray]:
    if v is None:
        return None
    a = _host(v, f"detections[{what!r}]").reshape(-1)
    if a.shape[0] != n:
        raise InvalidArgumentError(f"detections[{what!r}] has {a.shape[0]} values for {n} boxes")
    return a


def _from_dicts(items: Sequence[Mapping[str, Any]]) -> Detections:
    n = len(items)
    boxes = np.zeros((n, 4), np.float64)
    scores = np.ones(n, np.float32)
    rotation = np.zeros(n, np.float32)
    tids = np.full(n, -1, np.int64)
    labels: List[Any] = []
    rotated = tracked = False
    for i, d in enumerate(items):
        if "box" not in d:
            raise InvalidArgumentError(f"detection {i} has no 'box' (x1, y1, x2, y2)")
        boxes[i] = _host(d["box"], f"detection {i}'s box").reshape(4)
        scores[i] = d.get("score", 1.0)
        if "rotation" in d:
            rotation[i], rotated = d["rotation"], True
        if d.get("track_id") is not None:
            tids[i], tracked = d["track_id"], True
        labels.append(d.get("label", ""))
    if labels and all(isinstance(x, (int, np.integer)) for x in labels):
        labels = np.asarray(labels, np.int64)  # type: ignore[assignment]
    else:
        labels = [x if isinstance(x, str) else str(x) for x in labels]
    return Detections(boxes, scores, labels, rotation if rotated else None,
                      tids if tracked else None)
