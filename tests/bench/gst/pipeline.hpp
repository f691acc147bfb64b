// Pipelines and GStreamer objects as RAII handles, for the benchmark programs' child processes
// (roles.cpp, streams.cpp): launch a description, find a pad, change state with the reason.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>

namespace gstbench {

struct PipelineDeleter {
  void operator()(GstElement* p) const {
    gst_element_set_state(p, GST_STATE_NULL);
    gst_object_unref(p);
  }
};
using Pipeline = std::unique_ptr<GstElement, PipelineDeleter>;

struct ObjectDeleter {
  void operator()(gpointer p) const { gst_object_unref(p); }
};
template <typename T>
using Ref = std::unique_ptr<T, ObjectDeleter>;

inline Pipeline launch(const std::string& desc) {
  GError* err = nullptr;
  GstElement* p = gst_parse_launch(desc.c_str(), &err);
  if (err) {
    const std::string msg = err->message;
    g_error_free(err);
    if (p) gst_object_unref(p);
    throw std::runtime_error("gst_parse_launch(" + desc + "): " + msg);
  }
  return Pipeline(p);
}

inline Ref<GstPad> pad_of(GstElement* pipe, const char* element, const char* pad) {
  Ref<GstElement> e(gst_bin_get_by_name(GST_BIN(pipe), element));
  if (!e) throw std::runtime_error(std::string("no element named ") + element);
  GstPad* p = gst_element_get_static_pad(e.get(), pad);
  if (!p) throw std::runtime_error(std::string("no pad ") + element + ":" + pad);
  return Ref<GstPad>(p);
}

// Lets exactly `n` buffers out of `element`'s src pad, then ends the stream there: what
// identity eos-after does, without its count differing between GStreamer versions and upstream
// elements (a decoder keeps pushing, and gets EOS back from then on).
inline void limit_buffers(GstElement* pipe, const char* element, std::uint64_t n) {
  Ref<GstPad> pad = pad_of(pipe, element, "src");
  auto* left = g_new(std::uint64_t, 1);  // the buffers still to let through; the probe frees it
  *left = n;
  gst_pad_add_probe(
      pad.get(), GST_PAD_PROBE_TYPE_BUFFER,
      [](GstPad* p, GstPadProbeInfo*, gpointer data) -> GstPadProbeReturn {
        auto* remaining = static_cast<std::uint64_t*>(data);
        if (*remaining > 0) {
          --*remaining;
          return GST_PAD_PROBE_OK;
        }
        gst_pad_push_event(p, gst_event_new_eos());
        return GST_PAD_PROBE_DROP;
      },
      left, g_free);
}

// Copies the named guint64 fields of `element`'s "stats" structure into `out` (as
// prefix + field), where the element has such a property.
template <typename Map>
void read_stats(GstElement* pipe, const char* element, std::initializer_list<const char*> fields,
                const std::string& prefix, Map* out) {
  Ref<GstElement> e(gst_bin_get_by_name(GST_BIN(pipe), element));
  if (!e || !g_object_class_find_property(G_OBJECT_GET_CLASS(e.get()), "stats")) return;
  GstStructure* stats = nullptr;
  g_object_get(e.get(), "stats", &stats, nullptr);
  if (!stats) return;
  for (const char* f : fields) {
    guint64 v = 0;
    if (gst_structure_get_uint64(stats, f, &v)) (*out)[prefix + f] = std::to_string(v);
  }
  gst_structure_free(stats);
}

inline std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// An error or warning message as one line: the element, the message, the debug text.
inline std::string describe_error(GstMessage* msg) {
  GError* err = nullptr;
  gchar* dbg = nullptr;
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_WARNING)
    gst_message_parse_warning(msg, &err, &dbg);
  else
    gst_message_parse_error(msg, &err, &dbg);
  std::string s = std::string(GST_OBJECT_NAME(GST_MESSAGE_SRC(msg))) + ": " +
                  (err ? err->message : "?") + (dbg ? std::string(" (") + dbg + ")" : "");
  if (err) g_error_free(err);
  g_free(dbg);
  return one_line(s);
}

// Sets a state; on failure the reason is the bus's error message.
inline bool set_state(GstElement* pipe, GstState state, std::string* error) {
  if (gst_element_set_state(pipe, state) != GST_STATE_CHANGE_FAILURE) return true;
  Ref<GstBus> bus(gst_element_get_bus(pipe));
  GstMessage* msg = gst_bus_timed_pop_filtered(bus.get(), 0, GST_MESSAGE_ERROR);
  *error = msg ? describe_error(msg)
               : std::string("state change to ") + gst_element_state_get_name(state) + " failed";
  if (msg) gst_message_unref(msg);
  return false;
}

}  // namespace gstbench
