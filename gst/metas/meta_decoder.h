// cudaipcsrc's side of the metas: the records of a frame's meta area (untrusted: another process
// wrote them) turned back into GstMetas on the outgoing buffer. A record this process cannot turn
// into a meta is skipped and counted; a malformed one is dropped and counted, its reason kept for
// the element's warning. The frame always flows.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <string>

#include "metas/meta_filter.h"

namespace cudaipc::gst {

struct DecodeCounts {
  std::uint32_t received = 0;  // metas attached
  std::uint32_t unknown = 0;   // records (or mtds) of kinds this process cannot attach
  std::uint32_t bad = 0;       // malformed records
  std::uint32_t filtered = 0;  // left out by forward-metas
  // A GStreamer without an API a record needs (docs/metas.md, "Per GStreamer version"):
  std::uint32_t as_custom = 0;       // analytics records attached as a CudaipcAnalyticsMeta (1.22)
  std::uint32_t tensors_no_api = 0;  // tensors records skipped: no GstTensorMeta (before 1.26)
};

// What the elements warn about, once each per run, where this GStreamer lacks analytics metas.
enum VersionGap : unsigned {
  kAnalyticsAsCustom = 1u << 0,
  kTensorsSkipped = 1u << 1,
};
// The gaps a frame's counts show; none on a GStreamer with analytics metas (1.24+), whose missing
// tensor metas (1.24, 1.25) are only counted, as they always were.
unsigned version_gaps(const DecodeCounts& counts);
// The warning for `gaps`: this GStreamer's version, what was converted or skipped, and the section
// of docs/metas.md that explains it.
std::string version_gap_warning(unsigned gaps);

// `error` gets the first malformed record's reason.
void decode_metas(const std::uint8_t* area, std::uint32_t bytes, const MetaFilter& filter,
                  GstBuffer* buf, DecodeCounts* counts, std::string* error);

}  // namespace cudaipc::gst
