// UTF-8 checks and quotations of a peer's bytes (text.hpp).
#include "text.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace cudaipc::metas::text {

bool valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    // Names and keys are ASCII almost always: eight bytes a step while no byte has its top bit.
    if (n - i >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p + i, sizeof w);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const std::uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint8_t lo = 0x80, hi = 0xbf;  // the second byte's range
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // overlong
      if (c == 0xed) hi = 0x9f;  // surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;  // overlong
      if (c == 0xf4) hi = 0x8f;  // past U+10FFFF
    } else {
      return false;
    }
    if (n - i < len || p[i + 1] < lo || p[i + 1] > hi) return false;
    for (std::size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xbf) return false;
    i += len;
  }
  return true;
}

void quote(std::string_view s, char* out, std::size_t capacity) noexcept {
  constexpr std::size_t kShown = 64;
  if (capacity == 0) return;
  std::size_t at = 0;
  auto put = [&](const char* p) {
    for (; *p && at + 1 < capacity; ++p) out[at++] = *p;
  };
  put("'");
  for (std::size_t i = 0; i < s.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    char one[5] = {static_cast<char>(c), 0};
    if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\')
      std::snprintf(one, sizeof one, "\\x%02x", c);
    put(one);
  }
  put(s.size() > kShown ? "'..." : "'");
  out[at] = 0;
}

std::string quoted(std::string_view s) {
  char buf[300];
  quote(s, buf, sizeof buf);
  return buf;
}

}  // namespace cudaipc::metas::text
