"""What the metas tests publish, computed from the frame index so that a consumer in another
process can check every value; run as a script it is that producer:
    metas_peer.py PATH FRAMES all|detections [meta_size]"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cudaipc  # noqa: E402
from cudaipc import metas as M  # noqa: E402
from conftest import pattern  # noqa: E402

NAMES = ["person", "car", "dog"]


def tensor_dtypes() -> List[Any]:
    """Every dtype a tensor record carries that NumPy (with ml_dtypes, if installed) has."""
    out: List[Any] = [np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                      np.uint64, np.float16, np.float32, np.float64, np.bool_, np.complex64,
                      np.complex128]
    try:
        import ml_dtypes
        out += [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz, ml_dtypes.int4,
                ml_dtypes.uint4]
    except ImportError:
        pass
    return out


def tensor_values(seq: int, j: int) -> np.ndarray:
    dtypes = tensor_dtypes()
    dt = np.dtype(dtypes[(seq + j) % len(dtypes)])
    shapes = [(3,), (2, 3), (4, 1, 2), (), (0, 5), (2, 2, 2, 3), (1,) * 16]
    shape = shapes[(seq * 3 + j) % len(shapes)]
    if dt.name in ("int4", "uint4"):
        n = int(np.prod(shape))
        v = (np.arange(n) + seq + j) % 8
        return v.astype(dt).reshape(shape)
    if dt.kind == "c":
        return (pattern(seq + j, shape, np.float32) + 1j).astype(dt)
    if dt.name.startswith("float8"):
        n = int(np.prod(shape))
        return ((np.arange(n) + seq + j) % 8).astype(np.float32).astype(dt).reshape(shape)
    return pattern(seq + j, shape, dt)


def detections(seq: int, n: int) -> Dict[str, Any]:
    i = np.arange(n)
    x1 = seq + 3 * i
    y1 = 2 * seq + i
    boxes = np.stack([x1, y1, x1 + 10 + i, y1 + 5 + seq % 4], axis=1).astype(np.float32)
    out = {"boxes": boxes, "labels": i % 3,
           "scores": ((seq % 100) / 100 + i / 1000).astype(np.float32),
           "track_ids": np.where(i % 2 == 0, i * seq, -1)}
    if seq % 2:
        out["rotation"] = (i * 0.01).astype(np.float32)
    return out


def classifications(seq: int, n: int) -> List[Any]:
    return [None if k % 2 else {"labels": [f"c{seq}", "other"], "scores": [0.75, 0.25]}
            for k in range(n)]


def publish_kwargs(seq: int) -> Dict[str, Any]:
    """Every record kind: analytics, tensors, custom (cudaipc-meta and another), timestamp, a
    serialized record and a kind this version does not know."""
    n = seq % 5 + 1
    return {
        "detections": detections(seq, n),
        "label_names": NAMES,
        "classifications": classifications(seq, n),
        "tensors": {f"t{j}": tensor_values(seq, j) for j in range(seq % 17)},
        "meta": {"seq": seq, "neg": -seq, "big": (1 << 63) + seq, "ratio": seq / 3,
                 "odd": bool(seq % 2), "name": f"frame {seq}", "blob": bytes([seq % 256]) * 3},
        "metas": [M.TimestampRecord("timestamp/x-test", seq * 1000, 33 if seq % 2 else None),
                  M.RawRecord(1, "GstFooMetaAPI", b"serialized %d" % seq),
                  M.RawRecord(99, "future-kind", bytes([seq % 256]) * (seq % 9)),
                  M.CustomRecord("other-meta", {"x": seq, "v": M.GstValue("GstFraction",
                                                                          f"{seq}/1")})],
    }


def main() -> None:
    path, frames, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    meta_size = int(sys.argv[4]) if len(sys.argv) > 4 else 65536
    with cudaipc.Producer(path, memory="host", num_slots=4, block_timeout=20,
                          meta_size=meta_size) as p:
        p.wait_for_consumers(timeout=30)
        for seq in range(1, frames + 1):
            img = pattern(seq, (8, 6), np.uint8)
            if what == "all":
                kw = publish_kwargs(seq)
            else:
                kw = {"detections": detections(seq, 100), "label_names": NAMES}
            if seq % 3 == 0:  # the in-place path too
                with p.frame(img.shape, img.dtype, pts=seq, **kw) as slot:
                    slot.numpy()[...] = img
            else:
                assert p.publish(img, pts=seq, **kw)


if __name__ == "__main__":
    main()
