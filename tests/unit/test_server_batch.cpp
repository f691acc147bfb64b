// One Server, many pipelines (cudaipc/server.hpp), in this process: requesters play the filters'
// part (a request producer and a reply consumer each). Every request's content names its
// pipeline and its number, every reply carries that name back, and the checks are on those:
// batches take turns across pipelines, each pipeline's requests keep their order, a directory's
// channels join and leave, and a filter that stops reading replies never makes the model wait.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"
#include "cudaipc/server.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// A filter's two channels: requests out (frame = {pipeline, n}), replies in.
class Requester {
 public:
  Requester(const std::string& path, std::uint32_t who, std::uint32_t slots = 24,
            bool read_replies = true)
      : who_(who) {
    ProducerOptions po;
    po.path = path;
    po.slots = slots;
    po.role = ChannelRole::requests;
    requests_ = std::make_unique<Producer>(po);
    Format f;
    f.caps = "test/requests";
    f.tensor = make_tensor(DType::uint32, {2});
    requests_->set_format(f);
    read_replies_ = read_replies;
  }
  // Once a server reads the requests, the filter connects to its reply channel (as the filter
  // sends requests only while it does: replies to nobody are lost).
  bool served(std::chrono::milliseconds within = 3000ms) {
    const auto until = Clock::now() + within;
    while (requests_->consumer_count() == 0 && Clock::now() < until)
      std::this_thread::sleep_for(2ms);
    if (requests_->consumer_count() == 0) return false;
    ConsumerOptions co;
    co.path = reply_path(requests_->path());
    co.reconnect = false;
    while (read_replies_ && !replies_ && Clock::now() < until) {
      try {
        replies_ = std::make_unique<Consumer>(co);
      } catch (const cudaipc::Error&) {
        std::this_thread::sleep_for(2ms);
      }
    }
    return !read_replies_ || replies_;
  }
  void send(std::uint32_t n) {
    const std::uint32_t v[2] = {who_, n};
    ASSERT_EQ(requests_->publish(v, sizeof v), PublishStatus::published);
  }
  // The replies' texts, in the order they came.
  std::vector<std::string> replies(std::size_t count) {
    std::vector<std::string> out;
    const auto until = Clock::now() + 3s;
    while (out.size() < count && Clock::now() < until) {
      Event e = replies_->next(50ms);
      if (e.type != EventType::frame) continue;
      out.emplace_back(reinterpret_cast<const char*>(e.frame.metas()), e.frame.metas_size());
    }
    return out;
  }
  Producer& producer() { return *requests_; }

 private:
  std::uint32_t who_;
  bool read_replies_ = true;
  std::unique_ptr<Producer> requests_;
  std::unique_ptr<Consumer> replies_;
};

struct Got {
  std::uint32_t who = 0, n = 0;
};
Got content(const Request& r) {
  std::uint32_t v[2];
  std::memcpy(v, r.frame.data(), sizeof v);
  return {v[0], v[1]};
}
std::string text(const Got& g) {
  return std::to_string(g.who) + "/" + std::to_string(g.n);
}
void answer(Server& s, Request& r) {
  const std::string t = text(content(r));
  ASSERT_TRUE(s.reply(r, t.data(), static_cast<std::uint32_t>(t.size())));
}

// Waits until `server` has `count` requests queued over all its pipelines.
void wait_queued(Server& server, std::uint32_t count) {
  const auto until = Clock::now() + 3s;
  for (;;) {
    std::uint32_t q = 0;
    for (const ServerPipelineInfo& p : server.pipelines()) q += p.queued;
    if (q >= count || Clock::now() > until) return;
    std::this_thread::sleep_for(1ms);
  }
}

TEST(ServerBatch, TurnsGoRoundThePipelinesAndEachKeepsItsOrder) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  for (int i = 0; i < 3; ++i) so.paths.push_back(dir.file("cam" + std::to_string(i)));
  so.reply_slots = 16;  // the requesters read their replies only at the end
  std::vector<std::unique_ptr<Requester>> req;
  for (std::uint32_t i = 0; i < 3; ++i) req.push_back(std::make_unique<Requester>(so.paths[i], i));
  Server server(so);
  for (auto& r : req) ASSERT_TRUE(r->served());
  // Pipeline 0 floods, 1 and 2 send two each.
  for (std::uint32_t n = 1; n <= 12; ++n) req[0]->send(n);
  for (std::uint32_t n = 1; n <= 2; ++n) req[1]->send(n), req[2]->send(n);
  wait_queued(server, 12 + 2 + 2);

  std::vector<Request> batch;
  std::map<std::uint32_t, std::uint32_t> last;  // who -> last n seen
  std::vector<std::vector<Got>> batches;
  while (batches.size() < 10) {
    ASSERT_TRUE(server.batch(batch, 6, 0ns, 500ms));
    if (batch.empty()) break;
    std::vector<Got> b;
    for (Request& r : batch) {
      const Got g = content(r);
      EXPECT_EQ(r.pipeline(), g.who + 1) << "pipeline numbers follow the paths' order";
      EXPECT_EQ(r.path(), so.paths[g.who]);
      EXPECT_EQ(g.n, last[g.who] + 1) << "pipeline " << g.who << " out of order";
      last[g.who] = g.n;
      b.push_back(g);
      answer(server, r);
    }
    batches.push_back(b);
  }
  ASSERT_GE(batches.size(), 3u);
  // The first batch has the two requests of each quiet pipeline beside the flood's share.
  std::map<std::uint32_t, int> first;
  for (const Got& g : batches[0]) ++first[g.who];
  EXPECT_EQ(batches[0].size(), 6u);
  EXPECT_EQ(first[0], 2);
  EXPECT_EQ(first[1], 2);
  EXPECT_EQ(first[2], 2);
  EXPECT_EQ(last[0], 12u);
  EXPECT_EQ(last[1], 2u);
  EXPECT_EQ(last[2], 2u);
  // Every reply came back to its own pipeline, in its order.
  std::vector<std::string> want0;
  for (std::uint32_t n = 1; n <= 12; ++n) want0.push_back("0/" + std::to_string(n));
  EXPECT_EQ(req[0]->replies(12), want0);
  EXPECT_EQ(req[1]->replies(2), (std::vector<std::string>{"1/1", "1/2"}));
  EXPECT_EQ(req[2]->replies(2), (std::vector<std::string>{"2/1", "2/2"}));
}

TEST(ServerBatch, ABatchFillsForMaxDelayThenGoesWithWhatCame) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.paths = {dir.file("a"), dir.file("b")};
  Requester a(so.paths[0], 0), b(so.paths[1], 1);
  Server server(so);
  ASSERT_TRUE(a.served());
  ASSERT_TRUE(b.served());
  a.send(1);
  std::thread late([&] {
    std::this_thread::sleep_for(30ms);
    b.send(1);
  });
  std::vector<Request> batch;
  // Both come in one batch: the first waits for the second, well within max_delay.
  ASSERT_TRUE(server.batch(batch, 4, 300ms, 2s));
  late.join();
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(text(content(batch[0])) + " " + text(content(batch[1])) == "0/1 1/1" ||
                text(content(batch[0])) + " " + text(content(batch[1])) == "1/1 0/1",
            true);
  for (Request& r : batch) answer(server, r);
  // A full batch goes at once, whatever max_delay.
  for (std::uint32_t n = 2; n <= 5; ++n) a.send(n);
  wait_queued(server, 4);
  const auto t0 = Clock::now();
  ASSERT_TRUE(server.batch(batch, 4, 10s, 10s));
  EXPECT_LT(Clock::now() - t0, 5s);
  ASSERT_EQ(batch.size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) EXPECT_EQ(content(batch[i]).n, i + 2);
  for (Request& r : batch) answer(server, r);
  EXPECT_EQ(a.replies(5), (std::vector<std::string>{"0/1", "0/2", "0/3", "0/4", "0/5"}));
  EXPECT_EQ(b.replies(1), (std::vector<std::string>{"1/1"}));
}

TEST(ServerBatch, InterruptWakesABatchAndNothingComesAsEmpty) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.path = dir.file("a");
  Server server(so);
  std::vector<Request> batch;
  ASSERT_TRUE(server.batch(batch, 4, 0ns, 20ms));
  EXPECT_TRUE(batch.empty());
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    server.interrupt();
  });
  EXPECT_FALSE(server.batch(batch, 4, 0ns, 10s));
  t.join();
  EXPECT_THROW(server.batch(batch, 0, 0ns, 0ns), cudaipc::Error);
}

TEST(ServerBatch, ADirectorysChannelsJoinAndLeave) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.directory = dir.path();
  so.scan_interval = 10ms;
  Server server(so);
  EXPECT_TRUE(server.pipelines().empty());
  auto cam = std::make_unique<Requester>(dir.file("cam7"), 7);
  ServerEvent e;
  const auto until = Clock::now() + 3s;
  do e = server.next(100ms);
  while (e.type != ServerEventType::joined && Clock::now() < until);
  ASSERT_EQ(e.type, ServerEventType::joined);
  EXPECT_EQ(e.path, dir.file("cam7"));
  ASSERT_TRUE(cam->served());
  // Its reply channel is in the directory too, and is not served as a pipeline.
  std::this_thread::sleep_for(50ms);
  ASSERT_EQ(server.pipelines().size(), 1u);
  cam->send(1);
  std::vector<Request> batch;
  ASSERT_TRUE(server.batch(batch, 2, 0ns, 3s));
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].path(), dir.file("cam7"));
  answer(server, batch[0]);
  EXPECT_EQ(cam->replies(1), (std::vector<std::string>{"7/1"}));
  // The pipeline stops: its channel goes, and so does its reply channel.
  cam.reset();
  do e = server.next(100ms);
  while (e.type != ServerEventType::left && Clock::now() < until + 3s);
  ASSERT_EQ(e.type, ServerEventType::left);
  EXPECT_TRUE(server.pipelines().empty());
  EXPECT_NE(::access(reply_path(dir.file("cam7")).c_str(), F_OK), 0);
  // And joins again as a new pipeline when it restarts.
  cam = std::make_unique<Requester>(dir.file("cam7"), 7);
  ASSERT_TRUE(cam->served());
  cam->send(1);
  ASSERT_TRUE(server.batch(batch, 2, 0ns, 3s));
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_GT(batch[0].pipeline(), 1u);
  answer(server, batch[0]);
  EXPECT_EQ(cam->replies(1), (std::vector<std::string>{"7/1"}));
}

// A pipeline that leaves with requests still queued takes them with it: none of them reaches a
// batch, the others' requests come as before, and the server counts none left over.
TEST(ServerBatch, APipelineThatLeavesTakesItsQueuedRequestsWithIt) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.directory = dir.path();
  so.scan_interval = 10ms;
  Server server(so);
  auto gone = std::make_unique<Requester>(dir.file("cam1"), 1);
  Requester stays(dir.file("cam2"), 2);
  ASSERT_TRUE(gone->served());
  ASSERT_TRUE(stays.served());
  for (std::uint32_t n = 1; n <= 3; ++n) gone->send(n);
  wait_queued(server, 3);
  gone.reset();
  const auto until = Clock::now() + 3s;
  while (server.pipelines().size() != 1 && Clock::now() < until) std::this_thread::sleep_for(2ms);
  const std::vector<ServerPipelineInfo> left = server.pipelines();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].path, dir.file("cam2"));
  EXPECT_EQ(left[0].queued, 0u);
  std::vector<Request> batch;
  ASSERT_TRUE(server.batch(batch, 4, 0ns, 100ms));
  EXPECT_TRUE(batch.empty());
  stays.send(1);
  ASSERT_TRUE(server.batch(batch, 4, 0ns, 3s));
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(text(content(batch[0])), "2/1");
  answer(server, batch[0]);
  EXPECT_EQ(stays.replies(1), (std::vector<std::string>{"2/1"}));
}

TEST(ServerBatch, AChannelAnotherServerServesIsLeftToIt) {
  cudaipc::testing::TempDir dir;
  ServerOptions first;
  first.path = dir.file("cam");
  Server one(first);
  ServerOptions so;
  so.directory = dir.path();
  so.scan_interval = 10ms;
  Server two(so);
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(two.pipelines().empty());
  ServerOptions same;
  same.paths = {dir.file("cam")};
  try {
    Server three(same);
    FAIL() << "two servers answered one path";
  } catch (const cudaipc::Error& e) {
    EXPECT_EQ(e.code(), Errc::busy) << e.what();
  }
  EXPECT_THROW(one.add(dir.file("cam")), cudaipc::Error);  // already served by this one
}

// A filter that stopped reading replies (stuck, or gone without closing) has every reply slot
// full: the model's reply() returns at once, the backlog gives those replies up after a second,
// and another pipeline's replies go on meanwhile.
TEST(ServerBatch, AFilterThatStopsReadingNeverMakesTheModelWait) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.paths = {dir.file("stuck"), dir.file("fine")};
  so.reply_slots = 2;
  Requester fine(so.paths[1], 1);
  Requester stuck_req(so.paths[0], 0, 24, false);
  Server server(so);
  // The stuck filter's reply reader: connected, never reads.
  ConsumerOptions co;
  co.path = reply_path(so.paths[0]);
  co.reconnect = true;
  Consumer stuck_replies(co);
  ASSERT_TRUE(stuck_req.served());
  ASSERT_TRUE(fine.served());
  (void)stuck_replies.next(1s);  // the reply channel's format
  for (std::uint32_t n = 1; n <= 8; ++n) stuck_req.send(n), fine.send(n);
  wait_queued(server, 16);
  std::vector<Request> batch;
  int answered = 0;
  const auto t0 = Clock::now();
  while (answered < 16) {
    ASSERT_TRUE(server.batch(batch, 16, 0ns, 2s));
    ASSERT_FALSE(batch.empty());
    for (Request& r : batch) {
      answer(server, r);
      ++answered;
    }
  }
  // Sixteen replies, eight of them to a filter with no room: had any waited for room (100 ms
  // each, the old reply channel's block) this would take 0.8 s.
  EXPECT_LT(Clock::now() - t0, 400ms);
  std::vector<std::string> want;
  for (std::uint32_t n = 1; n <= 8; ++n) want.push_back("1/" + std::to_string(n));
  EXPECT_EQ(fine.replies(8), want);
  const auto until = Clock::now() + 5s;
  std::uint64_t lost = 0;
  while (Clock::now() < until) {
    for (const ServerPipelineInfo& p : server.pipelines())
      if (p.path == so.paths[0]) lost = p.replies_lost;
    if (lost >= 6) break;
    std::this_thread::sleep_for(5ms);
  }
  // Two slots' worth were published; the rest were given up (the filter's timeout has passed
  // those frames on by then), each a second after it was queued, so they go one by one and the
  // wait is for all six. The reader got the ones published, in order.
  EXPECT_EQ(lost, 6u);
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    Event r = stuck_replies.next(100ms);
    if (r.type == EventType::frame)
      got.emplace_back(reinterpret_cast<const char*>(r.frame.metas()), r.frame.metas_size());
  }
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0], "0/1");
  for (std::size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i], "0/" + std::to_string(i + 1));
  EXPECT_LE(got.size(), 2u) << "a reply given up was published after all";
}

// reply_after's queue (the path of results still on the GPU), here with host results (no stream):
// the model's thread only queues; every reply reaches its own pipeline, in its order, tickets
// count up, and a failing encoder answers its frame without results.
TEST(ServerBatch, RepliesSentLaterKeepEachPipelinesOrder) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.paths = {dir.file("a"), dir.file("b")};
  so.reply_slots = 16;
  Requester a(so.paths[0], 0), b(so.paths[1], 1);
  Server server(so);
  ASSERT_TRUE(a.served());
  ASSERT_TRUE(b.served());
  for (std::uint32_t n = 1; n <= 6; ++n) a.send(n), b.send(n);
  wait_queued(server, 12);
  std::vector<Request> batch;
  std::uint64_t last = 0;
  int sent = 0;
  while (sent < 12) {
    ASSERT_TRUE(server.batch(batch, 12, 0ns, 2s));
    ASSERT_FALSE(batch.empty());
    for (Request& r : batch) {
      const Got g = content(r);
      const std::string t = text(g);
      const std::uint64_t ticket =
          g.who == 1 && g.n == 3
              ? server.reply_after(r, nullptr,
                                   [](std::uint8_t*, std::uint32_t) -> std::uint32_t {
                                     throw cudaipc::Error(Errc::invalid_argument, "no results");
                                   })
              : server.reply_after(r, nullptr, [t](std::uint8_t* area, std::uint32_t cap) {
                  EXPECT_GE(cap, t.size());
                  std::memcpy(area, t.data(), t.size());
                  return static_cast<std::uint32_t>(t.size());
                });
      EXPECT_FALSE(r);
      EXPECT_EQ(ticket, last + 1);
      last = ticket;
      ++sent;
    }
  }
  EXPECT_EQ(a.replies(6), (std::vector<std::string>{"0/1", "0/2", "0/3", "0/4", "0/5", "0/6"}));
  EXPECT_EQ(b.replies(6), (std::vector<std::string>{"1/1", "1/2", "", "1/4", "1/5", "1/6"}));
  const auto until = Clock::now() + 2s;
  while (server.replies_done() < last && Clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(server.replies_done(), last);
}

// A queue of one: the pipeline's format event fills it before its first request. The batch takes
// the event off at once rather than wait out its timeout with the reader stuck behind it.
TEST(ServerBatch, StreamEventsNeverHoldRequestsBack) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.path = dir.file("a");
  so.queue_depth = 1;
  Requester a(so.path, 0);
  Server server(so);
  ASSERT_TRUE(a.served());
  a.send(1);
  std::vector<Request> batch;
  const auto t0 = Clock::now();
  ASSERT_TRUE(server.batch(batch, 4, 0ns, 5s));
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(text(content(batch[0])), "0/1");
}

// "For ever" (the C API's UINT64_MAX, a huge max_delay) waits rather than overflowing into the
// past; interrupt() ends it.
TEST(ServerBatch, WaitingForEverWaits) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.path = dir.file("a");
  Server server(so);
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);
    server.interrupt();
  });
  std::vector<Request> batch;
  const auto t0 = Clock::now();
  EXPECT_FALSE(
      server.batch(batch, 4, std::chrono::nanoseconds::max(), std::chrono::nanoseconds::max()));
  EXPECT_GE(Clock::now() - t0, 150ms);
  t.join();
  std::thread u([&] {
    std::this_thread::sleep_for(200ms);
    server.interrupt();
  });
  const auto t1 = Clock::now();
  EXPECT_EQ(server.next(std::chrono::nanoseconds::max()).type, ServerEventType::interrupted);
  EXPECT_GE(Clock::now() - t1, 150ms);
  u.join();
}

TEST(ServerBatch, RefusesWhatACallerMustNotDo) {
  ServerOptions none;
  EXPECT_THROW(Server s(none), cudaipc::Error);
  cudaipc::testing::TempDir dir;
  ServerOptions deep;
  deep.path = dir.file("a");
  deep.queue_depth = 0;
  EXPECT_THROW(Server s(deep), cudaipc::Error);
  ServerOptions missing;
  missing.directory = dir.file("nowhere");
  // No filter creates a directory other than the default one: a missing one is a mistake, not a
  // wait (test_server_misuse.cpp checks the message).
  EXPECT_THROW(Server s(missing), cudaipc::Error);
  ServerOptions so;
  so.path = dir.file("b");
  Server server(so);
  Request empty;
  EXPECT_THROW(server.reply(empty), cudaipc::Error);
}

}  // namespace
