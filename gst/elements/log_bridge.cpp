#include "elements/log_bridge.h"

#include <gst/gst.h>

#include "cudaipc/log.hpp"

GST_DEBUG_CATEGORY_STATIC(cudaipc_core_debug);
#define GST_CAT_DEFAULT cudaipc_core_debug

namespace cudaipc::gst {
namespace {

void forward(LogLevel level, const char* message, void*) {
  switch (level) {
    case LogLevel::error:
      GST_ERROR("%s", message);
      break;
    case LogLevel::warning:
      GST_WARNING("%s", message);
      break;
    case LogLevel::info:
      GST_INFO("%s", message);
      break;
    case LogLevel::debug:
      GST_DEBUG("%s", message);
      break;
  }
}

}  // namespace

void install_log_bridge() {
  GST_DEBUG_CATEGORY_INIT(cudaipc_core_debug, "cudaipc", 0, "cudaipc core library");
  set_log_handler(forward, nullptr);
}

}  // namespace cudaipc::gst
