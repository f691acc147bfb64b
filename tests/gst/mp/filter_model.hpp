// cudaipc-gst-filter-model (filter_model.cpp): a model process for cudaipcfilter, and what the
// tests that read its lines need to know about it: the result it gives a frame, and which abuse
// its hostile behaviour puts on which frame (by the id in the frame's pixels), so a test knows
// which frames must come out with their own result and which cannot carry one.
#pragma once

#include <cstdint>

namespace cudaipc::testing::gstmp {

// The model's result for a frame: a custom meta of this name whose int64 field kResultField is
// the frame id the model read from the frame's pixels (frame_pattern.hpp).
inline constexpr const char* kResultMeta = "filter-result";
inline constexpr const char* kResultField = "index";

// --behaviour hostile, by frame id. Every frame is answered once with its correct tag (except a
// held frame whose next frame never comes); the abuse surrounds or replaces that answer.
enum class Abuse {
  none,          // the answer alone
  forged,        // before the answer: a tag naming a frame never sent, one with another run's
                 // publish time, one of garbage bytes, one of the wrong size; after it, a
                 // duplicate of the answer carrying another frame's result
  held,          // answered after the next frame's answer (replies out of order)
  garbage_area,  // the answer's meta area is not one (wrong magic): no result can be read
  deep_value,    // a custom record whose `other` field names GstValueArray with '<' nested 30000
                 // levels deep, then the result
  bad_names,     // custom records named "bad name!" and "9lives", fields naming the GTypes void
                 // and GInterface, then the result, then a record count one too many
};

// Which abuse the hostile model sends (--abuse): all of it, only what surrounds the answers
// (tags, order, areas), or only the meta records no GStreamer type can hold.
enum class AbuseSet { all, replies, records };

inline Abuse abuse_for(std::uint64_t id, AbuseSet set) {
  Abuse a = Abuse::forged;
  switch (id % 6) {
    case 1:
      a = Abuse::held;  // its answer follows frame id+1's
      break;
    case 3:
      a = Abuse::garbage_area;
      break;
    case 4:
      a = Abuse::deep_value;
      break;
    case 5:
      a = Abuse::bad_names;
      break;
    default:
      break;
  }
  const bool record = a == Abuse::deep_value || a == Abuse::bad_names;
  if (set == AbuseSet::replies && record) return Abuse::forged;
  if (set == AbuseSet::records && !record) return Abuse::none;
  return a;
}

// Whether the model's answer to a frame with this abuse carries the frame's result: records
// before a bad one stay good, and a bad record never takes the others with it (docs/metas.md).
inline bool answer_has_result(Abuse a) {
  return a != Abuse::garbage_area;
}

}  // namespace cudaipc::testing::gstmp
