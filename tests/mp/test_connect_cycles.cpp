// 1 000 connect/disconnect cycles, each with a verified frame: the producer's process ends with
// the fds and mappings it started with (the consumer runs here too, so its own are counted).
#include <gtest/gtest.h>

#include <tuple>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "proc_stats.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

void cycle(Producer& p, const ConsumerOptions& co) {
  Consumer c(co);
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::format);
  ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  ASSERT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
}

}  // namespace

TEST(ConnectCycles, ThousandCyclesLeakNothing) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(4096));
  ConsumerOptions co;
  co.path = o.path;
  co.reconnect = false;
  // Warm up first, so lazily created runtime state (allocator arenas) is not counted as a leak.
  for (int i = 0; i < 20; ++i) ASSERT_NO_FATAL_FAILURE(cycle(p, co));
  ASSERT_TRUE(wait_consumers(p, 0));
  // The producer's socket thread retires a consumer after its count drops: its connection page
  // and pidfd go a moment later, so the starting counts are read once that has settled.
  const auto start = settled(
      [] { return std::make_tuple(open_fd_count(), mapping_count("memfd:"), mapping_count()); });
  const std::size_t fds = std::get<0>(start);
  const std::size_t memfd_maps = std::get<1>(start);
  const std::size_t maps = std::get<2>(start);

  for (int i = 0; i < 1000; ++i) ASSERT_NO_FATAL_FAILURE(cycle(p, co)) << "cycle " << i;

  ASSERT_TRUE(wait_consumers(p, 0));
  // The producer reaps a hung-up consumer on its socket thread: wait for it, bounded.
  EXPECT_TRUE(poll_until([&] { return open_fd_count() == fds; }, 5s))
      << open_fd_count() << " fds open, " << fds << " at the start";
  EXPECT_TRUE(poll_until([&] { return mapping_count("memfd:") == memfd_maps; }, 5s))
      << mapping_count("memfd:") << " memfd mappings, " << memfd_maps << " at the start";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers' allocators map more memory as their quarantine of freed blocks fills, so only
  // the memfd mappings (slots, control block, connection pages) are exact there.
  (void)maps;
#else
  EXPECT_EQ(mapping_count(), maps);
#endif
  EXPECT_EQ(p.stats().published, 1020u);
}
