// Server::reply_after (cudaipc/server.hpp): a model answers with results its GPU is still
// computing. A kernel spins 300 ms before writing the results, a copy brings them to page-locked
// host memory on the same stream, and reply_after returns at once; the reply that reaches the
// requester carries exactly the bytes the kernel wrote, published only after they landed. A
// second case sends the reply of a stream already idle, and one whose encoder fails (the frame is
// answered without results).
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"
#include "cudaipc/server.hpp"
#include "gpu_support.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

namespace cudaipc {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kResult = 4096;  // bytes of results
constexpr std::uint64_t kMs = 1'000'000;

class ReplyAfter : public ::testing::Test {
 protected:
  void SetUp() override {
    CUDAIPC_REQUIRE_GPU();
    kernels_ = std::make_unique<gputest::Kernels>();
    const std::string path = dir_.file("model");
    ProducerOptions po;
    po.path = path;
    po.slots = 4;
    po.role = ChannelRole::requests;
    requests_ = std::make_unique<Producer>(po);
    Format f;
    f.caps = "test/requests";
    f.tensor = make_tensor(DType::uint64, {1});
    requests_->set_format(f);
    ServerOptions so;
    so.path = path;
    server_ = std::make_unique<Server>(so);
    for (int i = 0; i < 300 && requests_->consumer_count() == 0; ++i)
      std::this_thread::sleep_for(10ms);
    ConsumerOptions co;
    co.path = reply_path(path);
    co.reconnect = false;
    replies_ = std::make_unique<Consumer>(co);
  }

  Request request(std::uint64_t key) {
    EXPECT_EQ(requests_->publish(&key, sizeof key), PublishStatus::published);
    std::vector<Request> batch;
    EXPECT_TRUE(server_->batch(batch, 1, 0ns, 5s));
    EXPECT_EQ(batch.size(), 1u);
    return batch.empty() ? Request{} : std::move(batch[0]);
  }

  // The next reply's meta area.
  std::vector<std::uint8_t> reply() {
    const auto until = Clock::now() + 5s;
    while (Clock::now() < until) {
      Event e = replies_->next(50ms);
      if (e.type == EventType::frame)
        return std::vector<std::uint8_t>(e.frame.metas(), e.frame.metas() + e.frame.metas_size());
    }
    ADD_FAILURE() << "no reply";
    return {};
  }

  testing::TempDir dir_;
  std::unique_ptr<gputest::Kernels> kernels_;
  std::unique_ptr<Producer> requests_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Consumer> replies_;
};

TEST_F(ReplyAfter, ReturnsAtOnceAndSendsWhatTheGpuWroteOnceItLanded) {
  cuda::DeviceAllocation results = cuda::make_device_allocation(kernels_->context(), kResult);
  cuda::HostAllocation host = cuda::make_host_allocation(kernels_->context(), kResult);
  std::memset(host.get(), 0, kResult);
  for (std::uint64_t key = 1; key <= 3; ++key) {
    Request r = request(key);
    ASSERT_TRUE(r);
    // The model: results written after a 300 ms spin, then copied to the host, all queued.
    kernels_->slow_fill(kernels_->own_stream(), results.get(), kResult, key * 100, 300 * kMs);
    {
      cuda::ScopedContext current(kernels_->context()->get());
      cuda::check(cuda::driver().cuMemcpyDtoHAsync(host.get(), results.get(), kResult,
                                                   kernels_->own_stream()),
                  "cuMemcpyDtoHAsync");
    }
    const auto t0 = Clock::now();
    const std::uint64_t ticket = server_->reply_after(
        r, kernels_->own_stream(), [&](std::uint8_t* area, std::uint32_t capacity) {
          EXPECT_GE(capacity, kResult);
          std::memcpy(area, host.get(), kResult);
          return static_cast<std::uint32_t>(kResult);
        });
    const auto returned = Clock::now() - t0;
    EXPECT_FALSE(r) << "the request is released";
    EXPECT_LT(returned, 100ms) << "reply_after waited for the GPU";
    EXPECT_LT(server_->replies_done(), ticket) << "done before the kernel ran";
    const std::vector<std::uint8_t> got = reply();
    ASSERT_EQ(got.size(), kResult);
    EXPECT_EQ(testing::check_pattern(got.data(), got.size(), key * 100), got.size())
        << "key " << key << ": the first wrong byte";
    const auto until = Clock::now() + 2s;
    while (server_->replies_done() < ticket && Clock::now() < until)
      std::this_thread::sleep_for(1ms);
    EXPECT_EQ(server_->replies_done(), ticket);
  }
}

TEST_F(ReplyAfter, AnIdleStreamAndAFailingEncoder) {
  Request r = request(7);
  kernels_->counters(kernels_->own_stream());  // waits: the stream is idle now
  const std::uint64_t t1 =
      server_->reply_after(r, kernels_->own_stream(), [](std::uint8_t* area, std::uint32_t) {
        std::memcpy(area, "idle", 4);
        return 4u;
      });
  std::vector<std::uint8_t> got = reply();
  EXPECT_EQ(std::string(got.begin(), got.end()), "idle");
  Request bad = request(8);
  server_->reply_after(bad, kernels_->own_stream(),
                       [](std::uint8_t*, std::uint32_t) -> std::uint32_t {
                         throw Error(Errc::invalid_argument, "the model's results did not fit");
                       });
  got = reply();
  EXPECT_TRUE(got.empty()) << "answered without results";
  EXPECT_GT(server_->replies_done(), t1);
}

// The reply's boxes and labels as the core read them: the encoder's host arrays, raw.
std::uint32_t raw_boxes_and_labels(const ReadyResults& r, std::uint8_t* area,
                                   std::uint32_t capacity) {
  const std::size_t need = r.n * (4 * sizeof(float) + sizeof(std::int64_t));
  if (need > capacity || !r.detections || !r.boxes || !r.labels)
    throw Error(Errc::invalid_argument, "unexpected results");
  std::memcpy(area, r.boxes, r.n * 4 * sizeof(float));
  std::memcpy(area + r.n * 4 * sizeof(float), r.labels, r.n * sizeof(std::int64_t));
  return static_cast<std::uint32_t>(need);
}

// send_reply_results with GPU arrays (Python's path): boxes strided ([n, 6] rows, 4 read), int32
// labels; the core copies them on the stream behind a 300 ms spin and returns at once; each reply
// carries exactly the values the stream left, converted (float32 boxes, int64 labels).
TEST_F(ReplyAfter, DeviceArraysAreCopiedByTheCoreBehindTheModelsWork) {
  constexpr std::uint32_t n = 5;
  cuda::DeviceAllocation rows = cuda::make_device_allocation(kernels_->context(), n * 6 * 4);
  cuda::DeviceAllocation labels = cuda::make_device_allocation(kernels_->context(), n * 4);
  cuda::DeviceAllocation spin = cuda::make_device_allocation(kernels_->context(), kResult);
  cuda::HostAllocation staged = cuda::make_host_allocation(kernels_->context(), n * 10 * 4);
  for (std::uint64_t key = 1; key <= 3; ++key) {
    Request r = request(key);
    ASSERT_TRUE(r);
    auto* host_rows = static_cast<float*>(staged.get());
    auto* host_labels = reinterpret_cast<std::int32_t*>(host_rows + n * 6);
    for (std::uint32_t i = 0; i < n * 6; ++i) host_rows[i] = static_cast<float>(key * 1000 + i);
    for (std::uint32_t i = 0; i < n; ++i) host_labels[i] = static_cast<std::int32_t>(key + i);
    kernels_->slow_fill(kernels_->own_stream(), spin.get(), kResult, key, 300 * kMs);
    {
      cuda::ScopedContext current(kernels_->context()->get());
      const cuda::Driver& d = cuda::driver();
      cuda::check(d.cuMemcpyHtoDAsync(rows.get(), host_rows, n * 6 * 4, kernels_->own_stream()),
                  "cuMemcpyHtoDAsync");
      cuda::check(d.cuMemcpyHtoDAsync(labels.get(), host_labels, n * 4, kernels_->own_stream()),
                  "cuMemcpyHtoDAsync");
    }
    ResultDetections det;
    det.n = n;
    det.boxes.data = reinterpret_cast<const void*>(rows.get());
    det.boxes.dtype = DType::float32;
    det.boxes.stride = 6;
    det.labels.data = reinterpret_cast<const void*>(labels.get());
    det.labels.dtype = DType::int32;
    const auto t0 = Clock::now();
    const std::uint64_t ticket = server_->send_reply_results(
        r, r.frame.desc(), kernels_->own_stream(), &det, nullptr, 0, raw_boxes_and_labels);
    EXPECT_LT(Clock::now() - t0, 100ms) << "the reply waited for the GPU";
    EXPECT_LT(server_->replies_done(), ticket) << "done before the copies ran";
    const std::vector<std::uint8_t> got = reply();
    ASSERT_EQ(got.size(), n * (16 + 8));
    std::vector<float> boxes(n * 4);
    std::vector<std::int64_t> ls(n);
    std::memcpy(boxes.data(), got.data(), n * 16);
    std::memcpy(ls.data(), got.data() + n * 16, n * 8);
    for (std::uint32_t i = 0; i < n; ++i) {
      for (std::uint32_t k = 0; k < 4; ++k)
        EXPECT_EQ(boxes[i * 4 + k], static_cast<float>(key * 1000 + i * 6 + k))
            << "key " << key << " box " << i;
      EXPECT_EQ(ls[i], static_cast<std::int64_t>(key + i));
    }
    cuda::check(cuda::driver().cuStreamSynchronize(kernels_->own_stream()), "sync");
  }
}

// Requests in CUDA memory: the server makes the later replies' page-locked ring as their format
// comes, on the ring's own thread, while the model reads the first frame (checked word by word on
// the GPU). The first reply's device results then land in that ring, each reply's exactly.
TEST_F(ReplyAfter, CudaRequestsResultsLandInTheRingMadeAsTheirFormatCame) {
  constexpr std::uint64_t kFrame = 64 * 1024;
  constexpr std::uint32_t n = 3;
  const std::string path = dir_.file("cuda-model");
  ProducerOptions po;
  po.path = path;
  po.slots = 4;
  po.memory = MemoryKind::cuda;
  po.role = ChannelRole::requests;
  Producer p(po);
  p.set_format(testing::pattern_format(kFrame));
  ServerOptions so;
  so.path = path;
  Server server(so);
  ASSERT_TRUE(testing::wait_consumers(p, 1, 60s));
  ConsumerOptions co;
  co.path = reply_path(path);
  co.reconnect = false;
  Consumer replies(co);
  cuda::DeviceAllocation rows = cuda::make_device_allocation(kernels_->context(), n * 4 * 4);
  cuda::DeviceAllocation labels = cuda::make_device_allocation(kernels_->context(), n * 4);
  cuda::HostAllocation staged = cuda::make_host_allocation(kernels_->context(), n * 5 * 4);
  kernels_->reset_counters();
  for (std::uint64_t key = 1; key <= 3; ++key) {
    ASSERT_EQ(gputest::publish_pattern(p, *kernels_, key, kFrame), PublishStatus::published);
    std::vector<Request> batch;
    ASSERT_TRUE(server.batch(batch, 1, 0ns, 10s));
    ASSERT_EQ(batch.size(), 1u);
    Request& r = batch[0];
    ASSERT_EQ(r.frame.desc().pts, key);
    const CUstream stream = static_cast<CUstream>(r.frame.cuda_stream());
    kernels_->slow_read(stream, reinterpret_cast<CUdeviceptr>(r.frame.data()), kFrame, key, 0);
    auto* host_rows = static_cast<float*>(staged.get());
    auto* host_labels = reinterpret_cast<std::int32_t*>(host_rows + n * 4);
    for (std::uint32_t i = 0; i < n * 4; ++i) host_rows[i] = static_cast<float>(key * 100 + i);
    for (std::uint32_t i = 0; i < n; ++i) host_labels[i] = static_cast<std::int32_t>(key * 10 + i);
    {
      cuda::ScopedContext current(kernels_->context()->get());
      const cuda::Driver& d = cuda::driver();
      cuda::check(d.cuMemcpyHtoDAsync(rows.get(), host_rows, n * 4 * 4, stream),
                  "cuMemcpyHtoDAsync");
      cuda::check(d.cuMemcpyHtoDAsync(labels.get(), host_labels, n * 4, stream),
                  "cuMemcpyHtoDAsync");
    }
    ResultDetections det;
    det.n = n;
    det.boxes.data = reinterpret_cast<const void*>(rows.get());
    det.boxes.dtype = DType::float32;
    det.boxes.stride = 4;
    det.labels.data = reinterpret_cast<const void*>(labels.get());
    det.labels.dtype = DType::int32;
    const std::uint64_t ticket = server.send_reply_results(r, r.frame.desc(), stream, &det, nullptr,
                                                           0, raw_boxes_and_labels);
    std::vector<std::uint8_t> got;
    for (const auto until = Clock::now() + 5s; got.empty() && Clock::now() < until;) {
      Event e = replies.next(50ms);
      if (e.type == EventType::frame)
        got.assign(e.frame.metas(), e.frame.metas() + e.frame.metas_size());
    }
    ASSERT_EQ(got.size(), n * (16 + 8)) << "key " << key;
    std::vector<float> boxes(n * 4);
    std::vector<std::int64_t> ls(n);
    std::memcpy(boxes.data(), got.data(), n * 16);
    std::memcpy(ls.data(), got.data() + n * 16, n * 8);
    for (std::uint32_t i = 0; i < n * 4; ++i)
      EXPECT_EQ(boxes[i], static_cast<float>(key * 100 + i)) << "key " << key << " value " << i;
    for (std::uint32_t i = 0; i < n; ++i)
      EXPECT_EQ(ls[i], static_cast<std::int64_t>(key * 10 + i)) << "key " << key;
    const auto until = Clock::now() + 2s;
    while (server.replies_done() < ticket && Clock::now() < until) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(server.replies_done(), ticket);
    cuda::check(cuda::driver().cuStreamSynchronize(stream), "sync");
  }
  const gputest::Counters k = kernels_->counters(kernels_->own_stream());
  EXPECT_EQ(k.bad, 0u) << "words of the requests' frames that did not hold their pattern";
}

}  // namespace
}  // namespace cudaipc
