// Routes the core's diagnostics (peer refusals, deaths, protocol errors; never per frame) into
// GStreamer's debug log under the `cudaipc` category.
#pragma once

namespace cudaipc::gst {
void install_log_bridge();
}
