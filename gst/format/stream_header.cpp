#include "format/stream_header.h"

#include "format/peer_text.h"

namespace cudaipc::gst {
namespace {
constexpr char kTagsPrefix[] = "tags=";
}

std::string encode_stream_header(const std::string& caps, const GstTagList* tags) {
  std::string out = caps;
  if (tags && !gst_tag_list_is_empty(tags)) {
    gchar* text = gst_tag_list_to_string(tags);
    if (text) {
      out += '\n';
      out += kTagsPrefix;
      out += text;
      g_free(text);
    }
  }
  return out;
}

bool decode_stream_header(const std::string& text, StreamHeader* out, std::string* error) {
  const auto nl = text.find('\n');
  out->caps = text.substr(0, nl);
  out->tags.clear();
  if (nl == std::string::npos) return true;
  std::string rest = text.substr(nl + 1);
  if (rest.compare(0, sizeof kTagsPrefix - 1, kTagsPrefix) != 0 ||
      rest.find('\n') != std::string::npos) {
    *error = "the producer's stream header has an unknown line after the caps";
    return false;
  }
  out->tags = rest.substr(sizeof kTagsPrefix - 1);
  std::string why;
  if (!peer_text_ok(out->tags, &why)) {
    *error = "the producer's tags are refused: " + why;
    return false;
  }
  GstTagList* tags = gst_tag_list_new_from_string(out->tags.c_str());
  if (!tags) {
    *error = "the producer's tags do not parse: " + out->tags;
    return false;
  }
  gst_tag_list_unref(tags);
  return true;
}

}  // namespace cudaipc::gst
