#include "metas/analytics_custom_meta.h"

#include <vector>

#include "metas/analytics_records.h"

namespace cudaipc::gst {
namespace {

// GstAnalyticsRelTypes bits (docs/metas.md, kind 2): how GStreamer, and the core's writer, link a
// classification and a track to their detection.
constexpr std::uint32_t kIsPartOf = 2, kContain = 4, kRelateTo = 8;

struct Names {
  GQuark version = g_quark_from_static_string("version");
  GQuark objects = g_quark_from_static_string("objects");
  GQuark classifications = g_quark_from_static_string("classifications");
  GQuark tracks = g_quark_from_static_string("tracks");
  GQuark object = g_quark_from_static_string("object");
  GQuark x = g_quark_from_static_string("x");
  GQuark y = g_quark_from_static_string("y");
  GQuark w = g_quark_from_static_string("w");
  GQuark h = g_quark_from_static_string("h");
  GQuark label = g_quark_from_static_string("label");
  GQuark score = g_quark_from_static_string("score");
  GQuark rotation = g_quark_from_static_string("rotation");
  GQuark track = g_quark_from_static_string("track");
  GQuark classification = g_quark_from_static_string("classification");
  GQuark labels = g_quark_from_static_string("labels");
  GQuark scores = g_quark_from_static_string("scores");
  GQuark id = g_quark_from_static_string("id");
  GQuark first_seen = g_quark_from_static_string("first-seen");
  GQuark last_seen = g_quark_from_static_string("last-seen");
  GQuark lost = g_quark_from_static_string("lost");
};

const Names& names() {
  static const Names n;
  return n;
}

const GstMetaInfo* meta_info() {
  static const GstMetaInfo* info = []() -> const GstMetaInfo* {
    if (const GstMetaInfo* known = gst_meta_get_info(kAnalyticsCustomMetaName))
      return gst_meta_info_is_custom(known) ? known : nullptr;
    // No tags, as GstAnalyticsRelationMeta: elements that keep untagged metas keep this one.
    const gchar* tags[] = {nullptr};
    return gst_meta_register_custom(kAnalyticsCustomMetaName, tags, nullptr, nullptr, nullptr);
  }();
  return info;
}

// What a GstStructure's string may hold, and what a record's reader on a 1.22 peer accepts.
bool text_ok(std::string_view s) {
  // g_utf8_validate refuses a NUL within the length, and a NULL pointer even of length 0.
  return s.empty() || g_utf8_validate(s.data(), static_cast<gssize>(s.size()), nullptr);
}

// ---- record -> structure ----

void take(GstStructure* s, GQuark field, GValue* v) {
  gst_structure_id_take_value(s, field, v);
}

void set_int(GstStructure* s, GQuark field, gint value) {
  GValue v = G_VALUE_INIT;
  g_value_init(&v, G_TYPE_INT);
  g_value_set_int(&v, value);
  take(s, field, &v);
}

void set_float(GstStructure* s, GQuark field, gfloat value) {
  GValue v = G_VALUE_INIT;
  g_value_init(&v, G_TYPE_FLOAT);
  g_value_set_float(&v, value);
  take(s, field, &v);
}

void set_uint64(GstStructure* s, GQuark field, guint64 value) {
  GValue v = G_VALUE_INIT;
  g_value_init(&v, G_TYPE_UINT64);
  g_value_set_uint64(&v, value);
  take(s, field, &v);
}

void string_value(GValue* v, std::string_view text) {
  g_value_init(v, G_TYPE_STRING);
  g_value_take_string(v, text.empty() ? g_strdup("") : g_strndup(text.data(), text.size()));
}

void init_array(GValue* v) {
  g_value_init(v, GST_TYPE_ARRAY);
}

void append_structure(GValue* array, GstStructure* member) {
  GValue v = G_VALUE_INIT;
  g_value_init(&v, GST_TYPE_STRUCTURE);
  g_value_take_boxed(&v, member);
  gst_value_array_append_and_take_value(array, &v);
}

GstStructure* classification(const metas::AnalyticsView& view, const metas::Mtd& m) {
  const Names& q = names();
  GstStructure* c = gst_structure_new_id_empty(q.classification);
  GValue labels = G_VALUE_INIT, scores = G_VALUE_INIT;
  init_array(&labels);
  init_array(&scores);
  for (std::uint32_t j = 0; j < m.class_count; ++j) {
    metas::ClassEntry e;
    view.class_entry(m, j, &e);  // checked before anything was built
    GValue label = G_VALUE_INIT, score = G_VALUE_INIT;
    string_value(&label, e.label);
    gst_value_array_append_and_take_value(&labels, &label);
    g_value_init(&score, G_TYPE_FLOAT);
    g_value_set_float(&score, e.confidence);
    gst_value_array_append_and_take_value(&scores, &score);
  }
  take(c, q.labels, &labels);
  take(c, q.scores, &scores);
  return c;
}

GstStructure* track(const metas::Tracking& t) {
  const Names& q = names();
  GstStructure* s = gst_structure_new_id_empty(q.track);
  set_uint64(s, q.id, t.tracking_id);
  set_uint64(s, q.first_seen, t.first_seen);
  set_uint64(s, q.last_seen, t.last_seen);
  GValue lost = G_VALUE_INIT;
  g_value_init(&lost, G_TYPE_BOOLEAN);
  g_value_set_boolean(&lost, t.lost);
  take(s, q.lost, &lost);
  return s;
}

// Every string the meta will hold, checked before anything is built.
bool check_texts(const metas::AnalyticsView& view, const std::vector<metas::Mtd>& mtds,
                 std::string* error) {
  for (std::uint32_t i = 0; i < mtds.size(); ++i) {
    const metas::Mtd& m = mtds[i];
    if (m.type == metas::MtdType::object_detection && !text_ok(m.od.label))
      return (*error = "mtd " + std::to_string(i) + ": its label is not UTF-8 or holds a NUL",
              false);
    if (m.type != metas::MtdType::classification) continue;
    for (std::uint32_t j = 0; j < m.class_count; ++j) {
      metas::ClassEntry e;
      if (!view.class_entry(m, j, &e))
        return (
            *error = "mtd " + std::to_string(i) + ": class " + std::to_string(j) + " is malformed",
            false);
      if (!text_ok(e.label))
        return (*error = "mtd " + std::to_string(i) + ": class " + std::to_string(j) +
                         "'s label is not UTF-8 or holds a NUL",
                false);
    }
  }
  return true;
}

// ---- structure -> record ----

const GValue* array_field(const GstStructure* s, GQuark field) {
  const GValue* v = gst_structure_id_get_value(s, field);
  return v && GST_VALUE_HOLDS_ARRAY(v) ? v : nullptr;
}

const GstStructure* structure_value(const GValue* v) {
  return v && GST_VALUE_HOLDS_STRUCTURE(v) ? gst_value_get_structure(v) : nullptr;
}

// Optional fields keep `*out` when absent; false when present with a type they cannot have.
bool get_float(const GValue* v, float* out) {
  if (!v) return true;
  if (G_VALUE_HOLDS_FLOAT(v))
    *out = g_value_get_float(v);
  else if (G_VALUE_HOLDS_DOUBLE(v))
    *out = static_cast<float>(g_value_get_double(v));
  else
    return false;
  return true;
}

bool get_uint64(const GValue* v, std::uint64_t* out) {
  if (!v) return true;
  if (G_VALUE_HOLDS_UINT64(v))
    *out = g_value_get_uint64(v);
  else if (G_VALUE_HOLDS_UINT(v))
    *out = g_value_get_uint(v);
  else if (G_VALUE_HOLDS_INT64(v) && g_value_get_int64(v) >= 0)
    *out = static_cast<std::uint64_t>(g_value_get_int64(v));
  else if (G_VALUE_HOLDS_INT(v) && g_value_get_int(v) >= 0)
    *out = static_cast<std::uint64_t>(g_value_get_int(v));
  else
    return false;
  return true;
}

bool get_text(const GValue* v, std::string_view* out) {
  if (!v) return true;
  if (!G_VALUE_HOLDS_STRING(v)) return false;
  const gchar* text = g_value_get_string(v);
  *out = text ? std::string_view(text) : std::string_view();
  return text_ok(*out);
}

struct Classes {
  std::vector<metas::ClassEntry> entries;
  std::int32_t object = -1;
};

struct Track {
  metas::Tracking t;
  std::int32_t object = -1;
};

bool read_classification(const GstStructure* c, std::int32_t object, Classes* out) {
  if (!c) return false;
  const Names& q = names();
  const GValue* labels = array_field(c, q.labels);
  const GValue* scores = array_field(c, q.scores);
  if (!labels || !scores) return false;
  const guint n = gst_value_array_get_size(labels);
  if (gst_value_array_get_size(scores) != n) return false;
  out->entries.resize(n);
  out->object = object;
  for (guint j = 0; j < n; ++j) {
    const GValue* label = gst_value_array_get_value(labels, j);
    if (!label || !get_text(label, &out->entries[j].label) ||
        !get_float(gst_value_array_get_value(scores, j), &out->entries[j].confidence))
      return false;
  }
  return true;
}

bool read_track(const GstStructure* t, std::int32_t object, Track* out) {
  if (!t) return false;
  const Names& q = names();
  bool lost = false;
  const GValue* id = gst_structure_id_get_value(t, q.id);
  const GValue* lost_v = gst_structure_id_get_value(t, q.lost);
  if (lost_v && !G_VALUE_HOLDS_BOOLEAN(lost_v)) return false;
  if (lost_v) lost = g_value_get_boolean(lost_v);
  out->t.lost = lost;
  out->object = object;
  return id && get_uint64(id, &out->t.tracking_id) &&
         get_uint64(gst_structure_id_get_value(t, q.first_seen), &out->t.first_seen) &&
         get_uint64(gst_structure_id_get_value(t, q.last_seen), &out->t.last_seen);
}

bool read_object(const GstStructure* o, metas::ObjectDetection* od) {
  if (!o) return false;
  const Names& q = names();
  float rotation = 0.f;
  if (!gst_structure_id_get(o, q.x, G_TYPE_INT, &od->x, q.y, G_TYPE_INT, &od->y, q.w, G_TYPE_INT,
                            &od->w, q.h, G_TYPE_INT, &od->h, nullptr))
    return false;
  if (!get_text(gst_structure_id_get_value(o, q.label), &od->label) ||
      !get_float(gst_structure_id_get_value(o, q.score), &od->confidence) ||
      !get_float(gst_structure_id_get_value(o, q.rotation), &rotation))
    return false;
  // As GStreamer 1.26's encoder decides: a box is oriented when it is rotated (and -0 is 0).
  od->oriented = rotation != 0.f;
  od->r = od->oriented ? rotation : 0.f;
  return true;
}

}  // namespace

bool is_analytics_custom_meta(std::string_view custom_meta_name) noexcept {
  return custom_meta_name == kAnalyticsCustomMetaName;
}

bool attach_analytics_as_custom(GstBuffer* buf, metas::Bytes body, std::uint32_t* skipped,
                                std::string* error) {
  metas::AnalyticsView view;
  if (!view.parse(body, error)) return false;
  const std::uint32_t n = view.mtd_count();
  std::vector<metas::Mtd> mtds;
  std::vector<metas::Relation> relations;
  if (!view.read_all(&mtds, &relations, error)) return false;
  if (!check_texts(view, mtds, error)) return false;
  const GstMetaInfo* info = meta_info();
  if (!info)
    return (*error = std::string("'") + kAnalyticsCustomMetaName +
                     "' names a type of this process that is not a custom meta",
            false);

  // Which detection each classification and track belongs to, as the core's C API reads it for
  // Python: a detection's relation to it first, then its own to a detection, in the relations'
  // order; the first found counts. A detection's track is the last one linked to it so; a track
  // that is not one ends up among the meta's own tracks.
  using Type = metas::MtdType;
  std::vector<std::int32_t> owner(n, -1), track_of(n, -1);
  for (int pass = 0; pass < 2; ++pass) {
    for (const metas::Relation& r : relations) {
      if (!r.types) continue;
      const std::uint32_t d = pass == 0 ? r.from : r.to, x = pass == 0 ? r.to : r.from;
      const bool linkable = mtds[x].type == Type::classification || mtds[x].type == Type::tracking;
      if (mtds[d].type != Type::object_detection || !linkable || owner[x] >= 0) continue;
      owner[x] = static_cast<std::int32_t>(d);
      if (mtds[x].type == Type::tracking) track_of[d] = static_cast<std::int32_t>(x);
    }
  }
  // Each detection's classifications in table order, as a list threaded through `next`: one pass,
  // however many mtds a hostile record holds.
  std::vector<std::int32_t> first(n, -1), next(n, -1);
  for (std::uint32_t x = n; x-- > 0;) {
    if (mtds[x].type != Type::classification || owner[x] < 0) continue;
    next[x] = first[static_cast<std::size_t>(owner[x])];
    first[static_cast<std::size_t>(owner[x])] = static_cast<std::int32_t>(x);
  }

  const Names& q = names();
  GValue objects = G_VALUE_INIT, classifications = G_VALUE_INIT, tracks = G_VALUE_INIT;
  init_array(&objects);
  init_array(&classifications);
  init_array(&tracks);
  for (std::uint32_t i = 0; i < n; ++i) {
    const metas::Mtd& m = mtds[i];
    switch (m.type) {
      case Type::object_detection: {
        GstStructure* o = gst_structure_new_id_empty(q.object);
        set_int(o, q.x, m.od.x);
        set_int(o, q.y, m.od.y);
        set_int(o, q.w, m.od.w);
        set_int(o, q.h, m.od.h);
        GValue label = G_VALUE_INIT;
        string_value(&label, m.od.label);
        take(o, q.label, &label);
        set_float(o, q.score, m.od.confidence);
        set_float(o, q.rotation, m.od.oriented ? m.od.r : 0.f);
        GValue own = G_VALUE_INIT;
        init_array(&own);
        for (std::int32_t c = first[i]; c >= 0; c = next[static_cast<std::size_t>(c)])
          append_structure(&own, classification(view, mtds[static_cast<std::size_t>(c)]));
        take(o, q.classifications, &own);
        if (track_of[i] >= 0) {
          GValue t = G_VALUE_INIT;
          g_value_init(&t, GST_TYPE_STRUCTURE);
          g_value_take_boxed(&t, track(mtds[static_cast<std::size_t>(track_of[i])].tracking));
          take(o, q.track, &t);
        }
        append_structure(&objects, o);
        break;
      }
      case Type::classification:
        if (owner[i] < 0) append_structure(&classifications, classification(view, m));
        break;
      case Type::tracking:
        if (owner[i] < 0 || track_of[static_cast<std::size_t>(owner[i])] != static_cast<int>(i))
          append_structure(&tracks, track(m.tracking));
        break;
      default:  // segmentation (its mask has no field here) and types this version does not know
        ++*skipped;
        break;
    }
  }

  GstCustomMeta* meta = gst_buffer_add_custom_meta(buf, kAnalyticsCustomMetaName);
  if (!meta) {
    g_value_unset(&objects);
    g_value_unset(&classifications);
    g_value_unset(&tracks);
    return (*error = std::string("could not add a ") + kAnalyticsCustomMetaName, false);
  }
  GstStructure* s = gst_custom_meta_get_structure(meta);
  GValue version = G_VALUE_INIT;
  g_value_init(&version, G_TYPE_UINT);
  g_value_set_uint(&version, kAnalyticsCustomMetaVersion);
  take(s, q.version, &version);
  take(s, q.objects, &objects);
  take(s, q.classifications, &classifications);
  take(s, q.tracks, &tracks);
  return true;
}

Encoded encode_analytics_custom(GstMeta* meta, metas::AreaWriter& w, std::uint32_t* skipped) {
  const GstStructure* s = gst_custom_meta_get_structure(reinterpret_cast<GstCustomMeta*>(meta));
  const Names& q = names();
  // What the meta holds, read and checked before the record is begun. Strings stay in the meta.
  std::vector<metas::ObjectDetection> objects;
  std::vector<Classes> classes;
  std::vector<Track> tracks;
  const GValue* list = s ? array_field(s, q.objects) : nullptr;
  for (guint i = 0; list && i < gst_value_array_get_size(list); ++i) {
    const GstStructure* o = structure_value(gst_value_array_get_value(list, i));
    metas::ObjectDetection od;
    if (!read_object(o, &od)) {
      ++*skipped;
      continue;
    }
    const auto index = static_cast<std::int32_t>(objects.size());
    objects.push_back(od);
    const GValue* own = array_field(o, q.classifications);
    for (guint j = 0; own && j < gst_value_array_get_size(own); ++j) {
      Classes c;
      if (read_classification(structure_value(gst_value_array_get_value(own, j)), index, &c))
        classes.push_back(std::move(c));
      else
        ++*skipped;
    }
    if (const GValue* t = gst_structure_id_get_value(o, q.track)) {
      Track tr;
      if (read_track(structure_value(t), index, &tr))
        tracks.push_back(tr);
      else
        ++*skipped;
    }
  }
  list = s ? array_field(s, q.classifications) : nullptr;
  for (guint j = 0; list && j < gst_value_array_get_size(list); ++j) {
    Classes c;
    if (read_classification(structure_value(gst_value_array_get_value(list, j)), -1, &c))
      classes.push_back(std::move(c));
    else
      ++*skipped;
  }
  list = s ? array_field(s, q.tracks) : nullptr;
  for (guint j = 0; list && j < gst_value_array_get_size(list); ++j) {
    Track tr;
    if (read_track(structure_value(gst_value_array_get_value(list, j)), -1, &tr))
      tracks.push_back(tr);
    else
      ++*skipped;
  }

  // As the core's writer lays a reply out: detections, then classifications, then tracks, each
  // mtd's id its index; then GStreamer's pairs linking a classification and a track to its
  // detection.
  const auto n_od = static_cast<std::uint32_t>(objects.size());
  const auto n_cls = static_cast<std::uint32_t>(classes.size());
  const std::size_t total = objects.size() + classes.size() + tracks.size();
  if (total > 0xffffffffu) return Encoded::no_room;
  const std::size_t room = body_room(w, kAnalyticsApiName);
  std::uint8_t* body = w.begin_record(metas::RecordKind::analytics, kAnalyticsApiName, room);
  if (!body) return Encoded::no_room;
  metas::AnalyticsWriter aw(body, room, static_cast<std::uint32_t>(total));
  bool ok = aw.ok();
  for (std::uint32_t i = 0; ok && i < n_od; ++i) ok = aw.add_object_detection(i, objects[i]) >= 0;
  for (std::uint32_t k = 0; ok && k < n_cls; ++k)
    ok = aw.add_classification(n_od + k, classes[k].entries.data(),
                               static_cast<std::uint32_t>(classes[k].entries.size())) >= 0;
  for (std::uint32_t j = 0; ok && j < tracks.size(); ++j)
    ok = aw.add_tracking(n_od + n_cls + j, tracks[j].t) >= 0;
  for (std::uint32_t k = 0; ok && k < n_cls; ++k) {
    if (classes[k].object < 0) continue;
    const auto d = static_cast<std::uint32_t>(classes[k].object);
    ok = aw.add_relation(d, n_od + k, kContain) && aw.add_relation(n_od + k, d, kIsPartOf);
  }
  for (std::uint32_t j = 0; ok && j < tracks.size(); ++j)
    if (tracks[j].object >= 0)
      ok = aw.add_relation(static_cast<std::uint32_t>(tracks[j].object), n_od + n_cls + j,
                           kRelateTo);
  if (!ok) {
    w.cancel_record();
    return Encoded::no_room;
  }
  w.commit_record(aw.finish());
  return Encoded::written;
}

}  // namespace cudaipc::gst
