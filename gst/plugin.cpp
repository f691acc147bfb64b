// The cudaipc plugin: registers cudaipcsink, cudaipcsrc and cudaipcfilter, after checking that the
// libgstcuda loaded in this process is the minor version the plugin was built against (its API
// changed between 1.22 and 1.24 under one soname, so a mismatch would crash instead of failing).
#include <gst/gst.h>
#include <gst/video/video.h>

#include "elements/gstcudaipcfilter.h"
#include "elements/gstcudaipcsink.h"
#include "elements/gstcudaipcsrc.h"
#include "elements/log_bridge.h"
#include "memory/cuda_glue.h"
#include "metas/tensor_meta.h"

static gboolean plugin_init(GstPlugin* plugin) {
  const int loaded = cudaipc::gst::loaded_gstcuda_minor();
  if (loaded >= 0 && loaded != CUDAIPC_GST_BUILT_MINOR) {
    g_warning(
        "cudaipc: this plugin was built for GStreamer 1.%d but libgstcuda 1.%d is loaded; "
        "rebuild cudaipc against the GStreamer you run (meson setup with its pkg-config). "
        "The cudaipc elements are not registered.",
        CUDAIPC_GST_BUILT_MINOR, loaded);
    return FALSE;
  }
  cudaipc::gst::install_log_bridge();
  // Caps from a producer may carry multiview flags (decoders set them); their type must exist in
  // this process for the caps text to parse, even where no other video element is loaded.
  gst_video_multiview_flagset_get_type();
  cudaipc::gst::tensor_meta_info();
  gboolean ok = GST_ELEMENT_REGISTER(cudaipcsink, plugin);
  ok &= GST_ELEMENT_REGISTER(cudaipcsrc, plugin);
  ok &= GST_ELEMENT_REGISTER(cudaipcfilter, plugin);
  // GStreamer 1.24+'s nvcodec registers elements with the same two names, and the plugin loaded
  // last wins; these aliases always name ours (docs/coexistence.md).
  ok &= gst_element_register(plugin, "cudaipcringsink", GST_RANK_NONE, GST_TYPE_CUDA_IPC_RING_SINK);
  ok &= gst_element_register(plugin, "cudaipcringsrc", GST_RANK_NONE, GST_TYPE_CUDA_IPC_RING_SRC);
  return ok;
}

GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, cudaipc,
                  "Zero-copy GPU and host frame channels between processes: cudaipcsink and "
                  "cudaipcsrc (also as cudaipcringsink and cudaipcringsrc), and cudaipcfilter, "
                  "a model process as one element",
                  plugin_init, VERSION, "LGPL", GST_PACKAGE_NAME, GST_PACKAGE_ORIGIN)
