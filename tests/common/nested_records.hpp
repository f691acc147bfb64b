// A custom record body (docs/metas.md, kind 4) whose one field holds `levels` arrays inside each
// other around an empty one, written byte by byte as a hostile peer could, whatever the nesting
// limit: 24 bytes a level (a body header and one nameless array field around the next body).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "cudaipc/metas.hpp"

namespace cudaipc::testing {

inline std::vector<std::uint8_t> nested_arrays(unsigned levels) {
  std::vector<std::uint8_t> body(8 + 24 * std::size_t{levels}, 0);
  for (unsigned i = 0; i < levels; ++i) {
    std::uint8_t* p = body.data() + 24 * std::size_t{i};
    const auto inner = static_cast<std::uint32_t>(body.size() - 24 * std::size_t{i} - 24);
    const std::uint32_t one = 1, size = 16 + inner;
    std::memcpy(p, &one, 4);
    std::memcpy(p + 8, &size, 4);
    p[8 + 6] = static_cast<std::uint8_t>(metas::FieldType::array);
    std::memcpy(p + 8 + 8, &inner, 4);
  }
  return body;  // the innermost array has no members (its count stays 0)
}

}  // namespace cudaipc::testing
