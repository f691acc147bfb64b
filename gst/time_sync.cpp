#include "time_sync.h"

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

}  // namespace cudaipc::gst
