"""GStreamer's own C API through ctypes, in a process that has GStreamer loaded already (a PyGObject
application): what cudaipc.gst_detections reads a buffer's results with. C rather than PyGObject's
typelibs, because PyGObject cannot turn a GstValueArray into Python without gst-python's overrides
(1.22's results are arrays of structures), and the analytics typelib (GstAnalytics-1.0) is a
separate distribution package most machines lack. Nothing here opens a library the process has not
loaded (RTLD_NOLOAD): importing cudaipc loads no GStreamer, and the calls reach the very GStreamer
PyGObject uses."""

from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int64, c_size_t,
                    c_uint, c_uint32, c_uint64, c_void_p)
from typing import Optional

from ._errors import InvalidArgumentError

GType = c_size_t
# GLib's fundamental types: fixed numbers of its ABI (gtype.h, G_TYPE_MAKE_FUNDAMENTAL).
G_TYPE_INT, G_TYPE_UINT = 6 << 2, 7 << 2
G_TYPE_INT64, G_TYPE_UINT64, G_TYPE_FLOAT, G_TYPE_DOUBLE, G_TYPE_STRING = \
    10 << 2, 11 << 2, 14 << 2, 15 << 2, 16 << 2


class Mtd(Structure):
    """GstAnalyticsMtd (1.24+): a handle on one mtd of a relation meta."""
    _fields_ = [("id", c_uint), ("meta", c_void_p)]


_P = c_void_p
_CORE = {
    "gst_version": (None, [POINTER(c_uint)] * 4),
    "gst_buffer_get_type": (GType, []),
    "gst_structure_get_type": (GType, []),
    "gst_value_array_get_type": (GType, []),
    "gst_buffer_get_custom_meta": (_P, [_P, c_char_p]),
    "gst_custom_meta_get_structure": (_P, [_P]),
    "gst_structure_get_value": (_P, [_P, c_char_p]),
    "gst_value_array_get_size": (c_uint, [_P]),
    "gst_value_array_get_value": (_P, [_P, c_uint]),
    "gst_value_get_structure": (_P, [_P]),
}
_GOBJECT = {
    "g_value_get_int": (c_int, [_P]),
    "g_value_get_uint": (c_uint, [_P]),
    "g_value_get_int64": (c_int64, [_P]),
    "g_value_get_uint64": (c_uint64, [_P]),
    "g_value_get_float": (c_float, [_P]),
    "g_value_get_double": (c_double, [_P]),
    "g_value_get_string": (c_char_p, [_P]),
}
_ANALYTICS = {
    "gst_buffer_get_analytics_relation_meta": (_P, [_P]),
    "gst_analytics_relation_meta_iterate": (c_int, [_P, POINTER(c_void_p), c_size_t, POINTER(Mtd)]),
    "gst_analytics_relation_meta_get_relation": (c_int, [_P, c_uint, c_uint]),
    "gst_analytics_od_mtd_get_mtd_type": (c_size_t, []),
    "gst_analytics_tracking_mtd_get_mtd_type": (c_size_t, []),
    "gst_analytics_od_mtd_get_location": (c_int, [POINTER(Mtd)] + [POINTER(c_int)] * 4 +
                                          [POINTER(c_float)]),
    "gst_analytics_od_mtd_get_obj_type": (c_uint32, [POINTER(Mtd)]),
    "gst_analytics_tracking_mtd_get_info": (c_int, [POINTER(Mtd), POINTER(c_uint64),
                                                    POINTER(c_uint64), POINTER(c_uint64),
                                                    POINTER(c_int)]),
}
# 1.26+: oriented boxes.
_ORIENTED = ("gst_analytics_od_mtd_get_oriented_location",
             (c_int, [POINTER(Mtd)] + [POINTER(c_int)] * 4 + [POINTER(c_float)] * 2))


def _loaded(soname: str) -> Optional[ctypes.CDLL]:
    """The library when this process has it loaded already, else None."""
    try:
        return ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        return None


def _bind(lib: ctypes.CDLL, protos: dict, into: object) -> None:
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
        setattr(into, name, f)


class Api:
    """GStreamer's calls, bound once GStreamer is in the process; the analytics ones once its
    analytics library is (a relation meta can exist only after that library registered it)."""

    def __init__(self, core: ctypes.CDLL, gobject: ctypes.CDLL, glib: ctypes.CDLL) -> None:
        _bind(core, _CORE, self)
        _bind(gobject, _GOBJECT, self)
        self.g_quark_to_string = glib.g_quark_to_string
        self.g_quark_to_string.restype, self.g_quark_to_string.argtypes = c_char_p, [c_uint32]
        v = [c_uint() for _ in range(4)]
        self.gst_version(*v)
        self.version = tuple(x.value for x in v[:3])
        self.buffer_type = self.gst_buffer_get_type()
        self.structure_type = self.gst_structure_get_type()
        self.array_type = self.gst_value_array_get_type()
        self.analytics = False
        self.oriented = False

    def find_analytics(self) -> bool:
        """Whether GStreamer's analytics library is in the process (1.24+), binding its calls
        the first time it is."""
        if self.analytics or self.version < (1, 24, 0):
            return self.analytics
        lib = _loaded("libgstanalytics-1.0.so.0")
        if lib is None:
            return False
        _bind(lib, _ANALYTICS, self)
        if hasattr(lib, _ORIENTED[0]):
            _bind(lib, dict([_ORIENTED]), self)
            self.oriented = True
        self.od_type = self.gst_analytics_od_mtd_get_mtd_type()
        self.tracking_type = self.gst_analytics_tracking_mtd_get_mtd_type()
        self.analytics = True
        return True

    def buffer_address(self, buffer: object) -> int:
        """The GstBuffer a PyGObject Gst.Buffer (check_buffer) wraps. PyGObject hashes a boxed
        wrapper to the address it wraps (pygboxed.c, gboxed_hash), as DeepStream's bindings rely
        on too; the buffer's GType in its first word is checked before anything else is read."""
        address = hash(buffer)
        if address <= 0 or GType.from_address(address).value != self.buffer_type:
            raise InvalidArgumentError("this PyGObject's Gst.Buffer does not lead to its GstBuffer "
                                       "(its hash is not the buffer's address)")
        return address

    def value_type(self, value: int) -> int:
        """A GValue's GType: its first word."""
        return GType.from_address(value).value


def check_buffer(buffer: object) -> None:
    """Refuses anything but a PyGObject Gst.Buffer, by its GType's name (gi is not imported)."""
    name = getattr(getattr(type(buffer), "__gtype__", None), "name", None)
    if name != "GstBuffer":
        hint = " (a sample's is sample.get_buffer())" if name == "GstSample" else ""
        raise InvalidArgumentError(
            f"gst_detections takes a Gst.Buffer of PyGObject, not {type(buffer).__name__}{hint}")


_api: Optional[Api] = None


def api() -> Api:
    global _api
    if _api is None:
        libs = [_loaded(n) for n in ("libgstreamer-1.0.so.0", "libgobject-2.0.so.0",
                                     "libglib-2.0.so.0")]
        if not all(libs):
            raise InvalidArgumentError("GStreamer is not loaded in this process: gst_detections "
                                       "reads buffers of a PyGObject application (gi.repository.Gst)")
        _api = Api(*libs)
    return _api
