// How a frame's timing crosses processes. The sink stores a TimingRecord in the frame's user
// metadata; the source turns it into its own running time. Both pipelines' clocks are mapped to
// CLOCK_MONOTONIC (the system clock's default), so a live source shows a frame at the moment the
// sink's pipeline meant it to be shown.
#pragma once

#include <gst/gst.h>

#include <cstdint>

namespace cudaipc::gst {

struct TimingRecord {
  std::uint32_t magic;           // kTimingMagic
  std::uint32_t version;         // 1
  std::uint64_t running_time;    // sink's running time of the buffer's PTS, or NONE
  std::uint64_t render_mono_ns;  // CLOCK_MONOTONIC ns at which that running time falls, or 0
  std::uint64_t chain_mono_ns;   // CLOCK_MONOTONIC ns at the sink's render() entry
};
inline constexpr std::uint32_t kTimingMagic = 0x43495054;  // "TPIC"

std::uint64_t monotonic_now_ns();

// CLOCK_MONOTONIC ns minus `clock`'s time now: add it to a clock time to get monotonic time.
// Reads two clocks, no syscall (vDSO).
std::int64_t clock_to_monotonic_offset(GstClock* clock);

// A live source's running time for a frame the producer meant to render at `render_mono_ns`
// (CLOCK_MONOTONIC; 0: unknown), in `element`'s clock: the moment the producer meant, or now when
// that is past (a frame shows no earlier than it arrives) or more than a second ahead (an
// untrusted clock), never before the base time. NONE without a clock.
GstClockTime live_running_time(GstElement* element, std::uint64_t render_mono_ns);

// A non-live source's timestamps are the producer's running time, which starts again at 0 after
// a flushing seek there: the frame then comes back in time (with DISCONT) while the source's
// segment still runs on. The source starts a new segment for it whose running time goes on from
// where the last frame ended, so downstream sees a segment that matches its buffers and time that
// never goes back. Streaming thread only.
class TimelineFollower {
 public:
  void reset() { end_ = GST_CLOCK_TIME_NONE; }
  // Notes the frame at `pts` (its `duration`, NONE if unknown): whether it went back in time, and
  // then *last_end is where the frame before it ended. Per frame: no lock, no segment read.
  bool went_back(GstClockTime pts, GstClockTime duration, GstClockTime* last_end);
  // The segment to start before such a frame: it starts at `pts` and its running time goes on
  // from `last_end`'s under `current`. False when `last_end` has no running time there.
  static bool next_segment(const GstSegment& current, GstClockTime last_end, GstClockTime pts,
                           GstSegment* next);

 private:
  GstClockTime end_ = GST_CLOCK_TIME_NONE;  // the last frame's end (its PTS when no duration)
};

// Untrusted bytes from shared memory: true only for a whole record of our version.
bool read_timing(const void* data, std::uint32_t size, TimingRecord* out);

// Reference-timestamp caps the source tags buffers with (static, never freed).
GstCaps* pts_reference_caps();      // timestamp/x-cudaipc-pts: the producer's own PTS
GstCaps* publish_reference_caps();  // timestamp/x-cudaipc-publish: CLOCK_MONOTONIC at publish
GstCaps* chain_reference_caps();    // timestamp/x-cudaipc-sink-chain: the sink's render() entry
GstCaps* acquire_reference_caps();  // timestamp/x-cudaipc-acquire: the source took the frame

}  // namespace cudaipc::gst
