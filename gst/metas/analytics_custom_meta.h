// GStreamer 1.22 has no analytics metas (GstAnalyticsRelationMeta is 1.24+). Built against it,
// cudaipcsrc and cudaipcfilter attach an analytics record's detections, classifications and
// tracks as a GstCustomMeta named CudaipcAnalyticsMeta instead, whose structure holds them as typed
// fields an application reads with GStreamer's public API alone (docs/metas.md, "GStreamer 1.22:
// analytics as a custom meta", has the layout); cudaipcsink of such a build sends that meta on as
// an analytics record again, so the next hop gets what the first producer sent. Builds with the
// analytics library never call these: there, analytics metas cross as themselves.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "cudaipc/metas.hpp"
#include "metas/record_io.h"

namespace cudaipc::gst {

inline constexpr const char* kAnalyticsCustomMetaName = "CudaipcAnalyticsMeta";
// The structure's `version` field. Later versions only add fields.
inline constexpr guint kAnalyticsCustomMetaVersion = 1;

bool is_analytics_custom_meta(std::string_view custom_meta_name) noexcept;

// Adds to `buf` the CudaipcAnalyticsMeta an analytics record (untrusted) describes. False with the
// reason when the record is malformed (a bad table, a label that is not UTF-8 or holds a NUL);
// nothing is attached then. `skipped` counts the mtds the meta cannot hold (segmentation, types
// this version does not know).
bool attach_analytics_as_custom(GstBuffer* buf, metas::Bytes body, std::uint32_t* skipped,
                                std::string* error);

// `meta` is a CudaipcAnalyticsMeta (ours, or one an application made) written as an analytics
// record. `skipped` counts its entries that do not hold the documented fields and types.
Encoded encode_analytics_custom(GstMeta* meta, metas::AreaWriter& w, std::uint32_t* skipped);

}  // namespace cudaipc::gst
