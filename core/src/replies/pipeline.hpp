// One pipeline a Server serves: its request channel, read ahead on a thread of its own into a
// bounded queue, and its reply channel. A reply the filter has no room for yet waits in the
// pipeline's own backlog (published in order by the server's reply thread), so a stuck or dead
// filter never makes the model wait. Once stopped, its channels are closed whoever still holds
// the object (a request the model keeps, a DLPack view of one): a pipeline that restarts on the
// same path gets a reply channel of its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "cudaipc/server.hpp"

namespace cudaipc::detail {

// What every pipeline of a server shares: the lock over every pipeline's queue, the waits on it,
// and the requests queued in all of them.
struct Hub {
  std::mutex mu;
  std::condition_variable ready;  // an entry was queued (the model's thread waits)
  std::condition_variable space;  // an entry was taken (readers wait)
  std::uint32_t requests = 0;     // requests queued over every pipeline
  bool interrupted = false;
  // Called by a reader whose producer went away (set before any pipeline starts): a directory's
  // pipeline may leave now.
  std::function<void()> producer_gone;
  // Called by a reader whose requests' frames are in CUDA memory, with their device, as their
  // format comes (set before any pipeline starts; may be empty).
  std::function<void(int device)> cuda_frames;
};

// A pipeline's stream format as its requests carry it, with where its frames live here.
struct StreamFormat {
  Format format;
  std::uint64_t generation = 0;
  int cuda_device = -1;
};

// A queued event of one pipeline: a request, or a stream event in its place among them.
struct Entry {
  ServerEventType type = ServerEventType::request;
  Request request;                             // request
  std::shared_ptr<const StreamFormat> format;  // format
  std::string message;                         // disconnected
};

class Pipeline {
 public:
  Pipeline(std::uint32_t id, std::string path, const ServerOptions& options,
           std::shared_ptr<Hub> hub);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Starts reading (once the pipeline is owned by a shared_ptr: requests hold it).
  void start(const std::shared_ptr<Pipeline>& self);
  // Stops the reader (what it queued stays) and starts it again: the server looks at a
  // directory's channel between the two, the reader unable to connect meanwhile.
  void pause() noexcept;
  void resume();
  // Stops reading, drops what is queued, sends what the backlog can and closes both channels:
  // the filter's reply channel is gone, and requests handed out and answered later are lost
  // (counted).
  void stop() noexcept;

  std::uint32_t id() const noexcept { return id_; }
  const std::string& path() const noexcept { return path_; }
  bool connected() const noexcept { return connected_.load(std::memory_order_acquire); }

  // Under hub.mu: the queue.
  bool empty() const noexcept { return count_ == 0; }
  std::uint32_t size() const noexcept { return count_; }
  bool has_request() const noexcept { return queued_requests_ > 0; }
  // The head entry, taken off the queue.
  Entry take_front() noexcept;
  // Takes everything queued off (a pipeline leaving: its requests never reach a batch) into
  // `dropped`, for the caller to let go once hub.mu is released: a request's release may call the
  // driver (a stream query or write), which can wait on the GPU-wide lock while other processes
  // make or drop contexts, and the model's batch() and every reader's push wait on hub.mu.
  void take_all(std::vector<Entry>& dropped) noexcept {
    try {
      dropped.reserve(dropped.size() + count_);
    } catch (const std::bad_alloc&) {
      while (count_) take_front();  // no room to move them out: let go here
      return;
    }
    while (count_) dropped.push_back(take_front());
  }
  // The head entry's type; only when not empty().
  ServerEventType front_type() const noexcept { return ring_[first_].type; }
  // The oldest queued request's taken time; only when has_request().
  std::uint64_t oldest_request_ns() const noexcept;

  enum class Sent { now, later, lost };
  // The reply to `request` (already taken off the queue): published now when the filter has
  // room and nothing of this pipeline waits before it, else kept in order in the backlog for the
  // reply thread; lost (and counted) when the backlog is full too.
  Sent reply(const FrameDesc& request, const void* metas, std::uint32_t metas_size);
  // The server's reply thread: publishes what the backlog holds in order, giving up on replies
  // older than the reply timeout. True while anything is left.
  bool flush_backlog();

  void with_reply_channel(const std::function<void(Producer&)>& publish);

  ServerPipelineInfo info() const;

 private:
  void read_loop();
  // Until the channel at the path is another file (or gone), or the pipeline stops.
  void wait_for_another_channel();
  void producer_gone();
  void push(Entry&& e);
  bool publish_now(const FrameDesc& request, const void* metas, std::uint32_t metas_size);

  struct Deferred {
    FrameDesc request{};
    std::vector<std::uint8_t> metas;
    std::uint64_t deadline_ns = 0;
  };

  const std::uint32_t id_;
  const std::string path_;
  std::shared_ptr<Hub> hub_;
  std::weak_ptr<Pipeline> self_;
  std::unique_ptr<Producer> replies_;   // under reply_mu_; null once stopped
  std::unique_ptr<Consumer> requests_;  // the reader's; null once stopped
  const std::uint32_t reply_meta_size_;
  std::shared_ptr<const StreamFormat> format_;  // the reader's
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::thread reader_;

  // The queue, under hub_.mu: a ring of queue_depth entries.
  std::vector<Entry> ring_;
  std::uint32_t first_ = 0;
  std::uint32_t count_ = 0;
  std::uint32_t queued_requests_ = 0;

  // Replies, under reply_mu_.
  mutable std::mutex reply_mu_;
  std::deque<Deferred> backlog_;
  std::atomic<std::uint64_t> n_requests_{0};
  std::atomic<std::uint64_t> n_replies_{0};
  std::atomic<std::uint64_t> n_lost_{0};
};

}  // namespace cudaipc::detail
