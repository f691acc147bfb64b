// GstTensorMeta (1.26+) as a tensors record (docs/metas.md, kind 3): every tensor's id, data type,
// dims order, dims and data. Data is copied into the area at the sink and out of it at the source
// (a tensor's GstBuffer may outlive the frame's lease); CUDA-memory tensor data is downloaded by
// mapping it. Before 1.26 both sides say `unsupported`.
#pragma once

#include <gst/gst.h>

#include <string>

#include "cudaipc/metas.hpp"
#include "metas/record_io.h"

namespace cudaipc::gst {

inline constexpr const char* kTensorApiName = "GstTensorMetaAPI";

// GstTensorMeta's API type; 0 before 1.26.
GType tensor_meta_api_type_or_0();
Encoded encode_tensors(GstMeta* meta, metas::AreaWriter& w);
// Adds the GstTensorMeta a tensors record describes (untrusted); false with the reason when it is
// malformed or names a data type this GStreamer lacks. Nothing is attached then.
bool attach_tensors(GstBuffer* buf, metas::Bytes body, std::string* error);

}  // namespace cudaipc::gst
