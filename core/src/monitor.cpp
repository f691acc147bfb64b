// The monitor side of status requests (cudaipc/monitor.hpp): one socket, no mappings, no fds.
#include "cudaipc/monitor.hpp"

#include "protocol.hpp"
#include "unix_socket.hpp"

namespace cudaipc {

struct MonitorImpl {
  std::string path;
  std::chrono::milliseconds timeout;
  UniqueFd sock;
  pid_t producer_pid = 0;
};

namespace {

// What the producer said when it hung up (a refusal of who we are, say), or that it went away.
[[noreturn]] void throw_hang_up(MonitorImpl& m) {
  RawMessage raw;
  try {
    if (recv_raw(m.sock.get(), raw, std::chrono::milliseconds(0)) == RecvStatus::ok) {
      Received r = parse_header(std::move(raw));
      if (r.type == MsgType::refused) throw_refused(r);
    }
  } catch (const Refused&) {
    throw;
  } catch (const Error&) {
    // Nothing readable was left: the plain hang-up below is all there is to say.
  }
  throw Error(Errc::disconnected, "the producer on '" + m.path + "' went away");
}

}  // namespace

Monitor::Monitor(const std::string& path, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<MonitorImpl>()) {
  impl_->path = path;
  impl_->timeout = timeout;
  impl_->sock = connect_unix(path);
  try {
    impl_->producer_pid = peer_credentials(impl_->sock.get()).pid;
  } catch (const Error&) {
    // Gone already: the first request says so.
  }
}

Monitor::~Monitor() = default;
Monitor::Monitor(Monitor&&) noexcept = default;
Monitor& Monitor::operator=(Monitor&&) noexcept = default;

const std::string& Monitor::path() const noexcept {
  return impl_->path;
}

ChannelStatus Monitor::status() {
  MonitorImpl& m = *impl_;
  if (!m.sock) throw Error(Errc::disconnected, "the producer on '" + m.path + "' went away");
  try {
    send_status_request(m.sock.get());
  } catch (const Error& e) {
    // A producer refusing our credentials answers at accept and hangs up, often before our
    // request goes out: its refusal then waits on our socket.
    if (e.code() != Errc::disconnected) throw;
    throw_hang_up(m);
  }
  RawMessage raw;
  switch (recv_raw(m.sock.get(), raw, m.timeout)) {
    case RecvStatus::ok:
      break;
    case RecvStatus::closed:
      m.sock.reset();
      throw Error(Errc::disconnected, "the producer on '" + m.path + "' went away");
    case RecvStatus::timeout:
      throw Error(Errc::timeout, "the producer on '" + m.path + "' did not answer within " +
                                     std::to_string(m.timeout.count()) + " ms");
    case RecvStatus::interrupted:
      throw Error(Errc::interrupted, "interrupted");
  }
  Received r = parse_header(std::move(raw));
  if (r.type == MsgType::refused) {
    m.sock.reset();
    throw_refused(r);
  }
  if (r.type != MsgType::status)
    throw Error(Errc::protocol, "producer sent message type " +
                                    std::to_string(static_cast<std::uint32_t>(r.type)) +
                                    " instead of a status");
  ChannelStatus s = decode_status(r);
  s.producer_pid = m.producer_pid;
  s.at = std::chrono::steady_clock::now();
  return s;
}

ChannelStatus read_channel_status(const std::string& path, std::chrono::milliseconds timeout) {
  Monitor m(path, timeout);
  return m.status();
}

}  // namespace cudaipc
