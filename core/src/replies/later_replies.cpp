#include "replies/later_replies.hpp"

#include <string>
#include <utility>

#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "replies/pipeline.hpp"

namespace cudaipc::detail {

LaterReplies::LaterReplies(std::uint32_t area_size, std::function<void()> deferred)
    : area_(area_size), deferred_(std::move(deferred)), thread_([this] { run(); }) {}

LaterReplies::~LaterReplies() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::uint64_t LaterReplies::add(std::shared_ptr<Pipeline> pipeline, const FrameDesc& request,
                                StreamPoint point, Encoder encode) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stop_ || jobs_.size() < kMaxQueued; });
  if (stop_) throw Error(Errc::interrupted, "the server is closing");
  Job j;
  j.pipeline = std::move(pipeline);
  j.request = request;
  j.point = std::move(point);
  j.encode = std::move(encode);
  j.ticket = next_ticket_++;
  const std::uint64_t ticket = j.ticket;
  jobs_.push_back(std::move(j));
  lock.unlock();
  cv_.notify_all();
  return ticket;
}

void LaterReplies::run() {
  std::string last_error;
  for (;;) {
    Job j;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      // Closing still finishes what was queued: the model's results are on their way.
      if (jobs_.empty()) return;
      j = std::move(jobs_.front());
      jobs_.pop_front();
    }
    cv_.notify_all();
    std::uint32_t size = 0;
    try {
      j.point.wait();
      size = j.encode(area_.data(), static_cast<std::uint32_t>(area_.size()));
      if (size > area_.size())
        throw Error(Errc::invalid_argument, "an encoder said it wrote " + std::to_string(size) +
                                                " bytes into an area of " +
                                                std::to_string(area_.size()));
    } catch (const std::exception& e) {
      // The frame is answered without results (it passes on at once rather than at its timeout);
      // each distinct cause said once.
      size = 0;
      if (last_error != e.what()) {
        last_error = e.what();
        log(LogLevel::warning,
            ("a reply computed on the GPU was sent without results: " + last_error).c_str());
      }
    }
    try {
      if (j.pipeline->reply(j.request, size ? area_.data() : nullptr, size) ==
          Pipeline::Sent::later)
        deferred_();
    } catch (const std::exception& e) {
      log(LogLevel::warning, e.what());
    } catch (...) {
      log(LogLevel::warning, "a reply computed on the GPU could not be published");
    }
    j.point.reset();
    done_.store(j.ticket, std::memory_order_release);
  }
}

}  // namespace cudaipc::detail
