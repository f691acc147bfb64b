// Which factory names reach this project's elements. GStreamer 1.24+'s nvcodec registers its own
// cudaipcsink/cudaipcsrc; where one of those names is taken by another type, the aliases
// cudaipcringsink/cudaipcringsrc (always ours) are used instead.
#pragma once

#include <gst/gst.h>

#include <cstring>
#include <string>

namespace cudaipc::testing::gstmp {

// `name` if that factory makes `type_name`, else `alias` if that one does, else "".
inline std::string factory_for(const char* name, const char* alias, const char* type_name) {
  for (const char* candidate : {name, alias}) {
    GstElementFactory* f = gst_element_factory_find(candidate);
    if (!f) continue;
    auto* loaded = GST_ELEMENT_FACTORY(gst_plugin_feature_load(GST_PLUGIN_FEATURE(f)));
    gst_object_unref(f);
    if (!loaded) continue;
    const GType t = gst_element_factory_get_element_type(loaded);
    gst_object_unref(loaded);
    if (t != 0 && std::strcmp(g_type_name(t), type_name) == 0) return candidate;
  }
  return "";
}

inline std::string sink_factory() {
  return factory_for("cudaipcsink", "cudaipcringsink", "GstCudaIpcRingSink");
}

inline std::string src_factory() {
  return factory_for("cudaipcsrc", "cudaipcringsrc", "GstCudaIpcRingSrc");
}

}  // namespace cudaipc::testing::gstmp
