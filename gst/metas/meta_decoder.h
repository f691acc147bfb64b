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
};

// `error` gets the first malformed record's reason.
void decode_metas(const std::uint8_t* area, std::uint32_t bytes, const MetaFilter& filter,
                  GstBuffer* buf, DecodeCounts* counts, std::string* error);

}  // namespace cudaipc::gst
