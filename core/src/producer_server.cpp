// The producer's socket thread: admits consumers (credentials, version, handshake), sends format
// changes, carries out evictions, and gives a consumer's slots back only on proof: it released
// them, or its process is gone (pidfd). It never takes the publish mutex.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <new>
#include <thread>

#include "clock.hpp"
#include "cudaipc/log.hpp"
#include "descriptor_shortage.hpp"
#include "process_watch.hpp"
#include "producer_impl.hpp"
#include "protocol.hpp"
#include "thread_name.hpp"
#include "unix_socket.hpp"

namespace cudaipc {
namespace {

constexpr std::uint64_t kHandshakeTimeoutNs = 5'000'000'000;
constexpr int kTickMs = 100;
constexpr int kMaxAcceptsPerRound = 64;
constexpr std::uint64_t kAcceptPauseNs = 100'000'000;
// How long a connection may wait for its handshake before a newcomer may push it out.
constexpr std::uint64_t kPendingGraceNs = 200'000'000;
constexpr std::uint64_t kAcceptLogIntervalNs = 5'000'000'000;
constexpr std::size_t kMaxSetsRemembered = 8;
// How long a consumer's socket may stay too full for the format changes it owes.
constexpr std::uint64_t kSendStallNs = 1'000'000'000;
// A monitor that asks nothing for this long has gone quiet: its place is given back.
constexpr std::uint64_t kMonitorIdleNs = 60'000'000'000;

// What a consumer is told when the producer could not serve it for want of a descriptor; the
// failed call's own words follow the limit.
std::string refusal_reason(const Error& e) {
  const auto* shortage = dynamic_cast<const DescriptorShortage*>(&e);
  return shortage ? shortage->reason("the producer") + ": " + e.what() : std::string(e.what());
}

std::size_t page_bytes() {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (sizeof(ConnPage) + page - 1) / page * page;
}

// True when `id`, as SO_PEERCRED reported it, stands for an id that this process's user namespace
// does not map: the kernel then shows the overflow id (`overflow_file`, 65534 by default), which
// is itself unmapped here. That is a peer in a user namespace with other id maps (another
// container's); who it really is cannot be told from here.
bool unmapped_id(std::uint32_t id, const char* overflow_file, const char* map_file) {
  std::uint64_t overflow = 65534;
  if (std::ifstream f(overflow_file); f) f >> overflow;
  if (id != overflow) return false;
  std::ifstream map(map_file);
  if (!map) return false;  // cannot tell: say nothing more
  std::uint64_t inside, outside, count;
  while (map >> inside >> outside >> count)
    if (id >= inside && id - inside < count) return false;
  return true;
}

}  // namespace

bool ProducerImpl::peer_allowed(uid_t uid, gid_t gid, std::string& why) const {
  if (uid == ::geteuid()) return true;
  if (opts_.allowed_gid && gid == *opts_.allowed_gid) return true;
  why = "peer uid " + std::to_string(uid) + " gid " + std::to_string(gid) +
        " is not allowed (channel owner uid " + std::to_string(::geteuid()) +
        (opts_.allowed_gid ? ", group " + std::to_string(*opts_.allowed_gid) : std::string()) + ")";
  const bool uid_unmapped = unmapped_id(uid, "/proc/sys/kernel/overflowuid", "/proc/self/uid_map");
  const bool gid_unmapped = unmapped_id(gid, "/proc/sys/kernel/overflowgid", "/proc/self/gid_map");
  if (uid_unmapped || gid_unmapped)
    why += std::string(": its ") +
           (uid_unmapped && gid_unmapped ? "uid and gid are"
            : uid_unmapped               ? "uid is"
                                         : "gid is") +
           " not mapped into the producer's user namespace (a container with other id maps); "
           "map the same ids into both, or a group mapped in both with socket-mode 0660 and "
           "allowed-group";
  return false;
}

void ProducerImpl::serve() {
  detail::name_this_thread("cudaipc-serve");
  std::vector<pollfd> fds;
  while (!stopping_.load(std::memory_order_seq_cst)) {
    try {
      serve_once(fds);
    } catch (const std::exception& e) {
      // One bad round must not end the thread that reclaims leases: report, breathe, go on.
      log(LogLevel::error, (std::string("producer socket thread: ") + e.what()).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Formats set just before the producer closes still reach its consumers, so they can read the
  // frames published in them.
  try {
    send_formats();
  } catch (const std::exception& e) {
    log(LogLevel::warning, (std::string("producer socket thread: ") + e.what()).c_str());
  }
}

void ProducerImpl::serve_once(std::vector<pollfd>& fds) {
  const std::uint64_t now = monotonic_ns();
  for (auto& c : conns_) {
    if (!c.fd) continue;
    if (c.state == ConnState::monitor) {
      if (now - c.last_request_ns > kMonitorIdleNs) drop(c, "");
    } else if (c.state != ConnState::active && now - c.accepted_ns > kHandshakeTimeoutNs) {
      drop(c, "handshake not finished within 5 s");
    }
  }
  act_on_records();
  std::vector<std::uint32_t> stalled;
  try {
    // GPU reads get as long as a lease to finish, whether their consumer is connected or left.
    memory_->reap(now, static_cast<std::uint64_t>(opts_.lease_timeout.count()), stalled);
  } catch (const Error& e) {
    log(LogLevel::error, (std::string("settling GPU reads: ") + e.what()).c_str());
  }
  if (!stalled.empty()) {
    evict_gpu_holders(stalled);
    act_on_records();
  }
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const Conn& c) { return !c.fd; }),
               conns_.end());

  fds.clear();
  fds.push_back({notify_fd_.get(), POLLIN, 0});
  const bool accepting = now >= accept_paused_until_;
  fds.push_back({accepting ? listen_fd_.get() : -1, POLLIN, 0});
  for (const auto& c : conns_)
    fds.push_back({c.fd.get(), static_cast<short>(POLLIN | (c.send_blocked_ns ? POLLOUT : 0)), 0});
  std::vector<int> watched;  // record ids, in the order of their pidfds in `fds`
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    for (const auto& r : live_records())
      if (r && r->pidfd) {
        fds.push_back({r->pidfd.get(), POLLIN, 0});
        watched.push_back(static_cast<int>(r->id));
      }
  }
  int rc = ::poll(fds.data(), fds.size(), kTickMs);
  if (rc < 0) {
    if (errno == EINTR) return;
    throw_errno("poll");
  }
  if (fds[0].revents) {
    std::uint64_t count;
    if (::read(notify_fd_.get(), &count, sizeof count) < 0 && errno != EAGAIN)
      throw_errno("reading the producer's notify eventfd");
    if (stopping_.load(std::memory_order_seq_cst)) return;
  }
  // Every round: a consumer whose socket was full gets what it still owes once there is room.
  send_formats();
  // conns_ only changes on this thread, so the poll set still lines up with it.
  const std::size_t first_conn = 2, first_pid = 2 + conns_.size();
  for (std::size_t k = first_conn; k < first_pid; ++k) {
    Conn& c = conns_[k - first_conn];
    if (!c.fd || fds[k].revents == 0) continue;
    if (fds[k].revents & POLLIN) {
      handle_message(c);
    } else if (fds[k].revents & (POLLHUP | POLLERR | POLLNVAL)) {
      drop(c, "consumer hung up");
    }
  }
  for (std::size_t k = first_pid; k < fds.size(); ++k) {
    if (fds[k].revents == 0) continue;
    const int id = watched[k - first_pid];
    for (auto& c : conns_)
      if (c.record == id) {
        c.record = -1;
        drop(c, "its process exited");
      }
    retire_record(id);
  }
  if (accepting && (fds[1].revents & POLLIN)) accept_new();
}

void ProducerImpl::accept_new() {
  for (int n = 0; n < kMaxAcceptsPerRound; ++n) {
    // Connections that never finish their handshake must not lock others out, nor make us churn:
    // at the limit the one waiting longest goes once it has had its chance (kPendingGraceNs);
    // until then newcomers wait in the backlog, which costs nothing.
    std::size_t pending = 0;
    Conn* oldest = nullptr;
    for (auto& c : conns_)
      if (c.fd && (c.state == ConnState::awaiting_hello || c.state == ConnState::awaiting_ready)) {
        ++pending;
        if (!oldest || c.accepted_ns < oldest->accepted_ns) oldest = &c;
      }
    if (pending >= kMaxPending && oldest) {
      const std::uint64_t now = monotonic_ns();
      if (now - oldest->accepted_ns < kPendingGraceNs) {
        accept_paused_until_ =
            std::min(now + kAcceptPauseNs, oldest->accepted_ns + kPendingGraceNs);
        return;
      }
      send_refused(oldest->fd.get(), Errc::busy, "too many connections waiting for a handshake");
      drop(*oldest, "cut: too many connections waiting for a handshake");
    }
    UniqueFd fd;
    try {
      fd = accept_unix(listen_fd_.get());
    } catch (const Error& e) {
      // Out of fds: the spare descriptor lets the consumer in to be told so, and the next one.
      const auto* shortage = dynamic_cast<const DescriptorShortage*>(&e);
      const SpareUse use = shortage ? refuse_on_spare(*shortage) : SpareUse::unavailable;
      if (use == SpareUse::refused) continue;
      if (use == SpareUse::none_waiting) return;
      // Out of memory, or no spare to give: leave the rest queued, try again shortly, and say
      // so now and then.
      const std::uint64_t now = monotonic_ns();
      accept_paused_until_ = now + kAcceptPauseNs;
      if (now >= next_accept_log_ns_) {
        next_accept_log_ns_ = now + kAcceptLogIntervalNs;
        log(LogLevel::warning, (path_ + ": " + e.what() + " (retrying)").c_str());
      }
      return;
    }
    if (!fd) return;
    PeerCredentials cred{};
    try {
      cred = peer_credentials(fd.get());
    } catch (const Error& e) {
      log(LogLevel::warning, e.what());
      continue;
    }
    std::string why;
    if (!peer_allowed(cred.uid, cred.gid, why)) {
      std::string msg =
          "refused consumer (" + describe_pid(cred.pid) + ") on " + path_ + ": " + why;
      log(LogLevel::warning, msg.c_str());
      send_refused(fd.get(), Errc::permission_denied, why);
      continue;
    }
    Conn c;
    c.fd = std::move(fd);
    c.pid = cred.pid;
    c.accepted_ns = monotonic_ns();
    conns_.push_back(std::move(c));
  }
}

// Lets one queued connection in on the spare descriptor, tells it that this process has no
// descriptors left (naming the limit), closes it and takes the spare back. A consumer that keeps
// trying (reconnect) is thus told why it waits, and is served once descriptors return.
ProducerImpl::SpareUse ProducerImpl::refuse_on_spare(const DescriptorShortage& e) {
  // The spare is gone when another thread of this process took its number since it was given
  // up; it is taken again here as soon as there is one.
  if (!spare_fd_) spare_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!spare_fd_) return SpareUse::unavailable;
  spare_fd_.reset();
  UniqueFd fd;
  try {
    fd = accept_unix(listen_fd_.get());
  } catch (const Error&) {
    // Another thread took the number first.
  }
  const bool waiting = static_cast<bool>(fd);
  if (fd) {
    const std::string why = e.reason("the producer");
    // Only those allowed in learn of the producer's state; the rest are refused as ever.
    std::string denied;
    try {
      const PeerCredentials cred = peer_credentials(fd.get());
      peer_allowed(cred.uid, cred.gid, denied);
    } catch (const Error& err) {
      denied = err.what();
    }
    ++descriptor_refusals_;
    if (denied.empty())
      send_refused(fd.get(), Errc::busy, why);
    else
      send_refused(fd.get(), Errc::permission_denied, denied);
    fd.reset();
    const std::uint64_t now = monotonic_ns();
    if (now >= next_accept_log_ns_) {
      next_accept_log_ns_ = now + kAcceptLogIntervalNs;
      log(LogLevel::warning,
          (path_ + ": refusing consumers, " + why + " (" + e.what() + ")").c_str());
    }
  }
  spare_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC));
  if (!waiting) return spare_fd_ ? SpareUse::none_waiting : SpareUse::unavailable;
  return SpareUse::refused;
}

void ProducerImpl::handle_message(Conn& c) {
  try {
    RawMessage raw;
    if (recv_raw(c.fd.get(), raw, std::chrono::milliseconds(0)) == RecvStatus::closed) {
      drop(c, "consumer hung up");
      return;
    }
    Received r = parse_header(std::move(raw));
    if (c.state == ConnState::awaiting_hello && r.type == MsgType::hello) {
      on_hello(c, r);
    } else if ((c.state == ConnState::awaiting_hello || c.state == ConnState::monitor) &&
               r.type == MsgType::status_request) {
      on_status_request(c, r);
    } else if (c.state == ConnState::awaiting_ready && r.type == MsgType::ready) {
      on_ready(c, r);
    } else {
      throw Error(Errc::protocol, "unexpected message type " +
                                      std::to_string(static_cast<std::uint32_t>(r.type)) +
                                      " from consumer");
    }
  } catch (const Error& e) {
    // Short of descriptors (the page's memfd, the dups of the control block and the slots):
    // busy, as at accept, so a consumer that keeps trying is served once they return.
    const bool shortage = dynamic_cast<const DescriptorShortage*>(&e) != nullptr;
    if (shortage) ++descriptor_refusals_;
    const std::string why = refusal_reason(e);
    send_refused(c.fd.get(), shortage ? Errc::busy : e.code(), why);
    drop(c, why);
  }
}

void ProducerImpl::on_hello(Conn& c, Received& r) {
  HelloMsg h = decode_hello(r);
  auto rec = std::make_unique<Record>();
  rec->pidfd = peer_pidfd(c.fd.get(), c.pid);
  if (!rec->pidfd && c.pid == 0)
    // Neither watched nor visible: its hang-up would have to stand for its death. A live consumer
    // cut off (evicted) would then have the frames it still reads overwritten, and a dead one
    // whose forked child keeps the socket open would hold its slots until it is evicted.
    throw Error(Errc::unsupported,
                "the consumer runs in a PID namespace the producer cannot see, and this kernel "
                "gives no pidfd for it (SO_PEERPIDFD, Linux 6.5+), so its death could not be told "
                "from a hang-up; run it in the producer's PID namespace (docker run "
                "--pid=container:<producer>) or on Linux 6.5 or newer");
  if (!rec->pidfd)
    log(LogLevel::debug, "no pidfd for a consumer: its socket alone tells that it exited");
  const std::size_t size = page_bytes();
  UniqueFd page_fd = make_memfd("cudaipc-connection", size);
  rec->page_map = std::make_shared<Mapping>(page_fd.get(), size, true);
  seal_memfd(page_fd.get(), false);
  rec->page = new (rec->page_map->data()) ConnPage{};
  rec->page->magic = kPageMagic;
  rec->page->version = kLayoutVersion;
  rec->page->page_size = static_cast<std::uint32_t>(size);
  rec->pid = c.pid;
  rec->mode = h.mode;
  int id = -1;
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    for (std::uint32_t i = 0; i < kMaxRecords && id < 0; ++i)
      if (!records_[i]) id = static_cast<int>(i);
    if (id >= 0) {
      rec->id = static_cast<std::uint32_t>(id);
      records_[static_cast<std::size_t>(id)] = std::move(rec);
      records_end_ = std::max(records_end_, static_cast<std::uint32_t>(id) + 1);
    }
  }
  if (id < 0)
    throw Error(Errc::busy, "the producer tracks " + std::to_string(kMaxRecords) +
                                " connections already (some hold slots after leaving)");
  c.record = id;
  c.mode = h.mode;
  c.state = ConnState::awaiting_ready;

  WelcomeMsg w;
  w.consumer_id = static_cast<std::uint32_t>(id);
  w.slot_count = slot_count_;
  w.memory = memory_->kind();
  w.control_size = static_cast<std::uint32_t>(control_map_.size());
  w.page_size = static_cast<std::uint32_t>(size);
  w.max_leases = max_leases_;
  w.control_fd = dup_fd(control_fd_.get());
  w.page_fd = std::move(page_fd);
  w.sync = memory_->export_sync();
  send_welcome(c.fd.get(), w);
  FormatState f;
  {
    std::lock_guard<std::mutex> lock(format_mu_);
    if (!format_history_.empty()) f = format_history_.back();
  }
  // Its frames start after Ready, so the newest format is the oldest it can need.
  if (f.slots) send_format_to(c, f);
}

void ProducerImpl::on_ready(Conn& c, Received& r) {
  WireBlob sync = decode_ready(r);
  if (consumer_count() >= opts_.max_consumers)
    throw Error(Errc::busy,
                "all " + std::to_string(opts_.max_consumers) + " consumer places taken");
  {
    std::shared_ptr<Mapping> page_map;
    ConnPage* page = nullptr;
    {
      std::lock_guard<std::mutex> lock(table_mu_);
      const Record& rec = *records_[static_cast<std::size_t>(c.record)];
      page_map = rec.page_map;
      page = rec.page;
    }
    const std::size_t page_bytes = page_map->size();
    memory_->attach_consumer(static_cast<std::uint32_t>(c.record), sync, page, page_bytes,
                             std::move(page_map));
  }
  std::uint64_t cursor;
  {
    // Under the table lock the publish path cannot be between choosing a slot and publishing
    // into it with this consumer unseen, so the frames after `cursor` are all kept for it.
    std::lock_guard<std::mutex> lock(table_mu_);
    Record& rec = *records_[static_cast<std::size_t>(c.record)];
    const std::uint64_t published = cb_->published.load(std::memory_order_acquire);
    // Late join: every-frame consumers start at the next frame, latest ones at the newest.
    cursor = c.mode == ConsumeMode::latest && published > 0 ? published - 1 : published;
    rec.page->cursor.store(cursor, std::memory_order_release);
    rec.last = PageSnapshot{};
    rec.last.cursor = cursor;
    rec.progress_ns = monotonic_ns();
    rec.active = true;
  }
  c.state = ConnState::active;
  send_start(c.fd.get(), StartMsg{cursor});
  std::string msg =
      "consumer " + std::to_string(c.record) + " (" + describe_pid(c.pid) + ") joined " + path_;
  log(LogLevel::info, msg.c_str());
  tell_consumer(ConsumerChange::Kind::joined, c, {});
}

void ProducerImpl::tell_consumer(ConsumerChange::Kind kind, const Conn& c, std::string reason) {
  if (!opts_.on_consumer) return;
  ConsumerChange change;
  change.kind = kind;
  change.pid = c.pid;
  change.mode = c.mode;
  change.reason = std::move(reason);
  change.consumers = consumer_count();
  try {
    opts_.on_consumer(change);
  } catch (const std::exception& e) {
    log(LogLevel::warning, (std::string("on_consumer threw: ") + e.what()).c_str());
  } catch (...) {
    log(LogLevel::warning, "on_consumer threw");
  }
}

void ProducerImpl::send_formats() {
  std::uint64_t behind = ~std::uint64_t{0};
  for (const auto& c : conns_)
    if (c.fd && owes_formats(c.state)) behind = std::min(behind, c.sent_generation);
  std::vector<FormatState> owed;  // every generation some consumer has not been sent, in order
  {
    std::lock_guard<std::mutex> lock(format_mu_);
    for (const auto& f : format_history_)
      if (f.generation > behind) owed.push_back(f);
  }
  for (auto& c : conns_) {
    if (owed.empty()) break;
    if (!c.fd || !owes_formats(c.state) || c.sent_generation >= owed.back().generation) continue;
    std::string why;
    try {
      for (const auto& f : owed)
        if (f.generation > c.sent_generation) send_format_to(c, f);
      c.send_blocked_ns = 0;
      continue;
    } catch (const Error& e) {
      why = refusal_reason(e);
      if (e.code() == Errc::busy) {
        // A burst of changes can fill a healthy reader's socket: give it time to drain.
        const std::uint64_t now = monotonic_ns();
        if (c.send_blocked_ns == 0) c.send_blocked_ns = now;
        if (now - c.send_blocked_ns < kSendStallNs) continue;
      }
    }
    // A consumer that does not read its socket is evicted like one that holds frames: the slots
    // it holds stay its own until it releases them or exits.
    why = "evicted: could not send a format change: " + why;
    send_refused(c.fd.get(), Errc::disconnected, why);
    drop(c, why);
  }
  // Keep only what a connected consumer still lacks, and the newest for those yet to join.
  behind = ~std::uint64_t{0};
  for (const auto& c : conns_)
    if (c.fd && owes_formats(c.state)) behind = std::min(behind, c.sent_generation);
  std::lock_guard<std::mutex> lock(format_mu_);
  while (format_history_.size() > 1 && format_history_.front().generation <= behind)
    format_history_.pop_front();
}

void ProducerImpl::send_format_to(Conn& c, const FormatState& f) {
  FormatMsg m;
  m.generation = f.generation;
  m.set_id = f.set_id;
  m.slot_size = f.slots->slot_size();
  m.format = f.format;
  // Slot fds travel once per connection and set: a consumer that stops reading must not pile up
  // descriptors in its socket with every format change.
  m.has_slots = std::find(c.sent_sets.begin(), c.sent_sets.end(), f.set_id) == c.sent_sets.end();
  if (m.has_slots) m.slots = f.slots->export_slots();
  send_format(c.fd.get(), m);
  c.sent_generation = f.generation;
  if (m.has_slots) {
    if (c.sent_sets.size() == kMaxSetsRemembered) c.sent_sets.erase(c.sent_sets.begin());
    c.sent_sets.push_back(f.set_id);
  }
}

// Carries out what the publish path decided (evictions, broken page rules) and frees records of
// consumers that left and have since released their last slot.
void ProducerImpl::act_on_records() {
  std::vector<std::pair<int, std::string>> cut;
  std::vector<int> done;
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    for (auto& r : live_records()) {
      if (!r) continue;
      if (r->evict_reason && r->has_socket) {
        cut.emplace_back(static_cast<int>(r->id), r->evict_reason);
        r->evict_reason = nullptr;
      } else if (!r->has_socket) {
        PageSnapshot s = read_conn_page(*r->page, slot_count_, max_leases_, ~std::uint64_t{0});
        if (r->void_leases || s.violation || s.leases == 0) done.push_back(static_cast<int>(r->id));
      }
    }
  }
  for (auto& [id, why] : cut)
    for (auto& c : conns_)
      if (c.record == id && c.fd) {
        send_refused(c.fd.get(), Errc::disconnected, "evicted: " + why);
        drop(c, "evicted: " + why);
      }
  for (int id : done) retire_record(id);
}

// The socket side of a consumer ends here; its record follows at once unless it still holds slots
// and is provably alive.
void ProducerImpl::drop(Conn& c, const std::string& why) {
  // A monitor coming and going is no news to whoever reads the producer's log.
  if (!why.empty() && c.state != ConnState::monitor) {
    std::string msg = "consumer (" + describe_pid(c.pid) + ") left " + path_ + ": " + why;
    log(LogLevel::info, msg.c_str());
  }
  c.fd.reset();
  const int id = std::exchange(c.record, -1);
  if (id < 0) return;
  // Told after its record stops counting (below), so `consumers` is the number left.
  struct Tell {
    ProducerImpl* self;
    const Conn& c;
    const std::string& why;
    bool active;
    ~Tell() {
      if (!active) return;
      const bool evicted = why.rfind("evicted", 0) == 0;
      self->tell_consumer(evicted ? ConsumerChange::Kind::evicted : ConsumerChange::Kind::left, c,
                          why.empty() ? "consumer hung up" : why);
    }
  } tell{this, c, why, c.state == ConnState::active};
  bool retire = true;
  std::size_t held = 0;
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    if (!records_[static_cast<std::size_t>(id)]) return;
    Record& r = *records_[static_cast<std::size_t>(id)];
    r.has_socket = false;
    r.active = false;
    // Before the last look at its leases (conn_page.hpp): none it takes later can count.
    r.page->revoked.store(1, std::memory_order_seq_cst);
    // Asleep on its own page's word, it hears of it now (the socket already says why) rather than
    // at its next liveness slice.
    wake_page(*r.page);
    // Without a pidfd the hang-up is the only sign of death we get, so it has to count as one.
    if (r.pidfd && !r.void_leases) {
      PageSnapshot s = read_conn_page(*r.page, slot_count_, max_leases_, ~std::uint64_t{0});
      held = static_cast<std::size_t>(__builtin_popcountll(s.leases));
      retire = s.violation != nullptr || s.leases == 0;
      if (!retire) r.evicted = true;
    }
  }
  if (retire) {
    retire_record(id);
  } else {
    std::string msg = "consumer " + std::to_string(id) + " (" + describe_pid(c.pid) + ") keeps " +
                      std::to_string(held) +
                      " slot(s) out of rotation until it releases them or exits";
    log(LogLevel::info, msg.c_str());
  }
}

void ProducerImpl::retire_record(int id) {
  std::unique_ptr<Record> rec;
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    rec = std::move(records_[static_cast<std::size_t>(id)]);
    while (records_end_ > 0 && !records_[records_end_ - 1]) --records_end_;
  }
  if (!rec) return;
  try {
    memory_->detach_consumer(static_cast<std::uint32_t>(id), std::move(rec->pidfd));
  } catch (const Error& e) {
    log(LogLevel::error, (std::string("reaping a consumer: ") + e.what()).c_str());
  }
  // Its slots and its unread frames are free now: a producer waiting for space moves on.
  wake_space();
}

}  // namespace cudaipc
