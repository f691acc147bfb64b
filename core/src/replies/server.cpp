// cudaipc::Server: pipelines (replies/pipeline.hpp) read ahead on their own threads, a fair pick
// over their queues, the directory's listing that adds and removes them (run whenever its watch,
// replies/directory_watch.hpp, says), and the thread that publishes replies their filters had no
// room for at once.
#include "cudaipc/server.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <map>
#include <set>
#include <thread>

#include "channel_path.hpp"
#include "channel_role.hpp"
#include "clock.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "replies/directory_watch.hpp"
#include "replies/later_replies.hpp"
#include "replies/pipeline.hpp"
#include "replies/server_mark.hpp"
#include "replies/server_paths.hpp"
#include "stream_point.hpp"
#include "thread_name.hpp"

namespace cudaipc {

using detail::Entry;
using detail::Hub;
using detail::Pipeline;

Format reply_format() {
  Format f;
  f.caps = "application/x-cudaipc-reply";
  f.tensor = make_tensor(DType::uint8, {1});
  return f;
}

ProducerOptions reply_channel_options(const std::string& request_path, std::uint32_t slots,
                                      std::uint32_t meta_size) {
  ProducerOptions o;
  o.path = reply_path(request_path);
  o.role = ChannelRole::replies;
  o.slots = slots;
  o.memory = MemoryKind::host;
  o.meta_size = meta_size;
  // A filter that stopped reading is gone or stuck: the model goes on with its next request
  // rather than wait on it (the filter gives up on late replies anyway).
  o.on_full = FullPolicy::block;
  o.block_timeout = std::chrono::milliseconds(100);
  return o;
}

PublishStatus publish_reply(Producer& replies, const FrameDesc& request, const void* metas,
                            std::uint32_t metas_size) {
  std::uint8_t tag[kReplyTagSize];
  write_reply_tag(request, tag);
  static const std::uint8_t kByte = 0;
  FrameInfo info;
  info.pts = request.pts;
  info.user_meta = tag;
  info.user_meta_size = kReplyTagSize;
  info.metas = metas_size ? metas : nullptr;
  info.metas_size = metas_size;
  return replies.publish(&kByte, 1, info);
}

Request::~Request() = default;

void Request::reset() noexcept {
  frame.release();
  pipeline_.reset();
  format_.reset();
  pipeline_id_ = 0;
  taken_ns_ = 0;
}

const std::string& Request::path() const noexcept {
  static const std::string kNone;
  return pipeline_ ? pipeline_->path() : kNone;
}

const Format& Request::format() const noexcept {
  static const Format kNone;
  return format_ ? format_->format : kNone;
}

int Request::cuda_device() const noexcept {
  return format_ ? format_->cuda_device : -1;
}

void* Request::cuda_stream() const noexcept {
  return frame.cuda_stream();
}

std::uint64_t Request::format_generation() const noexcept {
  return format_ ? format_->generation : 0;
}

// now + d, or the end of time where that would overflow ("wait for ever" from the C API).
std::chrono::steady_clock::time_point deadline_after(std::chrono::nanoseconds d) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  if (d.count() <= 0) return now;
  if (d >= Clock::time_point::max() - now) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Clock::duration>(d);
}

// Answers `r` with `send`, then ends its lease after `stream` whatever happened (a request kept
// would hold its slot for good); the first failure is the one thrown.
template <typename Send>
auto answer_then_release(Request& r, void* stream, Send send) -> decltype(send()) {
  std::exception_ptr failure;
  decltype(send()) result{};
  try {
    result = send();
  } catch (...) {
    failure = std::current_exception();
  }
  if (stream) {
    try {
      r.frame.order_release_after(stream);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  r = Request{};
  if (failure) std::rethrow_exception(failure);
  return result;
}

// Stream events batch() met and kept for next() and event(), at most.
constexpr std::size_t kMaxKeptEvents = 256;

class ServerImpl {
 public:
  explicit ServerImpl(const ServerOptions& o);
  ~ServerImpl();
  void shutdown() noexcept;

  ServerEvent next(std::chrono::nanoseconds timeout);
  bool batch(std::vector<Request>& out, std::uint32_t max_batch, std::chrono::nanoseconds delay,
             std::chrono::nanoseconds timeout);
  bool reply(Request& r, const void* metas, std::uint32_t size, void* stream);
  bool send_reply(const Request& route, const FrameDesc& request, const void* metas,
                  std::uint32_t size);
  std::size_t events() const;
  bool event(ServerEvent& out);
  std::uint64_t send_reply_after(const Request& route, const FrameDesc& request, void* stream,
                                 Server::Encoder encode);
  std::uint64_t send_reply_results(const Request& route, const FrameDesc& request, void* stream,
                                   const ResultDetections* results, const void* metas,
                                   std::uint32_t metas_size, ResultEncoder encode);
  std::uint64_t replies_done() const noexcept;
  std::uint32_t add(const std::string& path, bool from_directory);
  void interrupt() noexcept;
  std::vector<ServerPipelineInfo> pipelines() const;
  static Pipeline& channel_of(const Request& r) noexcept { return *r.pipeline_; }

 private:
  void scan_loop();
  void scan_once();
  // Under paths_mu_: the directory's pipelines whose channel is gone and whose producer left, to
  // stop.
  std::vector<std::shared_ptr<Pipeline>> take_gone(const std::set<std::string>& present);
  void backlog_loop();
  // Under hub_->mu: the pipeline whose turn comes first, going round.
  std::size_t next_start() noexcept;
  // Under hub_->mu: the stream events at the head of `p`'s queue move to the server's own, so
  // its head is a request (or it is empty); format changes go (requests carry their format).
  bool lift_events(Pipeline& p);
  bool lift_all();  // every pipeline's; whether any entry was taken
  void keep_event(ServerEvent&& e);

  ServerOptions options_;  // the directory's path as checked
  std::shared_ptr<Hub> hub_ = std::make_shared<Hub>();
  // Under hub_->mu: served pipelines, in the order they joined; events of the server itself.
  std::vector<std::shared_ptr<Pipeline>> pipelines_;
  std::deque<ServerEvent> own_events_;
  std::size_t turn_ = 0;
  std::uint32_t next_id_ = 1;

  std::mutex paths_mu_;  // adding and removing pipelines, one at a time
  std::set<std::string> from_directory_;
  std::map<std::string, std::string> refused_;  // directory channels another server serves
  // Directory channels of another role (a cudaipcsink's): tried again only once replaced.
  std::map<std::string, detail::FileId> wrong_role_;

  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  bool bg_stop_ = false;
  bool backlog_due_ = false;
  std::unique_ptr<detail::DirectoryWatch> watch_;
  std::unique_ptr<detail::ServerMark> mark_;
  std::thread scanner_;
  std::thread backlog_;
  // Made on the first reply_after(), or as the first pipeline whose frames are in CUDA memory
  // comes (its page-locked memory then too, where that device's primary context is in use): a
  // thread only for servers of CUDA frames or models that answer from the GPU.
  mutable std::mutex later_mu_;
  std::unique_ptr<detail::LaterReplies> later_;
  bool later_closed_ = false;             // under later_mu_: shut down, not made again
  std::atomic<bool> later_asked_{false};  // a reader asked for the ring ahead
  detail::LaterReplies& later();          // under later_mu_
  // A reader's: the later replies' page-locked memory made now, on their own thread, so that the
  // model's first reply from the GPU does not make it (10-41 ms on the H200 under MPS, with the
  // first batch waiting behind it).
  void prepare_gpu_replies(int device) noexcept;
  void backlog_due() noexcept;
};

ServerImpl::ServerImpl(const ServerOptions& o) : options_(o) {
  std::vector<std::string> paths = o.paths;
  if (!o.path.empty()) paths.insert(paths.begin(), o.path);
  if (paths.empty() && o.directory.empty())
    throw Error(Errc::invalid_argument, "a server needs a filter's socket path or a directory");
  if (o.queue_depth < 1 || o.queue_depth > kMaxInflight)
    throw Error(Errc::invalid_argument, "queue_depth " + std::to_string(o.queue_depth) +
                                            " is not between 1 and " +
                                            std::to_string(kMaxInflight));
  if (!o.directory.empty()) options_.directory = detail::check_serve_directory(o.directory);
  try {
    if (!o.directory.empty()) {
      // Watched before it is first listed, so nothing that appears in between is missed.
      watch_ =
          std::make_unique<detail::DirectoryWatch>(o.directory, o.scan_interval, kServerMarkName);
      hub_->producer_gone = [w = watch_.get()] { w->wake(); };
    }
    hub_->cuda_frames = [this](int device) { prepare_gpu_replies(device); };
    for (const std::string& p : paths) add(p, false);
    backlog_ = std::thread([this] { backlog_loop(); });
    if (!o.directory.empty()) {
      mark_ = std::make_unique<detail::ServerMark>(o.directory, o.socket_mode);
      scan_once();  // the channels there now are served when the constructor returns
      scanner_ = std::thread([this] { scan_loop(); });
    }
  } catch (...) {
    shutdown();
    throw;
  }
}

ServerImpl::~ServerImpl() {
  shutdown();
}

void ServerImpl::shutdown() noexcept {
  {
    // Replies still on their way from the GPU go out first (they may need the backlog thread).
    std::lock_guard<std::mutex> lock(later_mu_);
    later_.reset();
    later_closed_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(bg_mu_);
    bg_stop_ = true;
  }
  bg_cv_.notify_all();
  if (watch_) watch_->stop();
  if (scanner_.joinable()) scanner_.join();
  if (backlog_.joinable()) backlog_.join();
  mark_.reset();  // filters that start in the directory from now on no longer wait for us
  std::vector<std::shared_ptr<Pipeline>> all;
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    all.swap(pipelines_);
    own_events_.clear();
  }
  for (auto& p : all) p->stop();
  // Every reader has ended: none calls back into this object, which the hub may outlive (held by
  // requests still handed out).
  hub_->cuda_frames = nullptr;
}

std::uint32_t ServerImpl::add(const std::string& path, bool from_directory) {
  if (path.empty()) throw Error(Errc::invalid_argument, "a filter's socket path is empty");
  detail::check_filter_path(path);
  std::lock_guard<std::mutex> paths_lock(paths_mu_);
  std::uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    for (const auto& p : pipelines_)
      if (p->path() == path)
        throw Error(Errc::invalid_argument, "the server already serves " + path);
    id = next_id_;  // spent only once the pipeline exists (paths_mu_ keeps adds one at a time)
  }
  auto p = std::make_shared<Pipeline>(id, path, options_, hub_);
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    // Listed before its reader starts: a request it queues at once (its filter was publishing
    // already) is counted in the hub only for a pipeline batch() can find, or batch() would see
    // a request, find none, and return empty before its timeout.
    pipelines_.push_back(p);
    try {
      p->start(p);
    } catch (...) {
      pipelines_.pop_back();
      throw;
    }
    next_id_ = id + 1;
    if (from_directory) {
      ServerEvent e;
      e.type = ServerEventType::joined;
      e.pipeline = id;
      e.path = path;
      keep_event(std::move(e));
    }
  }
  if (from_directory) from_directory_.insert(path);
  hub_->ready.notify_all();
  return id;
}

void ServerImpl::scan_loop() {
  detail::name_this_thread("cudaipc-scan");
  while (watch_->wait()) scan_once();
}

void ServerImpl::scan_once() {
  mark_->refresh();
  std::vector<std::string> found;
  try {
    found = list_channels(options_.directory);
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(paths_mu_);
    if (refused_[options_.directory] != e.what()) {
      refused_[options_.directory] = e.what();
      log(LogLevel::warning, e.what());
    }
    return;
  }
  const std::string suffix = reply_path("");
  std::set<std::string> present;
  for (const std::string& p : found) {
    if (p.size() >= suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0)
      continue;  // a reply channel: ours, or another server's
    present.insert(p);
    {
      std::lock_guard<std::mutex> lock(hub_->mu);
      if (std::any_of(pipelines_.begin(), pipelines_.end(),
                      [&](const auto& q) { return q->path() == p; }))
        continue;  // served already (found earlier, or a path given)
    }
    const detail::FileId id = detail::file_id(p);
    {
      std::lock_guard<std::mutex> lock(paths_mu_);
      const auto wrong = wrong_role_.find(p);
      if (wrong != wrong_role_.end() && wrong->second == id) continue;
    }
    try {
      add(p, true);
      std::lock_guard<std::mutex> lock(paths_mu_);
      refused_.erase(p);
      wrong_role_.erase(p);
    } catch (const WrongRole& e) {
      // A cudaipcsink's channel beside the filters': not ours, and no use asking again (each
      // try is a handshake with its producer) until another channel takes its place.
      std::lock_guard<std::mutex> lock(paths_mu_);
      wrong_role_[p] = id;
      log(LogLevel::info, ("not serving " + p + ": " + e.what()).c_str());
    } catch (const std::exception& e) {
      // Another server serves it (busy), or its reply channel or reader cannot be made: tried
      // again at the next scan, said once.
      std::lock_guard<std::mutex> lock(paths_mu_);
      if (refused_[p] != e.what()) {
        refused_[p] = e.what();
        log(LogLevel::info, ("not serving " + p + ": " + e.what()).c_str());
      }
    }
  }
  // Channels removed while no pipeline publishes on them leave. Adds wait meanwhile: a path added
  // again gets its reply channel's name once the pipeline that had it is stopped.
  std::lock_guard<std::mutex> paths_lock(paths_mu_);
  std::vector<std::shared_ptr<Pipeline>> gone = take_gone(present);
  if (gone.empty()) return;
  // Said once the pipeline is stopped and its reply channel gone, whoever holds its requests.
  std::vector<ServerEvent> left;
  for (auto& p : gone) {
    p->stop();
    ServerEvent e;
    e.type = ServerEventType::left;
    e.pipeline = p->id();
    e.path = p->path();
    left.push_back(std::move(e));
    p.reset();
  }
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    for (auto& e : left) keep_event(std::move(e));
  }
  hub_->ready.notify_all();
}

std::vector<std::shared_ptr<Pipeline>> ServerImpl::take_gone(const std::set<std::string>& present) {
  std::vector<std::shared_ptr<Pipeline>> maybe;
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    for (const auto& p : pipelines_)
      if (from_directory_.count(p->path()) && !present.count(p->path()) && !p->connected())
        maybe.push_back(p);
    for (auto it = refused_.begin(); it != refused_.end();)
      it = present.count(it->first) || it->first == options_.directory ? std::next(it)
                                                                       : refused_.erase(it);
    for (auto it = wrong_role_.begin(); it != wrong_role_.end();)
      it = present.count(it->first) ? std::next(it) : wrong_role_.erase(it);
  }
  // Each is looked at again with its reader stopped, which then cannot connect: a pipeline that
  // restarted on the path since the listing is served on by the same reader, what it read
  // meanwhile still queued.
  std::vector<std::shared_ptr<Pipeline>> gone;
  for (auto& p : maybe) {
    p->pause();
    struct stat st {};
    const bool absent = ::lstat(p->path().c_str(), &st) != 0 && errno == ENOENT;
    if (absent && !p->connected()) {
      gone.push_back(std::move(p));
      continue;
    }
    try {
      p->resume();
    } catch (const std::exception& e) {
      // No thread to read it: it leaves, and joins again as a new pipeline at the next listing.
      log(LogLevel::warning, ("reading " + p->path() + " again: " + e.what()).c_str());
      gone.push_back(std::move(p));
    }
  }
  std::vector<detail::Entry> dropped;  // let go once hub_->mu is released (Pipeline::take_all)
  std::lock_guard<std::mutex> lock(hub_->mu);
  for (const auto& p : gone) {
    from_directory_.erase(p->path());
    p->take_all(dropped);
    pipelines_.erase(std::find(pipelines_.begin(), pipelines_.end(), p));
  }
  return gone;
}

void ServerImpl::backlog_loop() {
  detail::name_this_thread("cudaipc-backlog");
  std::unique_lock<std::mutex> lock(bg_mu_);
  while (!bg_stop_) {
    if (!backlog_due_) {
      bg_cv_.wait(lock, [&] { return bg_stop_ || backlog_due_; });
      continue;
    }
    // A reply deferred while the flush runs sets it again.
    backlog_due_ = false;
    lock.unlock();
    std::vector<std::shared_ptr<Pipeline>> all;
    {
      std::lock_guard<std::mutex> hl(hub_->mu);
      all = pipelines_;
    }
    bool left = false;
    for (auto& p : all) {
      try {
        left |= p->flush_backlog();
      } catch (const std::exception& e) {
        // A reply channel that fails to publish gives that reply up; the others go on.
        log(LogLevel::warning, e.what());
      }
    }
    lock.lock();
    if (left) backlog_due_ = true;
    // The filters read their replies on a thread of their own: room comes within a millisecond
    // unless a filter is stuck, whose replies are given up after a second.
    if (left) bg_cv_.wait_for(lock, std::chrono::milliseconds(1), [&] { return bg_stop_; });
  }
}

std::size_t ServerImpl::next_start() noexcept {
  const std::size_t n = pipelines_.size();
  const std::size_t s = n ? turn_ % n : 0;
  turn_ = s + 1;
  return s;
}

void ServerImpl::keep_event(ServerEvent&& e) {
  // A caller that only batches never reads them: the oldest go first.
  if (own_events_.size() >= kMaxKeptEvents) own_events_.pop_front();
  own_events_.push_back(std::move(e));
}

bool ServerImpl::lift_all() {
  bool any = false;
  for (const auto& p : pipelines_) any |= lift_events(*p);
  return any;
}

bool ServerImpl::lift_events(Pipeline& p) {
  bool any = false;
  while (!p.empty() && p.front_type() != ServerEventType::request) {
    any = true;
    Entry head = p.take_front();
    if (head.type == ServerEventType::format) continue;
    ServerEvent e;
    e.type = head.type;
    e.pipeline = p.id();
    e.path = p.path();
    e.message = std::move(head.message);
    keep_event(std::move(e));
  }
  return any;
}

std::size_t ServerImpl::events() const {
  std::lock_guard<std::mutex> lock(hub_->mu);
  return own_events_.size();
}

bool ServerImpl::event(ServerEvent& out) {
  bool got = false;
  bool lifted = false;
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    lifted = lift_all();
    if (!own_events_.empty()) {
      out = std::move(own_events_.front());
      own_events_.pop_front();
      got = true;
    }
  }
  if (lifted) hub_->space.notify_all();
  return got;
}

ServerEvent ServerImpl::next(std::chrono::nanoseconds timeout) {
  const auto end = deadline_after(timeout);
  std::unique_lock<std::mutex> lock(hub_->mu);
  for (;;) {
    if (!own_events_.empty()) {
      ServerEvent e = std::move(own_events_.front());
      own_events_.pop_front();
      return e;
    }
    const std::size_t n = pipelines_.size();
    const std::size_t start = next_start();
    for (std::size_t i = 0; i < n; ++i) {
      Pipeline& p = *pipelines_[(start + i) % n];
      if (p.empty()) continue;
      Entry head = p.take_front();
      lock.unlock();
      hub_->space.notify_all();
      ServerEvent e;
      e.type = head.type;
      e.pipeline = p.id();
      e.path = p.path();
      e.request = std::move(head.request);
      if (head.format) e.format = head.format->format;
      e.message = std::move(head.message);
      return e;
    }
    if (hub_->interrupted) {
      hub_->interrupted = false;
      ServerEvent e;
      e.type = ServerEventType::interrupted;
      return e;
    }
    if (std::chrono::steady_clock::now() >= end) return ServerEvent{};
    hub_->ready.wait_until(lock, end);
  }
}

bool ServerImpl::batch(std::vector<Request>& out, std::uint32_t max_batch,
                       std::chrono::nanoseconds delay, std::chrono::nanoseconds timeout) {
  out.clear();
  if (max_batch < 1) throw Error(Errc::invalid_argument, "a batch of 0 requests");
  const auto end = deadline_after(timeout);
  std::unique_lock<std::mutex> lock(hub_->mu);
  for (;;) {
    // Stream events at the heads of the queues go first: a queue full of them would otherwise
    // hold its reader, and the requests behind, until the timeout.
    if (lift_all()) hub_->space.notify_all();
    if (hub_->interrupted) {
      hub_->interrupted = false;
      return false;
    }
    if (hub_->requests > 0) break;
    if (std::chrono::steady_clock::now() >= end) return true;
    hub_->ready.wait_until(lock, end);
  }
  if (hub_->requests < max_batch && delay.count() > 0) {
    // The batch fills until the oldest request waiting has waited `delay`.
    std::uint64_t oldest = UINT64_MAX;
    for (const auto& p : pipelines_)
      if (p->has_request()) oldest = std::min(oldest, p->oldest_request_ns());
    const std::uint64_t now_ns = monotonic_ns();
    const std::uint64_t waited = now_ns > oldest ? now_ns - oldest : 0;
    if (static_cast<std::uint64_t>(delay.count()) > waited) {
      const auto until = deadline_after(
          std::chrono::nanoseconds(static_cast<std::uint64_t>(delay.count()) - waited));
      hub_->ready.wait_until(lock, until, [&] {
        if (lift_all()) hub_->space.notify_all();
        return hub_->requests >= max_batch || hub_->interrupted;
      });
    }
  }
  // Turns: one request of each pipeline that has one, round and round, the first turn moving on
  // from batch to batch.
  const std::size_t n = pipelines_.size();
  const std::size_t start = next_start();
  for (bool took = true; took && out.size() < max_batch;) {
    took = false;
    for (std::size_t i = 0; i < n && out.size() < max_batch; ++i) {
      Pipeline& p = *pipelines_[(start + i) % n];
      lift_events(p);
      if (!p.has_request()) continue;
      out.push_back(std::move(p.take_front().request));
      took = true;
    }
  }
  lift_all();
  lock.unlock();
  hub_->space.notify_all();
  return true;
}

bool ServerImpl::send_reply(const Request& route, const FrameDesc& request, const void* metas,
                            std::uint32_t size) {
  if (!route.pipeline_) throw Error(Errc::invalid_argument, "not a request of this server");
  if (size && !metas) throw Error(Errc::invalid_argument, "results of a size but no bytes");
  const Pipeline::Sent sent = route.pipeline_->reply(request, metas, size);
  if (sent == Pipeline::Sent::later) backlog_due();
  return sent != Pipeline::Sent::lost;
}

void ServerImpl::backlog_due() noexcept {
  {
    std::lock_guard<std::mutex> lock(bg_mu_);
    backlog_due_ = true;
  }
  bg_cv_.notify_all();
}

std::uint64_t ServerImpl::send_reply_after(const Request& route, const FrameDesc& request,
                                           void* stream, Server::Encoder encode) {
  if (!route.pipeline_) throw Error(Errc::invalid_argument, "not a request of this server");
  if (!encode) throw Error(Errc::invalid_argument, "reply_after needs an encoder");
  std::lock_guard<std::mutex> lock(later_mu_);
  return later().add(route.pipeline_, request, stream, std::move(encode));
}

std::uint64_t ServerImpl::send_reply_results(const Request& route, const FrameDesc& request,
                                             void* stream, const ResultDetections* results,
                                             const void* metas, std::uint32_t metas_size,
                                             ResultEncoder encode) {
  if (!route.pipeline_) throw Error(Errc::invalid_argument, "not a request of this server");
  if (!encode) throw Error(Errc::invalid_argument, "a reply's results need an encoder");
  std::lock_guard<std::mutex> lock(later_mu_);
  return later().add(route.pipeline_, request, stream, results, metas, metas_size, encode);
}

detail::LaterReplies& ServerImpl::later() {
  if (later_closed_) throw Error(Errc::interrupted, "the server is closing");
  if (!later_)
    later_ =
        std::make_unique<detail::LaterReplies>(options_.reply_meta_size, [this] { backlog_due(); });
  return *later_;
}

void ServerImpl::prepare_gpu_replies(int device) noexcept {
  // Once per server: formats come with every connection, and later_mu_ may be held by a reply
  // waiting for room in the ring (which exists then).
  if (later_asked_.exchange(true, std::memory_order_acq_rel)) return;
  std::lock_guard<std::mutex> lock(later_mu_);
  if (later_closed_) return;
  try {
    later().prepare(device);
  } catch (const std::exception& e) {
    // Left to the first reply from the GPU, which says what fails.
    log(LogLevel::debug, (std::string("the later replies not made ahead: ") + e.what()).c_str());
  }
}

std::uint64_t ServerImpl::replies_done() const noexcept {
  std::lock_guard<std::mutex> lock(later_mu_);
  return later_ ? later_->done() : 0;
}

bool ServerImpl::reply(Request& r, const void* metas, std::uint32_t size, void* stream) {
  if (!r) throw Error(Errc::invalid_argument, "reply to a request already answered");
  return answer_then_release(r, stream, [&] { return send_reply(r, r.frame.desc(), metas, size); });
}

void ServerImpl::interrupt() noexcept {
  {
    std::lock_guard<std::mutex> lock(hub_->mu);
    hub_->interrupted = true;
  }
  hub_->ready.notify_all();
}

std::vector<ServerPipelineInfo> ServerImpl::pipelines() const {
  std::lock_guard<std::mutex> lock(hub_->mu);
  std::vector<ServerPipelineInfo> out;
  out.reserve(pipelines_.size());
  for (const auto& p : pipelines_) out.push_back(p->info());
  return out;
}

Server::Server(const ServerOptions& options) : impl_(std::make_unique<ServerImpl>(options)) {}
Server::~Server() = default;

ServerEvent Server::next(std::chrono::nanoseconds timeout) {
  return impl_->next(timeout);
}

bool Server::batch(std::vector<Request>& out, std::uint32_t max_batch,
                   std::chrono::nanoseconds max_delay, std::chrono::nanoseconds timeout) {
  return impl_->batch(out, max_batch, max_delay, timeout);
}

bool Server::reply(Request& request, const void* metas, std::uint32_t metas_size, void* stream) {
  return impl_->reply(request, metas, metas_size, stream);
}

bool Server::send_reply(const Request& route, const FrameDesc& request, const void* metas,
                        std::uint32_t metas_size) {
  return impl_->send_reply(route, request, metas, metas_size);
}

void Server::with_reply_channel(const Request& request,
                                const std::function<void(Producer&)>& publish) {
  if (!request) throw Error(Errc::invalid_argument, "the request was already answered");
  impl_->channel_of(request).with_reply_channel(publish);
}

std::uint32_t Server::add(const std::string& path) {
  return impl_->add(path, false);
}

std::uint64_t Server::reply_after(Request& request, void* stream, Encoder encode) {
  if (!request) throw Error(Errc::invalid_argument, "reply to a request already answered");
  return answer_then_release(request, stream, [&] {
    return impl_->send_reply_after(request, request.frame.desc(), stream, std::move(encode));
  });
}

std::uint64_t Server::send_reply_after(const Request& route, const FrameDesc& request, void* stream,
                                       Encoder encode) {
  return impl_->send_reply_after(route, request, stream, std::move(encode));
}

std::uint64_t Server::send_reply_results(const Request& route, const FrameDesc& request,
                                         void* stream, const ResultDetections* results,
                                         const void* metas, std::uint32_t metas_size,
                                         ResultEncoder encode) {
  return impl_->send_reply_results(route, request, stream, results, metas, metas_size, encode);
}

std::uint64_t Server::replies_done() const noexcept {
  return impl_->replies_done();
}

std::size_t Server::events() const {
  return impl_->events();
}

bool Server::event(ServerEvent& out) {
  return impl_->event(out);
}

void Server::interrupt() noexcept {
  impl_->interrupt();
}

std::vector<ServerPipelineInfo> Server::pipelines() const {
  return impl_->pipelines();
}

}  // namespace cudaipc
