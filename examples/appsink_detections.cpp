// Reads a model's detections in a GStreamer application: the pipeline given (ending in a
// cudaipcfilter, or a cudaipcsrc) goes into an appsink, and every frame's results are printed,
// object by object, with its classifications and track. Built against GStreamer 1.24+ it reads
// the GstAnalyticsRelationMeta the results are there; on 1.22, which has no analytics metas, it
// reads the CudaipcAnalyticsMeta custom meta cudaipc attaches instead (docs/metas.md, "GStreamer
// 1.22: analytics as a custom meta"); either way with GStreamer's public API only, no cudaipc
// header (detections_*.cpp).
//   cudaipc-appsink-detections [--frames N] 'videotestsrc pattern=ball ! ... ! cudaipcfilter ...'
// prints, per frame:
//   frame 0 pts 0:00:00.000000000: 1 object(s)
//     ball x=140 y=100 w=39 h=39 score=1.000 track=3 classes=[red 0.875, blue 0.125]
#include <gst/app/gstappsink.h>
#include <gst/gst.h>

#include <cstdio>
#include <memory>
#include <string>

#include "detections.h"

namespace {

struct ObjectUnref {
  void operator()(gpointer p) const { gst_object_unref(p); }
};
struct SampleUnref {
  void operator()(GstSample* s) const { gst_sample_unref(s); }
};
struct MessageUnref {
  void operator()(GstMessage* m) const { gst_message_unref(m); }
};
struct GFree {
  void operator()(gpointer p) const { g_free(p); }
};
struct ErrorFree {
  void operator()(GError* e) const { g_error_free(e); }
};
using ElementPtr = std::unique_ptr<GstElement, ObjectUnref>;
using BusPtr = std::unique_ptr<GstBus, ObjectUnref>;
using SamplePtr = std::unique_ptr<GstSample, SampleUnref>;
using MessagePtr = std::unique_ptr<GstMessage, MessageUnref>;
using CharPtr = std::unique_ptr<gchar, GFree>;
using ErrorPtr = std::unique_ptr<GError, ErrorFree>;

// Sets the pipeline to NULL on every way out, so cudaipc's elements release their channels.
struct StopOnExit {
  GstElement* pipeline;
  ~StopOnExit() { gst_element_set_state(pipeline, GST_STATE_NULL); }
};

// A classification's classes as printed: [label score, ...].
std::string classes_text(const detections::Classes& c) {
  std::string out = "[";
  for (std::size_t j = 0; j < c.size(); ++j) {
    char score[32];
    std::snprintf(score, sizeof score, " %.3f", c[j].second);
    out += (j ? ", " : "") + c[j].first + score;
  }
  return out + "]";
}

void print_track(const detections::Track& t) {
  std::printf(" track=%" G_GUINT64_FORMAT "%s", t.id, t.lost ? " (lost)" : "");
}

// The buffer's results in either form: a relation meta first (1.24+), else 1.22's custom meta.
bool read_results(GstBuffer* buf, detections::Frame* f) {
#ifdef CUDAIPC_HAVE_ANALYTICS
  if (detections::read_relation_meta(buf, f)) return true;
#endif
  return detections::read_custom_meta(buf, f);
}

void print_frame(GstSample* sample, guint64 n) {
  GstBuffer* buf = gst_sample_get_buffer(sample);
  std::printf("frame %" G_GUINT64_FORMAT " pts %" GST_TIME_FORMAT ": ", n,
              GST_TIME_ARGS(buf ? GST_BUFFER_PTS(buf) : GST_CLOCK_TIME_NONE));
  detections::Frame f;
  if (!buf || !read_results(buf, &f)) {
    // The model did not answer this frame in time (cudaipcfilter's on-missing and timeout).
    std::printf("no results\n");
    return;
  }
  std::printf("%zu object(s)\n", f.objects.size());
  for (const detections::Object& o : f.objects) {
    std::printf("  %s x=%d y=%d w=%d h=%d score=%.3f",
                o.label.empty() ? "(no label)" : o.label.c_str(), o.x, o.y, o.w, o.h, o.score);
    if (o.has_track) print_track(o.track);
    for (const detections::Classes& c : o.classifications)
      std::printf(" classes=%s", classes_text(c).c_str());
    std::printf("\n");
  }
  // Classifications of the whole frame, and tracks of no object.
  for (const detections::Classes& c : f.classifications)
    std::printf("  frame classes=%s\n", classes_text(c).c_str());
  for (const detections::Track& t : f.tracks) {
    std::printf("  ");
    print_track(t);
    std::printf("\n");
  }
}

// Prints an error or warning message from the bus; returns true for an error.
bool report(GstMessage* msg) {
  GError* raw = nullptr;
  gchar* debug_raw = nullptr;
  const bool is_error = GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR;
  if (is_error)
    gst_message_parse_error(msg, &raw, &debug_raw);
  else
    gst_message_parse_warning(msg, &raw, &debug_raw);
  ErrorPtr err(raw);
  CharPtr debug(debug_raw);
  std::fprintf(stderr, "%s from %s: %s\n", is_error ? "error" : "warning",
               GST_OBJECT_NAME(GST_MESSAGE_SRC(msg)), err ? err->message : "?");
  if (debug) std::fprintf(stderr, "  (%s)\n", debug.get());
  return is_error;
}

// Reports every error and warning waiting on the bus; true when there was an error.
bool drain_bus(GstBus* bus) {
  bool failed = false;
  while (MessagePtr msg{gst_bus_pop_filtered(
      bus, static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING))})
    failed = report(msg.get()) || failed;
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  gint frames = 0;
  GOptionEntry entries[] = {{"frames", 'n', 0, G_OPTION_ARG_INT, &frames,
                             "Stop after N frames (0: at end of stream)", "N"},
                            {nullptr, 0, 0, G_OPTION_ARG_NONE, nullptr, nullptr, nullptr}};
  GOptionContext* ctx = g_option_context_new("'PIPELINE' - print each frame's detections");
  g_option_context_add_main_entries(ctx, entries, nullptr);
  g_option_context_add_group(ctx, gst_init_get_option_group());
  GError* parse_error = nullptr;
  const bool parsed = g_option_context_parse(ctx, &argc, &argv, &parse_error);
  g_option_context_free(ctx);
  if (!parsed || argc != 2 || frames < 0) {
    std::fprintf(stderr, "%s\nusage: %s [--frames N] 'PIPELINE'\n",
                 parse_error ? parse_error->message : "one pipeline description is needed",
                 argv[0]);
    if (parse_error) g_error_free(parse_error);
    return 2;
  }
#ifndef CUDAIPC_HAVE_ANALYTICS
  // Built against 1.22, run on 1.24+: the results are relation metas this build cannot read.
  guint major = 0, minor = 0, micro = 0, nano = 0;
  gst_version(&major, &minor, &micro, &nano);
  if (major > 1 || minor >= 24)
    std::fprintf(stderr,
                 "note: GStreamer %u.%u attaches a model's results as GstAnalyticsRelationMeta "
                 "(docs/metas.md); this build (against 1.22) reads only 1.22's "
                 "CudaipcAnalyticsMeta: build it against %u.%u to read them\n",
                 major, minor, major, minor);
#endif

  const std::string description = std::string(argv[1]) + " ! appsink name=detections sync=false";
  GError* launch_error = nullptr;
  ElementPtr pipeline(gst_parse_launch(description.c_str(), &launch_error));
  if (launch_error) {
    ErrorPtr err(launch_error);
    std::fprintf(stderr, "cannot build the pipeline: %s\n", err->message);
    return 1;
  }
  StopOnExit stop{pipeline.get()};
  ElementPtr appsink(gst_bin_get_by_name(GST_BIN(pipeline.get()), "detections"));
  BusPtr bus(gst_element_get_bus(pipeline.get()));
  if (gst_element_set_state(pipeline.get(), GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    drain_bus(bus.get());
    std::fprintf(stderr, "the pipeline did not start\n");
    return 1;
  }
  guint64 n = 0;
  while (frames == 0 || n < static_cast<guint64>(frames)) {
    SamplePtr sample(gst_app_sink_try_pull_sample(GST_APP_SINK(appsink.get()), 100 * GST_MSECOND));
    if (drain_bus(bus.get())) return 1;
    if (sample) {
      print_frame(sample.get(), n++);
      std::fflush(stdout);
    } else if (gst_app_sink_is_eos(GST_APP_SINK(appsink.get()))) {
      break;
    }
  }
  return 0;
}
