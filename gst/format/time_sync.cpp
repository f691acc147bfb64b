#include "format/time_sync.h"

#include <time.h>

#include <cstring>

namespace cudaipc::gst {
namespace {

// One reference kept for the process's lifetime, so the hot path takes none.
GstCaps* static_caps(GstStaticCaps* s) {
  GstCaps* caps = gst_static_caps_get(s);
  GST_MINI_OBJECT_FLAG_SET(caps, GST_MINI_OBJECT_FLAG_MAY_BE_LEAKED);
  return caps;
}

}  // namespace

std::uint64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::int64_t clock_to_monotonic_offset(GstClock* clock) {
  const auto mono = static_cast<std::int64_t>(monotonic_now_ns());
  return mono - static_cast<std::int64_t>(gst_clock_get_time(clock));
}

GstClockTime live_running_time(GstElement* element, std::uint64_t render_mono_ns) {
  GstClock* clock = gst_element_get_clock(element);
  if (!clock) return GST_CLOCK_TIME_NONE;
  const GstClockTime base = gst_element_get_base_time(element);
  const GstClockTime now = gst_clock_get_time(clock);
  const auto offset =
      static_cast<std::int64_t>(monotonic_now_ns()) - static_cast<std::int64_t>(now);
  gst_object_unref(clock);
  const auto now_i = static_cast<std::int64_t>(now);
  std::int64_t when = render_mono_ns ? static_cast<std::int64_t>(render_mono_ns) - offset : now_i;
  if (when < now_i || when > now_i + static_cast<std::int64_t>(GST_SECOND)) when = now_i;
  if (when < static_cast<std::int64_t>(base)) when = static_cast<std::int64_t>(base);
  return static_cast<GstClockTime>(when) - base;
}

bool read_timing(const void* data, std::uint32_t size, TimingRecord* out) {
  if (size != sizeof(TimingRecord)) return false;
  std::memcpy(out, data, sizeof *out);
  return out->magic == kTimingMagic && out->version == 1;
}

GstCaps* pts_reference_caps() {
  static GstStaticCaps caps = GST_STATIC_CAPS("timestamp/x-cudaipc-pts");
  static GstCaps* once = static_caps(&caps);
  return once;
}

GstCaps* publish_reference_caps() {
  static GstStaticCaps caps = GST_STATIC_CAPS("timestamp/x-cudaipc-publish");
  static GstCaps* once = static_caps(&caps);
  return once;
}

GstCaps* chain_reference_caps() {
  static GstStaticCaps caps = GST_STATIC_CAPS("timestamp/x-cudaipc-sink-chain");
  static GstCaps* once = static_caps(&caps);
  return once;
}

GstCaps* acquire_reference_caps() {
  static GstStaticCaps caps = GST_STATIC_CAPS("timestamp/x-cudaipc-acquire");
  static GstCaps* once = static_caps(&caps);
  return once;
}

bool TimelineFollower::went_back(GstClockTime pts, GstClockTime duration, GstClockTime* last_end) {
  if (!GST_CLOCK_TIME_IS_VALID(pts)) return false;
  *last_end = end_;
  end_ = GST_CLOCK_TIME_IS_VALID(duration) ? pts + duration : pts;
  return GST_CLOCK_TIME_IS_VALID(*last_end) && pts < *last_end;
}

bool TimelineFollower::next_segment(const GstSegment& current, GstClockTime last_end,
                                    GstClockTime pts, GstSegment* next) {
  const guint64 base = gst_segment_to_running_time(&current, GST_FORMAT_TIME, last_end);
  if (!GST_CLOCK_TIME_IS_VALID(base)) return false;
  gst_segment_init(next, GST_FORMAT_TIME);
  next->start = pts;
  next->time = pts;
  next->position = pts;
  next->base = base;
  return true;
}

}  // namespace cudaipc::gst
