// The C API's server (cudaipc.h): two pipelines' requests through cudaipc_server_batch, each
// answered with its own content and read back on its own reply channel; the views, the formats,
// the counters, and the errors a caller can make (answering twice, a consumer's frame).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "c_channel.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/cudaipc.h"
#include "cudaipc/error.hpp"
#include "cudaipc/metas.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"
#include "temp_dir.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kSecond = 1'000'000'000;

struct Pipeline {
  Pipeline(const std::string& path, std::uint32_t who) : who(who) {
    cudaipc::ProducerOptions po;
    po.path = path;
    po.slots = 8;
    po.role = cudaipc::ChannelRole::requests;
    requests = std::make_unique<cudaipc::Producer>(po);
    cudaipc::Format f;
    f.caps = "test/requests,who=" + std::to_string(who);
    f.tensor = cudaipc::make_tensor(cudaipc::DType::uint32, {2});
    requests->set_format(f);
  }
  bool connect_replies() {
    const auto until = Clock::now() + 3s;
    while (requests->consumer_count() == 0 && Clock::now() < until)
      std::this_thread::sleep_for(2ms);
    cudaipc::ConsumerOptions co;
    co.path = cudaipc::reply_path(requests->path());
    co.reconnect = false;
    while (!replies && Clock::now() < until) {
      try {
        replies = std::make_unique<cudaipc::Consumer>(co);
      } catch (const cudaipc::Error&) {
        std::this_thread::sleep_for(2ms);
      }
    }
    return replies != nullptr;
  }
  void send(std::uint32_t n) {
    const std::uint32_t v[2] = {who, n};
    ASSERT_EQ(requests->publish(v, sizeof v), cudaipc::PublishStatus::published);
  }
  std::string reply() {
    const auto until = Clock::now() + 3s;
    while (Clock::now() < until) {
      cudaipc::Event e = replies->next(50ms);
      if (e.type == cudaipc::EventType::frame)
        return std::string(reinterpret_cast<const char*>(e.frame.metas()), e.frame.metas_size());
    }
    return "(none)";
  }
  std::uint32_t who;
  std::unique_ptr<cudaipc::Producer> requests;
  std::unique_ptr<cudaipc::Consumer> replies;
};

}  // namespace

TEST(CApiServer, BatchesOfTwoPipelinesAnsweredEachWithItsOwn) {
  cudaipc::testing::TempDir dir;
  const std::string a = dir.file("a"), b = dir.file("b");
  Pipeline pa(a, 1), pb(b, 2);
  const auto server = cudaipc::testing::c_server({a, b});
  ASSERT_TRUE(server);
  cudaipc_server* s = server.get();
  ASSERT_TRUE(pa.connect_replies());
  ASSERT_TRUE(pb.connect_replies());
  for (std::uint32_t n = 1; n <= 3; ++n) pa.send(n), pb.send(n);

  cudaipc_request_view views[8];
  std::uint32_t got = 0, tensor_id_a = 0;
  std::uint32_t next_n[3] = {0, 1, 1};
  const auto until = Clock::now() + 5s;
  while (got < 6 && Clock::now() < until) {
    uint32_t count = 0;
    ASSERT_EQ(cudaipc_server_batch(s, 8, 0, kSecond, views, &count, nullptr), CUDAIPC_OK)
        << cudaipc_last_error();
    for (uint32_t i = 0; i < count; ++i) {
      const cudaipc_request_view& v = views[i];
      ASSERT_EQ(v.frame.type, CUDAIPC_EVENT_FRAME);
      ASSERT_EQ(v.frame.size, 8u);
      ASSERT_EQ(v.frame.cuda_device, -1);
      std::uint32_t c[2];
      std::memcpy(c, reinterpret_cast<const void*>(v.frame.data), sizeof c);
      ASSERT_TRUE(c[0] == 1 || c[0] == 2);
      EXPECT_EQ(v.pipeline, c[0]) << "pipelines are numbered in the paths' order";
      EXPECT_EQ(c[1], next_n[c[0]]++) << "pipeline " << c[0] << " out of order";
      if (c[0] == 1) {
        // One description per pipeline format: the id stays while it does.
        if (tensor_id_a) {
          EXPECT_EQ(v.frame.tensor_id, tensor_id_a);
        }
        tensor_id_a = v.frame.tensor_id;
      }
      const char* caps = nullptr;
      uint64_t generation = 0;
      void* stream = reinterpret_cast<void*>(1);
      ASSERT_EQ(cudaipc_request_format(v.frame.frame, &caps, &generation, &stream), CUDAIPC_OK);
      EXPECT_EQ(std::string(caps), "test/requests,who=" + std::to_string(c[0]));
      EXPECT_GT(generation, 0u);
      EXPECT_EQ(stream, nullptr);
      const std::string text = std::to_string(c[0]) + "/" + std::to_string(c[1]);
      ASSERT_EQ(
          cudaipc_server_reply(s, v.frame.frame, text.data(), static_cast<uint32_t>(text.size())),
          CUDAIPC_OK)
          << cudaipc_last_error();
      // Once only.
      EXPECT_EQ(cudaipc_server_reply(s, v.frame.frame, nullptr, 0), CUDAIPC_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(cudaipc_last_error()).find("already answered"), std::string::npos);
      cudaipc_frame_release(v.frame.frame);
      ++got;
    }
  }
  ASSERT_EQ(got, 6u);
  for (std::uint32_t n = 1; n <= 3; ++n) {
    EXPECT_EQ(pa.reply(), "1/" + std::to_string(n));
    EXPECT_EQ(pb.reply(), "2/" + std::to_string(n));
  }
  cudaipc_server_pipeline info[4];
  uint32_t count = 0;
  ASSERT_EQ(cudaipc_server_pipelines(s, info, 4, &count), CUDAIPC_OK);
  ASSERT_EQ(count, 2u);
  EXPECT_EQ(std::string(info[0].path), a);
  EXPECT_EQ(std::string(info[1].path), b);
  EXPECT_EQ(info[0].requests, 3u);
  EXPECT_EQ(info[0].replies, 3u);
  EXPECT_EQ(info[1].replies, 3u);
  EXPECT_EQ(info[0].replies_lost, 0u);
  EXPECT_EQ(info[0].connected, 1u);
  // Pipeline a ends its stream and goes: a batch keeps both events, read in order.
  pa.requests->end_of_stream();
  pa.requests.reset();
  std::vector<int> seen;
  cudaipc_server_event ev{};
  const auto until2 = Clock::now() + 3s;
  while (seen.size() < 2 && Clock::now() < until2) {
    uint32_t events = 0;
    ASSERT_EQ(cudaipc_server_batch(s, 8, 0, 20'000'000, views, &count, &events), CUDAIPC_OK);
    ASSERT_EQ(count, 0u);
    for (; events; --events) {
      ASSERT_EQ(cudaipc_server_next_event(s, &ev), CUDAIPC_OK);
      EXPECT_EQ(ev.pipeline, 1u);
      EXPECT_EQ(std::string(ev.path), a);
      seen.push_back(ev.type);
    }
  }
  EXPECT_EQ(seen, (std::vector<int>{CUDAIPC_SERVER_EOS, CUDAIPC_SERVER_DISCONNECTED}));
  ASSERT_EQ(cudaipc_server_next_event(s, &ev), CUDAIPC_OK);
  EXPECT_EQ(ev.type, 0);
}

// Results sent later (no stream: on the host): detections and host records merged into one
// reply; a label past the names table named in decimal, as the host path names it.
TEST(CApiServer, ReplyAfterMergesDetectionsAndNamesEveryLabel) {
  cudaipc::testing::TempDir dir;
  const std::string a = dir.file("a");
  Pipeline pa(a, 1);
  const auto server = cudaipc::testing::c_server({a});
  ASSERT_TRUE(server);
  cudaipc_server* s = server.get();
  ASSERT_TRUE(pa.connect_replies());
  pa.send(1);
  cudaipc_request_view v[1];
  uint32_t count = 0;
  ASSERT_EQ(cudaipc_server_batch(s, 1, 0, 5 * kSecond, v, &count, nullptr), CUDAIPC_OK);
  ASSERT_EQ(count, 1u);
  const float boxes[8] = {1, 2, 30, 40, 5, 6, 70, 80};
  const std::int64_t labels[2] = {0, 7};
  const char names[] = "object";
  const std::uint32_t offsets[2] = {0, 6};
  cudaipc_detections d{};
  d.n = 2;
  d.boxes = boxes;
  d.labels = labels;
  d.names = reinterpret_cast<const std::uint8_t*>(names);
  d.name_offsets = offsets;
  d.name_count = 1;
  // A host record beside them: a raw record the writer copies as it is.
  std::vector<std::uint8_t> area(256);
  cudaipc::metas::AreaWriter w(area.data(), area.size());
  ASSERT_TRUE(w.add_record(cudaipc::metas::RecordKind::serialized, "x-note", "hello", 5));
  std::uint64_t ticket = 0;
  ASSERT_EQ(cudaipc_server_reply_after(s, v[0].frame.frame, nullptr, &d, area.data(),
                                       static_cast<uint32_t>(w.size()), &ticket),
            CUDAIPC_OK)
      << cudaipc_last_error();
  EXPECT_EQ(ticket, 1u);
  cudaipc_frame_release(v[0].frame.frame);
  const std::string reply = pa.reply();
  cudaipc::metas::AreaReader r(reply.data(), reply.size());
  cudaipc::metas::Record rec;
  std::vector<std::string> kinds;
  std::string analytics;
  while (r.next(&rec)) {
    kinds.emplace_back(rec.name);
    if (rec.kind == cudaipc::metas::RecordKind::analytics)
      analytics.assign(reinterpret_cast<const char*>(rec.body.data), rec.body.size);
    if (rec.kind == cudaipc::metas::RecordKind::serialized) {
      // Bodies come padded to 8 bytes, as in the area they came from.
      ASSERT_EQ(rec.body.size, 8u);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(rec.body.data), 5), "hello");
    }
  }
  EXPECT_EQ(r.error(), nullptr);
  EXPECT_EQ(kinds, (std::vector<std::string>{"GstAnalyticsRelationMetaAPI", "x-note"}));
  EXPECT_NE(analytics.find("object"), std::string::npos);
  EXPECT_NE(analytics.find("7"), std::string::npos) << "label 7 named in decimal";
  const auto until = Clock::now() + 2s;
  while (cudaipc_server_replies_done(s) < ticket && Clock::now() < until)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(cudaipc_server_replies_done(s), ticket);
}

// The objects of a reply's analytics record, as "x y w h confidence label" each.
std::vector<std::string> objects_of(const std::string& reply) {
  std::vector<std::string> out;
  cudaipc::metas::AreaReader r(reply.data(), reply.size());
  cudaipc::metas::Record rec;
  while (r.next(&rec)) {
    if (rec.kind != cudaipc::metas::RecordKind::analytics) continue;
    cudaipc::metas::AnalyticsView v;
    std::string error;
    if (!v.parse(rec.body, &error)) return {"malformed: " + error};
    for (std::uint32_t i = 0; i < v.mtd_count(); ++i) {
      cudaipc::metas::Mtd m;
      if (!v.mtd(i, &m, &error)) return {"malformed: " + error};
      char text[128];
      std::snprintf(text, sizeof text, "%d %d %d %d %.3f %.*s", m.od.x, m.od.y, m.od.w, m.od.h,
                    m.od.confidence, static_cast<int>(m.od.label.size()), m.od.label.data());
      out.emplace_back(text);
    }
  }
  return out;
}

// cudaipc_server_reply_results with host arrays (the GPU path without its copies): one call
// answers and releases a batch of two; float16 boxes strided between detections, float64 scores,
// int32 labels strided, a label past the names named in decimal; a reply of host records only;
// a dtype refused names the cause and leaves the request the caller's.
TEST(CApiServer, ReplyResultsTakesDtypesAndStridesForABatchInOneCall) {
  cudaipc::testing::TempDir dir;
  const std::string a = dir.file("a");
  Pipeline pa(a, 1);
  const auto server = cudaipc::testing::c_server({a});
  ASSERT_TRUE(server);
  cudaipc_server* s = server.get();
  ASSERT_TRUE(pa.connect_replies());
  pa.send(1);
  pa.send(2);
  pa.send(3);
  cudaipc_request_view v[3];
  uint32_t count = 0;
  const auto until = Clock::now() + 5s;
  while (count < 3 && Clock::now() < until) {
    uint32_t got = 0;
    ASSERT_EQ(cudaipc_server_batch(s, 3 - count, 0, kSecond, v + count, &got, nullptr), CUDAIPC_OK);
    count += got;
  }
  ASSERT_EQ(count, 3u);
  // float16 1 2 30 40 and 5 6 70 80, each box 8 elements from the last (junk between).
  std::uint16_t boxes[16];
  std::fill(std::begin(boxes), std::end(boxes), std::uint16_t{0x7bff});
  const std::uint16_t values[8] = {0x3c00, 0x4000, 0x4f80, 0x5100, 0x4500, 0x4600, 0x5460, 0x5500};
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) boxes[i * 8 + k] = values[i * 4 + k];
  const double scores[2] = {0.5, 0.25};
  const std::int32_t labels[4] = {1, -1, 9, -1};  // stride 2
  const char names[] = "aball";
  const std::uint32_t offsets[3] = {0, 1, 5};
  std::vector<std::uint8_t> area(256);
  cudaipc::metas::AreaWriter w(area.data(), area.size());
  ASSERT_TRUE(w.add_record(cudaipc::metas::RecordKind::serialized, "x-note", "hello", 5));
  cudaipc_reply_results r[2] = {};
  r[0].request = v[0].frame.frame;
  r[0].n = 2;
  r[0].boxes = boxes;
  r[0].boxes_strides[0] = 8;
  r[0].boxes_strides[1] = 1;
  r[0].boxes_dtype = 9;
  r[0].scores = scores;
  r[0].scores_stride = 1;
  r[0].scores_dtype = 11;
  r[0].labels = labels;
  r[0].labels_stride = 2;
  r[0].labels_dtype = 3;
  r[0].names = reinterpret_cast<const std::uint8_t*>(names);
  r[0].name_offsets = offsets;
  r[0].name_count = 2;
  r[0].flags = CUDAIPC_RESULTS_DETECTIONS | CUDAIPC_RESULTS_HOST;
  r[1].request = v[1].frame.frame;
  r[1].metas = area.data();
  r[1].metas_size = static_cast<uint32_t>(w.size());
  uint32_t sent = 0;
  std::uint64_t ticket = 0;
  ASSERT_EQ(cudaipc_server_reply_results(s, nullptr, r, 2, 1, &sent, &ticket), CUDAIPC_OK)
      << cudaipc_last_error();
  EXPECT_EQ(sent, 2u);
  EXPECT_EQ(ticket, 2u);
  EXPECT_EQ(objects_of(pa.reply()),
            (std::vector<std::string>{"1 2 29 38 0.500 ball", "5 6 65 74 0.250 9"}));
  const std::string second = pa.reply();
  EXPECT_TRUE(objects_of(second).empty());
  EXPECT_NE(second.find("hello"), std::string::npos);

  cudaipc_reply_results bad = r[0];
  bad.request = v[2].frame.frame;
  bad.scores_dtype = 4;  // int64 scores
  EXPECT_EQ(cudaipc_server_reply_results(s, nullptr, &bad, 1, 1, &sent, &ticket),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sent, 0u);
  EXPECT_NE(std::string(cudaipc_last_error()).find("scores of dtype 4"), std::string::npos)
      << cudaipc_last_error();
  // Still the caller's, and still answerable.
  bad.scores_dtype = 10;
  bad.scores = nullptr;
  bad.n = 0;
  ASSERT_EQ(cudaipc_server_reply_results(s, nullptr, &bad, 1, 0, &sent, &ticket), CUDAIPC_OK)
      << cudaipc_last_error();
  EXPECT_TRUE(objects_of(pa.reply()).empty());
  cudaipc_frame_release(v[2].frame.frame);
}

TEST(CApiServer, ErrorsNameTheCause) {
  cudaipc::testing::TempDir dir;
  cudaipc_server_options o;
  cudaipc_server_options_init(&o);
  cudaipc_server* s = nullptr;
  EXPECT_EQ(cudaipc_server_new(&o, &s), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("socket path or a directory"),
            std::string::npos);
  const std::string a = dir.file("a");
  const char* paths[] = {a.c_str()};
  o.paths = paths;
  o.path_count = 1;
  ASSERT_EQ(cudaipc_server_new(&o, &s), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_server* second = nullptr;
  EXPECT_EQ(cudaipc_server_new(&o, &second), CUDAIPC_ERR_BUSY);
  uint32_t id = 0;
  EXPECT_EQ(cudaipc_server_add(s, dir.file("b").c_str(), &id), CUDAIPC_OK);
  EXPECT_EQ(id, 2u);
  EXPECT_EQ(cudaipc_server_add(s, a.c_str(), &id), CUDAIPC_ERR_INVALID_ARGUMENT);
  // Nothing comes: an empty batch; interrupted: its own code.
  cudaipc_request_view views[2];
  uint32_t count = 7;
  EXPECT_EQ(cudaipc_server_batch(s, 2, 0, 10'000'000, views, &count, nullptr), CUDAIPC_OK);
  EXPECT_EQ(count, 0u);
  cudaipc_server_interrupt(s);
  EXPECT_EQ(cudaipc_server_batch(s, 2, 0, kSecond, views, &count, nullptr),
            CUDAIPC_ERR_INTERRUPTED);
  EXPECT_EQ(cudaipc_server_batch(s, 0, 0, 0, views, &count, nullptr), CUDAIPC_ERR_INVALID_ARGUMENT);

  // A consumer's frame is not a request.
  cudaipc_producer_options po;
  cudaipc_producer_options_init(&po);
  const std::string c = dir.file("c");
  po.path = c.c_str();
  cudaipc_producer* p = nullptr;
  ASSERT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_OK);
  cudaipc_tensor t{};
  t.dtype = 5;
  t.rank = 1;
  t.shape[0] = 4;
  t.strides[0] = 1;
  t.size = 4;
  ASSERT_EQ(cudaipc_producer_set_format(p, "test/x", &t, 4), CUDAIPC_OK);
  cudaipc_consumer_options co;
  cudaipc_consumer_options_init(&co);
  co.path = c.c_str();
  cudaipc_consumer* cons = nullptr;
  ASSERT_EQ(cudaipc_consumer_new(&co, &cons), CUDAIPC_OK) << cudaipc_last_error();
  const std::uint8_t bytes[4] = {1, 2, 3, 4};
  ASSERT_EQ(cudaipc_producer_publish(p, bytes, 4, nullptr, 0, nullptr), CUDAIPC_OK);
  cudaipc_event ev{};
  do ASSERT_EQ(cudaipc_consumer_next(cons, kSecond, &ev), CUDAIPC_OK);
  while (ev.type == CUDAIPC_EVENT_FORMAT);
  ASSERT_EQ(ev.type, CUDAIPC_EVENT_FRAME);
  EXPECT_EQ(cudaipc_server_reply(s, ev.frame, nullptr, 0), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("not a server's request"), std::string::npos);
  EXPECT_EQ(cudaipc_request_format(ev.frame, nullptr, nullptr, nullptr),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  cudaipc_frame_release(ev.frame);
  cudaipc_consumer_free(cons);
  cudaipc_producer_free(p);
  cudaipc_server_free(s);
  cudaipc_server_free(nullptr);
}
