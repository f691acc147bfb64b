#include "replies/pipeline.hpp"

#include <algorithm>
#include <utility>

#include "channel_role.hpp"
#include "clock.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "replies/server_paths.hpp"
#include "thread_name.hpp"

namespace cudaipc::detail {
namespace {

// How long a reply waits for its filter to make room before it is given up: the filter has
// passed that frame on by then (its default timeout), or is gone. Shorter would lose answers to a
// filter whose reading thread a loaded machine did not schedule for a while.
constexpr std::uint64_t kReplyPatienceNs = 1'000'000'000;

ProducerOptions reply_options(const std::string& path, const ServerOptions& o) {
  ProducerOptions p = reply_channel_options(path, o.reply_slots, o.reply_meta_size);
  p.socket_mode = o.socket_mode;
  p.allowed_gid = o.allowed_gid;
  // Never block the model's thread on one filter: a full reply channel defers to the backlog.
  p.on_full = FullPolicy::drop;
  return p;
}

ConsumerOptions request_options(const std::string& path, const ServerOptions& o) {
  ConsumerOptions c;
  c.path = path;
  c.mode = ConsumeMode::every_frame;
  c.reconnect = true;
  // A directory's channel is found as it is bound, a moment before its producer listens; a
  // filter under a live model waits for this connection before its first frame.
  c.reconnect_interval = std::chrono::milliseconds(20);
  c.cuda = o.cuda;
  // A cudaipcsink's channel is turned away before the server takes a place there: its frames
  // are no requests, and no filter would read the answers.
  c.role = ChannelRole::requests;
  return c;
}

}  // namespace

Pipeline::Pipeline(std::uint32_t id, std::string path, const ServerOptions& options,
                   std::shared_ptr<Hub> hub)
    : id_(id),
      path_(std::move(path)),
      hub_(std::move(hub)),
      replies_(std::make_unique<Producer>(reply_options(path_, options))),
      requests_(std::make_unique<Consumer>(request_options(path_, options))),
      reply_meta_size_(replies_->meta_size()),
      ring_(std::clamp<std::uint32_t>(options.queue_depth, 1, kMaxInflight)) {
  replies_->set_format(reply_format());
  // Whether a pipeline is there now (the reader is not started yet), so a server knows at once
  // which of its paths still wait for their pipeline.
  connected_.store(requests_->connected(), std::memory_order_release);
}

Pipeline::~Pipeline() {
  stop();
}

void Pipeline::start(const std::shared_ptr<Pipeline>& self) {
  self_ = self;
  reader_ = std::thread([this] { read_loop(); });
}

void Pipeline::pause() noexcept {
  stop_.store(true, std::memory_order_release);
  if (requests_) requests_->interrupt();
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    hub_->space.notify_all();
  }
  if (reader_.joinable() && reader_.get_id() != std::this_thread::get_id()) reader_.join();
}

void Pipeline::resume() {
  if (reader_.joinable() || !requests_) return;
  stop_.store(false, std::memory_order_release);
  reader_ = std::thread([this] { read_loop(); });
}

void Pipeline::stop() noexcept {
  pause();
  std::vector<Entry> dropped;  // let go below, outside hub.mu
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    take_all(dropped);
  }
  dropped.clear();
  // The server's backlog thread no longer visits a pipeline that left: what its filter has room
  // for goes now, the rest is given up (and counted).
  try {
    flush_backlog();
  } catch (const std::exception& e) {
    log(LogLevel::warning, e.what());
  }
  // Closed now, not when the last request of it goes: the model may keep a request (or a view
  // of one) for as long as it likes, and the filter that restarts on this path needs the reply
  // channel's name, and this process the old connection's memory (its GPU imports) back.
  std::unique_ptr<Producer> replies;
  {
    std::lock_guard<std::mutex> lock(reply_mu_);
    n_lost_.fetch_add(backlog_.size(), std::memory_order_relaxed);
    backlog_.clear();
    replies = std::move(replies_);
  }
  replies.reset();
  requests_.reset();
  connected_.store(false, std::memory_order_release);
}

void Pipeline::producer_gone() {
  // Said once per connection lost: a producer that keeps failing does not keep the server busy.
  if (connected_.exchange(false, std::memory_order_acq_rel) && hub_->producer_gone)
    hub_->producer_gone();
}

Entry Pipeline::take_front() noexcept {
  Entry e = std::move(ring_[first_]);
  ring_[first_] = Entry{};
  if (e.type == ServerEventType::request) {
    --queued_requests_;
    --hub_->requests;
  }
  first_ = (first_ + 1) % static_cast<std::uint32_t>(ring_.size());
  --count_;
  return e;
}

std::uint64_t Pipeline::oldest_request_ns() const noexcept {
  const auto n = static_cast<std::uint32_t>(ring_.size());
  for (std::uint32_t i = 0; i < count_; ++i) {
    const Entry& e = ring_[(first_ + i) % n];
    if (e.type == ServerEventType::request) return e.request.taken_ns();
  }
  return 0;
}

void Pipeline::push(Entry&& e) {
  std::unique_lock<std::mutex> lock(hub_->mu);
  hub_->space.wait(lock,
                   [&] { return stop_.load(std::memory_order_acquire) || count_ < ring_.size(); });
  if (stop_.load(std::memory_order_acquire)) return;  // the entry (and its lease) goes
  const bool request = e.type == ServerEventType::request;
  ring_[(first_ + count_) % ring_.size()] = std::move(e);
  ++count_;
  if (request) {
    ++queued_requests_;
    ++hub_->requests;
  }
  lock.unlock();
  hub_->ready.notify_all();
}

void Pipeline::read_loop() {
  name_this_thread("cudaipc-reader");
  std::string last_error;
  while (!stop_.load(std::memory_order_acquire)) {
    Event ev;
    try {
      ev = requests_->next(std::chrono::milliseconds(100));
    } catch (const WrongRole& err) {
      // A cudaipcsink took the path: said once, and not asked again (each try is a handshake
      // with its producer) until another channel takes its place.
      connected_.store(false, std::memory_order_release);
      if (last_error != err.what()) {
        last_error = err.what();
        log(LogLevel::warning, err.what());
        Entry e;
        e.type = ServerEventType::disconnected;
        e.message = err.what();
        push(std::move(e));
      }
      wait_for_another_channel();
      continue;
    } catch (const std::exception& err) {
      // A malformed producer (or no memory for what it sent): the consumer drops it; the
      // pipeline is served again once a sound one publishes. Said once per distinct cause, and
      // queued once: a producer that keeps failing does not fill the queue.
      producer_gone();
      if (last_error != err.what()) {
        last_error = err.what();
        log(LogLevel::warning, ("request channel " + path_ + ": " + last_error).c_str());
        Entry e;
        e.type = ServerEventType::disconnected;
        e.message = err.what();
        push(std::move(e));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    Entry e;
    switch (ev.type) {
      case EventType::frame:
        connected_.store(true, std::memory_order_release);
        e.type = ServerEventType::request;
        e.request.frame = std::move(ev.frame);
        e.request.pipeline_ = self_.lock();
        e.request.format_ = format_;
        e.request.pipeline_id_ = id_;
        e.request.taken_ns_ = monotonic_ns();
        n_requests_.fetch_add(1, std::memory_order_relaxed);
        break;
      case EventType::format:
        connected_.store(true, std::memory_order_release);
        last_error.clear();  // a cause that comes back after a sound connection is news again
        {
          auto f = std::make_shared<StreamFormat>();
          f->format = ev.format;
          f->generation = ev.generation;
          if (requests_->memory_kind() == MemoryKind::cuda) {
            f->cuda_device = requests_->cuda_device();
            if (hub_->cuda_frames) hub_->cuda_frames(f->cuda_device);
          }
          format_ = std::move(f);
        }
        e.type = ServerEventType::format;
        e.format = format_;
        break;
      case EventType::eos:
        e.type = ServerEventType::eos;
        break;
      case EventType::disconnected:
        producer_gone();
        if (ev.refused && ev.message == last_error) continue;
        last_error = ev.message;
        e.type = ServerEventType::disconnected;
        e.message = std::move(ev.message);
        break;
      case EventType::timeout:
      case EventType::interrupted:
        continue;
    }
    push(std::move(e));
  }
}

void Pipeline::wait_for_another_channel() {
  const FileId seen = file_id(path_);
  while (!stop_.load(std::memory_order_acquire) && file_id(path_) == seen)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

bool Pipeline::publish_now(const FrameDesc& request, const void* metas, std::uint32_t metas_size) {
  if (publish_reply(*replies_, request, metas, metas_size) != PublishStatus::published)
    return false;
  n_replies_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Pipeline::Sent Pipeline::reply(const FrameDesc& request, const void* metas,
                               std::uint32_t metas_size) {
  if (metas_size > reply_meta_size_)
    throw Error(Errc::invalid_argument, "results of " + std::to_string(metas_size) +
                                            " bytes do not fit the reply area of " +
                                            std::to_string(reply_meta_size_) +
                                            " bytes (reply_meta_size)");
  std::lock_guard<std::mutex> lock(reply_mu_);
  if (!replies_) {
    // The pipeline left: its filter is gone, and a filter that restarted here is another run.
    n_lost_.fetch_add(1, std::memory_order_relaxed);
    return Sent::lost;
  }
  if (backlog_.empty() && publish_now(request, metas, metas_size)) return Sent::now;
  if (backlog_.size() >= ring_.size()) {
    n_lost_.fetch_add(1, std::memory_order_relaxed);
    return Sent::lost;
  }
  Deferred d;
  d.request = request;
  if (metas_size)
    d.metas.assign(static_cast<const std::uint8_t*>(metas),
                   static_cast<const std::uint8_t*>(metas) + metas_size);
  d.deadline_ns = monotonic_ns() + kReplyPatienceNs;
  backlog_.push_back(std::move(d));
  return Sent::later;
}

bool Pipeline::flush_backlog() {
  std::lock_guard<std::mutex> lock(reply_mu_);
  if (!replies_) return false;  // stopped: the backlog was counted lost
  const std::uint64_t now = monotonic_ns();
  while (!backlog_.empty()) {
    Deferred& d = backlog_.front();
    if (!publish_now(d.request, d.metas.empty() ? nullptr : d.metas.data(),
                     static_cast<std::uint32_t>(d.metas.size()))) {
      if (now < d.deadline_ns) return true;
      n_lost_.fetch_add(1, std::memory_order_relaxed);
    }
    backlog_.pop_front();
  }
  return false;
}

void Pipeline::with_reply_channel(const std::function<void(Producer&)>& publish) {
  std::lock_guard<std::mutex> lock(reply_mu_);
  if (!replies_)
    throw Error(Errc::disconnected,
                "the pipeline on " + path_ + " left: its reply channel is closed");
  publish(*replies_);
}

ServerPipelineInfo Pipeline::info() const {
  ServerPipelineInfo i;
  i.id = id_;
  i.path = path_;
  i.connected = connected();
  i.queued = queued_requests_;
  i.requests = n_requests_.load(std::memory_order_relaxed);
  i.replies = n_replies_.load(std::memory_order_relaxed);
  i.replies_lost = n_lost_.load(std::memory_order_relaxed);
  return i;
}

}  // namespace cudaipc::detail
