// A frame's detections as cudaipc-appsink-detections prints them, read from whichever form the
// buffer carries: GStreamer 1.24+'s GstAnalyticsRelationMeta, or the CudaipcAnalyticsMeta custom
// meta cudaipc attaches on 1.22 (docs/metas.md). Public GStreamer API only, no cudaipc header.
#pragma once

#include <gst/gst.h>

#include <string>
#include <utility>
#include <vector>

namespace detections {

// Classes side by side: each label with its score.
using Classes = std::vector<std::pair<std::string, float>>;

struct Track {
  guint64 id = 0;
  bool lost = false;
};

struct Object {
  std::string label;  // "" when the model gave none
  gint x = 0, y = 0, w = 0, h = 0;
  float score = 0;
  bool has_track = false;
  Track track;
  std::vector<Classes> classifications;
};

struct Frame {
  std::vector<Object> objects;
  std::vector<Classes> classifications;  // of the whole frame (no object's)
  std::vector<Track> tracks;             // of no object
};

// Each returns false when the buffer carries no such meta (the model did not answer the frame).
bool read_custom_meta(GstBuffer* buf, Frame* out);
#ifdef CUDAIPC_HAVE_ANALYTICS
bool read_relation_meta(GstBuffer* buf, Frame* out);
#endif

}  // namespace detections
