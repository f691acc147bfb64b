// Records a hostile model (or producer) sends, for the suites that check each is counted once.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace cudaipc::testing::gst {

// A serialized meta's body in GStreamer's layout ([u32 total][u32 name_len][name][NUL][u8
// version], then a payload) for an implementation no process registered: GStreamer 1.24+ cannot
// deserialize it, 1.22 deserializes nothing.
inline std::vector<std::uint8_t> unregistered_serialized_meta() {
  const std::string impl = "NoSuchMetaOfAnyProcess";
  std::vector<std::uint8_t> body(8 + impl.size() + 2 + 4, 0);
  const auto total = static_cast<std::uint32_t>(body.size());
  const auto name_len = static_cast<std::uint32_t>(impl.size());
  std::memcpy(body.data(), &total, 4);
  std::memcpy(body.data() + 4, &name_len, 4);
  std::memcpy(body.data() + 8, impl.data(), impl.size());
  return body;
}

}  // namespace cudaipc::testing::gst
