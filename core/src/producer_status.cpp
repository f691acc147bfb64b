// The producer's answer to a monitor (cudaipc/monitor.hpp): a snapshot of what it already keeps,
// taken on the socket thread. It reads the control block's counters and the lease records under
// table_mu_ (a short loop, no syscall), never the publish mutex, so a monitor costs publishing
// nothing, per frame or otherwise.
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "clock.hpp"
#include "producer_impl.hpp"
#include "protocol.hpp"

namespace cudaipc {
namespace {

static_assert(kMaxRecords <= kMaxStatusConsumers, "every record must fit a status message");

// The producer's executable, for `cudaipc ls`; empty where /proc cannot say.
std::string own_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf);
  if (n <= 0) return {};
  return std::string(buf, std::min<std::size_t>(static_cast<std::size_t>(n), kMaxStatusExeBytes));
}

}  // namespace

std::size_t ProducerImpl::monitor_count() const {
  return static_cast<std::size_t>(std::count_if(conns_.begin(), conns_.end(), [](const Conn& c) {
    return c.fd && c.state == ConnState::monitor;
  }));
}

void ProducerImpl::on_status_request(Conn& c, Received& r) {
  decode_status_request(r);
  if (c.state != ConnState::monitor) {
    // Admission already ran at accept: a monitor is someone who could have been a consumer.
    if (monitor_count() >= kMaxMonitors)
      throw Error(Errc::busy, std::to_string(kMaxMonitors) + " monitors are connected already");
    c.state = ConnState::monitor;
  }
  c.last_request_ns = monotonic_ns();
  // A monitor that does not read its replies fills its socket: send_status then throws busy and
  // the connection is dropped, so it can never make this thread wait.
  send_status(c.fd.get(), status_snapshot());
}

ChannelStatus ProducerImpl::status_snapshot() const {
  ChannelStatus s;
  s.producer_exe = own_executable();
  s.memory = memory_->kind();
  s.export_mode = memory_->export_mode();
  s.device = memory_->device();
  s.slot_count = slot_count_;
  s.max_consumers = opts_.max_consumers;
  s.max_leases = max_leases_;
  s.meta_size = opts_.meta_size;
  {
    std::lock_guard<std::mutex> lock(format_mu_);
    if (!format_history_.empty()) {
      const FormatState& f = format_history_.back();
      s.generation = f.generation;
      s.format = f.format;
      s.slot_size = f.slots->slot_size();
    }
  }
  s.published = cb_->frames_published.load(std::memory_order_acquire);
  s.dropped = cb_->frames_dropped.load(std::memory_order_relaxed);
  s.end_of_stream = cb_->eos_after.load(std::memory_order_acquire) != 0;
  s.descriptor_refusals = descriptor_refusals_;
  s.monitors = static_cast<std::uint32_t>(monitor_count());
  s.producer_time_ns = monotonic_ns();
  std::lock_guard<std::mutex> table(table_mu_);
  for (const auto& r : live_records()) {
    if (!r || (!r->active && !r->evicted)) continue;
    // The page is the consumer's to write: its words are clamped, shown, never acted on.
    MonitorConsumer m;
    m.id = r->id;
    m.pid = r->pid;
    m.mode = r->mode;
    m.cursor = std::min(r->page->cursor.load(std::memory_order_relaxed), s.published);
    m.lag = s.published - m.cursor;
    m.delivered = r->page->delivered.load(std::memory_order_relaxed);
    m.skipped = r->page->skipped.load(std::memory_order_relaxed);
    m.leases = static_cast<std::uint32_t>(
        __builtin_popcountll(r->page->leases.load(std::memory_order_relaxed) & valid_mask_));
    m.evicted = r->evicted;
    s.consumers.push_back(m);
  }
  return s;
}

}  // namespace cudaipc
