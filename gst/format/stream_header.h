// What the sink puts in the core's Format::caps: the caps text on the first line, then optional
// `tags=` with a serialized GstTagList. Tags travel this way (a new format generation with the
// same caps) because they can exceed a frame's user metadata.
#pragma once

#include <gst/gst.h>

#include <string>

namespace cudaipc::gst {

struct StreamHeader {
  std::string caps;
  std::string tags;  // gst_tag_list_to_string text, or empty
};

std::string encode_stream_header(const std::string& caps, const GstTagList* tags);
// Untrusted input: false with a message when a line is neither caps nor tags, or tags do not parse.
bool decode_stream_header(const std::string& text, StreamHeader* out, std::string* error);

}  // namespace cudaipc::gst
