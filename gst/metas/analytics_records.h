// GstAnalyticsRelationMeta (1.24+) as an analytics record (docs/metas.md, kind 2): object
// detection (oriented too, 1.26+), classification, tracking and segmentation (1.26+) mtds and every
// relation between them. Built without GStreamer's analytics library (1.22), both sides say
// `unsupported` and the source counts such records as unknown.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <string>

#include "cudaipc/metas.hpp"
#include "metas/record_io.h"

namespace cudaipc::gst {

inline constexpr const char* kAnalyticsApiName = "GstAnalyticsRelationMetaAPI";

// GstAnalyticsRelationMeta's API type; 0 when this build has no analytics library.
GType analytics_api_type();
// `meta` is a GstAnalyticsRelationMeta. `skipped` counts its mtds of types the record cannot carry.
Encoded encode_analytics(GstMeta* meta, metas::AreaWriter& w, std::uint32_t* skipped);
// Adds to `buf` the meta an analytics record describes (untrusted). False with the reason when
// the record is malformed; nothing is attached then. `skipped` counts mtds of unknown types.
bool attach_analytics(GstBuffer* buf, metas::Bytes body, std::uint32_t* skipped,
                      std::string* error);

}  // namespace cudaipc::gst
