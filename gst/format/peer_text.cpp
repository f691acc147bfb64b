#include "format/peer_text.h"

#include <gst/gst.h>

#include <cstring>

namespace cudaipc::gst {
namespace {

// GStreamer's own abbreviations for casts (gststructure.c), plus the scalar GTypes: a quoted
// string cast to one of these is read as a plain value, never parsed again.
bool scalar_cast(std::string_view t) {
  for (const char* s :
       {"int",      "i",          "uint",        "u",          "float",       "f",      "double",
        "d",        "fraction",   "boolean",     "bool",       "b",           "string", "str",
        "s",        "date",       "datetime",    "bitmask",    "flagset",     "type",   "gint",
        "guint",    "gint64",     "guint64",     "int64",      "uint64",      "gfloat", "gdouble",
        "gboolean", "gchararray", "GstFraction", "GstBitmask", "GstDateTime", "GDate",  "GType"})
    if (t == s) return true;
  return false;
}
// Abbreviations for types whose text is parsed again (a quoted structure, caps or tag list).
bool nested_abbreviation(std::string_view t) {
  for (const char* s : {"structure", "sample", "taglist", "buffer", "array", "list"})
    if (t == s) return true;
  return false;
}

struct Scan {
  std::string* why;
  bool fail(const std::string& reason) {
    *why = reason;
    return false;
  }
  bool text(std::string_view t, int depth);
  bool structure_name(std::string_view t, std::size_t at);
};

// The name of the structure starting at `at` (after blanks): GStreamer's parser hands it to
// gst_structure_new_empty unchecked, a critical for a name such as "/x" or a quoted "9x". Caps
// features after it "(...)" and the caps keywords (ANY, EMPTY, NONE) are fine.
bool Scan::structure_name(std::string_view t, std::size_t at) {
  while (at < t.size() && (t[at] == ' ' || t[at] == '\t')) ++at;
  std::size_t end = at;
  while (end < t.size() && !std::strchr(",;( \t", t[end])) ++end;
  const std::string_view name = t.substr(at, end - at);
  if (name.empty()) return true;  // nothing, or a trailing ';'
  const char first = name[0];
  bool ok = (first >= 'a' && first <= 'z') || (first >= 'A' && first <= 'Z');
  for (char c : name.substr(1))
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                (c != '\0' && std::strchr("/-_.:+", c)));
  std::string shown;
  for (char c : name.substr(0, 64)) shown += (c >= 0x20 && c <= 0x7e) ? c : '?';
  return ok || fail("a structure named '" + shown + "', which GStreamer refuses");
}

bool Scan::text(std::string_view t, int depth) {
  if (depth > kMaxPeerTextDepth)
    return fail("nested more than " + std::to_string(kMaxPeerTextDepth) + " levels");
  int open = 0;
  bool reparse_next_string = false;  // the last cast names a type whose quoted text is parsed
  if (!structure_name(t, 0)) return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == ';' && open == 0) {
      if (!structure_name(t, i + 1)) return false;
      reparse_next_string = false;
    } else if (c == '"') {
      std::string inner;
      std::size_t j = i + 1;
      for (; j < t.size() && t[j] != '"'; ++j) {
        if (t[j] == '\\' && j + 1 < t.size()) ++j;
        inner += t[j];
      }
      if (j >= t.size()) return fail("a quoted value without its closing quote");
      if (reparse_next_string && !text(inner, depth + open + 1)) return false;
      reparse_next_string = false;
      i = j;
    } else if (c == '<' || c == '{' || c == '[') {
      if (depth + ++open > kMaxPeerTextDepth)
        return fail("nested more than " + std::to_string(kMaxPeerTextDepth) + " levels");
    } else if (c == '>' || c == '}' || c == ']') {
      --open;
    } else if (c == ',' || c == ';') {
      reparse_next_string = false;
    } else if (c == '(') {
      const std::size_t end = t.find_first_of("()", i + 1);
      // A '(' with no ')' names no type: GStreamer's parser refuses the text by itself.
      if (end == std::string_view::npos || t[end] != ')') continue;
      std::string_view name = t.substr(i + 1, end - i - 1);
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
      i = end;
      // Caps features ("memory:CUDAMemory", "ANY") are names, never types.
      if (name.find(':') != std::string_view::npos || name == "ANY") continue;
      if (scalar_cast(name)) continue;
      reparse_next_string = true;
      if (nested_abbreviation(name)) continue;
      const GType type = g_type_from_name(std::string(name).c_str());
      if (type && (!G_TYPE_IS_VALUE_TYPE(type) || G_TYPE_IS_ABSTRACT(type)))
        return fail("a cast to '" + std::string(name) + "', a type GStreamer cannot hold");
    }
  }
  return true;
}

}  // namespace

bool peer_text_ok(std::string_view text, std::string* why) {
  if (text.size() > kMaxPeerText)
    return (*why = std::to_string(text.size()) + " bytes of text, more than " +
                   std::to_string(kMaxPeerText),
            false);
  if (!g_utf8_validate(text.data(), static_cast<gssize>(text.size()), nullptr))
    return (*why = "text that is not UTF-8 or holds a NUL byte", false);
  return Scan{why}.text(text, 0);
}

}  // namespace cudaipc::gst
