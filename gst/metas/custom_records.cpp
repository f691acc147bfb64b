#include "metas/custom_records.h"

#include <cstring>
#include <mutex>
#include <string>

namespace cudaipc::gst {
namespace {

struct FieldWriter {
  metas::CustomWriter* w;
  bool ok = true;
};

gboolean write_field(GQuark field, const GValue* v, gpointer data) {
  auto* fw = static_cast<FieldWriter*>(data);
  const char* name = g_quark_to_string(field);
  metas::CustomWriter& w = *fw->w;
  bool ok;
  switch (G_TYPE_FUNDAMENTAL(G_VALUE_TYPE(v))) {
    case G_TYPE_INT:
      ok = w.add_int64(name, g_value_get_int(v));
      break;
    case G_TYPE_INT64:
      ok = w.add_int64(name, g_value_get_int64(v));
      break;
    case G_TYPE_UINT:
      ok = w.add_uint64(name, g_value_get_uint(v));
      break;
    case G_TYPE_UINT64:
      ok = w.add_uint64(name, g_value_get_uint64(v));
      break;
    case G_TYPE_FLOAT:
      ok = w.add_double(name, g_value_get_float(v));
      break;
    case G_TYPE_DOUBLE:
      ok = w.add_double(name, g_value_get_double(v));
      break;
    case G_TYPE_BOOLEAN:
      ok = w.add_boolean(name, g_value_get_boolean(v) != FALSE);
      break;
    case G_TYPE_STRING: {
      const char* s = g_value_get_string(v);
      ok = w.add_string(name, s ? s : "");
      break;
    }
    default: {
      // Anything else as GStreamer's own text of it, deserialized at the source when its process
      // knows the type.
      gchar* text = gst_value_serialize(v);
      ok = text && w.add_other(name, g_type_name(G_VALUE_TYPE(v)), text);
      g_free(text);
      if (!text) ok = true;  // a value GStreamer cannot serialize is left out, not the meta
      break;
    }
  }
  fw->ok = fw->ok && ok;
  return ok;
}

std::mutex register_mu;

const GstMetaInfo* custom_info(const std::string& name) {
  std::lock_guard<std::mutex> lock(register_mu);
  const GstMetaInfo* info = gst_meta_get_info(name.c_str());
  if (info) return gst_meta_info_is_custom(info) ? info : nullptr;
  const gchar* tags[] = {nullptr};
  return gst_meta_register_custom(name.c_str(), tags, nullptr, nullptr, nullptr);
}

}  // namespace

bool is_custom_meta(GstMeta* meta, const char** name) {
  if (!gst_meta_info_is_custom(meta->info)) return false;
  *name = g_type_name(meta->info->type);
  return true;
}

Encoded encode_custom(GstMeta* meta, const char* name, metas::AreaWriter& w) {
  GstStructure* s = gst_custom_meta_get_structure(reinterpret_cast<GstCustomMeta*>(meta));
  const std::size_t room = body_room(w, name);
  std::uint8_t* body = w.begin_record(metas::RecordKind::custom, name, room);
  if (!body) return Encoded::no_room;
  metas::CustomWriter cw(body, room);
  FieldWriter fw{&cw};
  if (s) gst_structure_foreach(s, write_field, &fw);
  const std::size_t used = cw.finish();
  if (!fw.ok || !cw.ok()) {
    w.cancel_record();
    return Encoded::no_room;
  }
  w.commit_record(used);
  return Encoded::written;
}

bool attach_custom(GstBuffer* buf, std::string_view name, metas::Bytes body, std::string* error) {
  metas::CustomView view;
  if (!view.parse(body, error)) return false;
  const std::string meta_name(name);
  if (meta_name.empty()) return (*error = "custom meta without a name", false);
  // Collect the fields first: a malformed one drops the meta before it is attached.
  GstStructure* s = gst_structure_new_empty(meta_name.c_str());
  metas::Field f;
  while (view.next(&f)) {
    const std::string field(f.name);
    if (field.empty() || !g_ascii_isalpha(field[0])) continue;  // GstStructure refuses such names
    GValue v = G_VALUE_INIT;
    switch (f.type) {
      case metas::FieldType::int64:
        g_value_init(&v, G_TYPE_INT64);
        g_value_set_int64(&v, f.i);
        break;
      case metas::FieldType::uint64:
        g_value_init(&v, G_TYPE_UINT64);
        g_value_set_uint64(&v, f.u);
        break;
      case metas::FieldType::float64:
        g_value_init(&v, G_TYPE_DOUBLE);
        g_value_set_double(&v, f.d);
        break;
      case metas::FieldType::boolean:
        g_value_init(&v, G_TYPE_BOOLEAN);
        g_value_set_boolean(&v, f.b);
        break;
      case metas::FieldType::string:
        g_value_init(&v, G_TYPE_STRING);
        g_value_take_string(&v, g_strndup(f.text.data(), f.text.size()));
        break;
      case metas::FieldType::bytes: {
        g_value_init(&v, G_TYPE_BYTES);
        g_value_take_boxed(&v, g_bytes_new(f.text.data(), f.text.size()));
        break;
      }
      case metas::FieldType::other: {
        const std::string type_name(f.type_name), text(f.text);
        const GType t = g_type_from_name(type_name.c_str());
        bool done = false;
        if (t) {
          g_value_init(&v, t);
          done = gst_value_deserialize(&v, text.c_str());
          if (!done) g_value_unset(&v);
        }
        if (!done) {  // a type this process does not know: kept as its text
          g_value_init(&v, G_TYPE_STRING);
          g_value_set_string(&v, text.c_str());
        }
        break;
      }
    }
    gst_structure_take_value(s, field.c_str(), &v);
  }
  if (view.error()) {
    gst_structure_free(s);
    *error = view.error();
    return false;
  }
  const GstMetaInfo* info = custom_info(meta_name);
  if (!info) {
    gst_structure_free(s);
    *error = "'" + meta_name + "' names a meta of this process that is not a custom meta";
    return false;
  }
  GstCustomMeta* m = gst_buffer_add_custom_meta(buf, meta_name.c_str());
  if (!m) {
    gst_structure_free(s);
    return (*error = "could not add custom meta '" + meta_name + "'", false);
  }
  GstStructure* into = gst_custom_meta_get_structure(m);
  // The meta's own structure is owned by it: copy the fields over.
  gst_structure_foreach(
      s,
      [](GQuark field, const GValue* value, gpointer data) -> gboolean {
        gst_structure_id_set_value(static_cast<GstStructure*>(data), field, value);
        return TRUE;
      },
      into);
  gst_structure_free(s);
  return true;
}

bool is_own_reference_timestamp(GstMeta* meta) {
  auto* r = reinterpret_cast<GstReferenceTimestampMeta*>(meta);
  if (!r->reference) return false;
  const GstStructure* s = gst_caps_get_structure(r->reference, 0);
  return s && g_str_has_prefix(gst_structure_get_name(s), "timestamp/x-cudaipc-");
}

Encoded encode_reference_timestamp(GstMeta* meta, metas::AreaWriter& w) {
  auto* r = reinterpret_cast<GstReferenceTimestampMeta*>(meta);
  gchar* caps = r->reference ? gst_caps_to_string(r->reference) : g_strdup("");
  metas::ReferenceTimestamp ts{r->timestamp, r->duration, caps};
  const std::size_t room = body_room(w, kReferenceTimestampApiName);
  std::uint8_t* body =
      w.begin_record(metas::RecordKind::reference_timestamp, kReferenceTimestampApiName, room);
  const std::size_t used = body ? metas::write_reference_timestamp(body, room, ts) : 0;
  g_free(caps);
  if (!used) {
    if (body) w.cancel_record();
    return Encoded::no_room;
  }
  w.commit_record(used);
  return Encoded::written;
}

bool attach_reference_timestamp(GstBuffer* buf, metas::Bytes body, std::string* error) {
  metas::ReferenceTimestamp ts;
  if (!metas::read_reference_timestamp(body, &ts, error)) return false;
  GstCaps* caps = gst_caps_from_string(std::string(ts.caps).c_str());
  if (!caps) return (*error = "reference timestamp caps do not parse", false);
  gst_buffer_add_reference_timestamp_meta(buf, caps, ts.timestamp, ts.duration);
  gst_caps_unref(caps);
  return true;
}

}  // namespace cudaipc::gst
