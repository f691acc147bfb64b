"""A GstBuffer's detections in a PyGObject application, in the form Frame.detections gives: what a
model answered a cudaipcfilter with (or a cudaipcsrc's producer sent), read from the
GstAnalyticsRelationMeta of GStreamer 1.24+ or the CudaipcAnalyticsMeta custom meta 1.22 gets
instead (docs/metas.md), whichever the buffer carries, through the compiled binding
(python/native/gst_results.cpp), which calls the GStreamer this process has loaded."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from . import _lib
from ._errors import InvalidArgumentError
from ._metas_analytics import _empty_detections


def check_buffer(buffer: object) -> None:
    """Refuses anything but a PyGObject Gst.Buffer, by its GType's name (gi is not imported)."""
    name = getattr(getattr(type(buffer), "__gtype__", None), "name", None)
    if name != "GstBuffer":
        hint = " (a sample's is sample.get_buffer())" if name == "GstSample" else ""
        raise InvalidArgumentError(
            f"gst_detections takes a Gst.Buffer of PyGObject, not {type(buffer).__name__}{hint}")


def gst_detections(buffer: Any) -> Optional[Dict[str, Any]]:
    """The detections a Gst.Buffer (PyGObject) carries, as ``Frame.detections`` gives them:
    ``boxes`` (N, 4) float32 x1 y1 x2 y2 (x2, y2 exclusive), ``xywh`` (N, 4) int32 as GStreamer
    holds them, ``labels`` (list of str), ``scores`` float32, ``rotation`` float32 radians,
    ``oriented`` bool, ``ids`` uint32 (the mtd ids; on 1.22 each object's index), ``track_ids``
    int64 (-1: none). None when the buffer carries no results (a frame the model did not answer in
    time); empty arrays when the model answered with nothing found.

    Reads a GstAnalyticsRelationMeta (GStreamer 1.24+) or else the CudaipcAnalyticsMeta custom
    meta (1.22) through GStreamer's C API; needs neither gst-python nor the analytics typelib.
    Copies everything: the arrays outlive the buffer."""
    check_buffer(buffer)
    # PyGObject hashes a boxed wrapper to the address it wraps (pygboxed.c, gboxed_hash), as
    # DeepStream's bindings rely on too; the binding checks the buffer's GType there before it
    # reads anything else.
    address = hash(buffer)
    got = _lib.native.gst_detections(address if address > 0 else 0)
    if got == -1:
        raise InvalidArgumentError("GStreamer is not loaded in this process: gst_detections "
                                   "reads buffers of a PyGObject application (gi.repository.Gst)")
    if got == -2:
        raise InvalidArgumentError("this PyGObject's Gst.Buffer does not lead to its GstBuffer "
                                   "(its hash is not the buffer's address)")
    return None if got is None else _arrays(*got)


def _arrays(rows: List[tuple], labels: List[str]) -> Dict[str, Any]:
    """Rows (x, y, w, h, score, rotation, oriented, id, track id) as Frame.detections' arrays."""
    if not rows:
        return _empty_detections()
    xywh = np.array([r[:4] for r in rows], np.int32)
    boxes = xywh.astype(np.float32)
    boxes[:, 2:] += boxes[:, :2]
    return {"boxes": boxes, "xywh": xywh, "labels": labels,
            "scores": np.array([r[4] for r in rows], np.float32),
            "rotation": np.array([r[5] for r in rows], np.float32),
            "oriented": np.array([r[6] for r in rows], bool),
            "ids": np.array([r[7] for r in rows], np.uint32),
            "track_ids": np.array([r[8] for r in rows], np.int64)}
