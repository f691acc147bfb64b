#include "metas/custom_records.h"

#include "format/peer_text.h"
#include "metas/custom_values.h"

#include <cstring>
#include <mutex>
#include <string>

namespace cudaipc::gst {
namespace {

// Custom meta names this process registered for its peers. GStreamer cannot unregister a meta, so
// each new name a peer makes up costs the process for its lifetime: a producer naming a fresh meta
// per frame must not grow it without bound.
constexpr std::size_t kMaxPeerMetaNames = 256;
std::mutex register_mu;
std::size_t peer_names = 0;

const GstMetaInfo* custom_info(const std::string& name, std::string* error) {
  std::lock_guard<std::mutex> lock(register_mu);
  const GstMetaInfo* info = gst_meta_get_info(name.c_str());
  if (info) {
    if (gst_meta_info_is_custom(info)) return info;
    *error = "'" + name + "' names a meta of this process that is not a custom meta";
    return nullptr;
  }
  // GStreamer registers the meta as the types NAME and NAME-api: a name already taken by another
  // type would fail there with a warning.
  if (g_type_from_name(name.c_str()) || g_type_from_name((name + "-api").c_str())) {
    *error = "'" + name + "' names a type of this process that is not a custom meta";
    return nullptr;
  }
  if (peer_names >= kMaxPeerMetaNames) {
    *error = "more than " + std::to_string(kMaxPeerMetaNames) + " custom meta names; '" + name +
             "' is not registered";
    return nullptr;
  }
  const gchar* tags[] = {nullptr};
  info = gst_meta_register_custom(name.c_str(), tags, nullptr, nullptr, nullptr);
  if (info)
    ++peer_names;
  else
    *error = "GStreamer did not register custom meta '" + name + "'";
  return info;
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
  const bool ok = !s || write_fields(cw, s);
  const std::size_t used = cw.finish();
  if (!ok || !used) {
    w.cancel_record();
    return Encoded::no_room;
  }
  w.commit_record(used);
  return Encoded::written;
}

bool attach_custom(GstBuffer* buf, std::string_view name, metas::Bytes body, std::string* error) {
  if (!valid_custom_meta_name(name))
    return (*error = "custom meta name " + quoted(name) + " is not one GStreamer can register",
            false);
  metas::CustomView view;
  if (!view.parse(body, error)) return false;
  const std::string meta_name(name);
  // Collect the fields first: a malformed one drops the meta before it is attached.
  GstStructure* s = gst_structure_new_empty(meta_name.c_str());
  if (!read_fields(view, s, error)) {
    gst_structure_free(s);
    return false;
  }
  if (!custom_info(meta_name, error)) {
    gst_structure_free(s);
    return false;
  }
  GstCustomMeta* m = gst_buffer_add_custom_meta(buf, meta_name.c_str());
  if (!m) {
    gst_structure_free(s);
    return (*error = "could not add custom meta '" + meta_name + "'", false);
  }
  GstStructure* into = gst_custom_meta_get_structure(m);
  // The meta's own structure is owned by it: the fields move over.
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
  if (!r->reference || gst_caps_get_size(r->reference) == 0) return false;
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
  if (ts.timestamp == GST_CLOCK_TIME_NONE)
    return (*error = "reference timestamp without a time", false);
  std::string why;
  if (!peer_text_ok(ts.caps, &why))
    return (*error = "reference timestamp caps refused: " + why, false);
  GstCaps* caps = gst_caps_from_string(std::string(ts.caps).c_str());
  if (!caps) return (*error = "reference timestamp caps do not parse", false);
  if (gst_caps_is_any(caps) || gst_caps_is_empty(caps)) {
    gst_caps_unref(caps);
    return (*error = "reference timestamp caps name no clock", false);
  }
  gst_buffer_add_reference_timestamp_meta(buf, caps, ts.timestamp, ts.duration);
  gst_caps_unref(caps);
  return true;
}

}  // namespace cudaipc::gst
