#include "protocol.hpp"

#include <cstring>

namespace cudaipc {
namespace {

struct Header {
  std::uint32_t magic;
  std::uint32_t version;
  std::uint32_t type;
  std::uint32_t body_size;
};

// Fixed parts of the message bodies; variable tails (strings, blobs) follow them.
struct HelloBody {
  std::uint32_t mode;
};
struct WelcomeBody {
  std::uint32_t consumer_id;
  std::uint32_t slot_count;
  std::uint32_t memory;
  std::uint32_t control_size;
  std::uint32_t page_size;
  std::uint32_t max_leases;
  std::uint32_t sync_bytes;
  std::uint32_t sync_fds;
};
struct FormatBody {
  std::uint64_t generation;
  std::uint64_t set_id;
  std::uint64_t slot_size;
  std::uint64_t max_frame_size;
  TensorDesc tensor;
  std::uint32_t caps_bytes;
  std::uint32_t slot_bytes;
  std::uint32_t has_slots;
  std::uint32_t reserved;
};
struct StartBody {
  std::uint64_t cursor;
};
struct RefusedBody {
  std::uint32_t code;
  std::uint32_t reason_bytes;
};

class Writer {
 public:
  explicit Writer(MsgType type) {
    Header h{kWireMagic, kProtocolVersion, static_cast<std::uint32_t>(type), 0};
    append(&h, sizeof h);
  }
  template <typename T>
  void put(const T& v) {
    append(&v, sizeof v);
  }
  void append(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  void send(int fd, const std::vector<int>& fds = {}) {
    auto body = static_cast<std::uint32_t>(bytes_.size() - sizeof(Header));
    std::memcpy(bytes_.data() + offsetof(Header, body_size), &body, sizeof body);
    send_raw(fd, bytes_.data(), bytes_.size(), fds);
  }

 private:
  std::vector<std::uint8_t> bytes_;
};

class Reader {
 public:
  Reader(const Received& r, const char* what) : raw_(r.raw), what_(what), pos_(sizeof(Header)) {}
  template <typename T>
  T get() {
    T v;
    take(&v, sizeof v);
    return v;
  }
  void take(void* out, std::size_t n) {
    if (raw_.bytes.size() - pos_ < n)
      throw Error(Errc::protocol, std::string("truncated ") + what_ + " message from peer");
    if (n == 0) return;  // `out` may be an empty string's or vector's null data()
    std::memcpy(out, raw_.bytes.data() + pos_, n);
    pos_ += n;
  }
  void finish() const {
    if (pos_ != raw_.bytes.size())
      throw Error(Errc::protocol, std::string(what_) + " message from peer has " +
                                      std::to_string(raw_.bytes.size() - pos_) + " stray bytes");
  }

 private:
  const RawMessage& raw_;
  const char* what_;
  std::size_t pos_;
};

std::vector<int> raw_fds(const WireBlob& b) {
  std::vector<int> out;
  for (const auto& f : b.fds) out.push_back(f.get());
  return out;
}

void expect_fds(const Received& r, std::size_t n, const char* what) {
  if (r.raw.fds.size() != n)
    throw Error(Errc::protocol, std::string(what) + " message carried " +
                                    std::to_string(r.raw.fds.size()) +
                                    " file descriptors, expected " + std::to_string(n));
}

}  // namespace

void send_hello(int fd, const HelloMsg& m) {
  Writer w(MsgType::hello);
  w.put(HelloBody{static_cast<std::uint32_t>(m.mode)});
  w.send(fd);
}

void send_welcome(int fd, const WelcomeMsg& m) {
  Writer w(MsgType::welcome);
  w.put(WelcomeBody{m.consumer_id, m.slot_count, static_cast<std::uint32_t>(m.memory),
                    m.control_size, m.page_size, m.max_leases,
                    static_cast<std::uint32_t>(m.sync.bytes.size()),
                    static_cast<std::uint32_t>(m.sync.fds.size())});
  w.append(m.sync.bytes.data(), m.sync.bytes.size());
  std::vector<int> fds{m.control_fd.get(), m.page_fd.get()};
  for (int f : raw_fds(m.sync)) fds.push_back(f);
  w.send(fd, fds);
}

void send_format(int fd, const FormatMsg& m) {
  Writer w(MsgType::format);
  FormatBody b{};
  b.generation = m.generation;
  b.set_id = m.set_id;
  b.slot_size = m.slot_size;
  b.max_frame_size = m.format.max_frame_size;
  b.tensor = m.format.tensor;
  b.caps_bytes = static_cast<std::uint32_t>(m.format.caps.size());
  b.slot_bytes = static_cast<std::uint32_t>(m.slots.bytes.size());
  b.has_slots = m.has_slots ? 1 : 0;
  w.put(b);
  w.append(m.format.caps.data(), m.format.caps.size());
  w.append(m.slots.bytes.data(), m.slots.bytes.size());
  w.send(fd, raw_fds(m.slots));
}

void send_ready(int fd, const WireBlob& sync) {
  Writer w(MsgType::ready);
  w.put(static_cast<std::uint32_t>(sync.bytes.size()));
  w.append(sync.bytes.data(), sync.bytes.size());
  w.send(fd, raw_fds(sync));
}

void send_start(int fd, const StartMsg& m) {
  Writer w(MsgType::start);
  w.put(StartBody{m.cursor});
  w.send(fd);
}

void send_refused(int fd, Errc code, const std::string& reason) noexcept {
  try {
    Writer w(MsgType::refused);
    std::string r = reason.substr(0, 1024);
    w.put(RefusedBody{static_cast<std::uint32_t>(code), static_cast<std::uint32_t>(r.size())});
    w.append(r.data(), r.size());
    w.send(fd);
  } catch (const Error&) {
    // The peer is gone or not reading; the refusal is also logged by the caller.
  }
}

Received parse_header(RawMessage&& raw) {
  if (raw.bytes.size() < sizeof(Header))
    throw Error(Errc::protocol, "peer sent a " + std::to_string(raw.bytes.size()) +
                                    "-byte message, shorter than a header");
  Header h;
  std::memcpy(&h, raw.bytes.data(), sizeof h);
  if (h.magic != kWireMagic)
    throw Error(Errc::protocol, "peer is not a cudaipc endpoint (bad message magic)");
  if (h.version != kProtocolVersion)
    throw Error(Errc::version_mismatch, "peer speaks cudaipc protocol version " +
                                            std::to_string(h.version) + ", this build speaks " +
                                            std::to_string(kProtocolVersion));
  if (h.body_size != raw.bytes.size() - sizeof(Header))
    throw Error(Errc::protocol,
                "message size field (" + std::to_string(h.body_size) + ") does not match the " +
                    std::to_string(raw.bytes.size() - sizeof(Header)) + " bytes received");
  if (h.type < static_cast<std::uint32_t>(MsgType::hello) ||
      h.type > static_cast<std::uint32_t>(MsgType::refused))
    throw Error(Errc::protocol, "unknown message type " + std::to_string(h.type));
  return Received{static_cast<MsgType>(h.type), std::move(raw)};
}

HelloMsg decode_hello(Received& r) {
  Reader rd(r, "hello");
  auto b = rd.get<HelloBody>();
  rd.finish();
  expect_fds(r, 0, "hello");
  if (b.mode > static_cast<std::uint32_t>(ConsumeMode::latest))
    throw Error(Errc::protocol, "hello asks for unknown consume mode " + std::to_string(b.mode));
  return HelloMsg{static_cast<ConsumeMode>(b.mode)};
}

WelcomeMsg decode_welcome(Received& r) {
  Reader rd(r, "welcome");
  auto b = rd.get<WelcomeBody>();
  WelcomeMsg m;
  m.consumer_id = b.consumer_id;
  m.slot_count = b.slot_count;
  if (b.memory != static_cast<std::uint32_t>(MemoryKind::host) &&
      b.memory != static_cast<std::uint32_t>(MemoryKind::cuda))
    throw Error(Errc::protocol, "welcome names unknown memory kind " + std::to_string(b.memory));
  m.memory = static_cast<MemoryKind>(b.memory);
  m.control_size = b.control_size;
  m.page_size = b.page_size;
  m.max_leases = b.max_leases;
  if (b.sync_bytes > kMaxMessageBytes)
    throw Error(Errc::protocol, "welcome sync blob size out of range");
  m.sync.bytes.resize(b.sync_bytes);
  rd.take(m.sync.bytes.data(), b.sync_bytes);
  rd.finish();
  if (b.sync_fds > kMaxMessageFds)
    throw Error(Errc::protocol, "welcome sync fd count out of range");
  expect_fds(r, 2 + static_cast<std::size_t>(b.sync_fds), "welcome");
  m.control_fd = std::move(r.raw.fds[0]);
  m.page_fd = std::move(r.raw.fds[1]);
  for (std::size_t i = 2; i < r.raw.fds.size(); ++i) m.sync.fds.push_back(std::move(r.raw.fds[i]));
  return m;
}

FormatMsg decode_format(Received& r) {
  Reader rd(r, "format");
  auto b = rd.get<FormatBody>();
  if (b.caps_bytes > kMaxCapsLength)
    throw Error(Errc::protocol, "format caps of " + std::to_string(b.caps_bytes) +
                                    " bytes exceed the limit of " + std::to_string(kMaxCapsLength));
  if (b.slot_bytes > kMaxMessageBytes) throw Error(Errc::protocol, "format slot blob out of range");
  FormatMsg m;
  m.generation = b.generation;
  m.set_id = b.set_id;
  m.slot_size = b.slot_size;
  m.format.tensor = b.tensor;
  m.format.max_frame_size = b.max_frame_size;
  m.format.caps.resize(b.caps_bytes);
  rd.take(m.format.caps.data(), b.caps_bytes);
  m.slots.bytes.resize(b.slot_bytes);
  rd.take(m.slots.bytes.data(), b.slot_bytes);
  rd.finish();
  if (b.has_slots > 1) throw Error(Errc::protocol, "format message has a bad slot flag");
  m.has_slots = b.has_slots == 1;
  if (!m.has_slots && (b.slot_bytes != 0 || !r.raw.fds.empty()))
    throw Error(Errc::protocol, "format message without slots carries a slot blob");
  for (auto& f : r.raw.fds) m.slots.fds.push_back(std::move(f));
  validate_format(m.format, Errc::protocol);
  if (m.format.max_frame_size > m.slot_size)
    throw Error(Errc::protocol, "format needs " + std::to_string(m.format.max_frame_size) +
                                    "-byte frames but slots hold " + std::to_string(m.slot_size));
  return m;
}

WireBlob decode_ready(Received& r) {
  Reader rd(r, "ready");
  auto n = rd.get<std::uint32_t>();
  if (n > kMaxMessageBytes) throw Error(Errc::protocol, "ready sync blob size out of range");
  WireBlob b;
  b.bytes.resize(n);
  rd.take(b.bytes.data(), n);
  rd.finish();
  for (auto& f : r.raw.fds) b.fds.push_back(std::move(f));
  return b;
}

StartMsg decode_start(Received& r) {
  Reader rd(r, "start");
  auto b = rd.get<StartBody>();
  rd.finish();
  expect_fds(r, 0, "start");
  return StartMsg{b.cursor};
}

void throw_refused(Received& r) {
  Reader rd(r, "refused");
  auto b = rd.get<RefusedBody>();
  if (b.reason_bytes > 1024) throw Error(Errc::protocol, "refusal reason too long");
  std::string reason(b.reason_bytes, '\0');
  rd.take(reason.data(), b.reason_bytes);
  Errc code = Errc::protocol;
  if (b.code >= 1 && b.code <= static_cast<std::uint32_t>(Errc::unsupported))
    code = static_cast<Errc>(b.code);
  throw Refused(code, "producer refused the connection: " + reason);
}

void validate_format(Format& f, Errc code) {
  if (f.caps.size() > kMaxCapsLength)
    throw Error(code, "caps string of " + std::to_string(f.caps.size()) +
                          " bytes exceeds the limit of " + std::to_string(kMaxCapsLength));
  try {
    validate(f.tensor, ~std::uint64_t{0});
  } catch (const Error& e) {
    throw Error(code, e.what());
  }
  std::uint64_t need = f.tensor.byte_offset + f.tensor.size;
  if (f.max_frame_size == 0) f.max_frame_size = need;
  if (f.max_frame_size < need)
    throw Error(code, "format max_frame_size " + std::to_string(f.max_frame_size) +
                          " is smaller than its tensor (" + std::to_string(need) + " bytes)");
  if (f.max_frame_size == 0) throw Error(code, "format describes an empty frame");
}

}  // namespace cudaipc
