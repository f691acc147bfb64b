// Many connections at once (issue #7, findings 15 and 18): refusals that pass (no consumer place
// free) are retried by a consumer with reconnect on; connections that say hello and nothing more
// cannot lock real consumers out; and publishing never waits for the socket thread, however busy
// connections keep it.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "log_capture.hpp"
#include "peer_process.hpp"
#include "poll_until.hpp"
#include "protocol.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

bool has_consumer_pid(const Producer& p, pid_t pid) {
  for (const auto& c : p.stats().consumers)
    if (c.pid == pid && !c.evicted) return true;
  return false;
}

void expect_frames(Consumer& c, int n) {
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::format) << ev.message;
  for (int i = 0; i < n; ++i) {
    ev = c.next(5s);
    ASSERT_EQ(ev.type, EventType::frame) << ev.message;
    EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
  }
}

}  // namespace

// Finding 15: "all consumer places taken" is a refusal for now, not for good. With reconnect on,
// the consumer keeps trying and gets in once the place frees.
TEST(ConnectionFloods, BusyConsumerWithReconnectWaitsForAPlace) {
  LogCapture logs;
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.max_consumers = 1;
  Producer p(o);
  p.set_format(pattern_format(4096));
  ConsumerOptions co;
  co.path = o.path;
  co.reconnect = false;
  auto first = std::make_unique<Consumer>(co);
  ASSERT_TRUE(wait_consumers(p, 1));

  constexpr int kFrames = 10;
  PeerProcess second({"consume", "--path", o.path, "--mode", "every", "--reconnect", "--frames",
                      std::to_string(kFrames), "--timeout-ms", "20000"});
  ASSERT_TRUE(second.wait_for("connected", 10s)) << second.transcript();
  // Refused at least once while the place was taken.
  const std::string pid = "pid " + std::to_string(second.pid());
  ASSERT_TRUE(poll_until(
      [&] {
        return !logs.find({pid, "places taken"}).empty();
      },
      10s))
      << logs.all() << second.transcript();
  EXPECT_FALSE(has_consumer_pid(p, second.pid()));

  first.reset();
  ASSERT_TRUE(poll_until([&] { return has_consumer_pid(p, second.pid()); }, 10s))
      << second.transcript();
  for (int i = 0; i < kFrames; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  auto done = second.wait_for("done", 10s);
  ASSERT_TRUE(done) << second.transcript();
  EXPECT_EQ(field(*done, "frames"), kFrames) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
  EXPECT_EQ(field(*done, "order"), 0) << *done;
}

// Finding 15: 40 connections say hello and then nothing. They used to hold a consumer place each
// for the 5 s handshake timeout, so 16 of them locked everyone out; now the oldest are cut beyond
// the pending limit and a real consumer connects at once.
TEST(ConnectionFloods, HelloOnlySquattersDoNotLockConsumersOut) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(4096));
  std::vector<UniqueFd> squatters;
  for (int i = 0; i < 40; ++i) {
    squatters.push_back(connect_unix(o.path));
    send_hello(squatters.back().get(), HelloMsg{ConsumeMode::every_frame});
    RawMessage raw;
    ASSERT_EQ(recv_raw(squatters.back().get(), raw, 10000ms), RecvStatus::ok) << "squatter " << i;
    ASSERT_EQ(parse_header(std::move(raw)).type, MsgType::welcome) << "squatter " << i;
  }

  ConsumerOptions co;
  co.path = o.path;
  co.reconnect = false;
  Consumer c(co);  // throws if refused
  ASSERT_TRUE(wait_consumers(p, 1));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  ASSERT_NO_FATAL_FAILURE(expect_frames(c, 3));

  // The oldest squatters were cut with a reason.
  int cut = 0;
  for (auto& s : squatters) {
    RawMessage raw;
    while (recv_raw(s.get(), raw, 0ms) == RecvStatus::ok) {
      Received r = parse_header(std::move(raw));
      if (r.type != MsgType::refused) continue;
      try {
        throw_refused(r);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::busy) << e.what();
        EXPECT_NE(std::string(e.what()).find("waiting for a handshake"), std::string::npos)
            << e.what();
        ++cut;
      }
    }
  }
  EXPECT_GE(cut, 8);
}

// Finding 18: the socket thread is held inside the log handler (it logs a hang-up) for as long as
// the test likes. Publishing, which never takes the socket thread's locks, goes on regardless and
// the consumer gets every frame. Before, the socket thread logged under the publish mutex.
TEST(ConnectionFloods, PublishingDoesNotWaitForAStalledSocketThread) {
  LogCapture logs;
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(4096));
  constexpr int kFrames = 200;
  PeerProcess consumer({"consume", "--path", o.path, "--mode", "every", "--frames",
                        std::to_string(kFrames), "--timeout-ms", "30000"});
  ASSERT_TRUE(consumer.wait_for("connected", 10s)) << consumer.transcript();
  ASSERT_TRUE(wait_consumers(p, 1));

  logs.stall_on("consumer hung up");
  { UniqueFd passer_by = connect_unix(o.path); }
  ASSERT_TRUE(logs.wait_stalled(10s)) << logs.all();

  std::atomic<bool> done{false};
  std::atomic<int> published{0};
  std::thread publisher([&] {
    for (int i = 0; i < kFrames; ++i)
      if (publish_next(p) == PublishStatus::published) ++published;
    done = true;
  });
  const bool finished = poll_until([&] { return done.load(); }, 10s);
  logs.release();
  publisher.join();
  EXPECT_TRUE(finished) << "publishing waited for the socket thread";
  EXPECT_EQ(published.load(), kFrames);
  auto line = consumer.wait_for("done", 10s);
  ASSERT_TRUE(line) << consumer.transcript();
  EXPECT_EQ(field(*line, "frames"), kFrames) << *line;
  EXPECT_EQ(field(*line, "bad"), 0) << *line;
  EXPECT_EQ(field(*line, "order"), 0) << *line;
}

// Finding 18: frames are published for as long as a flood of 3000 connects and hang-ups (half
// of them after a hello) from the same uid lasts. Every frame arrives intact and in order, and a
// consumer still gets in afterwards. (How long publishing takes meanwhile is the benchmark's.)
TEST(ConnectionFloods, PublishingProceedsThroughAConnectFlood) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(4096));
  constexpr int kFloods = 3000;
  PeerProcess consumer({"consume", "--path", o.path, "--mode", "every", "--timeout-ms", "30000"});
  ASSERT_TRUE(consumer.wait_for("connected", 10s)) << consumer.transcript();
  ASSERT_TRUE(wait_consumers(p, 1));

  std::atomic<bool> stop{false};
  std::atomic<int> cycles{0}, busy{0};
  std::string flood_error;
  std::thread flood([&] {
    for (int i = 0; i < kFloods && !stop.load(); ++i) {
      try {
        UniqueFd s = connect_unix(o.path);
        if (i % 2) send_hello(s.get(), HelloMsg{ConsumeMode::every_frame});
      } catch (const Error& e) {
        if (e.code() != Errc::busy) {
          flood_error = e.what();
          return;
        }
        ++busy;  // the backlog is full for a moment: the socket thread is behind
      }
      ++cycles;
    }
  });
  // Bounded by frames as well as time, should the flood stall.
  int frames = 0;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (cycles.load() < kFloods && flood_error.empty() && frames < 1'000'000 &&
         std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(publish_next(p), PublishStatus::published) << "frame " << frames + 1;
    ++frames;
  }
  stop = true;
  flood.join();
  EXPECT_EQ(flood_error, "");
  EXPECT_EQ(cycles.load(), kFloods);
  p.end_of_stream();
  auto line = consumer.wait_for("done", 20s);
  ASSERT_TRUE(line) << consumer.transcript();
  EXPECT_EQ(field(*line, "frames"), frames) << *line;
  EXPECT_EQ(field(*line, "eos"), 1) << *line;
  EXPECT_EQ(field(*line, "bad"), 0) << *line;
  EXPECT_EQ(field(*line, "order"), 0) << *line;
  std::printf("flood: %d connects (%d found the backlog full) during %d frames\n", cycles.load(),
              busy.load(), frames);

  // Afterwards a consumer still gets in and reads verified frames.
  ConsumerOptions co;
  co.path = o.path;
  co.reconnect = true;
  co.reconnect_interval = 20ms;
  Consumer late(co);
  Event ev;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ev.type != EventType::format && std::chrono::steady_clock::now() < deadline)
    ev = late.next(100ms);
  ASSERT_EQ(ev.type, EventType::format) << "the late consumer never got in: " << ev.message;
  ASSERT_EQ(publish_next(p), PublishStatus::published);
  ev = late.next(5s);
  ASSERT_EQ(ev.type, EventType::frame) << ev.message;
  EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
}
