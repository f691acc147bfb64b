// The socket messages, as a peer's bytes reach them: sendmsg on a real SOCK_SEQPACKET pair (with
// up to 69 fds, past kMaxMessageFds), recv_raw, parse_header, then the decoder for the header's
// type, as the producer and consumer dispatch. A message that decodes is sent again with the real
// encoder and must decode to the same values.
//
// Input: [u8 fd count % 70] [message bytes...]
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "fuzz.hpp"
#include "mapping.hpp"
#include "memory_backend.hpp"
#include "protocol.hpp"

namespace cudaipc::fuzz {
namespace {

using namespace std::chrono_literals;

UniqueFd g_tx, g_rx, g_devnull;

void init() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) fail("socketpair failed");
  g_tx = UniqueFd(sv[0]);
  g_rx = UniqueFd(sv[1]);
  g_devnull = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!g_devnull) fail("cannot open /dev/null");
}

// Bypasses send_raw's own limits: a hostile peer is not bound by them.
void send_hostile(const Bytes& bytes, std::size_t nfds) {
  std::vector<int> fds(nfds, g_devnull.get());  // each arrives as a fresh fd
  iovec iov{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * nfds));
  if (nfds > 0) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * nfds);
  }
  if (::sendmsg(g_tx.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL) !=
      static_cast<ssize_t>(bytes.size()))
    fail(std::string("sendmsg of a fuzz message failed: ") + std::strerror(errno));
}

// The next message on the pair, as the real receivers see it; nullopt when it reads as a close.
std::optional<Received> receive() {
  RawMessage raw;
  switch (recv_raw(g_rx.get(), raw, 0ms)) {
    case RecvStatus::ok:
      return parse_header(std::move(raw));
    case RecvStatus::closed:
      return std::nullopt;
    case RecvStatus::timeout:
    case RecvStatus::interrupted:  // no wake fd is given, so only a lost message gets here
      fail("a message sent on the socket pair did not arrive");
  }
  return std::nullopt;
}

Received resent() {
  auto r = receive();
  if (!r) fail("a re-encoded message read as a close");
  return std::move(*r);
}

void expect(bool ok, const char* what) {
  if (!ok) fail(std::string("decoded, re-encoded and decoded again, ") + what + " changed");
}

void decode(Received& r) {
  switch (r.type) {
    case MsgType::status_request: {
      decode_status_request(r);
      send_status_request(g_tx.get());
      Received again = resent();
      decode_status_request(again);
      break;
    }
    case MsgType::status: {
      ChannelStatus m = decode_status(r);
      send_status(g_tx.get(), m);
      Received again = resent();
      ChannelStatus n = decode_status(again);
      expect(n.published == m.published && n.slot_count == m.slot_count &&
                 n.format.caps == m.format.caps && n.producer_exe == m.producer_exe &&
                 n.consumers.size() == m.consumers.size(),
             "status fields");
      for (std::size_t i = 0; i < n.consumers.size(); ++i)
        expect(n.consumers[i].lag == m.consumers[i].lag &&
                   n.consumers[i].leases == m.consumers[i].leases,
               "status consumer");
      break;
    }
    case MsgType::hello: {
      HelloMsg m = decode_hello(r);
      send_hello(g_tx.get(), m);
      Received again = resent();
      expect(decode_hello(again).mode == m.mode, "hello mode");
      break;
    }
    case MsgType::welcome: {
      WelcomeMsg m = decode_welcome(r);
      send_welcome(g_tx.get(), m);
      Received again = resent();
      WelcomeMsg n = decode_welcome(again);
      expect(n.consumer_id == m.consumer_id && n.slot_count == m.slot_count &&
                 n.memory == m.memory && n.control_size == m.control_size &&
                 n.page_size == m.page_size && n.max_leases == m.max_leases,
             "welcome fields");
      expect(n.sync.bytes == m.sync.bytes && n.sync.fds.size() == m.sync.fds.size(),
             "welcome sync blob");
      break;
    }
    case MsgType::format: {
      FormatMsg m = decode_format(r);
      send_format(g_tx.get(), m);
      Received again = resent();
      FormatMsg n = decode_format(again);
      expect(n.generation == m.generation && n.set_id == m.set_id && n.slot_size == m.slot_size,
             "format header");
      expect(n.format.caps == m.format.caps && n.format.tensor == m.format.tensor &&
                 n.format.max_frame_size == m.format.max_frame_size,
             "format");
      expect(n.slots.bytes == m.slots.bytes && n.slots.fds.size() == m.slots.fds.size(),
             "format slot blob");
      break;
    }
    case MsgType::ready: {
      WireBlob b = decode_ready(r);
      send_ready(g_tx.get(), b);
      Received again = resent();
      WireBlob c = decode_ready(again);
      expect(c.bytes == b.bytes && c.fds.size() == b.fds.size(), "ready sync blob");
      break;
    }
    case MsgType::start: {
      StartMsg m = decode_start(r);
      send_start(g_tx.get(), m);
      Received again = resent();
      expect(decode_start(again).cursor == m.cursor, "start cursor");
      break;
    }
    case MsgType::refused: {
      // A refusal always throws: the producer's code when it is a known one, else protocol.
      static const std::string prefix = "producer refused the connection: ";
      Errc code = Errc::ok;
      std::string what;
      try {
        throw_refused(r);
      } catch (const Error& e) {
        code = e.code();
        what = e.what();
      }
      if (code == Errc::ok || code > Errc::unsupported)
        fail("a refusal decoded to code " + std::to_string(static_cast<int>(code)));
      if (what.compare(0, prefix.size(), prefix) != 0) return;  // rejected as malformed
      send_refused(g_tx.get(), code, what.substr(prefix.size()));
      Received again = resent();
      try {
        throw_refused(again);
      } catch (const Error& e) {
        expect(e.code() == code && what == e.what(), "refusal");
      }
      break;
    }
  }
}

void one_input(Input& in) {
  const std::size_t nfds = in.u8() % 70;
  // Past kMaxMessageBytes, where recv_raw must refuse, yet within the socket's send buffer.
  Bytes msg = in.rest(kMaxMessageBytes + 64);
  send_hostile(msg, nfds);
  auto r = receive();
  if (!r) {
    // Only an empty message without fds reads as the peer's hang-up.
    if (!msg.empty() || nfds != 0) fail("a message with content read as a close");
    return;
  }
  decode(*r);
}

Bytes seed(const Captured& c) {
  return SeedBuilder().u8(static_cast<std::uint8_t>(c.fds)).bytes(c.bytes).done();
}

std::vector<Bytes> seeds() {
  std::vector<Bytes> out;
  for (ConsumeMode mode : {ConsumeMode::every_frame, ConsumeMode::latest})
    out.push_back(seed(capture([&](int fd) { send_hello(fd, HelloMsg{mode}); })));

  // The host backend's real slot blob and a real control-block memfd.
  auto producer = make_host_producer_memory();
  auto slots = producer->allocate(3, 8192);
  for (std::uint32_t sync_fds : {0u, 2u}) {
    out.push_back(seed(capture([&](int fd) {
      WelcomeMsg w{};
      w.consumer_id = 1;
      w.slot_count = 3;
      w.memory = MemoryKind::host;
      w.control_size = 4096;
      w.page_size = 4096;
      w.max_leases = 2;
      w.control_fd = make_memfd("fuzz-control", 4096);
      w.page_fd = make_memfd("fuzz-page", 4096);
      w.sync.bytes = {1, 2, 3, 4, 5};
      for (std::uint32_t i = 0; i < sync_fds; ++i) w.sync.fds.push_back(make_memfd("fuzz-sync", 0));
      send_welcome(fd, w);
    })));
  }
  for (const char* caps : {"", "video/x-raw, format=RGBA, width=4, height=2"}) {
    out.push_back(seed(capture([&](int fd) {
      FormatMsg m{};
      m.generation = 2;
      m.set_id = 1;
      m.slot_size = slots->slot_size();
      m.format.caps = caps;
      m.format.tensor = make_tensor(DType::uint8, {2, 4, 4});
      m.slots = slots->export_slots();
      send_format(fd, m);
    })));
  }
  out.push_back(seed(capture([&](int fd) { send_ready(fd, WireBlob{}); })));
  out.push_back(seed(capture([&](int fd) {
    WireBlob b;
    b.bytes = {42, 0, 0, 0, 0, 0, 0, 0};
    b.fds.push_back(make_memfd("fuzz-ready", 0));
    send_ready(fd, b);
  })));
  out.push_back(seed(capture([&](int fd) { send_start(fd, StartMsg{17}); })));
  out.push_back(seed(capture([&](int fd) { send_refused(fd, Errc::busy, "no free entry"); })));
  out.push_back(seed(capture([&](int fd) { send_refused(fd, Errc::permission_denied, ""); })));
  return out;
}

}  // namespace

const Target& target() {
  static const Target t{
      "protocol", init, one_input, seeds, {Errc::protocol, Errc::version_mismatch}};
  return t;
}

}  // namespace cudaipc::fuzz
