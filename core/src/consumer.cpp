// The consumer's acquire loop: wait on the control block's futex, lease a frame, validate what
// the producer wrote before handing it out. See control_block.hpp for the protocol.
#include "cudaipc/consumer.hpp"
#include "hot_path.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <utility>

#include "channel_watch.hpp"
#include "clock.hpp"
#include "consumer_connection.hpp"
#include "futex.hpp"
#include "protocol.hpp"
#include "unix_socket.hpp"

namespace cudaipc {
namespace {

// A frame description's fields and the user metadata it has, not the rest of its 256 bytes: a
// frame is copied out of shared memory and moved on to its holder, and each whole copy refilled
// four cache lines more, read and written, for bytes nobody may read.
CUDAIPC_HOT void copy_used(FrameDesc& to, const FrameDesc& from) noexcept {
  constexpr std::size_t head = offsetof(FrameDesc, user_meta);
  std::memcpy(&to, &from, head);
  // The size as copied, clamped: an out-of-range one is refused after the copy (try_acquire).
  const std::uint32_t meta = std::min(to.user_meta_size, kMaxUserMeta);
  std::memcpy(to.user_meta, from.user_meta, meta);
}

// How often a waiting consumer checks that the producer is still there when no wake comes.
constexpr std::chrono::milliseconds kLivenessSlice{50};
constexpr int kAcquireRetries = 64;
// The wait between connect attempts for the first kQuickWindowNs of a wait for a producer, then
// doubled up to ConsumerOptions::reconnect_interval. Processes started together (pipelines, a
// server, their readers) come up over seconds (a CUDA context each), and a reader whose waits had
// already grown to the interval met its producer up to that long late, its first frames with it.
// An attempt that finds nobody costs a few microseconds (socket, connect, close).
constexpr std::uint64_t kFirstRetryNs = 5'000'000;
constexpr std::uint64_t kQuickWindowNs = 5'000'000'000;
// Once the watch saw the producer's socket made, it binds before it listens: attempts refused
// meanwhile are repeated this often for kAppearedWindowNs, not kFirstRetryNs apart.
constexpr std::uint64_t kAppearedRetryNs = 200'000;
constexpr std::uint64_t kAppearedWindowNs = 20'000'000;
// A socket that refuses us by its mode is tried again for this long after it appeared: its producer
// binds it for itself alone and then opens it up to its group (chown, chmod) before it listens.
constexpr std::uint64_t kOpeningWindowNs = 1'000'000'000;

// Refusals worth another try with `reconnect` on: the producer is gone, slow, full or short of
// resources now, none of which says it will refuse us next time.
bool transient(Errc code) {
  return code == Errc::disconnected || code == Errc::timeout || code == Errc::busy ||
         code == Errc::system;
}

// What a reconnecting consumer tries again: the transient codes, and with connect_later a
// producer that does not answer (a stopped process looks the same as a listener that will never
// speak cudaipc, which a plain reconnecting consumer is told at once).
bool retried(const Error& e, const ConsumerOptions& o) {
  return transient(e.code()) || (o.connect_later && dynamic_cast<const Unanswered*>(&e));
}

}  // namespace

class ConsumerImpl {
 public:
  explicit ConsumerImpl(const ConsumerOptions& opts) : opts_(opts) {
    wake_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_fd_) throw_errno("eventfd");
    if (opts_.connect_later && opts_.reconnect) {
      // next() connects; what no producer can ever serve is still refused here, at once.
      if (!opts_.path.empty()) check_channel_path(opts_.path);
      return;
    }
    try {
      connect();
    } catch (const Error& e) {
      if (!opts_.reconnect || !retried(e, opts_)) throw;
      note_failed_connect(e);
    }
  }
  // Frames still held keep the connection's memory and their leases, but a Consumer that is gone
  // reads no more frames: it stops holding the producer back as an every-frame reader, and leaves
  // (the producer frees its place and keeps only the slots those frames lease until each is
  // released; a cudaipcsrc at NULL whose buffers are still downstream is no consumer any more).
  ~ConsumerImpl() {
    if (!conn_) return;
    conn_->page().cursor.store(~std::uint64_t{0}, std::memory_order_release);
    conn_->hang_up();
  }

  Event next(std::chrono::nanoseconds timeout);

  void interrupt() noexcept {
    // The eventfd first, so whoever takes the flag finds the wake to drain with it. It also
    // breaks a handshake or a format wait, which sleep in poll() on the socket.
    std::uint64_t one = 1;
    if (::write(wake_fd_.get(), &one, sizeof one) != sizeof one) {
      // Only a full counter fails, and then a wake is pending anyway.
    }
    interrupted_.store(true, std::memory_order_seq_cst);
    local_wake_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all_noexcept(local_wake_);
  }

  bool connected() const noexcept { return conn_ != nullptr; }
  ConsumerCounters counters() {
    ConsumerCounters c;
    c.delivered = delivered_;
    c.skipped = skipped_;
    std::lock_guard<std::mutex> lock(conn_mu_);
    c.gpu_waits = past_gpu_waits_;
    c.gpu_releases = past_gpu_releases_;
    if (conn_) {
      c.producer_published = conn_->cb().frames_published.load(std::memory_order_relaxed);
      c.producer_dropped = conn_->cb().frames_dropped.load(std::memory_order_relaxed);
      c.gpu_waits += conn_->memory().gpu_waits();
      c.gpu_releases += conn_->memory().gpu_releases();
    }
    return c;
  }
  MemoryKind memory_kind() const {
    if (!conn_) throw Error(Errc::disconnected, "not connected to a producer");
    return conn_->memory_kind();
  }
  // Any thread may ask while next()'s thread connects.
  void* stream() const {
    std::lock_guard<std::mutex> lock(conn_mu_);
    return conn_ ? conn_->memory().stream() : nullptr;
  }
  int device() const { return conn_ ? conn_->memory().device() : -1; }

 private:
  void connect();
  void note_failed_connect(const Error& e);
  void disconnect(const std::string& fallback = {});
  bool try_acquire(Event& ev);
  bool format_event(std::uint64_t g, Event& ev);
  Event disconnected_event();
  bool take_interrupt() noexcept;

  ConsumerOptions opts_;
  UniqueFd wake_fd_;            // eventfd: interrupt() breaks socket waits through it
  mutable std::mutex conn_mu_;  // guards conn_ against other threads; only next()'s changes it
  // Earlier connections' gpu_waits/gpu_releases (under conn_mu_).
  std::uint64_t past_gpu_waits_ = 0;
  std::uint64_t past_gpu_releases_ = 0;
  std::shared_ptr<ConsumerConnection> conn_;
  std::atomic<bool> interrupted_{false};
  std::atomic<std::uint32_t> local_wake_{0};
  std::uint64_t cursor_ = 0;
  std::uint64_t reported_gen_ = 0;
  std::uint64_t reported_eos_ = 0;
  std::uint64_t delivered_ = 0;
  std::uint64_t skipped_ = 0;
  bool lost_reported_ = true;
  std::string lost_reason_;
  std::string refusal_;  // why the producer turned our last connect away; empty: it did not
  bool refusal_reported_ = true;  // next() has said so
  std::uint64_t next_connect_ns_ = 0;
  // The wait before the next connect attempt: short for the first seconds of a wait, then doubled
  // after each failed one up to reconnect_interval, so a producer that comes up soon after
  // (pipelines and a server or reader started together) is met in milliseconds, and one long gone
  // costs an attempt per interval. 0: not waiting.
  std::uint64_t retry_ns_ = 0;
  std::uint64_t waiting_since_ns_ = 0;
  // Wakes the wait for a producer when its socket appears; watching only while not connected.
  detail::ChannelWatch watch_;
  std::uint64_t appeared_ns_ = 0;  // when the watch last saw the socket appear; 0: not yet
  std::uint64_t deadline_ = 0;     // of the next() call in progress
  bool at_limit_ = false;          // holding as many frames as the producer allows
  bool late_ = false;  // a frame's format (or, with cpu_wait, its bytes) missed the deadline
};

void ConsumerImpl::connect() {
  auto c = std::make_shared<ConsumerConnection>(opts_, wake_fd_.get());
  std::lock_guard<std::mutex> lock(conn_mu_);
  conn_ = std::move(c);
  retry_ns_ = 0;
  watch_.stop();
  cursor_ = conn_->start_cursor();
  // Counted per producer: they are compared with its published count (stats, `cudaipc ls`), and
  // the new producer's connection page must not start with what an earlier one delivered.
  delivered_ = 0;
  skipped_ = 0;
  reported_gen_ = 0;
  reported_eos_ = 0;
  lost_reported_ = false;
  refusal_.clear();
  refusal_reported_ = true;
}

// A producer that is there but turns us away for now (out of descriptors, every place taken) or
// does not answer (its process stopped) is news while we keep trying: the user would otherwise wait
// in silence. Each new reason is told once; no producer listening yet is the ordinary wait for one,
// not news.
void ConsumerImpl::note_failed_connect(const Error& e) {
  const bool news = dynamic_cast<const Refused*>(&e) || dynamic_cast<const Unanswered*>(&e);
  const std::string why = news ? e.what() : std::string();
  if (why == refusal_) return;
  refusal_ = why;
  refusal_reported_ = why.empty();
}

void ConsumerImpl::disconnect(const std::string& fallback) {
  std::string why = conn_ ? conn_->parting_words() : std::string();
  // The producer's own words (an eviction's reason) when they arrived already.
  lost_reason_ = !why.empty() ? why : !fallback.empty() ? fallback : "the producer hung up";
  std::shared_ptr<ConsumerConnection> gone;
  {
    std::lock_guard<std::mutex> lock(conn_mu_);
    if (conn_) {
      past_gpu_waits_ += conn_->memory().gpu_waits();
      past_gpu_releases_ += conn_->memory().gpu_releases();
    }
    gone = std::move(conn_);
  }
  // Ended outside the lock: its close may drain the stream for seconds, and counters() and
  // cuda_stream() from other threads must not wait for that.
  gone.reset();
}

CUDAIPC_HOT bool ConsumerImpl::take_interrupt() noexcept {
  if (!interrupted_.exchange(false, std::memory_order_seq_cst)) return false;
  std::uint64_t count;
  if (::read(wake_fd_.get(), &count, sizeof count) < 0) {
    // EAGAIN: the eventfd was drained already.
  }
  return true;
}

bool ConsumerImpl::format_event(std::uint64_t g, Event& ev) {
  const auto* gen = conn_->find_generation(g);
  if (!gen) return false;
  ev.type = EventType::format;
  ev.format = gen->format;
  ev.generation = g;
  reported_gen_ = g;
  return true;
}

// How many leases a mask holds: a loop over its few set bits (std::bitset's count called
// libgcc's table-driven popcount, two more places to fetch per frame on a CPU baseline without
// POPCNT).
static unsigned leases_in(std::uint64_t held) noexcept {
  unsigned n = 0;
  for (; held; held &= held - 1) ++n;
  return n;
}

// Leases the next frame (every-frame) or the newest (latest). True with ev filled when it produced
// an event (a frame, or the format that must come before it). The frame is described in place in
// `ev`, empty on entry: a frame made here and moved there cost its description's lines twice.
CUDAIPC_HOT bool ConsumerImpl::try_acquire(Event& ev) {
  ControlBlock& cb = conn_->cb();
  ConnPage& me = conn_->page();
  const bool every = opts_.mode == ConsumeMode::every_frame;
  at_limit_ = false;
  for (int attempt = 0; attempt < kAcquireRetries; ++attempt) {
    const std::uint64_t published = cb.published.load(std::memory_order_acquire);
    if (published <= cursor_) return false;
    const std::uint64_t held = me.leases.load(std::memory_order_relaxed);
    if (leases_in(held) >= conn_->max_leases()) {
      // The producer would void every lease past its limit: wait for one of ours to end.
      at_limit_ = true;
      return false;
    }
    const std::uint64_t t = every ? cursor_ + 1 : published;
    const std::uint64_t ring = cb.ring[t % kRing].load(std::memory_order_acquire);
    if ((ring >> kRingSlotBits) != t) {
      if (every) {
        // The producer must keep every unread frame for us; only an eviction or a hostile
        // producer gets here. Count it and move on.
        ++skipped_;
        me.skipped.store(skipped_, std::memory_order_relaxed);
        cursor_ = t;
      }
      continue;
    }
    const auto slot = static_cast<std::uint32_t>(ring & ((1u << kRingSlotBits) - 1));
    if (slot >= conn_->slot_count())
      throw Error(Errc::protocol, "control block names slot " + std::to_string(slot) + " of " +
                                      std::to_string(conn_->slot_count()));
    const std::uint64_t bit = 1ull << slot;
    if (held & bit)
      throw Error(Errc::protocol, "producer published frame " + std::to_string(t) + " into slot " +
                                      std::to_string(slot) + " that we still lease");
    me.leases.fetch_or(bit, std::memory_order_seq_cst);
    if (cb.slots[slot].seq.load(std::memory_order_seq_cst) != t) {
      conn_->unlease(bit);  // lost the race to a rewrite
      continue;
    }
    if (me.revoked.load(std::memory_order_seq_cst) != 0) {
      // Evicted: the producer may no longer count this lease (conn_page.hpp).
      conn_->unlease(bit);
      throw Error(Errc::disconnected, "evicted by the producer");
    }
    Frame& f = ev.frame;  // not held until conn_ is set below
    copy_used(f.desc_, cb.slots[slot].desc);
    const std::uint64_t g = f.desc_.generation;
    try {
      if (f.desc_.seq != t)
        throw Error(Errc::protocol, "slot " + std::to_string(slot) + " describes frame " +
                                        std::to_string(f.desc_.seq) + ", expected " +
                                        std::to_string(t));
      if (!every && !conn_->generations().empty() && g < conn_->generations().front().generation) {
        // A latest reader that joined after a format change can find the newest frame still in
        // the old format, which it never got: that frame predates it, so it waits for the next.
        conn_->unlease(bit);
        ++skipped_;
        me.skipped.store(skipped_, std::memory_order_relaxed);
        cursor_ = t;
        continue;
      }
      if (g > conn_->newest_generation() && !conn_->sync_formats(g, deadline_)) {
        conn_->unlease(bit);
        late_ = true;
        return false;
      }
      const auto* gen = conn_->find_generation(g);
      if (!gen)
        throw Error(Errc::protocol, "frame " + std::to_string(t) + " names unknown generation " +
                                        std::to_string(g));
      validate(f.desc_.tensor, gen->slots->slot_size());
      if (f.desc_.user_meta_size > kMaxUserMeta)
        throw Error(Errc::protocol, "frame user metadata size out of range");
      if (f.desc_.metas_bytes > conn_->meta_size())
        throw Error(Errc::protocol, "frame " + std::to_string(t) + " claims " +
                                        std::to_string(f.desc_.metas_bytes) +
                                        " bytes of metas in a meta area of " +
                                        std::to_string(conn_->meta_size()));
      if (g != reported_gen_) {
        // The format comes before its first frame; the frame is taken again on the next call.
        conn_->unlease(bit);
        return format_event(g, ev);
      }
      conn_->prune_before(g);
      // Pruning erases from the generation list and moves `gen`'s entry: look it up again.
      gen = conn_->find_generation(g);
      f.slots_ = gen->slots;
      f.base_ = gen->slots->address(slot);
    } catch (...) {
      f.slots_.reset();
      conn_->release(slot, t);
      throw;
    }
    f.slot_ = slot;
    f.conn_ = conn_;
    f.metas_ = f.desc_.metas_bytes ? conn_->metas(slot) : nullptr;
    if (!conn_->memory().on_acquire(slot, t, deadline_)) {
      // cpu_wait: the frame was not written by the deadline. Taken again on the next call.
      f.conn_.reset();
      f.slots_.reset();
      f.metas_ = nullptr;
      conn_->release(slot, t);
      late_ = true;
      return false;
    }
    if (!every && t > cursor_ + 1) {
      skipped_ += t - cursor_ - 1;
      me.skipped.store(skipped_, std::memory_order_relaxed);
    }
    cursor_ = t;
    me.cursor.store(t, std::memory_order_release);
    me.delivered.store(++delivered_, std::memory_order_relaxed);
    ev.type = EventType::frame;
    return true;
  }
  return false;
}

Event ConsumerImpl::disconnected_event() {
  Event ev;
  ev.type = EventType::disconnected;
  ev.message = lost_reason_.empty() ? "the producer hung up" : lost_reason_;
  return ev;
}

CUDAIPC_HOT Event ConsumerImpl::next(std::chrono::nanoseconds timeout) {
  const std::uint64_t start = monotonic_ns();
  deadline_ = timeout.count() <= 0 ? start
              : static_cast<std::uint64_t>(timeout.count()) > ~std::uint64_t{0} - start
                  ? ~std::uint64_t{0}
                  : start + static_cast<std::uint64_t>(timeout.count());
  const std::uint64_t deadline = deadline_;
  Event ev;
  for (;;) {
    if (take_interrupt()) {
      ev.type = EventType::interrupted;
      return ev;
    }
    const std::uint64_t now = monotonic_ns();
    if (!conn_) {
      if (!lost_reported_) {
        lost_reported_ = true;
        return disconnected_event();
      }
      if (!refusal_reported_) {
        refusal_reported_ = true;
        ev.type = EventType::disconnected;
        ev.message = refusal_;
        ev.refused = true;
        return ev;
      }
      if (!opts_.reconnect) {
        ev.type = EventType::disconnected;
        ev.message = "not connected (reconnect is off)";
        return ev;
      }
      if (now >= next_connect_ns_) {
        const auto interval =
            static_cast<std::uint64_t>(std::chrono::nanoseconds(opts_.reconnect_interval).count());
        if (!retry_ns_) waiting_since_ns_ = now;
        // A producer that turned the last attempt away (full, short of descriptors) does work for
        // each one: it is asked again less and less often from the start.
        const bool quick =
            !retry_ns_ || (refusal_.empty() && now - waiting_since_ns_ < kQuickWindowNs);
        const bool appeared = appeared_ns_ && now - appeared_ns_ < kAppearedWindowNs;
        retry_ns_ = std::min(interval, appeared ? kAppearedRetryNs
                                       : quick  ? kFirstRetryNs
                                                : retry_ns_ * 2);
        next_connect_ns_ = now + retry_ns_;
        try {
          // Watched before the attempt: a socket made after it failed is still seen. (The
          // default path's directory is made here as connect() makes it, failing as it would.)
          if (!watch_.watching())
            watch_.watch(opts_.path.empty() ? default_channel_path("cudaipc") : opts_.path);
          connect();
          continue;
        } catch (const Error& e) {
          if (e.code() == Errc::interrupted) continue;
          // Refusals of who we are (credentials, version) are final; the rest may pass. So may a
          // socket's mode while the socket is new: its producer may not have opened it up yet.
          const bool opening = appeared_ns_ && now - appeared_ns_ < kOpeningWindowNs &&
                               dynamic_cast<const ConnectNotAllowed*>(&e);
          if (!opening && !retried(e, opts_)) throw;
          note_failed_connect(e);
          if (!refusal_reported_) continue;
        }
      }
      // A connect attempt can take long (a handshake nobody answers): the clock is read again,
      // so the caller hears of its deadline instead of the next attempt starting first.
      const std::uint64_t after = monotonic_ns();
      if (after >= deadline) return ev;  // timeout
      const std::chrono::nanoseconds nap(std::min(deadline, std::max(next_connect_ns_, after)) -
                                         after);
      if (watch_.watching()) {
        // interrupt() writes wake_fd_ before it sets its flag, so this wait ends for it too.
        const auto seen = watch_.wait(wake_fd_.get(), nap);
        if (seen != detail::ChannelWatch::Seen::nothing) next_connect_ns_ = monotonic_ns();
        if (seen == detail::ChannelWatch::Seen::socket) {
          appeared_ns_ = next_connect_ns_;
          retry_ns_ = 0;
        }
        continue;
      }
      std::uint32_t seen = local_wake_.load(std::memory_order_seq_cst);
      // interrupt() sets its flag before it bumps local_wake_: one that came after the check at
      // the top of the loop and before `seen` was read would otherwise be slept through.
      if (interrupted_.load(std::memory_order_seq_cst)) continue;
      futex_wait(local_wake_, seen, nap);
      continue;
    }

    ControlBlock& cb = conn_->cb();
    ConnPage& page = conn_->page();
    // The word slept on is read before anything is checked: a wake after this returns the wait.
    const std::uint32_t woken = page.frame_wake.load(std::memory_order_seq_cst);
    const std::uint32_t seen = cb.frame_futex.load(std::memory_order_seq_cst);
    const std::uint32_t released = page.release_futex.load(std::memory_order_seq_cst);
    late_ = false;
    try {
      if (try_acquire(ev)) return ev;
      const std::uint64_t g = cb.generation.load(std::memory_order_acquire);
      if (!late_ && g > conn_->newest_generation() && !conn_->sync_formats(g, deadline))
        late_ = true;
      // No frame is pending: a newer format with no frame yet is news on its own.
      if (conn_->newest_generation() > reported_gen_ &&
          format_event(conn_->newest_generation(), ev))
        return ev;
    } catch (const Error& e) {
      if (e.code() != Errc::disconnected) throw;
      disconnect(e.what());
      continue;
    }
    if (late_) {
      // The deadline passed or an interrupt came first; the frame is taken on the next call.
      if (monotonic_ns() >= deadline) return ev;
      continue;
    }
    if (page.revoked.load(std::memory_order_acquire) != 0) {
      // Evicted: that is the news, not an end of stream the producer may announce meanwhile.
      disconnect("evicted by the producer");
      continue;
    }
    const std::uint64_t eos = cb.eos_after.load(std::memory_order_acquire);
    if (eos != 0 && eos != reported_eos_ && cursor_ + 1 >= eos &&
        cb.published.load(std::memory_order_acquire) <= cursor_) {
      reported_eos_ = eos;
      ev.type = EventType::eos;
      return ev;
    }
    // A closed producer's frames stay readable: a consumer at its lease limit waits for one of its
    // own releases and reads on; only a consumer with nothing left to take is disconnected.
    const bool owed_frames = at_limit_ && cb.published.load(std::memory_order_acquire) > cursor_;
    if (cb.closed.load(std::memory_order_acquire) && !owed_frames) {
      disconnect();
      continue;
    }
    if (now >= deadline) return ev;  // timeout
    // Announce the sleep, then re-check: the producer bumps frame_futex before it reads the flag
    // (and then bumps frame_wake, where we sleep, if it saw it).
    page.sleeping.store(at_limit_ ? kSleepingAtLimit : kSleeping, std::memory_order_seq_cst);
    WaitResult w = WaitResult::woken;
    // interrupt() sets its flag before it bumps local_wake_: read the word before the flag.
    const std::uint32_t local = local_wake_.load(std::memory_order_seq_cst);
    if (cb.frame_futex.load(std::memory_order_seq_cst) == seen &&
        !interrupted_.load(std::memory_order_seq_cst)) {
      FutexWord words[3] = {
          {&page.frame_wake, woken}, {&local_wake_, local}, {&page.release_futex, released}};
      w = futex_wait_any(words, at_limit_ ? 3 : 2,
                         std::min<std::chrono::nanoseconds>(
                             kLivenessSlice, std::chrono::nanoseconds(deadline - now)));
    }
    page.sleeping.store(0, std::memory_order_relaxed);
    if (w == WaitResult::timeout && !owed_frames && peer_hung_up(conn_->socket())) disconnect();
  }
}

// ---- Frame ----

// Its description zeroed but the user metadata's bytes, which no size makes readable (copy_used).
CUDAIPC_HOT Frame::Frame() noexcept {
  std::memset(&desc_, 0, offsetof(FrameDesc, user_meta));
}

CUDAIPC_HOT Frame::Frame(Frame&& o) noexcept
    : conn_(std::move(o.conn_)),
      slots_(std::move(o.slots_)),
      base_(o.base_),
      slot_(o.slot_),
      metas_(std::exchange(o.metas_, nullptr)) {
  copy_used(desc_, o.desc_);
}

CUDAIPC_HOT Frame& Frame::operator=(Frame&& o) noexcept {
  if (this != &o) {
    release();
    conn_ = std::move(o.conn_);
    slots_ = std::move(o.slots_);
    base_ = o.base_;
    slot_ = o.slot_;
    metas_ = std::exchange(o.metas_, nullptr);
    copy_used(desc_, o.desc_);
  }
  return *this;
}

CUDAIPC_HOT std::shared_ptr<const void> Frame::slot_memory() const noexcept {
  return slots_;
}

bool Frame::written() const noexcept {
  return conn_ && conn_->memory().written(desc_.seq);
}

CUDAIPC_HOT void Frame::release() noexcept {
  if (!conn_) return;
  conn_->release(slot_, desc_.seq);
  slots_.reset();
  metas_ = nullptr;
  conn_.reset();
}

void Frame::order_reads(void* stream) const {
  if (!conn_) throw Error(Errc::invalid_argument, "order_reads on a released frame");
  conn_->memory().order_reads(slot_, desc_.seq, stream);
}

void Frame::order_release_after(void* stream) const {
  if (!conn_) throw Error(Errc::invalid_argument, "order_release_after on a released frame");
  conn_->memory().order_release_after(stream);
}

void Frame::order_release_after_event(void* event) const {
  if (!conn_) throw Error(Errc::invalid_argument, "order_release_after_event on a released frame");
  conn_->memory().order_release_after_event(event);
}

void* Frame::cuda_stream() const noexcept {
  return conn_ ? conn_->memory().stream() : nullptr;
}

void Frame::copy_to_host(void* dst, std::uint64_t bytes) const {
  if (!conn_) throw Error(Errc::invalid_argument, "copy_to_host on a released frame");
  if (bytes > size())
    throw Error(Errc::invalid_argument, "copy_to_host of " + std::to_string(bytes) +
                                            " bytes from a frame of " + std::to_string(size()));
  if (bytes && !dst) throw Error(Errc::invalid_argument, "copy_to_host into NULL");
  conn_->memory().copy_to_host(data(), dst, bytes);
}

// ---- Consumer facade ----

Consumer::Consumer(const ConsumerOptions& options)
    : impl_(std::make_unique<ConsumerImpl>(options)) {}
Consumer::~Consumer() = default;
CUDAIPC_HOT Event Consumer::next(std::chrono::nanoseconds timeout) {
  return impl_->next(timeout);
}
void Consumer::interrupt() noexcept {
  impl_->interrupt();
}
bool Consumer::connected() const noexcept {
  return impl_->connected();
}
ConsumerCounters Consumer::counters() const {
  return impl_->counters();
}
CUDAIPC_HOT MemoryKind Consumer::memory_kind() const {
  return impl_->memory_kind();
}
void* Consumer::cuda_stream() const {
  return impl_->stream();
}
int Consumer::cuda_device() const {
  return impl_->device();
}

}  // namespace cudaipc
