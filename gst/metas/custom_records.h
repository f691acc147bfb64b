// GstCustomMeta (its structure's fields, typed) and GstReferenceTimestampMeta as records
// (docs/metas.md, kinds 4 and 5). Both exist in every supported GStreamer version, so these cross
// on 1.22 too.
#pragma once

#include <gst/gst.h>

#include <string>
#include <string_view>

#include "cudaipc/metas.hpp"
#include "metas/record_io.h"

namespace cudaipc::gst {

inline constexpr const char* kReferenceTimestampApiName = "GstReferenceTimestampMetaAPI";

// True for a GstCustomMeta; its registered name in `name`.
bool is_custom_meta(GstMeta* meta, const char** name);
Encoded encode_custom(GstMeta* meta, const char* name, metas::AreaWriter& w);
// Adds a GstCustomMeta named `name` (registered in this process if it is not yet) with the
// record's fields; false with the reason when the record is malformed.
bool attach_custom(GstBuffer* buf, std::string_view name, metas::Bytes body, std::string* error);

// cudaipcsrc makes its own timestamp/x-cudaipc-* stamps anew: those are not sent.
bool is_own_reference_timestamp(GstMeta* meta);
Encoded encode_reference_timestamp(GstMeta* meta, metas::AreaWriter& w);
bool attach_reference_timestamp(GstBuffer* buf, metas::Bytes body, std::string* error);

}  // namespace cudaipc::gst
