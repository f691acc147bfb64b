// What the meta encoders and decoders of one GstMeta kind share: how a record's body is sized in an
// area, and the outcome of turning one GstMeta into a record.
#pragma once

#include <cstddef>
#include <string_view>

#include "cudaipc/metas.hpp"

namespace cudaipc::gst {

enum class Encoded {
  written,      // the record is in the area
  no_room,      // it does not fit what is left of the area: nothing was written
  unsupported,  // this meta cannot be encoded (its kind, or this GStreamer version)
};

// The most body bytes a record named `name` can still have in `w`.
inline std::size_t body_room(const metas::AreaWriter& w, std::string_view name) {
  const std::size_t header = w.record_count() == 0 ? metas::kAreaHeaderSize : 0;
  const std::size_t need = header + 8 + (name.size() + 7) / 8 * 8;
  // Bodies are padded to 8 bytes: what is left, rounded down to 8.
  return w.remaining() > need ? (w.remaining() - need) & ~std::size_t{7} : 0;
}

}  // namespace cudaipc::gst
