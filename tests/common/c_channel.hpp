// A host channel through the C API only, for the C API's tests: a producer (drop policy when full)
// and an every-frame consumer that does not reconnect, on one path in a private directory.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudaipc/cudaipc.h"
#include "pattern.hpp"
#include "temp_dir.hpp"

namespace cudaipc::testing {

// A dense uint32 matrix of rows x cols.
inline cudaipc_tensor u32_tensor(std::int64_t rows, std::int64_t cols) {
  cudaipc_tensor t{};
  t.dtype = 7;  // uint32
  t.rank = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.strides[0] = cols * 4;
  t.strides[1] = 4;
  t.size = static_cast<std::uint64_t>(rows * cols * 4);
  return t;
}

// A C API server of `paths` (the options' defaults otherwise), freed with its owner; empty, with
// the failure reported, when it cannot be made.
using CServer = std::unique_ptr<cudaipc_server, decltype(&cudaipc_server_free)>;
inline CServer c_server(const std::vector<std::string>& paths) {
  std::vector<const char*> names;
  for (const auto& p : paths) names.push_back(p.c_str());
  cudaipc_server_options o;
  cudaipc_server_options_init(&o);
  o.paths = names.data();
  o.path_count = static_cast<uint32_t>(names.size());
  cudaipc_server* s = nullptr;
  EXPECT_EQ(cudaipc_server_new(&o, &s), CUDAIPC_OK) << cudaipc_last_error();
  return CServer(s, cudaipc_server_free);
}

// A producer (host memory, drop policy) and an every-frame consumer on one path.
struct Channel {
  TempDir dir;
  std::string path = dir.file("ch");
  cudaipc_producer* p = nullptr;
  cudaipc_consumer* c = nullptr;

  explicit Channel(uint32_t slots = 4) {
    cudaipc_producer_options po;
    cudaipc_producer_options_init(&po);
    po.path = path.c_str();
    po.slots = slots;
    po.on_full = CUDAIPC_DROP;
    EXPECT_EQ(cudaipc_producer_new(&po, &p), CUDAIPC_OK) << cudaipc_last_error();
    cudaipc_consumer_options co;
    cudaipc_consumer_options_init(&co);
    co.path = path.c_str();
    co.reconnect = 0;
    EXPECT_EQ(cudaipc_consumer_new(&co, &c), CUDAIPC_OK) << cudaipc_last_error();
  }
  ~Channel() {
    cudaipc_consumer_free(c);
    cudaipc_producer_free(p);
  }

  void format(const cudaipc_tensor& t) {
    ASSERT_EQ(cudaipc_producer_set_format(p, "test/dlpack", &t, 0), CUDAIPC_OK)
        << cudaipc_last_error();
  }
  void publish(std::uint64_t key, std::uint64_t bytes) {
    std::vector<std::uint8_t> buf(bytes);
    fill_pattern(buf.data(), buf.size(), key);
    cudaipc_publish r = CUDAIPC_DROPPED;
    ASSERT_EQ(cudaipc_producer_publish(p, buf.data(), bytes, nullptr, 0, &r), CUDAIPC_OK);
    ASSERT_EQ(r, CUDAIPC_PUBLISHED);
  }
  // The next frame, past format events; fills `view` when given.
  cudaipc_frame* next(cudaipc_frame_view* view = nullptr) {
    cudaipc_event ev;
    cudaipc_frame_view v;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(cudaipc_consumer_next_frame(c, 5'000'000'000ull, &ev, &v), CUDAIPC_OK)
          << cudaipc_last_error();
      EXPECT_EQ(v.type, ev.type);
      if (ev.type == CUDAIPC_EVENT_FRAME) {
        if (view) *view = v;
        return ev.frame;
      }
      if (ev.type != CUDAIPC_EVENT_FORMAT) break;
    }
    ADD_FAILURE() << "no frame";
    return nullptr;
  }
  uint32_t held() {
    uint32_t n = 99;
    EXPECT_EQ(cudaipc_consumer_held(c, &n, nullptr, 0), CUDAIPC_OK);
    return n;
  }
};

}  // namespace cudaipc::testing
