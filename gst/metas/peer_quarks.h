// GQuarks for names a peer sends (analytics labels, tensor ids, custom field and structure names).
// GLib never frees a quark, so a producer or model naming something new in every frame would grow
// this process without bound: names this process already has cost nothing, and at most
// kMaxPeerQuarks new ones are made for peers, after which a record needing another is dropped.
#pragma once

#include <glib.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace cudaipc::gst {

inline constexpr std::size_t kMaxPeerQuarks = 65536;

// The quark of `name` (made if this process has none and the bound allows); false with the reason
// otherwise.
bool peer_quark(std::string_view name, GQuark* out, std::string* error);

}  // namespace cudaipc::gst
