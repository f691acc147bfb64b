// The producer's publish path and lifetime. See control_block.hpp for the protocol.
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "channel_path.hpp"
#include "channel_role.hpp"
#include "clock.hpp"
#include "cudaipc/log.hpp"
#include "futex.hpp"
#include "producer_impl.hpp"
#include "protocol.hpp"
#include "unix_socket.hpp"

namespace cudaipc {

ProducerImpl::ProducerImpl(const ProducerOptions& opts) : opts_(opts) {
  if (opts_.slots < 1 || opts_.slots > kMaxSlots)
    throw Error(Errc::invalid_argument, "slot count " + std::to_string(opts_.slots) +
                                            " out of range 1.." + std::to_string(kMaxSlots));
  if (opts_.max_consumers < 1 || opts_.max_consumers > kMaxConsumers)
    throw Error(Errc::invalid_argument, "max_consumers " + std::to_string(opts_.max_consumers) +
                                            " out of range 1.." + std::to_string(kMaxConsumers));
  if ((opts_.socket_mode & ~0770u) != 0)
    throw Error(Errc::invalid_argument,
                "socket mode must grant nothing to others (0600, or 0660 with a group)");
  if (opts_.max_leases_per_consumer > opts_.slots)
    throw Error(Errc::invalid_argument,
                "max_leases_per_consumer " + std::to_string(opts_.max_leases_per_consumer) +
                    " exceeds the slot count " + std::to_string(opts_.slots));
  if (opts_.lease_timeout.count() < 0)
    throw Error(Errc::invalid_argument, "lease_timeout must not be negative");
  if (opts_.meta_size > kMaxMetaSize)
    throw Error(Errc::invalid_argument, "meta_size " + std::to_string(opts_.meta_size) +
                                            " exceeds the limit of " +
                                            std::to_string(kMaxMetaSize) + " bytes per slot");
  check_role_value(static_cast<std::uint32_t>(opts_.role), Errc::invalid_argument, "role");
  path_ = opts_.path.empty() ? default_channel_path("cudaipc") : opts_.path;
  make_default_dir_for(path_);
  slot_count_ = opts_.slots;
  max_leases_ = opts_.max_leases_per_consumer != 0 ? opts_.max_leases_per_consumer
                                                   : std::max<std::uint32_t>(1, slot_count_ - 1);
  valid_mask_ = slot_count_ == 64 ? ~0ull : ((1ull << slot_count_) - 1);
  memory_ = opts_.memory == MemoryKind::cuda ? make_cuda_producer_memory(opts_.cuda, slot_count_)
                                             : make_host_producer_memory();
  create_control_block();
  notify_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!notify_fd_) throw_errno("eventfd");
  spare_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!spare_fd_) throw_errno("eventfd (the producer's spare descriptor)");
  listen_fd_ = listen_unix(path_, opts_.socket_mode, opts_.allowed_gid);
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) socket_inode_ = st.st_ino;
  server_ = std::thread([this] { serve(); });
}

ProducerImpl::~ProducerImpl() {
  close();
}

void ProducerImpl::close() {
  if (closed_.exchange(true, std::memory_order_acq_rel)) return;
  stopping_.store(true, std::memory_order_seq_cst);
  post_to_server();
  if (server_.joinable()) server_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    cb_->closed.store(1, std::memory_order_release);
    wake_consumers(/*everyone=*/true);
    conns_.clear();
    try {
      memory_->flush();
    } catch (const Error& e) {
      log(LogLevel::warning, e.what());
    }
  }
  // Only remove the socket file if it is still ours: a new producer may have replaced it.
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && st.st_ino == socket_inode_) ::unlink(path_.c_str());
  listen_fd_.reset();  // a connect now is refused at once, and the path is free for another
}

void ProducerImpl::create_control_block() {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const auto round_up = [](std::size_t n, std::size_t to) { return (n + to - 1) / to * to; };
  const std::size_t meta_offset = round_up(sizeof(ControlBlock), page);
  // Areas of 64 KiB and up start on their own pages; small ones on cache lines.
  const std::size_t meta_stride =
      opts_.meta_size >= page ? round_up(opts_.meta_size, page) : round_up(opts_.meta_size, 64);
  // Pages of the memfd are only backed once written: unused meta space costs address space.
  const std::size_t size = round_up(meta_offset + meta_stride * slot_count_, page);
  if (size > 0xffffffffu)
    throw Error(Errc::invalid_argument, "meta areas of " + std::to_string(meta_stride) +
                                            " bytes for " + std::to_string(slot_count_) +
                                            " slots exceed the 4 GiB producer region");
  control_fd_ = make_memfd("cudaipc-control", size);
  control_map_ = Mapping(control_fd_.get(), size, true);
  // From here on no other mapping of it can be writable: consumers read, only we write.
  seal_memfd(control_fd_.get(), true);
  cb_ = new (control_map_.data()) ControlBlock{};
  cb_->magic = kControlMagic;
  cb_->version = kLayoutVersion;
  cb_->block_size = static_cast<std::uint32_t>(sizeof(ControlBlock));
  cb_->slot_count = slot_count_;
  cb_->max_consumers = opts_.max_consumers;
  cb_->memory_kind = static_cast<std::uint32_t>(memory_->kind());
  cb_->meta_size = opts_.meta_size;
  cb_->meta_offset = meta_offset;
  cb_->meta_stride = meta_stride;
  cb_->role = static_cast<std::uint32_t>(opts_.role);
  metas_ = static_cast<std::uint8_t*>(control_map_.data()) + meta_offset;
  meta_stride_ = meta_stride;
}

void ProducerImpl::wake_consumers(bool everyone) {
  cb_->frame_futex.fetch_add(1, std::memory_order_seq_cst);
  wake_sleepers(everyone);
}

void ProducerImpl::wake_space() noexcept {
  space_wake_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all_noexcept(space_wake_);
}

void ProducerImpl::post_to_server() noexcept {
  std::uint64_t one = 1;
  // An eventfd write fails only when the counter would overflow: the thread is woken anyway.
  if (::write(notify_fd_.get(), &one, sizeof one) != sizeof one)
    log(LogLevel::debug, "producer socket thread already has a wake pending");
}

void ProducerImpl::set_format(const Format& f) {
  Format checked = f;
  validate_format(checked, Errc::invalid_argument);
  std::lock_guard<std::mutex> lock(mu_);
  if (writing_) throw Error(Errc::invalid_argument, "set_format while a slot is borrowed");
  // Allocate first: if it fails, the producer keeps its old format and slots and goes on working.
  std::shared_ptr<ProducerSlots> fresh;
  if (!slots_ || checked.max_frame_size > slots_->slot_size())
    fresh = memory_->allocate(slot_count_, checked.max_frame_size);
  FormatState next;
  next.generation = generation_ + 1;
  next.set_id = fresh ? set_id_ + 1 : set_id_;
  next.format = checked;
  next.slots = fresh ? fresh : slots_;
  const std::uint64_t next_set = next.set_id;
  {
    std::lock_guard<std::mutex> flock(format_mu_);
    // The socket thread trims what every consumer has been sent.
    format_history_.push_back(std::move(next));
  }
  if (fresh) {
    if (slots_) retired_.push_back(Retired{std::move(slots_), set_id_});
    slots_ = std::move(fresh);
    set_id_ = next_set;
  }
  format_ = std::move(checked);
  ++generation_;
  // The socket thread sends the format message; a consumer that sees the new generation first
  // waits for it (within its own deadline).
  post_to_server();
  cb_->generation.store(generation_, std::memory_order_release);
  wake_consumers();
}

bool ProducerImpl::slot_free(std::uint32_t i, const Occupancy& occ) const {
  if ((occ.leased | held_.load(std::memory_order_seq_cst)) & (1ull << i)) return false;
  // An every-frame consumer that has not reached this frame yet still needs it.
  return slot_seq_[i] == 0 || slot_seq_[i] <= occ.min_cursor;
}

// Picks a free slot and invalidates it, or returns -1. Called with mu_ held.
int ProducerImpl::claim_slot(std::uint64_t now) {
  Occupancy occ = occupancy(now);
  if (!retired_.empty()) free_retired(occ);
  std::uint64_t refused = 0;
  for (std::uint32_t n = 0; n < slot_count_; ++n) {
    std::uint32_t i = (next_slot_ + n) % slot_count_;
    if ((refused & (1ull << i)) || !slot_free(i, occ)) continue;
    cb_->slots[i].seq.store(0, std::memory_order_seq_cst);
    // A consumer may have leased it between occupancy() and the store above (see
    // control_block.hpp): then it keeps the frame and we look elsewhere.
    if (occupancy(now).leased & (1ull << i)) {
      slot_seq_[i] = 0;
      refused |= 1ull << i;
      continue;
    }
    next_slot_ = (i + 1) % slot_count_;
    return static_cast<int>(i);
  }
  return -1;
}

void ProducerImpl::free_retired(const Occupancy& occ) {
  retired_.erase(
      std::remove_if(retired_.begin(), retired_.end(),
                     [&](const Retired& r) {
                       const std::uint64_t held = held_.load(std::memory_order_seq_cst);
                       for (std::uint32_t i = 0; i < slot_count_; ++i) {
                         if (slot_set_[i] == r.set_id && slot_seq_[i] != 0 && !slot_free(i, occ))
                           return false;
                         if ((held & (1ull << i)) && held_set_[i] == r.set_id) return false;
                       }
                       return true;
                     }),
      retired_.end());
}

// Sleeps until a consumer releases a slot, the socket thread frees one, interrupt(), or `until`.
// Called without mu_.
void ProducerImpl::wait_for_space(std::uint64_t until) {
  FutexWord words[kMaxRecords + 1];
  std::array<std::shared_ptr<Mapping>, kMaxRecords> pages;  // keeps each page mapped while we sleep
  std::size_t n = 0;
  words[n++] = FutexWord{&space_wake_, space_wake_.load(std::memory_order_seq_cst)};
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    for (const auto& r : live_records()) {
      if (!r || r->void_leases) continue;
      pages[n - 1] = r->page_map;
      words[n++] = FutexWord{&r->page->release_futex,
                             r->page->release_futex.load(std::memory_order_seq_cst)};
    }
  }
  // Releases after the loads above change a word; releases before them show in the re-check.
  cb_->producer_waiting.fetch_add(1, std::memory_order_seq_cst);
  bool free_now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Occupancy occ = occupancy(monotonic_ns());
    free_now = false;
    for (std::uint32_t i = 0; i < slot_count_ && !free_now; ++i) free_now = slot_free(i, occ);
  }
  const std::uint64_t now = monotonic_ns();
  if (!free_now && !interrupted_.load(std::memory_order_seq_cst) && until > now)
    futex_wait_any(words, n, std::chrono::nanoseconds(until - now));
  cb_->producer_waiting.fetch_sub(1, std::memory_order_seq_cst);
}

WriteSlot ProducerImpl::begin_frame(PublishStatus* status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!slots_) throw Error(Errc::invalid_argument, "set_format before publishing frames");
  if (writing_) throw Error(Errc::invalid_argument, "a borrowed slot is not committed yet");
  const auto deadline = monotonic_ns() + static_cast<std::uint64_t>(opts_.block_timeout.count());
  for (;;) {
    const std::uint64_t now = monotonic_ns();
    int slot = claim_slot(now);
    if (slot < 0 && starved_since_ == 0) starved_since_ = now;
    if (slot < 0 && opts_.lease_timeout.count() > 0) {
      if (now - starved_since_ >= static_cast<std::uint64_t>(opts_.lease_timeout.count())) {
        evict_stalled(now);
        slot = claim_slot(now);
      }
    }
    if (slot >= 0) {
      starved_since_ = 0;
      memory_->begin_write(static_cast<std::uint32_t>(slot));
      writing_ = true;
      writing_slot_ = static_cast<std::uint32_t>(slot);
      if (status) *status = PublishStatus::published;
      WriteSlot ws;
      ws.owner_ = this;
      ws.address_ = slots_->address(writing_slot_);
      ws.capacity_ = slots_->slot_size();
      ws.index_ = writing_slot_;
      ws.metas_ = opts_.meta_size ? metas_ + meta_stride_ * writing_slot_ : nullptr;
      ws.metas_capacity_ = opts_.meta_size;
      return ws;
    }
    log_holdback(now);
    if (interrupted_.load(std::memory_order_seq_cst)) {
      if (status) *status = PublishStatus::interrupted;
      return WriteSlot();
    }
    if (opts_.on_full == FullPolicy::drop || now >= deadline) {
      ++dropped_;
      cb_->frames_dropped.store(dropped_, std::memory_order_relaxed);
      if (status)
        *status =
            opts_.on_full == FullPolicy::drop ? PublishStatus::dropped : PublishStatus::timeout;
      return WriteSlot();
    }
    std::uint64_t until = deadline;
    if (opts_.lease_timeout.count() > 0)
      until =
          std::min(until, starved_since_ + static_cast<std::uint64_t>(opts_.lease_timeout.count()));
    lock.unlock();
    wait_for_space(until);
    lock.lock();
    // Another thread may have borrowed a slot while we slept: one slot is lent at a time.
    if (writing_) throw Error(Errc::invalid_argument, "a borrowed slot is not committed yet");
  }
}

void ProducerImpl::commit(WriteSlot& ws, const FrameInfo& info) {
  if (ws.owner_ != this) throw Error(Errc::invalid_argument, "commit of a slot not borrowed here");
  std::lock_guard<std::mutex> lock(mu_);
  const TensorDesc& tensor = info.tensor ? *info.tensor : format_.tensor;
  if (info.tensor) {
    try {
      validate(tensor, slots_->slot_size());
    } catch (const Error& e) {
      throw Error(Errc::invalid_argument, e.what());
    }
  }
  if (info.user_meta_size > kMaxUserMeta)
    throw Error(Errc::invalid_argument, "user metadata of " + std::to_string(info.user_meta_size) +
                                            " bytes exceeds " + std::to_string(kMaxUserMeta));
  if (info.metas_size > opts_.meta_size)
    throw Error(Errc::invalid_argument,
                "metas of " + std::to_string(info.metas_size) + " bytes exceed the meta area of " +
                    std::to_string(opts_.meta_size) + " bytes (ProducerOptions::meta_size)");
  if (info.metas_size && !info.metas)
    throw Error(Errc::invalid_argument, "metas_size without metas");
  const std::uint32_t i = ws.index_;
  std::uint8_t* area = metas_ + meta_stride_ * i;
  if (info.metas_size && info.metas != area) std::memcpy(area, info.metas, info.metas_size);
  const std::uint64_t seq = seq_ + 1;
  memory_->end_write(i, seq);
  seq_ = seq;
  FrameDesc& d = cb_->slots[i].desc;
  d.seq = seq;
  d.generation = generation_;
  d.pts = info.pts;
  d.dts = info.dts;
  d.duration = info.duration;
  d.flags = info.flags;
  d.tensor = tensor;
  d.user_meta_size = info.user_meta_size;
  d.metas_bytes = info.metas_size;
  if (info.user_meta_size) std::memcpy(d.user_meta, info.user_meta, info.user_meta_size);
  d.publish_time_ns = monotonic_ns();
  last_publish_time_ = d.publish_time_ns;
  slot_seq_[i] = seq;
  slot_set_[i] = set_id_;
  cb_->slots[i].seq.store(seq, std::memory_order_release);
  cb_->ring[seq % kRing].store(ring_entry(seq, i), std::memory_order_release);
  cb_->eos_after.store(0, std::memory_order_relaxed);
  cb_->published.store(seq, std::memory_order_release);
  cb_->frames_published.store(seq, std::memory_order_relaxed);
  writing_ = false;
  ws.owner_ = nullptr;
  wake_consumers();
}

void ProducerImpl::abort(WriteSlot& ws) noexcept {
  if (ws.owner_ != this) return;
  std::lock_guard<std::mutex> lock(mu_);
  // The slot stays invalidated (seq 0); its half-written bytes are never published.
  try {
    memory_->end_write(ws.index_, 0);
  } catch (const Error& e) {
    // Runs from destructors: report, never throw. The slot stays invalid, so nothing reads it.
    log(LogLevel::error, (std::string("aborting a borrowed slot: ") + e.what()).c_str());
  }
  writing_ = false;
  ws.owner_ = nullptr;
}

SlotHold ProducerImpl::hold(const WriteSlot& ws) {
  if (ws.owner_ != this) throw Error(Errc::invalid_argument, "hold of a slot not borrowed here");
  std::lock_guard<std::mutex> lock(mu_);
  const std::uint64_t bit = 1ull << ws.index_;
  if (held_.load(std::memory_order_relaxed) & bit)
    throw Error(Errc::invalid_argument, "slot " + std::to_string(ws.index_) + " is held already");
  held_set_[ws.index_] = set_id_;
  held_.fetch_or(bit, std::memory_order_seq_cst);
  SlotHold h;
  h.owner_ = this;
  h.index_ = ws.index_;
  return h;
}

void ProducerImpl::release(SlotHold& h) noexcept {
  held_.fetch_and(~(1ull << h.index_), std::memory_order_seq_cst);
  h.owner_ = nullptr;
  // A publish waiting for space announced itself before it looked for a free slot (seq_cst on
  // both sides): either it sees the slot free, or we see it waiting and wake it.
  if (cb_->producer_waiting.load(std::memory_order_seq_cst) != 0) wake_space();
}

PublishStatus ProducerImpl::publish(const void* data, std::uint64_t bytes, const FrameInfo& info,
                                    SourceKind from) {
  PublishStatus st;
  WriteSlot ws = begin_frame(&st);
  if (!ws) return st;
  if (bytes > ws.capacity())
    throw Error(Errc::invalid_argument,
                "frame of " + std::to_string(bytes) + " bytes exceeds the slot size " +
                    std::to_string(ws.capacity()) + " (set a larger format)");
  memory_->write(ws.address(), data, bytes, from);
  commit(ws, info);
  return PublishStatus::published;
}

PublishStatus ProducerImpl::publish_2d(const void* src, std::uint64_t src_pitch,
                                       std::uint64_t width, std::uint64_t height,
                                       std::uint64_t dst_pitch, const FrameInfo& info,
                                       SourceKind from) {
  if (dst_pitch == 0) dst_pitch = width;
  if (width > dst_pitch || width > src_pitch)
    throw Error(Errc::invalid_argument, "row width exceeds a pitch");
  PublishStatus st;
  WriteSlot ws = begin_frame(&st);
  if (!ws) return st;
  if (height != 0 && dst_pitch * (height - 1) + width > ws.capacity())
    throw Error(Errc::invalid_argument, "2-D frame does not fit the slot (set a larger format)");
  memory_->write_2d(ws.address(), dst_pitch, src, src_pitch, width, height, from);
  commit(ws, info);
  return PublishStatus::published;
}

void ProducerImpl::interrupt() noexcept {
  interrupted_.store(true, std::memory_order_seq_cst);
  // The waiter re-checks the flag after any change of space_wake_.
  wake_space();
}

void ProducerImpl::end_of_stream() {
  std::lock_guard<std::mutex> lock(mu_);
  cb_->eos_after.store(seq_ + 1, std::memory_order_release);
  wake_consumers();
}

std::uint64_t ProducerImpl::last_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seq_;
}

Producer::Stamp ProducerImpl::last_frame() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Producer::Stamp{seq_, last_publish_time_};
}

ProducerStats ProducerImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ProducerStats s{seq_, dropped_, generation_, {}};
  s.held = held_.load(std::memory_order_relaxed) & valid_mask_;
  std::lock_guard<std::mutex> table(table_mu_);
  for (const auto& r : live_records()) {
    if (!r || (!r->active && !r->evicted)) continue;
    // Counters are the consumer's own claims: shown, never acted on.
    const std::uint64_t cursor = std::min(r->page->cursor.load(std::memory_order_relaxed), seq_);
    s.consumers.push_back(
        ConsumerStats{r->id, r->pid, r->mode, r->page->delivered.load(std::memory_order_relaxed),
                      r->page->skipped.load(std::memory_order_relaxed),
                      r->page->leases.load(std::memory_order_relaxed) & valid_mask_, cursor,
                      seq_ - cursor, r->evicted});
  }
  return s;
}

std::size_t ProducerImpl::consumer_count() const {
  std::lock_guard<std::mutex> lock(table_mu_);
  const auto live = live_records();
  return static_cast<std::size_t>(
      std::count_if(live.begin(), live.end(), [](const auto& r) { return r && r->active; }));
}

// ---- public facade ----

WriteSlot::WriteSlot(WriteSlot&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)),
      address_(o.address_),
      capacity_(o.capacity_),
      index_(o.index_),
      metas_(o.metas_),
      metas_capacity_(o.metas_capacity_) {}

WriteSlot& WriteSlot::operator=(WriteSlot&& o) noexcept {
  if (this != &o) {
    if (owner_) owner_->abort(*this);
    owner_ = std::exchange(o.owner_, nullptr);
    address_ = o.address_;
    capacity_ = o.capacity_;
    index_ = o.index_;
    metas_ = o.metas_;
    metas_capacity_ = o.metas_capacity_;
  }
  return *this;
}

WriteSlot::~WriteSlot() {
  if (owner_) owner_->abort(*this);
}

SlotHold::SlotHold(SlotHold&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)), index_(o.index_) {}

SlotHold& SlotHold::operator=(SlotHold&& o) noexcept {
  if (this != &o) {
    if (owner_) owner_->release(*this);
    owner_ = std::exchange(o.owner_, nullptr);
    index_ = o.index_;
  }
  return *this;
}

SlotHold::~SlotHold() {
  if (owner_) owner_->release(*this);
}

Producer::Producer(const ProducerOptions& options)
    : impl_(std::make_unique<ProducerImpl>(options)) {}
Producer::~Producer() = default;
void Producer::close() {
  impl_->close();
}
void Producer::set_format(const Format& format) {
  impl_->set_format(format);
}
const Format& Producer::format() const {
  return impl_->format_;
}
WriteSlot Producer::begin_frame(PublishStatus* status) {
  return impl_->begin_frame(status);
}
void Producer::commit(WriteSlot& slot, const FrameInfo& info) {
  impl_->commit(slot, info);
}
void Producer::abort(WriteSlot& slot) {
  impl_->abort(slot);
}
SlotHold Producer::hold(const WriteSlot& slot) {
  return impl_->hold(slot);
}
PublishStatus Producer::publish(const void* data, std::uint64_t bytes, const FrameInfo& info,
                                bool from_device) {
  return impl_->publish(data, bytes, info, from_device ? SourceKind::device : SourceKind::host);
}
PublishStatus Producer::publish_2d(const void* src, std::uint64_t src_pitch, std::uint64_t width,
                                   std::uint64_t height, std::uint64_t dst_pitch,
                                   const FrameInfo& info, bool from_device) {
  return impl_->publish_2d(src, src_pitch, width, height, dst_pitch, info,
                           from_device ? SourceKind::device : SourceKind::host);
}
void Producer::end_of_stream() {
  impl_->end_of_stream();
}
void Producer::interrupt() noexcept {
  impl_->interrupt();
}
void Producer::clear_interrupt() noexcept {
  impl_->interrupted_.store(false, std::memory_order_seq_cst);
}
ProducerStats Producer::stats() const {
  return impl_->stats();
}
std::size_t Producer::consumer_count() const {
  return impl_->consumer_count();
}
const std::string& Producer::path() const {
  return impl_->path_;
}
MemoryKind Producer::memory_kind() const {
  return impl_->opts_.memory;
}
void* Producer::cuda_stream() const {
  return impl_->stream();
}
int Producer::cuda_device() const {
  return impl_->memory().device();
}
std::uint32_t Producer::meta_size() const {
  return impl_->opts_.meta_size;
}
void Producer::write_after(void* stream) {
  impl_->memory().write_after(stream);
}
void Producer::order_after_writes(void* stream) {
  impl_->memory().order_after_writes(stream);
}
bool Producer::written(std::uint64_t seq) const {
  return impl_->memory().written(seq);
}
std::uint64_t Producer::last_seq() const {
  return impl_->last_seq();
}

Producer::Stamp Producer::last_frame() const {
  return impl_->last_frame();
}

}  // namespace cudaipc
