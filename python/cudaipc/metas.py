"""What a frame carries beside its pixels: the records of its meta area (docs/metas.md), without
GStreamer. ``Producer.publish(..., detections=..., tensors=..., meta=...)`` writes them and
``Frame.metas``/``.detections``/``.tensors``/``.meta`` read them; this module has the record
classes (to publish records by hand with ``metas=[...]``, or to read ``Frame.metas``) and
``encode``/``decode`` of whole areas as bytes."""

from ._metas import (KIND_ANALYTICS, KIND_CUSTOM, KIND_SERIALIZED, KIND_TENSORS, KIND_TIMESTAMP,
                     MAGIC, MAX_AREA, MAX_NAME, MAX_RECORDS, VERSION, CustomRecord, Decoded,
                     GstValue, MetaFormatError, MetaRecord, RawRecord, Structure,
                     TimestampRecord, ValueList)
from ._metas_analytics import (CONTAIN, IS_PART_OF, N_TO_N, RELATE_TO, AnalyticsRecord,
                               Classification, Detection, Segmentation, Track, UnknownMtd)
from ._metas_io import CUSTOM_NAME, decode, encode
from ._metas_tensors import TensorInfo, TensorsRecord

__all__ = [
    "MetaRecord", "RawRecord", "AnalyticsRecord", "TensorsRecord", "CustomRecord",
    "TimestampRecord", "TensorInfo", "GstValue", "Structure", "ValueList", "Detection", "Classification", "Track",
    "Segmentation", "UnknownMtd", "Decoded", "MetaFormatError", "encode", "decode",
    "KIND_SERIALIZED", "KIND_ANALYTICS", "KIND_TENSORS", "KIND_CUSTOM", "KIND_TIMESTAMP",
    "IS_PART_OF", "CONTAIN", "RELATE_TO", "N_TO_N", "MAGIC", "VERSION", "MAX_AREA", "MAX_NAME",
    "MAX_RECORDS", "CUSTOM_NAME",
]
