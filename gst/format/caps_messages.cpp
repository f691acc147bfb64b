#include "format/caps_messages.h"

#include <glib.h>

namespace cudaipc::gst::caps_messages {

std::string quoted(std::string_view text) {
  constexpr std::size_t kMax = 160;
  std::string s = "'";
  for (char c : text.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    s += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  if (text.size() > kMax) s += "...";
  return s + "'";
}

bool fail(std::string* error, std::string message) {
  if (error) *error = std::move(message);
  return false;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && g_ascii_isspace(s.front())) s.remove_prefix(1);
  while (!s.empty() && g_ascii_isspace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace cudaipc::gst::caps_messages
