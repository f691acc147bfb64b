// The lease side of the producer: what every consumer page says, checked, and what to do about a
// consumer that holds publishing back, and the wake of a consumer asleep on its page. Runs on the
// publish path under table_mu_, with no syscall but that wake and the rare eviction notice to the
// socket thread.
#include <algorithm>
#include <bitset>
#include <string>

#include "cudaipc/log.hpp"
#include "process_watch.hpp"
#include "producer_impl.hpp"

namespace cudaipc {
namespace {

constexpr std::uint64_t kHoldbackLogIntervalNs = 2'000'000'000;

}  // namespace

ProducerImpl::Occupancy ProducerImpl::occupancy(std::uint64_t now) {
  Occupancy o;
  bool notify = false;
  std::lock_guard<std::mutex> lock(table_mu_);
  for (auto& r : live_records()) {
    if (!r || r->void_leases || (!r->active && !r->evicted)) continue;
    PageSnapshot s = read_conn_page(*r->page, slot_count_, max_leases_, seq_);
    if (s.violation) {
      // Nothing an honest consumer does gets here; what it claims no longer counts, so it can
      // only have hurt itself.
      r->void_leases = true;
      r->active = false;
      r->evict_reason = s.violation;
      notify = true;
      continue;
    }
    if (s.leases != r->last.leases || s.cursor != r->last.cursor) r->progress_ns = now;
    r->last = s;
    o.leased |= s.leases;
    if (r->active && r->mode == ConsumeMode::every_frame && !s.retired)
      o.min_cursor = std::min(o.min_cursor, s.cursor);
  }
  if (notify) post_to_server();
  return o;
}

// After frame_futex's bump: a consumer that read the old value before it announced its sleep is
// seen here (both seq_cst) and woken on its own page's word; one that did not sleeps no more. Only
// pages that say `sleeping` cost a syscall. An evicted consumer is woken by drop(), once the socket
// holds the reason: woken by a publish before that, it would leave without it.
void ProducerImpl::wake_sleepers(bool everyone) {
  std::lock_guard<std::mutex> lock(table_mu_);
  for (const auto& r : live_records()) {
    if (!r) continue;
    if (everyone || (r->active && r->page->sleeping.load(std::memory_order_seq_cst) != 0))
      wake_page(*r->page);
  }
}

// Publishing has found no free slot for lease_timeout: every consumer that holds a slot or an
// unread frame and has not moved for that long is cut off. Its cursor stops counting at once; the
// slots it holds stay out of rotation until it releases them or dies.
void ProducerImpl::evict_stalled(std::uint64_t now) {
  const auto timeout = static_cast<std::uint64_t>(opts_.lease_timeout.count());
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    for (auto& r : live_records()) {
      if (!r || !r->active || now - r->progress_ns < timeout) continue;
      const bool holds_slots = r->last.leases != 0;
      const bool holds_frames =
          r->mode == ConsumeMode::every_frame && !r->last.retired && r->last.cursor < seq_;
      if (!holds_slots && !holds_frames) continue;
      mark_evicted(*r, holds_slots ? "held frames without releasing them for the lease timeout"
                                   : "read no frame for the lease timeout while publishing "
                                     "waited for it");
      notify = true;
    }
  }
  if (notify) post_to_server();
}

void ProducerImpl::evict_gpu_holders(const std::vector<std::uint32_t>& ids) {
  std::lock_guard<std::mutex> lock(table_mu_);
  for (std::uint32_t id : ids) {
    Record* r = id < kMaxRecords ? records_[id].get() : nullptr;
    if (r && r->active)
      mark_evicted(*r, "its GPU reads held a slot for longer than the lease timeout");
  }
}

// Called with table_mu_ held; the socket thread hangs up on it and says why.
void ProducerImpl::mark_evicted(Record& r, const char* reason) {
  r.active = false;
  r.evicted = true;
  // It takes no new frame from here on, even before the socket thread hangs up on it.
  r.page->revoked.store(1, std::memory_order_seq_cst);
  r.evict_reason = reason;
  std::string msg = "evicting consumer " + std::to_string(r.id) + " (" + describe_pid(r.pid) +
                    ") from " + path_ + ": " + reason;
  log(LogLevel::warning, msg.c_str());
}

// Says, at most every 2 s, which consumers have kept publishing from finding a free slot.
void ProducerImpl::log_holdback(std::uint64_t now) {
  // Short waits are ordinary back-pressure; a second without a slot is worth a name.
  if (now < next_holdback_log_ns_ || now - starved_since_ < 1'000'000'000) return;
  next_holdback_log_ns_ = now + kHoldbackLogIntervalNs;
  std::string msg;
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    for (const auto& r : live_records()) {
      if (!r || r->void_leases || (!r->active && !r->evicted)) continue;
      const bool behind = r->active && r->mode == ConsumeMode::every_frame && !r->last.retired &&
                          r->last.cursor < seq_;
      if (r->last.leases == 0 && !behind) continue;
      msg += "; consumer " + std::to_string(r->id) + " (" + describe_pid(r->pid) + ") holds " +
             std::to_string(std::bitset<64>(r->last.leases).count()) + " slot(s)";
      if (behind) msg += " and is " + std::to_string(seq_ - r->last.cursor) + " frame(s) behind";
      if (r->evicted) msg += " (evicted)";
    }
  }
  // Slots this process holds past their publishing (SlotHold: buffers downstream of a filter).
  const std::uint64_t held = held_.load(std::memory_order_relaxed) & valid_mask_;
  if (held)
    msg += "; this process holds " + std::to_string(std::bitset<64>(held).count()) +
           " published slot(s) in use here";
  if (msg.empty()) return;
  log(LogLevel::warning, ("no free slot on " + path_ + msg).c_str());
}

}  // namespace cudaipc
