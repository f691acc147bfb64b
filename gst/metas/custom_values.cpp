#include "metas/custom_values.h"

#include <cstring>
#include <string>

#include "metas/peer_quarks.h"

namespace cudaipc::gst {
namespace {

bool is_alpha(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_alnum(char c) noexcept {
  return is_alpha(c) || (c >= '0' && c <= '9');
}

// Types a peer may name in a field of type `other`: values whose text GStreamer parses in one
// step, without recursion (ranges are not among them: GStreamer reads those only inside a
// structure's text). Anything else stays the text it came as.
bool other_type_allowed(GType t) noexcept {
  if (t == GST_TYPE_BITMASK || t == GST_TYPE_DATE_TIME || t == G_TYPE_DATE) return true;
  // A concrete enum or flags type of this process ("GEnum" itself is abstract).
  return (G_TYPE_IS_ENUM(t) || G_TYPE_IS_FLAGS(t)) && !G_TYPE_IS_ABSTRACT(t);
}

constexpr std::size_t kMaxOtherText = 1024;

// Printable ASCII with no quotes, escapes, type casts or brackets: what the allowed types
// serialize to, and nothing that makes GStreamer's parser recurse or look up a type by a peer's
// name.
bool flat_text(std::string_view text) noexcept {
  if (text.size() > kMaxOtherText) return false;
  for (char c : text)
    if (c < 0x20 || c > 0x7e || std::strchr("\"\\(){}<>[]", c)) return false;
  return true;
}

bool read_value(const metas::CustomView& parent, const metas::Field& f, GValue* out,
                std::string* error);

// An array's or a list's members into `out` (initialized as GstValueArray or GstValueList).
bool read_members(const metas::CustomView& parent, const metas::Field& f, GValue* out,
                  std::string* error) {
  metas::CustomView members;
  if (!members.parse_nested(parent, f, error)) return false;
  const bool array = f.type == metas::FieldType::array;
  metas::Field m;
  while (members.next(&m)) {
    GValue v = G_VALUE_INIT;
    if (!read_value(members, m, &v, error)) return false;
    if (array)
      gst_value_array_append_and_take_value(out, &v);
    else
      gst_value_list_append_and_take_value(out, &v);
  }
  if (members.error()) return (*error = members.error(), false);
  return true;
}

bool read_other(const metas::Field& f, GValue* out, std::string* error) {
  const std::string type_name(f.type_name);
  const GType t = g_type_from_name(type_name.c_str());
  if (t && other_type_allowed(t)) {
    if (!flat_text(f.text))
      return (*error = "custom field " + quoted(f.name) + " of type " + quoted(type_name) +
                       " has text GStreamer would not read safely",
              false);
    const std::string text(f.text);
    g_value_init(out, t);
    if (gst_value_deserialize(out, text.c_str())) return true;
    g_value_unset(out);
  }
  // A type this process does not know or does not take from a peer: kept as its text.
  if (!g_utf8_validate(f.text.data(), static_cast<gssize>(f.text.size()), nullptr))
    return (*error = "custom field " + quoted(f.name) + " has text that is not UTF-8", false);
  g_value_init(out, G_TYPE_STRING);
  g_value_take_string(out, g_strndup(f.text.data(), f.text.size()));
  return true;
}

bool read_value(const metas::CustomView& parent, const metas::Field& f, GValue* out,
                std::string* error) {
  using metas::FieldType;
  switch (f.type) {
    case FieldType::int64:
      g_value_init(out, G_TYPE_INT64);
      g_value_set_int64(out, f.i);
      return true;
    case FieldType::uint64:
      g_value_init(out, G_TYPE_UINT64);
      g_value_set_uint64(out, f.u);
      return true;
    case FieldType::int32:
      g_value_init(out, G_TYPE_INT);
      g_value_set_int(out, static_cast<gint>(f.i));
      return true;
    case FieldType::uint32:
      g_value_init(out, G_TYPE_UINT);
      g_value_set_uint(out, static_cast<guint>(f.u));
      return true;
    case FieldType::float64:
      g_value_init(out, G_TYPE_DOUBLE);
      g_value_set_double(out, f.d);
      return true;
    case FieldType::float32:
      g_value_init(out, G_TYPE_FLOAT);
      g_value_set_float(out, static_cast<gfloat>(f.d));
      return true;
    case FieldType::fraction:  // the reader refused a zero denominator and INT32_MIN
      g_value_init(out, GST_TYPE_FRACTION);
      gst_value_set_fraction(out, static_cast<gint>(f.i), f.den);
      return true;
    case FieldType::boolean:
      g_value_init(out, G_TYPE_BOOLEAN);
      g_value_set_boolean(out, f.b);
      return true;
    case FieldType::string:
      // NUL-free UTF-8: a GStreamer string the pipeline can print and serialize.
      if (!g_utf8_validate(f.text.data(), static_cast<gssize>(f.text.size()), nullptr))
        return (*error = "custom field " + quoted(f.name) + " is not UTF-8 text", false);
      g_value_init(out, G_TYPE_STRING);
      g_value_take_string(out, g_strndup(f.text.data(), f.text.size()));
      return true;
    case FieldType::bytes:
      g_value_init(out, G_TYPE_BYTES);
      g_value_take_boxed(out, g_bytes_new(f.text.data(), f.text.size()));
      return true;
    case FieldType::other:
      return read_other(f, out, error);
    case FieldType::structure: {
      if (!valid_structure_name(f.type_name))
        return (*error = "custom field " + quoted(f.name) +
                         " holds a structure whose name GStreamer refuses",
                false);
      metas::CustomView members;
      GQuark name = 0;
      if (!members.parse_nested(parent, f, error) || !peer_quark(f.type_name, &name, error))
        return false;
      GstStructure* s = gst_structure_new_id_empty(name);
      if (!read_fields(members, s, error)) {
        gst_structure_free(s);
        return false;
      }
      g_value_init(out, GST_TYPE_STRUCTURE);
      g_value_take_boxed(out, s);
      return true;
    }
    case FieldType::array:
    case FieldType::list:
      g_value_init(out, f.type == FieldType::array ? GST_TYPE_ARRAY : GST_TYPE_LIST);
      if (read_members(parent, f, out, error)) return true;
      g_value_unset(out);
      return false;
  }
  *error = "custom field of an unknown type";
  return false;
}

}  // namespace

std::string quoted(std::string_view name) {
  std::string q = "'";
  for (char c : name.substr(0, 64)) q += (c >= 0x20 && c <= 0x7e) ? c : '?';
  return q + (name.size() > 64 ? "...'" : "'");
}

bool valid_structure_name(std::string_view name) noexcept {
  if (name.empty() || !is_alpha(name[0])) return false;
  for (char c : name.substr(1))
    if (!is_alnum(c) && (c == '\0' || !std::strchr("/-_.:+", c))) return false;
  return true;
}

bool valid_custom_meta_name(std::string_view name) noexcept {
  if (name.size() < 3 || name.size() > 255 || !is_alpha(name[0])) return false;
  for (char c : name.substr(1))
    if (!is_alnum(c) && c != '-' && c != '_' && c != '+') return false;
  return true;
}

Wrote write_value(metas::CustomWriter& w, std::string_view name, const GValue* v) {
  const GType t = G_VALUE_TYPE(v);
  auto done = [](bool ok) { return ok ? Wrote::ok : Wrote::no_room; };
  if (t == GST_TYPE_FRACTION)
    return done(w.add_fraction(name, gst_value_get_fraction_numerator(v),
                               gst_value_get_fraction_denominator(v)));
  if (t == GST_TYPE_STRUCTURE || t == GST_TYPE_ARRAY || t == GST_TYPE_LIST) {
    if (w.depth() + 1 > metas::kMaxCustomDepth) return Wrote::left_out;  // the reader's limit
    const GstStructure* s = t == GST_TYPE_STRUCTURE ? gst_value_get_structure(v) : nullptr;
    if (t == GST_TYPE_STRUCTURE && !s) return Wrote::left_out;
    metas::CustomWriter m = s ? w.begin_structure(name, gst_structure_get_name(s))
                              : w.begin_array(name, t == GST_TYPE_ARRAY ? metas::FieldType::array
                                                                        : metas::FieldType::list);
    bool ok = m.ok();
    if (ok && s) {
      ok = write_fields(m, s);
    } else if (ok) {
      const guint n =
          t == GST_TYPE_ARRAY ? gst_value_array_get_size(v) : gst_value_list_get_size(v);
      for (guint i = 0; ok && i < n; ++i) {
        const GValue* e =
            t == GST_TYPE_ARRAY ? gst_value_array_get_value(v, i) : gst_value_list_get_value(v, i);
        ok = write_value(m, {}, e) != Wrote::no_room;
      }
    }
    if (ok && w.end_nested(m)) return Wrote::ok;
    w.cancel_nested();
    return Wrote::no_room;
  }
  switch (G_TYPE_FUNDAMENTAL(t)) {
    case G_TYPE_INT:
      return done(w.add_int32(name, g_value_get_int(v)));
    case G_TYPE_UINT:
      return done(w.add_uint32(name, g_value_get_uint(v)));
    case G_TYPE_INT64:
      return done(w.add_int64(name, g_value_get_int64(v)));
    case G_TYPE_UINT64:
      return done(w.add_uint64(name, g_value_get_uint64(v)));
    case G_TYPE_FLOAT:
      return done(w.add_float(name, g_value_get_float(v)));
    case G_TYPE_DOUBLE:
      return done(w.add_double(name, g_value_get_double(v)));
    case G_TYPE_BOOLEAN:
      return done(w.add_boolean(name, g_value_get_boolean(v) != FALSE));
    case G_TYPE_STRING: {
      const char* s = g_value_get_string(v);
      return done(w.add_string(name, s ? s : ""));
    }
    default:
      break;
  }
  if (t == G_TYPE_BYTES) {
    GBytes* b = static_cast<GBytes*>(g_value_get_boxed(v));
    gsize size = 0;
    const void* data = b ? g_bytes_get_data(b, &size) : nullptr;
    return done(w.add_bytes(name, data, size));
  }
  // Anything else as GStreamer's own text of it, read back at the source when it is a type the
  // source takes from a peer (custom_values.cpp: other_type_allowed).
  gchar* text = gst_value_serialize(v);
  if (!text) return Wrote::left_out;  // a value GStreamer cannot serialize is left out
  const bool ok = w.add_other(name, g_type_name(t), text);
  g_free(text);
  return done(ok);
}

bool write_fields(metas::CustomWriter& w, const GstStructure* s) {
  const gint n = gst_structure_n_fields(s);
  for (gint i = 0; i < n; ++i) {
    const gchar* field = gst_structure_nth_field_name(s, static_cast<guint>(i));
    if (write_value(w, field, gst_structure_get_value(s, field)) == Wrote::no_room) return false;
  }
  return true;
}

bool read_fields(metas::CustomView& view, GstStructure* s, std::string* error) {
  metas::Field f;
  while (view.next(&f)) {
    if (!valid_structure_name(f.name))
      return (*error = "custom field name " + quoted(f.name) + " is not one GStreamer takes",
              false);
    GQuark name = 0;
    if (!peer_quark(f.name, &name, error)) return false;
    GValue v = G_VALUE_INIT;
    if (!read_value(view, f, &v, error)) return false;
    gst_structure_id_take_value(s, name, &v);
  }
  if (view.error()) return (*error = view.error(), false);
  return true;
}

}  // namespace cudaipc::gst
