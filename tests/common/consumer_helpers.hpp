// Small helpers for tests that read a channel in the test process: options for a consumer that
// does not reconnect, and the next frame with the format events before it skipped.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "cudaipc/consumer.hpp"

namespace cudaipc::testing {

inline ConsumerOptions consumer_at(const std::string& path,
                                   ConsumeMode mode = ConsumeMode::every_frame) {
  ConsumerOptions o;
  o.path = path;
  o.mode = mode;
  o.reconnect = false;
  return o;
}

// The next frame, past any format events; a failure (naming the event) and an empty Frame when
// something else comes first or nothing comes within 5 s.
inline Frame next_frame(Consumer& c) {
  Event ev;
  for (int i = 0; i < 8; ++i) {
    ev = c.next(std::chrono::seconds(5));
    if (ev.type == EventType::frame) return std::move(ev.frame);
    if (ev.type != EventType::format) break;
  }
  ADD_FAILURE() << "no frame: event " << static_cast<int>(ev.type) << " " << ev.message;
  return Frame();
}

}  // namespace cudaipc::testing
