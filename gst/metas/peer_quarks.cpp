#include "metas/peer_quarks.h"

#include <atomic>
#include <cstring>

namespace cudaipc::gst {
namespace {
std::atomic<std::size_t> made{0};
}  // namespace

bool peer_quark(std::string_view name, GQuark* out, std::string* error) {
  // NUL-terminated on the stack for the usual short name.
  char small[256];
  std::string large;
  const char* text = small;
  if (name.size() < sizeof small) {
    std::memcpy(small, name.data(), name.size());
    small[name.size()] = '\0';
  } else {
    large.assign(name.data(), name.size());
    text = large.c_str();
  }
  if ((*out = g_quark_try_string(text)) != 0) return true;
  // Counted before it is made: threads racing at the bound make at most one each past it.
  if (made.fetch_add(1, std::memory_order_relaxed) >= kMaxPeerQuarks) {
    made.fetch_sub(1, std::memory_order_relaxed);
    *error = "more than " + std::to_string(kMaxPeerQuarks) +
             " distinct names from peers (labels, ids, fields); a new one is not taken";
    return false;
  }
  *out = g_quark_from_string(text);
  return true;
}

}  // namespace cudaipc::gst
