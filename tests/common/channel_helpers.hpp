// Small helpers for tests that run a producer in the test process: patterned frames whose
// pattern seq is the seq the core gives them, and waiting for consumers to join or leave.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "pattern.hpp"
#include "poll_until.hpp"

namespace cudaipc::testing {

inline Format pattern_format(std::uint64_t bytes, const std::string& caps = "test/pattern") {
  Format f;
  f.caps = caps;
  f.tensor = make_tensor(DType::uint8, {static_cast<std::int64_t>(bytes)});
  return f;
}

// Publishes one frame of `bytes` (default: the format's size) filled with the pattern of the seq
// it will get. Zero-copy, so the seq is known once the slot is ours.
inline PublishStatus publish_next(Producer& p, std::uint64_t bytes = 0) {
  PublishStatus st;
  WriteSlot ws = p.begin_frame(&st);
  if (!ws) return st;
  if (bytes == 0) bytes = p.format().tensor.size;
  fill_pattern(ws.data(), bytes, p.stats().published + 1);
  p.commit(ws);
  return PublishStatus::published;
}

inline bool wait_consumers(const Producer& p, std::size_t n,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return poll_until([&] { return p.consumer_count() == n; }, timeout);
}

}  // namespace cudaipc::testing
