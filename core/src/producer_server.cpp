// The producer's socket thread: admits consumers (credentials, version, handshake), and reaps
// them when their socket hangs up, reclaiming their leases at once.
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "clock.hpp"
#include "cudaipc/log.hpp"
#include "producer_impl.hpp"
#include "protocol.hpp"
#include "unix_socket.hpp"

namespace cudaipc {
namespace {

constexpr std::uint64_t kHandshakeTimeoutNs = 5'000'000'000;
constexpr int kPollMs = 500;

}  // namespace

bool ProducerImpl::peer_allowed(uid_t uid, gid_t gid, std::string& why) const {
  if (uid == ::geteuid()) return true;
  if (opts_.allowed_gid && gid == *opts_.allowed_gid) return true;
  why = "peer uid " + std::to_string(uid) + " gid " + std::to_string(gid) +
        " is not allowed (channel owner uid " + std::to_string(::geteuid()) +
        (opts_.allowed_gid ? ", group " + std::to_string(*opts_.allowed_gid) : std::string()) +
        ")";
  return false;
}

void ProducerImpl::serve() {
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Reap closed or stalled connections before building the poll set.
      const std::uint64_t now = monotonic_ns();
      for (auto& c : conns_)
        if (c.fd && c.state != ConnState::active && now - c.accepted_ns > kHandshakeTimeoutNs)
          drop(c, "handshake not finished within 5 s");
      for (auto& c : conns_)
        if (!c.fd && c.state != ConnState::awaiting_hello) drop(c, "");
      conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const Conn& c) { return !c.fd; }),
                   conns_.end());
      fds.clear();
      fds.push_back({stop_fd_.get(), POLLIN, 0});
      fds.push_back({listen_fd_.get(), POLLIN, 0});
      for (const auto& c : conns_) fds.push_back({c.fd.get(), POLLIN, 0});
    }
    int rc = ::poll(fds.data(), fds.size(), kPollMs);
    if (rc < 0) {
      if (errno == EINTR) continue;
      log(LogLevel::error, "producer socket thread: poll failed");
      return;
    }
    if (fds[0].revents) return;
    std::lock_guard<std::mutex> lock(mu_);
    // conns_ only changes on this thread, so the poll set still lines up with it.
    for (std::size_t k = 2; k < fds.size(); ++k) {
      Conn& c = conns_[k - 2];
      if (!c.fd || fds[k].revents == 0) continue;
      if (fds[k].revents & POLLIN) {
        handle_message(c);
      } else {
        drop(c, "consumer hung up");
      }
    }
    if (fds[1].revents & POLLIN) accept_new();
  }
}

void ProducerImpl::accept_new() {
  for (;;) {
    UniqueFd fd;
    try {
      fd = accept_unix(listen_fd_.get());
    } catch (const Error& e) {
      log(LogLevel::warning, e.what());
      return;
    }
    if (!fd) return;
    PeerCredentials cred = peer_credentials(fd.get());
    std::string why;
    if (!peer_allowed(cred.uid, cred.gid, why)) {
      std::string msg = "refused consumer pid " + std::to_string(cred.pid) + " on " + path_ +
                        ": " + why;
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
    } else if (c.state == ConnState::awaiting_ready && r.type == MsgType::ready) {
      on_ready(c, r);
    } else {
      throw Error(Errc::protocol, "unexpected message type " +
                                      std::to_string(static_cast<std::uint32_t>(r.type)) +
                                      " from consumer");
    }
  } catch (const Error& e) {
    send_refused(c.fd.get(), e.code(), e.what());
    drop(c, e.what());
  }
}

void ProducerImpl::on_hello(Conn& c, Received& r) {
  HelloMsg h = decode_hello(r);
  std::uint32_t id = 0;
  while (id < opts_.max_consumers && entry_used_[id]) ++id;
  if (id == opts_.max_consumers)
    throw Error(Errc::busy, "all " + std::to_string(opts_.max_consumers) + " consumer places taken");
  entry_used_[id] = true;
  entry_mode_[id] = h.mode;
  c.id = id;
  c.mode = h.mode;
  c.state = ConnState::awaiting_ready;
  ConsumerEntry& e = cb_->consumers[id];
  e.state.store(static_cast<std::uint32_t>(EntryState::free), std::memory_order_release);
  e.leases.store(0, std::memory_order_relaxed);

  WelcomeMsg w;
  w.consumer_id = id;
  w.slot_count = slot_count_;
  w.memory = memory_->kind();
  w.control_size = static_cast<std::uint32_t>(control_map_.size());
  w.control_fd = dup_fd(control_fd_.get());
  w.sync = memory_->export_sync();
  send_welcome(c.fd.get(), w);
  if (slots_) send_format_to(c);
}

void ProducerImpl::on_ready(Conn& c, Received& r) {
  WireBlob sync = decode_ready(r);
  memory_->attach_consumer(c.id, sync);
  ConsumerEntry& e = cb_->consumers[c.id];
  // Late join: every-frame consumers start at the next frame, latest ones at the newest.
  std::uint64_t cursor = seq_;
  if (c.mode == ConsumeMode::latest && seq_ > 0) cursor = seq_ - 1;
  e.cursor.store(cursor, std::memory_order_relaxed);
  e.delivered.store(0, std::memory_order_relaxed);
  e.skipped.store(0, std::memory_order_relaxed);
  e.leases.store(0, std::memory_order_relaxed);
  e.pid.store(static_cast<std::uint32_t>(c.pid), std::memory_order_relaxed);
  e.mode = static_cast<std::uint32_t>(c.mode);
  e.state.store(static_cast<std::uint32_t>(EntryState::active), std::memory_order_seq_cst);
  c.state = ConnState::active;
  send_start(c.fd.get(), StartMsg{cursor});
  std::string msg = "consumer " + std::to_string(c.id) + " (pid " + std::to_string(c.pid) +
                    ") joined " + path_;
  log(LogLevel::info, msg.c_str());
}

// Forgets a consumer: its entry is freed and its leases are reclaimed, so a blocked producer
// moves on. Called with mu_ held; the Conn itself is erased by serve().
void ProducerImpl::drop(Conn& c, const std::string& why) {
  if (c.state != ConnState::awaiting_hello) {
    ConsumerEntry& e = cb_->consumers[c.id];
    e.state.store(static_cast<std::uint32_t>(EntryState::free), std::memory_order_seq_cst);
    e.leases.store(0, std::memory_order_seq_cst);
    try {
      memory_->detach_consumer(c.id);
    } catch (const Error& e) {
      log(LogLevel::error, (std::string("reaping a consumer: ") + e.what()).c_str());
    }
    entry_used_[c.id] = false;
    c.state = ConnState::awaiting_hello;
    wake_producer();
  }
  if (!why.empty()) {
    std::string msg = "consumer pid " + std::to_string(c.pid) + " left " + path_ + ": " + why;
    log(LogLevel::info, msg.c_str());
  }
  c.fd.reset();
}

}  // namespace cudaipc
