"""A GstBuffer's detections in a PyGObject application, in the form Frame.detections gives: what a
model answered a cudaipcfilter with (or a cudaipcsrc's producer sent), read from the
GstAnalyticsRelationMeta of GStreamer 1.24+ or the CudaipcAnalyticsMeta custom meta 1.22 gets
instead (docs/metas.md), whichever the buffer carries."""

from __future__ import annotations

from ctypes import byref, c_float, c_int, c_uint64, c_void_p
from typing import Any, Dict, List, Optional

import numpy as np

from ._gst_capi import (G_TYPE_DOUBLE, G_TYPE_FLOAT, G_TYPE_INT, G_TYPE_INT64, G_TYPE_STRING,
                        G_TYPE_UINT, G_TYPE_UINT64, Api, Mtd, api, check_buffer)
from ._metas_analytics import _empty_detections

CUSTOM_META = b"CudaipcAnalyticsMeta"


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
    gst = api()
    buf = gst.buffer_address(buffer)
    if gst.find_analytics():
        meta = gst.gst_buffer_get_analytics_relation_meta(buf)
        if meta:
            return _from_relation_meta(gst, meta)
    meta = gst.gst_buffer_get_custom_meta(buf, CUSTOM_META)
    if meta:
        return _from_custom_meta(gst, gst.gst_custom_meta_get_structure(meta))
    return None


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


def _int64(track_id: int) -> int:
    """A guint64 track id as Frame.detections' int64 holds it (wrapped, as NumPy's cast does)."""
    return track_id - (1 << 64) if track_id >= 1 << 63 else track_id


# ---- 1.24+: GstAnalyticsRelationMeta ----

def _mtds(gst: Api, meta: int, mtd_type: int) -> List[Mtd]:
    out, state = [], c_void_p()
    while True:
        m = Mtd()
        if not gst.gst_analytics_relation_meta_iterate(meta, byref(state), mtd_type, byref(m)):
            return out
        out.append(m)


def _track_ids(gst: Api, meta: int, ods: List[Mtd]) -> List[int]:
    """Each detection's track id (-1: none). A track belongs to the first detection related to it,
    the detection's relation to it before its own to a detection, as cudaipc's own reader links
    them (GStreamer's trackers make the detection RELATE_TO its track)."""
    out = [-1] * len(ods)
    related = gst.gst_analytics_relation_meta_get_relation
    for t in _mtds(gst, meta, gst.tracking_type):
        owner = next((i for i, od in enumerate(ods) if related(meta, od.id, t.id)), None)
        if owner is None:
            owner = next((i for i, od in enumerate(ods) if related(meta, t.id, od.id)), None)
        if owner is None:
            continue
        tid, first, last, lost = c_uint64(), c_uint64(), c_uint64(), c_int()
        if gst.gst_analytics_tracking_mtd_get_info(byref(t), byref(tid), byref(first),
                                                   byref(last), byref(lost)):
            out[owner] = _int64(tid.value)
    return out


def _from_relation_meta(gst: Api, meta: int) -> Dict[str, Any]:
    ods = _mtds(gst, meta, gst.od_type)
    tracks = _track_ids(gst, meta, ods)
    rows, labels = [], []
    x, y, w, h, r, conf = c_int(), c_int(), c_int(), c_int(), c_float(), c_float()
    for od, tid in zip(ods, tracks):
        r.value = 0.0
        if gst.oriented:
            ok = gst.gst_analytics_od_mtd_get_oriented_location(
                byref(od), byref(x), byref(y), byref(w), byref(h), byref(r), byref(conf))
        else:
            ok = gst.gst_analytics_od_mtd_get_location(byref(od), byref(x), byref(y), byref(w),
                                                       byref(h), byref(conf))
        if not ok:
            continue
        quark = gst.gst_analytics_od_mtd_get_obj_type(byref(od))
        name = gst.g_quark_to_string(quark) if quark else None
        labels.append(name.decode("utf-8", "replace") if name else "")
        # As GStreamer 1.26 decides, and cudaipc's records: a box is oriented when rotated.
        rows.append((x.value, y.value, w.value, h.value, conf.value, r.value, r.value != 0.0,
                     od.id, tid))
    return _arrays(rows, labels)


# ---- 1.22: the CudaipcAnalyticsMeta custom meta (docs/metas.md) ----

def _field(gst: Api, s: int, name: bytes) -> Optional[int]:
    v = gst.gst_structure_get_value(s, name)
    return v or None


def _number(gst: Api, v: Optional[int], default: Optional[float]) -> Optional[float]:
    """A float or double field; `default` when absent, None when of another type."""
    if v is None:
        return default
    t = gst.value_type(v)
    if t == G_TYPE_FLOAT:
        return gst.g_value_get_float(v)
    if t == G_TYPE_DOUBLE:
        return gst.g_value_get_double(v)
    return None


def _count(gst: Api, v: Optional[int]) -> int:
    return gst.gst_value_array_get_size(v) if v and gst.value_type(v) == gst.array_type else 0


def _member(gst: Api, array: int, i: int) -> Optional[int]:
    v = gst.gst_value_array_get_value(array, i)
    return gst.gst_value_get_structure(v) if v and gst.value_type(v) == gst.structure_type \
        else None


def _track_id(gst: Api, o: int) -> int:
    """The object's track id (the unsigned and signed integer types the plugin takes), else -1."""
    t = _field(gst, o, b"track")
    if t is None or gst.value_type(t) != gst.structure_type:
        return -1
    v = _field(gst, gst.gst_value_get_structure(t), b"id")
    if v is None:
        return -1
    get = {G_TYPE_UINT64: gst.g_value_get_uint64, G_TYPE_UINT: gst.g_value_get_uint,
           G_TYPE_INT64: gst.g_value_get_int64, G_TYPE_INT: gst.g_value_get_int}.get(
               gst.value_type(v))
    tid = get(v) if get else -1
    return _int64(tid) if tid >= 0 else -1


def _object(gst: Api, o: int, index: int) -> Optional[tuple]:
    """One `object` structure as a row with its label; None for one without the fields and types
    docs/metas.md gives (the plugin leaves such an entry out too)."""
    xywh = []
    for k in (b"x", b"y", b"w", b"h"):
        v = _field(gst, o, k)
        if v is None or gst.value_type(v) != G_TYPE_INT:
            return None
        xywh.append(gst.g_value_get_int(v))
    score = _number(gst, _field(gst, o, b"score"), 0.0)
    rotation = _number(gst, _field(gst, o, b"rotation"), 0.0)
    v = _field(gst, o, b"label")
    if score is None or rotation is None or (v is not None and gst.value_type(v) != G_TYPE_STRING):
        return None
    text = gst.g_value_get_string(v) if v is not None else None
    label = text.decode("utf-8", "replace") if text else ""
    return (*xywh, score, rotation, rotation != 0.0, index, _track_id(gst, o)), label


def _from_custom_meta(gst: Api, s: int) -> Dict[str, Any]:
    objects = _field(gst, s, b"objects")
    rows, labels = [], []
    for i in range(_count(gst, objects)):
        o = _member(gst, objects, i)
        got = _object(gst, o, i) if o else None
        if got is not None:
            rows.append(got[0])
            labels.append(got[1])
    return _arrays(rows, labels)

