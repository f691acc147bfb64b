#include "replies/later_replies.hpp"

#include <string>
#include <utility>

#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "replies/pipeline.hpp"
#include "thread_name.hpp"

namespace cudaipc::detail {

namespace {

// Room for 256 detections of every array at float32 and int64 per place (2 MiB in all).
constexpr std::size_t kPlaceBytes = 256 * (16 + 4 + 8 + 4);

}  // namespace

LaterReplies::LaterReplies(std::uint32_t area_size, std::function<void()> deferred)
    : area_(area_size),
      deferred_(std::move(deferred)),
      ring_(kMaxQueued),
      staging_(kMaxQueued, kPlaceBytes),
      thread_([this] { run(); }) {}

LaterReplies::~LaterReplies() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

LaterReplies::Job& LaterReplies::claim() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stop_ || count_ < kMaxQueued; });
  if (stop_) throw Error(Errc::interrupted, "the server is closing");
  // The thread never touches the tail place while it is not counted.
  return ring_[(head_ + count_) % kMaxQueued];
}

std::uint64_t LaterReplies::commit(Job& j) {
  std::uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = j.ticket = next_ticket_++;
    ++count_;
  }
  cv_.notify_all();
  return ticket;
}

std::uint64_t LaterReplies::add(std::shared_ptr<Pipeline> pipeline, const FrameDesc& request,
                                void* stream, Encoder encode) {
  std::lock_guard<std::mutex> adding(adding_);
  Job& j = claim();
  j.point.mark(stream);
  j.pipeline = std::move(pipeline);
  j.request = request;
  j.encode = std::move(encode);
  j.results = nullptr;
  return commit(j);
}

std::uint64_t LaterReplies::add(std::shared_ptr<Pipeline> pipeline, const FrameDesc& request,
                                void* stream, const ResultDetections* results, const void* metas,
                                std::uint32_t metas_size, ResultEncoder encode) {
  if (metas_size && !metas)
    throw Error(Errc::invalid_argument, "a reply's host records of a size but no bytes");
  if (results) check_results(*results);
  std::lock_guard<std::mutex> adding(adding_);
  Job& j = claim();
  const auto place = static_cast<std::size_t>(&j - ring_.data());
  j.has_detections = results != nullptr;
  if (results) {
    const ResultDetections& d = *results;
    if (d.on_device && d.n)
      staging_.copy(place, d, stream, j.detections);
    else
      j.detections = d;
    if (d.on_device && !d.n)  // nothing to copy, nor to read
      j.detections.boxes = j.detections.scores = j.detections.labels = j.detections.rotation =
          ResultArray{};
    // The names are copied: the caller's table is its own again once this returns.
    j.name_offsets.assign(d.name_offsets, d.name_offsets + (d.name_count ? d.name_count + 1 : 0));
    const auto* names = static_cast<const std::uint8_t*>(d.names);
    j.names.assign(names, names + (d.name_count ? d.name_offsets[d.name_count] : 0));
    j.detections.names = j.names.data();
    j.detections.name_offsets = j.name_offsets.data();
  }
  const auto* m = static_cast<const std::uint8_t*>(metas);
  j.metas.assign(m, m + metas_size);
  j.point.mark(stream);
  j.pipeline = std::move(pipeline);
  j.request = request;
  j.encode = nullptr;
  j.results = encode;
  return commit(j);
}

void LaterReplies::prepare(int device) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The server asks once; a second ask finds the memory made (ResultStaging::prepare).
    if (device < 0) return;
    prepare_device_ = device;
  }
  cv_.notify_all();
}

std::uint32_t LaterReplies::encode(Job& j) {
  if (!j.results) return j.encode(area_.data(), static_cast<std::uint32_t>(area_.size()));
  ReadyResults r;
  if (j.has_detections) r = ready_results(j.detections, scratch_);
  r.metas = j.metas.data();
  r.metas_size = static_cast<std::uint32_t>(j.metas.size());
  return j.results(r, area_.data(), static_cast<std::uint32_t>(area_.size()));
}

void LaterReplies::run() {
  name_this_thread("cudaipc-later");
  std::string last_error;
  for (;;) {
    Job* jp;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || count_ > 0 || prepare_device_ >= 0; });
      // Replies already queued go first: making the memory may take tens of milliseconds.
      if (prepare_device_ >= 0 && !stop_ && count_ == 0) {
        const int device = prepare_device_;
        prepare_device_ = -1;
        lock.unlock();
        staging_.prepare(device);
        continue;
      }
      // Closing still finishes what was queued: the model's results are on their way.
      if (!count_) return;
      jp = &ring_[head_];
    }
    Job& j = *jp;
    std::uint32_t size = 0;
    try {
      j.point.wait();
      size = encode(j);
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
    j.point.clear();
    j.pipeline.reset();
    j.encode = nullptr;
    const std::uint64_t ticket = j.ticket;
    {
      std::lock_guard<std::mutex> lock(mu_);
      head_ = (head_ + 1) % kMaxQueued;
      --count_;
    }
    cv_.notify_all();
    done_.store(ticket, std::memory_order_release);
  }
}

}  // namespace cudaipc::detail
