// Text from another process that one of GStreamer's parsers is about to read: a producer's caps
// and tags, a reference timestamp's caps. GStreamer parses nested values recursively and makes a
// GValue of whatever type a "(type)" cast names, so such text could overflow a thread's stack or
// hand GLib a type it refuses with a critical. It is checked here first.
#pragma once

#include <string>
#include <string_view>

namespace cudaipc::gst {

// The most a peer's text may nest (<, {, [ and quoted values read as structures or caps).
inline constexpr int kMaxPeerTextDepth = 16;
inline constexpr std::size_t kMaxPeerText = 64 * 1024;

// True when `text` is NUL-free UTF-8 of at most kMaxPeerText bytes, nests at most
// kMaxPeerTextDepth levels, and each cast names a type GStreamer can hold (or one it does not
// know, which its parser refuses cleanly); else false with the reason.
bool peer_text_ok(std::string_view text, std::string* why);

}  // namespace cudaipc::gst
