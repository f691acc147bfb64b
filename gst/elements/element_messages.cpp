#include "elements/element_messages.h"

namespace cudaipc::gst {

void post_consumer_change(GstElement* sink, const ConsumerChange& c) {
  const char* event = c.kind == ConsumerChange::Kind::joined ? "joined"
                      : c.kind == ConsumerChange::Kind::left ? "left"
                                                             : "evicted";
  GstStructure* s = gst_structure_new("cudaipcsink-consumer", "event", G_TYPE_STRING, event, "pid",
                                      G_TYPE_INT, static_cast<gint>(c.pid), "mode", G_TYPE_STRING,
                                      c.mode == ConsumeMode::latest ? "latest" : "every-frame",
                                      "reason", G_TYPE_STRING, c.reason.c_str(), "consumers",
                                      G_TYPE_UINT, static_cast<guint>(c.consumers), nullptr);
  gst_element_post_message(sink, gst_message_new_element(GST_OBJECT(sink), s));
}

void post_model_change(GstElement* filter, bool serving, const std::string& path,
                       const std::string& reason) {
  GstStructure* s = gst_structure_new(
      "cudaipcfilter-model", "event", G_TYPE_STRING, serving ? "serving" : "left", "path",
      G_TYPE_STRING, path.c_str(), "reason", G_TYPE_STRING, reason.c_str(), nullptr);
  gst_element_post_message(filter, gst_message_new_element(GST_OBJECT(filter), s));
}

}  // namespace cudaipc::gst
