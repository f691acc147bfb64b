// A GstCustomMeta's field values as custom record fields (docs/metas.md, kind 4) and back, nested
// structures, arrays and lists included, each value keeping its GType. The reading side takes a
// peer's record: every name is checked by GStreamer's rules before GStreamer sees it, only the
// value types listed in docs/metas.md are made, nothing recurses deeper than
// metas::kMaxCustomDepth, and no peer text reaches GStreamer's recursive value parser.
#pragma once

#include <gst/gst.h>

#include <string>
#include <string_view>

#include "cudaipc/metas.hpp"

namespace cudaipc::gst {

// A peer's name as a message may quote it: printable ASCII in quotes, at most 64 characters.
std::string quoted(std::string_view name);

// GStreamer's rule for structure and field names: a letter, then letters, digits and "/-_.:+".
bool valid_structure_name(std::string_view name) noexcept;
// A name GStreamer can register as a custom meta: a valid structure name that is also a valid
// GType name (a letter, then letters, digits and "-_+"; three characters at least).
bool valid_custom_meta_name(std::string_view name) noexcept;

enum class Wrote { ok, no_room, left_out };
// Writes `v` as the field `name` (empty for an array's or list's member).
Wrote write_value(metas::CustomWriter& w, std::string_view name, const GValue* v);
// Writes every field of `s`; false when the record has no room for them.
bool write_fields(metas::CustomWriter& w, const GstStructure* s);

// Reads the fields `view` holds into `s`; false with the reason for the first bad one.
bool read_fields(metas::CustomView& view, GstStructure* s, std::string* error);

}  // namespace cudaipc::gst
