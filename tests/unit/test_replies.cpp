// Replies to frames (cudaipc/reply.hpp, server.hpp): the pairing window's verdicts one by one, and
// a Server answering a requester in the same process: every reply names its own frame and carries
// the results the server gave for that frame (the fuzz target "pairing" covers the window's
// verdicts over random sequences).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"
#include "cudaipc/server.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace std::chrono_literals;

namespace {

FrameDesc request(std::uint64_t seq, std::uint64_t time) {
  FrameDesc d{};
  d.seq = seq;
  d.publish_time_ns = time;
  return d;
}

ReplyMatch reply_to(ReplyWindow& w, std::uint64_t seq, std::uint64_t time) {
  std::uint8_t tag[kReplyTagSize];
  write_reply_tag(request(seq, time), tag);
  return w.match(tag, sizeof tag);
}

TEST(ReplyWindow, RepliesOutOfOrderFindTheirFrames) {
  ReplyWindow w(4);
  const std::uint32_t p1 = w.admit(1, 10), p2 = w.admit(2, 20), p5 = w.admit(5, 50);
  ReplyMatch m = reply_to(w, 5, 50);
  ASSERT_EQ(m.verdict, ReplyVerdict::matched);
  EXPECT_EQ(m.place, p5);
  EXPECT_FALSE(w.head_answered());
  m = reply_to(w, 1, 10);
  ASSERT_EQ(m.verdict, ReplyVerdict::matched);
  EXPECT_EQ(m.place, p1);
  EXPECT_TRUE(w.head_answered());
  EXPECT_EQ(reply_to(w, 2, 20).place, p2);
}

TEST(ReplyWindow, EveryBadReplyIsNamed) {
  ReplyWindow w(2);
  w.admit(3, 30);
  w.admit(4, 40);
  EXPECT_EQ(reply_to(w, 9, 90).verdict, ReplyVerdict::unknown);
  EXPECT_EQ(reply_to(w, 2, 20).verdict, ReplyVerdict::stale);
  EXPECT_EQ(reply_to(w, 3, 31).verdict, ReplyVerdict::foreign);
  EXPECT_EQ(reply_to(w, 3, 30).verdict, ReplyVerdict::matched);
  EXPECT_EQ(reply_to(w, 3, 30).verdict, ReplyVerdict::duplicate);
  w.pop();
  EXPECT_EQ(reply_to(w, 3, 30).verdict, ReplyVerdict::stale);
  const std::uint8_t junk[kReplyTagSize] = {1, 2, 3};
  EXPECT_EQ(w.match(junk, sizeof junk).verdict, ReplyVerdict::malformed);
  EXPECT_EQ(w.match(junk, 7).verdict, ReplyVerdict::malformed);
  EXPECT_EQ(w.match(nullptr, 0).verdict, ReplyVerdict::malformed);
  w.clear();
  EXPECT_EQ(reply_to(w, 4, 40).verdict, ReplyVerdict::stale);
}

TEST(ReplyWindow, RefusesWhatACallerMustNotDo) {
  EXPECT_THROW(ReplyWindow(0), cudaipc::Error);
  EXPECT_THROW(ReplyWindow(kMaxInflight + 1), cudaipc::Error);
  ReplyWindow w(1);
  w.admit(7, 1);
  EXPECT_THROW(w.admit(8, 1), cudaipc::Error);  // full
  w.pop();
  EXPECT_THROW(w.admit(7, 1), cudaipc::Error);  // seqs grow
}

// A requester (the filter's role: a producer and a reply consumer) and a Server in this process:
// 50 frames, each answered with a meta area naming it, the replies paired through the window.
TEST(Server, AnswersEveryRequestWithItsOwnResults) {
  cudaipc::testing::TempDir dir;
  const std::string path = dir.file("model");
  ProducerOptions po;
  po.path = path;
  po.slots = 6;
  po.role = ChannelRole::requests;
  Producer requests(po);
  Format f;
  f.caps = "test/frames";
  f.tensor = make_tensor(DType::uint32, {16});
  requests.set_format(f);

  ServerOptions so;
  so.path = path;
  Server server(so);
  ConsumerOptions co;
  co.path = reply_path(path);
  co.reconnect = true;
  Consumer replies(co);

  for (int i = 0; i < 200 && requests.consumer_count() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(requests.consumer_count(), 1u) << "the server never connected";

  ReplyWindow window(4);
  std::uint64_t times[4] = {};
  int answered = 0;
  std::uint32_t values[16];
  for (int n = 1; n <= 50; ++n) {
    for (std::uint32_t k = 0; k < 16; ++k) values[k] = n * 100 + k;
    ASSERT_EQ(requests.publish(values, sizeof values), PublishStatus::published);
    const std::uint64_t seq = requests.last_seq();
    // The server's view of the frame: its content, then its answer, the frame's first value.
    ServerEvent e;
    do e = server.next(2s);
    while (e.type == ServerEventType::format);
    ASSERT_EQ(e.type, ServerEventType::request) << e.message;
    ASSERT_EQ(e.request.frame.seq(), seq);
    std::uint32_t got[16];
    std::memcpy(got, e.request.frame.data(), sizeof got);
    ASSERT_EQ(got[3], n * 100u + 3);
    times[window.admit(seq, e.request.frame.desc().publish_time_ns)] =
        e.request.frame.desc().publish_time_ns;
    const std::string result = "frame-" + std::to_string(got[0]);
    ASSERT_TRUE(server.reply(e.request, result.data(), static_cast<std::uint32_t>(result.size())));
    EXPECT_FALSE(e.request);

    Event r;
    do r = replies.next(2s);
    while (r.type == EventType::format || r.type == EventType::disconnected);
    ASSERT_EQ(r.type, EventType::frame) << r.message;
    const ReplyMatch m = window.match(r.frame.desc().user_meta, r.frame.desc().user_meta_size);
    ASSERT_EQ(m.verdict, ReplyVerdict::matched) << to_string(m.verdict);
    ASSERT_EQ(m.seq, seq);
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(r.frame.metas()), r.frame.metas_size()),
              "frame-" + std::to_string(n * 100));
    EXPECT_NE(times[m.place], 0u);
    window.pop();
    ++answered;
  }
  EXPECT_EQ(answered, 50);
}

TEST(Server, SecondServerOnAPathIsRefused) {
  cudaipc::testing::TempDir dir;
  ServerOptions so;
  so.path = dir.file("model");
  Server first(so);
  try {
    Server second(so);
    FAIL() << "two servers answered one path";
  } catch (const cudaipc::Error& e) {
    EXPECT_EQ(e.code(), Errc::busy) << e.what();
  }
}

}  // namespace
