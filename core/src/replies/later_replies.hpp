// Replies whose results the GPU is still computing (Server::reply_after): each waits, in order,
// on a thread of the server's own for its point on the model's stream, then is encoded (the
// results read from the host memory the model's copies filled) and published like any reply. The
// model's thread only marks the point and queues the job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cudaipc/frame.hpp"
#include "stream_point.hpp"

namespace cudaipc::detail {

class Pipeline;

class LaterReplies {
 public:
  using Encoder = std::function<std::uint32_t(std::uint8_t* area, std::uint32_t capacity)>;
  // `published`: what to call when a reply went to the pipeline's backlog (the server's wake).
  LaterReplies(std::uint32_t area_size, std::function<void()> deferred);
  ~LaterReplies();
  LaterReplies(const LaterReplies&) = delete;
  LaterReplies& operator=(const LaterReplies&) = delete;

  // Queues the reply; its ticket (1, 2, ...). Waits only when kMaxQueued replies are queued.
  std::uint64_t add(std::shared_ptr<Pipeline> pipeline, const FrameDesc& request, StreamPoint point,
                    Encoder encode);
  // Tickets up to this one are done (published, deferred or given up).
  std::uint64_t done() const noexcept { return done_.load(std::memory_order_acquire); }

 private:
  struct Job {
    std::shared_ptr<Pipeline> pipeline;
    FrameDesc request{};
    StreamPoint point;
    Encoder encode;
    std::uint64_t ticket = 0;
  };
  void run();

  static constexpr std::size_t kMaxQueued = 256;
  std::vector<std::uint8_t> area_;
  std::function<void()> deferred_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::uint64_t next_ticket_ = 1;
  std::atomic<std::uint64_t> done_{0};
  std::thread thread_;
};

}  // namespace cudaipc::detail
