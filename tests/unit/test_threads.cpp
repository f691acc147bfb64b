// Threads of one process on one channel, the way the elements use it: a publishing thread beside
// the producer's socket thread (consumers joining and leaving) and beside stats(); a consumer whose
// next() runs on one thread while another interrupts it and a third releases its frames. The data
// is checked frame by frame; the point of the suite is also to give ThreadSanitizer
// (scripts/dev.sh test --tsan) these interleavings to look at.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kBytes = 4096;

bool frame_ok(const Frame& f) {
  return f.size() == kBytes && check_pattern(f.data(), f.size(), f.seq()) == f.size();
}

}  // namespace

// Consumers join and leave (socket thread: accept, hello, ready, reap) while another thread
// publishes and a third reads stats(); every frame a consumer sees carries its seq's pattern, and
// every-frame consumers see consecutive seqs.
TEST(Threads, PublishWhileConsumersComeAndGo) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.block_timeout = 5s;
  Producer p(o);
  p.set_format(pattern_format(kBytes));

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> not_published{0};
  std::thread publisher([&] {
    while (!stop) {
      if (publish_next(p) != PublishStatus::published) ++not_published;
      std::this_thread::sleep_for(50us);
    }
  });
  std::atomic<std::uint64_t> stats_calls{0};
  std::thread observer([&] {
    while (!stop) {
      ProducerStats s = p.stats();
      EXPECT_LE(s.consumers.size(), o.max_consumers);
      (void)p.consumer_count();
      ++stats_calls;
      std::this_thread::sleep_for(100us);
    }
  });

  for (int round = 0; round < 20; ++round) {
    ConsumerOptions co;
    co.path = o.path;
    co.mode = round % 2 ? ConsumeMode::latest : ConsumeMode::every_frame;
    Consumer c(co);
    std::uint64_t last = 0, frames = 0;
    while (frames < 20) {
      Event e = c.next(10s);
      if (e.type == EventType::format) continue;
      ASSERT_EQ(e.type, EventType::frame) << e.message;
      ASSERT_TRUE(frame_ok(e.frame)) << "frame " << e.frame.seq();
      ASSERT_GT(e.frame.seq(), last);
      if (co.mode == ConsumeMode::every_frame && last != 0) {
        ASSERT_EQ(e.frame.seq(), last + 1);
      }
      last = e.frame.seq();
      ++frames;
    }
  }
  stop = true;
  publisher.join();
  observer.join();
  EXPECT_EQ(not_published, 0u);
  EXPECT_GT(stats_calls, 0u);
}

// next() on one thread, frames handed to another that checks and releases them, a third calling
// interrupt(): every frame arrives once, in order, intact, and interrupts only cost a retry.
TEST(Threads, ConsumerInterruptedAndReleasedFromOtherThreads) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.block_timeout = 10s;
  Producer p(o);
  p.set_format(pattern_format(kBytes));
  ConsumerOptions co;
  co.path = o.path;
  Consumer c(co);
  ASSERT_TRUE(wait_consumers(p, 1));

  constexpr std::uint64_t kFrames = 2000;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Frame> handed;
  bool reader_done = false;
  std::atomic<std::uint64_t> interrupted{0}, bad{0}, released{0};

  std::thread reader([&] {
    std::uint64_t expect = 1;
    while (expect <= kFrames) {
      Event e = c.next(10s);
      if (e.type == EventType::interrupted) {
        ++interrupted;
        continue;
      }
      if (e.type == EventType::format) continue;
      if (e.type != EventType::frame || e.frame.seq() != expect) {
        ++bad;
        break;
      }
      ++expect;
      std::lock_guard<std::mutex> lock(mu);
      handed.push_back(std::move(e.frame));
      cv.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu);
    reader_done = true;
    cv.notify_one();
  });
  std::thread releaser([&] {
    for (;;) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !handed.empty() || reader_done; });
      if (handed.empty()) return;
      Frame f = std::move(handed.front());
      handed.pop_front();
      lock.unlock();
      if (!frame_ok(f)) ++bad;
      f.release();
      ++released;
    }
  });
  std::atomic<bool> stop{false};
  std::thread interrupter([&] {
    while (!stop) {
      c.interrupt();
      std::this_thread::sleep_for(200us);
    }
  });

  for (std::uint64_t i = 0; i < kFrames; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  reader.join();
  releaser.join();
  stop = true;
  interrupter.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(released, kFrames);
  EXPECT_GT(interrupted, 0u);
}

// Producer::interrupt() and clear_interrupt() from another thread while a publisher may be
// blocked on a full ring: each publish either lands (with its pattern) or says interrupted.
TEST(Threads, ProducerInterruptedFromAnotherThread) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 2;
  o.block_timeout = 10s;
  Producer p(o);
  p.set_format(pattern_format(kBytes));
  ConsumerOptions co;
  co.path = o.path;
  Consumer c(co);
  ASSERT_TRUE(wait_consumers(p, 1));

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> published{0}, interrupted{0};
  std::thread publisher([&] {
    while (!stop) {
      PublishStatus st = publish_next(p);
      if (st == PublishStatus::published) ++published;
      if (st == PublishStatus::interrupted) ++interrupted;
    }
  });
  std::thread interrupter([&] {
    while (!stop) {
      p.interrupt();
      std::this_thread::sleep_for(100us);
      p.clear_interrupt();
      std::this_thread::sleep_for(100us);
    }
  });
  std::uint64_t got = 0, last = 0;
  while (got < 500) {
    Event e = c.next(10s);
    if (e.type == EventType::format) continue;
    ASSERT_EQ(e.type, EventType::frame) << e.message;
    ASSERT_TRUE(frame_ok(e.frame)) << "frame " << e.frame.seq();
    ASSERT_EQ(e.frame.seq(), last + 1);  // every-frame: an interrupted publish is no frame at all
    last = e.frame.seq();
    ++got;
    if (got % 7 == 0) std::this_thread::sleep_for(300us);  // let the ring fill up now and then
  }
  stop = true;
  interrupter.join();
  p.interrupt();  // a publisher blocked on the full ring returns, and none clears it now
  publisher.join();
  EXPECT_GE(published, got);
}
