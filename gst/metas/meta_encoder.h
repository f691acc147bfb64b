// cudaipcsink's side of the metas: every GstMeta of a buffer that can cross, encoded into the
// slot's meta area (docs/metas.md). Runs on the streaming thread, per frame; allocates nothing
// for buffers whose metas have fewer than a few hundred entries.
#pragma once

#include <gst/gst.h>

#include <cstdint>

#include "metas/meta_filter.h"

namespace cudaipc::gst {

struct EncodeCounts {
  std::uint32_t sent = 0;         // metas in the area
  std::uint32_t oversized = 0;    // left out: no room left in the area
  std::uint32_t unsupported = 0;  // left out: no way to encode them (or mtds inside one)
};

// Encodes `buf`'s metas into `area` (`capacity` bytes) and returns the bytes to publish (0: none).
// `oversized_name` gets the API name of the first meta left out for want of room.
std::uint32_t encode_metas(GstBuffer* buf, const MetaFilter& filter, std::uint8_t* area,
                           std::uint32_t capacity, EncodeCounts* counts,
                           const char** oversized_name);

}  // namespace cudaipc::gst
