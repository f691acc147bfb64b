// Replies whose results the GPU is still computing (Server::reply_after, send_reply_results): each
// waits, in order, on a thread of the server's own for its point on the model's stream, then is
// encoded (the results read from the host memory the copies filled) and published like any reply.
// The model's thread only queues the copies, marks the point and goes on. The queue is a fixed
// ring whose places keep what a reply needs (its event, page-locked memory for its detections,
// room for its names and host records), so a reply allocates nothing once they are large enough.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cudaipc/frame.hpp"
#include "cudaipc/server.hpp"
#include "replies/ready_results.hpp"
#include "replies/result_staging.hpp"
#include "stream_point.hpp"

namespace cudaipc::detail {

class Pipeline;

class LaterReplies {
 public:
  using Encoder = std::function<std::uint32_t(std::uint8_t* area, std::uint32_t capacity)>;
  // `deferred`: what to call when a reply went to the pipeline's backlog (the server's wake).
  LaterReplies(std::uint32_t area_size, std::function<void()> deferred);
  ~LaterReplies();
  LaterReplies(const LaterReplies&) = delete;
  LaterReplies& operator=(const LaterReplies&) = delete;

  // Queues the reply after the work queued on `stream` so far; its ticket (1, 2, ...). Waits only
  // when kMaxQueued replies are queued.
  std::uint64_t add(std::shared_ptr<Pipeline> pipeline, const FrameDesc& request, void* stream,
                    Encoder encode);
  // The same for a detector's results (null: none) and host records, copied now (device arrays:
  // on `stream`, into the place's page-locked memory).
  std::uint64_t add(std::shared_ptr<Pipeline> pipeline, const FrameDesc& request, void* stream,
                    const ResultDetections* results, const void* metas, std::uint32_t metas_size,
                    ResultEncoder encode);
  // Makes the page-locked memory of the places now, on the ring's thread, in `device`'s primary
  // context (once; a failure leaves it to the first reply from the GPU).
  void prepare(int device) noexcept;
  // Tickets up to this one are done (published, deferred or given up).
  std::uint64_t done() const noexcept { return done_.load(std::memory_order_acquire); }

  static constexpr std::size_t kMaxQueued = 256;

 private:
  struct Job {
    std::shared_ptr<Pipeline> pipeline;
    FrameDesc request{};
    StreamPoint point;
    Encoder encode;                   // reply_after's
    ResultEncoder results = nullptr;  // send_reply_results'
    bool has_detections = false;
    ResultDetections detections;  // in host memory: the place's copies, or the caller's arrays
    std::vector<std::uint8_t> names, metas;
    std::vector<std::uint32_t> name_offsets;
    std::uint64_t ticket = 0;
  };
  // The free place at the ring's tail (waits for one); under adding_.
  Job& claim();
  // Hands the claimed place to the thread; its ticket.
  std::uint64_t commit(Job& j);
  std::uint32_t encode(Job& j);
  void run();

  std::vector<std::uint8_t> area_;
  std::function<void()> deferred_;
  std::mutex adding_;  // one caller fills the tail place at a time
  std::mutex mu_;      // the ring's head and count
  std::condition_variable cv_;
  std::vector<Job> ring_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  bool stop_ = false;
  int prepare_device_ = -1;  // asked of the thread, under mu_
  std::uint64_t next_ticket_ = 1;
  std::atomic<std::uint64_t> done_{0};
  ResultStaging staging_;
  ResultScratch scratch_;  // the thread's
  std::thread thread_;
};

}  // namespace cudaipc::detail
