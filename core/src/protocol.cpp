#include "protocol.hpp"

#include <cstring>

#include "control_block.hpp"

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
struct StatusBody {
  std::uint32_t memory;
  std::uint32_t export_mode;
  std::int32_t device;
  std::uint32_t slot_count;
  std::uint32_t max_consumers;
  std::uint32_t max_leases;
  std::uint32_t meta_size;
  std::uint32_t end_of_stream;
  std::uint64_t slot_size;
  std::uint64_t generation;
  std::uint64_t max_frame_size;
  TensorDesc tensor;
  std::uint64_t published;
  std::uint64_t dropped;
  std::uint64_t descriptor_refusals;
  std::uint64_t producer_time_ns;
  std::uint32_t monitors;
  std::uint32_t caps_bytes;
  std::uint32_t exe_bytes;
  std::uint32_t consumer_count;
};
struct StatusConsumerBody {
  std::uint32_t id;
  std::int32_t pid;
  std::uint32_t mode;
  std::uint32_t leases;
  std::uint64_t cursor;
  std::uint64_t lag;
  std::uint64_t delivered;
  std::uint64_t skipped;
  std::uint32_t evicted;
  std::uint32_t reserved;
};
static_assert(sizeof(StatusBody) + kMaxCapsLength + kMaxStatusExeBytes +
                      kMaxStatusConsumers * sizeof(StatusConsumerBody) + 16 <=
                  kMaxMessageBytes,
              "a full status message must fit one message");

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

void send_status_request(int fd) {
  Writer w(MsgType::status_request);
  w.put(std::uint32_t{0});
  w.send(fd);
}

void send_status(int fd, const ChannelStatus& s) {
  if (s.format.caps.size() > kMaxCapsLength || s.producer_exe.size() > kMaxStatusExeBytes ||
      s.consumers.size() > kMaxStatusConsumers)
    throw Error(Errc::invalid_argument, "status snapshot exceeds the message's limits");
  Writer w(MsgType::status);
  StatusBody b{};
  b.memory = static_cast<std::uint32_t>(s.memory);
  b.export_mode = static_cast<std::uint32_t>(s.export_mode);
  b.device = s.device;
  b.slot_count = s.slot_count;
  b.max_consumers = s.max_consumers;
  b.max_leases = s.max_leases;
  b.meta_size = s.meta_size;
  b.end_of_stream = s.end_of_stream ? 1 : 0;
  b.slot_size = s.slot_size;
  b.generation = s.generation;
  b.max_frame_size = s.format.max_frame_size;
  b.tensor = s.format.tensor;
  b.published = s.published;
  b.dropped = s.dropped;
  b.descriptor_refusals = s.descriptor_refusals;
  b.producer_time_ns = s.producer_time_ns;
  b.monitors = s.monitors;
  b.caps_bytes = static_cast<std::uint32_t>(s.format.caps.size());
  b.exe_bytes = static_cast<std::uint32_t>(s.producer_exe.size());
  b.consumer_count = static_cast<std::uint32_t>(s.consumers.size());
  w.put(b);
  w.append(s.format.caps.data(), s.format.caps.size());
  w.append(s.producer_exe.data(), s.producer_exe.size());
  for (const auto& c : s.consumers) {
    StatusConsumerBody cb{};
    cb.id = c.id;
    cb.pid = static_cast<std::int32_t>(c.pid);
    cb.mode = static_cast<std::uint32_t>(c.mode);
    cb.leases = c.leases;
    cb.cursor = c.cursor;
    cb.lag = c.lag;
    cb.delivered = c.delivered;
    cb.skipped = c.skipped;
    cb.evicted = c.evicted ? 1 : 0;
    w.put(cb);
  }
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
      h.type > static_cast<std::uint32_t>(MsgType::status))
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

void decode_status_request(Received& r) {
  Reader rd(r, "status request");
  const auto flags = rd.get<std::uint32_t>();
  rd.finish();
  expect_fds(r, 0, "status request");
  if (flags != 0)
    throw Error(Errc::protocol, "status request has unknown flags " + std::to_string(flags));
}

namespace {

// What a peer wrote, made safe to print: a producer's path or caps must not drive a terminal.
std::string printable(std::string s) {
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return s;
}

void status_check(bool ok, const std::string& what) {
  if (!ok) throw Error(Errc::protocol, "status from the producer: " + what);
}

}  // namespace

ChannelStatus decode_status(Received& r) {
  Reader rd(r, "status");
  const auto b = rd.get<StatusBody>();
  status_check(b.memory == static_cast<std::uint32_t>(MemoryKind::host) ||
                   b.memory == static_cast<std::uint32_t>(MemoryKind::cuda),
               "unknown memory kind " + std::to_string(b.memory));
  status_check(b.export_mode <= static_cast<std::uint32_t>(CudaExportMode::legacy),
               "unknown export mode " + std::to_string(b.export_mode));
  status_check(b.device >= -1 && b.device < 4096, "device " + std::to_string(b.device));
  status_check(b.slot_count >= 1 && b.slot_count <= kMaxSlots,
               std::to_string(b.slot_count) + " slots");
  status_check(b.max_consumers >= 1 && b.max_consumers <= kMaxConsumers,
               std::to_string(b.max_consumers) + " consumer places");
  status_check(b.max_leases >= 1 && b.max_leases <= b.slot_count,
               std::to_string(b.max_leases) + " leases per consumer");
  status_check(b.meta_size <= kMaxMetaSize, "meta size " + std::to_string(b.meta_size));
  status_check(b.end_of_stream <= 1, "bad end-of-stream flag");
  status_check(b.caps_bytes <= kMaxCapsLength, std::to_string(b.caps_bytes) + "-byte caps");
  status_check(b.exe_bytes <= kMaxStatusExeBytes, std::to_string(b.exe_bytes) + "-byte path");
  status_check(b.consumer_count <= kMaxStatusConsumers,
               std::to_string(b.consumer_count) + " consumers");
  status_check(b.monitors <= 1u << 20, std::to_string(b.monitors) + " monitors");
  ChannelStatus s;
  s.memory = static_cast<MemoryKind>(b.memory);
  s.export_mode = static_cast<CudaExportMode>(b.export_mode);
  s.device = b.device;
  s.slot_count = b.slot_count;
  s.max_consumers = b.max_consumers;
  s.max_leases = b.max_leases;
  s.meta_size = b.meta_size;
  s.end_of_stream = b.end_of_stream == 1;
  s.slot_size = b.slot_size;
  s.generation = b.generation;
  s.published = b.published;
  s.dropped = b.dropped;
  s.descriptor_refusals = b.descriptor_refusals;
  s.producer_time_ns = b.producer_time_ns;
  s.monitors = b.monitors;
  s.format.caps.resize(b.caps_bytes);
  rd.take(s.format.caps.data(), b.caps_bytes);
  s.format.caps = printable(std::move(s.format.caps));
  s.producer_exe.resize(b.exe_bytes);
  rd.take(s.producer_exe.data(), b.exe_bytes);
  s.producer_exe = printable(std::move(s.producer_exe));
  if (b.generation != 0) {
    s.format.tensor = b.tensor;
    s.format.max_frame_size = b.max_frame_size;
    validate_format(s.format, Errc::protocol);
    status_check(s.format.max_frame_size <= s.slot_size,
                 std::to_string(s.format.max_frame_size) + "-byte frames in " +
                     std::to_string(s.slot_size) + "-byte slots");
  } else {
    status_check(b.slot_size == 0 && b.caps_bytes == 0, "a format without a generation");
  }
  for (std::uint32_t i = 0; i < b.consumer_count; ++i) {
    const auto cb = rd.get<StatusConsumerBody>();
    status_check(cb.id < kMaxStatusConsumers, "consumer id " + std::to_string(cb.id));
    status_check(cb.pid >= 0, "consumer pid " + std::to_string(cb.pid));
    status_check(cb.mode <= static_cast<std::uint32_t>(ConsumeMode::latest),
                 "consumer mode " + std::to_string(cb.mode));
    status_check(cb.leases <= b.slot_count, "consumer holds " + std::to_string(cb.leases) + " of " +
                                                std::to_string(b.slot_count) + " slots");
    status_check(cb.cursor <= b.published && cb.lag <= b.published,
                 "consumer cursor or lag beyond the frames published");
    status_check(cb.evicted <= 1, "bad eviction flag");
    MonitorConsumer c;
    c.id = cb.id;
    c.pid = static_cast<pid_t>(cb.pid);
    c.mode = static_cast<ConsumeMode>(cb.mode);
    c.leases = cb.leases;
    c.cursor = cb.cursor;
    c.lag = cb.lag;
    c.delivered = cb.delivered;
    c.skipped = cb.skipped;
    c.evicted = cb.evicted == 1;
    s.consumers.push_back(c);
  }
  rd.finish();
  expect_fds(r, 0, "status");
  return s;
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
  throw Refused(code, std::move(reason));
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
