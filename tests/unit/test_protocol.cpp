// The handshake messages: each round-trips through a real seqpacket socket pair, and malformed
// ones fail to decode with Errc::protocol (or version_mismatch) naming the cause.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>

#include "mapping.hpp"
#include "protocol.hpp"

using namespace cudaipc;
using namespace std::chrono_literals;

namespace {

class Protocol : public ::testing::Test {
 protected:
  Protocol() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
    a_ = UniqueFd(sv[0]);
    b_ = UniqueFd(sv[1]);
  }
  Received receive() {
    RawMessage raw;
    EXPECT_EQ(recv_raw(b_.get(), raw, 1000ms), RecvStatus::ok);
    return parse_header(std::move(raw));
  }
  // Sends raw bytes as one message and returns the decode error for `decode`.
  template <typename Decode>
  Error decode_error(const std::vector<std::uint8_t>& bytes, Decode decode) {
    send_raw(a_.get(), bytes.data(), bytes.size(), {});
    try {
      Received r = receive();
      decode(r);
    } catch (const Error& e) {
      return e;
    }
    return Error(Errc::ok, "decoded");
  }
  static std::vector<std::uint8_t> msg(std::uint32_t type, std::vector<std::uint8_t> body,
                                       std::uint32_t version = kProtocolVersion) {
    std::uint32_t h[4] = {kWireMagic, version, type, static_cast<std::uint32_t>(body.size())};
    // Sized once and copied into: GCC 12 misreads a vector insert here (-Warray-bounds).
    std::vector<std::uint8_t> out(16 + body.size());
    std::memcpy(out.data(), h, 16);
    if (!body.empty()) std::memcpy(out.data() + 16, body.data(), body.size());
    return out;
  }
  UniqueFd a_, b_;
};

void expect_error(const Error& e, Errc code, const std::string& text) {
  EXPECT_EQ(e.code(), code) << e.what();
  EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
}

}  // namespace

TEST_F(Protocol, HelloRoundTrip) {
  send_hello(a_.get(), HelloMsg{ConsumeMode::latest});
  Received r = receive();
  ASSERT_EQ(r.type, MsgType::hello);
  EXPECT_EQ(decode_hello(r).mode, ConsumeMode::latest);
}

TEST_F(Protocol, WelcomeRoundTripCarriesFds) {
  WelcomeMsg w;
  w.consumer_id = 3;
  w.slot_count = 7;
  w.memory = MemoryKind::host;
  w.control_size = 8192;
  w.page_size = 4096;
  w.max_leases = 6;
  w.control_fd = make_memfd("t", 8192);
  w.page_fd = make_memfd("p", 4096);
  w.sync.bytes = {1, 2, 3};
  w.sync.fds.push_back(make_memfd("s", 4096));
  send_welcome(a_.get(), w);
  Received r = receive();
  ASSERT_EQ(r.type, MsgType::welcome);
  WelcomeMsg got = decode_welcome(r);
  EXPECT_EQ(got.consumer_id, 3u);
  EXPECT_EQ(got.slot_count, 7u);
  EXPECT_EQ(got.memory, MemoryKind::host);
  EXPECT_EQ(got.control_size, 8192u);
  EXPECT_EQ(got.page_size, 4096u);
  EXPECT_EQ(got.max_leases, 6u);
  EXPECT_TRUE(got.control_fd);
  EXPECT_TRUE(got.page_fd);
  EXPECT_EQ(got.sync.bytes, (std::vector<std::uint8_t>{1, 2, 3}));
  EXPECT_EQ(got.sync.fds.size(), 1u);
}

TEST_F(Protocol, FormatRoundTrip) {
  FormatMsg m;
  m.generation = 5;
  m.set_id = 2;
  m.slot_size = 65536;
  m.format.caps = "video/x-raw,format=RGBA,width=64,height=64";
  m.format.tensor = make_tensor(DType::uint8, {64, 64, 4});
  m.slots.bytes = {9, 9};
  send_format(a_.get(), m);
  Received r = receive();
  ASSERT_EQ(r.type, MsgType::format);
  FormatMsg got = decode_format(r);
  EXPECT_EQ(got.generation, 5u);
  EXPECT_EQ(got.set_id, 2u);
  EXPECT_EQ(got.slot_size, 65536u);
  EXPECT_EQ(got.format.caps, m.format.caps);
  EXPECT_EQ(got.format.tensor, m.format.tensor);
  EXPECT_EQ(got.format.max_frame_size, 16384u);  // filled in from the tensor
  EXPECT_EQ(got.slots.bytes, m.slots.bytes);
  EXPECT_TRUE(got.has_slots);
}

TEST_F(Protocol, FormatWithoutSlotsCarriesNoBlob) {
  FormatMsg m;
  m.generation = 6;
  m.set_id = 2;
  m.slot_size = 65536;
  m.format.tensor = make_tensor(DType::uint8, {16});
  m.has_slots = false;
  send_format(a_.get(), m);
  Received r = receive();
  FormatMsg got = decode_format(r);
  EXPECT_FALSE(got.has_slots);
  EXPECT_TRUE(got.slots.fds.empty());
  // A blob where the flag says none is a lie.
  m.slots.bytes = {1};
  send_format(a_.get(), m);
  r = receive();
  expect_error(
      [&] {
        try {
          decode_format(r);
        } catch (const Error& e) {
          return e;
        }
        return Error(Errc::ok, "decoded");
      }(),
      Errc::protocol, "without slots carries a slot blob");
}

TEST_F(Protocol, ReadyStartRefusedRoundTrip) {
  WireBlob sync;
  sync.bytes = {4, 5};
  send_ready(a_.get(), sync);
  Received r = receive();
  ASSERT_EQ(r.type, MsgType::ready);
  EXPECT_EQ(decode_ready(r).bytes, sync.bytes);

  send_start(a_.get(), StartMsg{123456789});
  r = receive();
  ASSERT_EQ(r.type, MsgType::start);
  EXPECT_EQ(decode_start(r).cursor, 123456789u);

  send_refused(a_.get(), Errc::permission_denied, "go away");
  r = receive();
  ASSERT_EQ(r.type, MsgType::refused);
  try {
    throw_refused(r);
  } catch (const Error& e) {
    expect_error(e, Errc::permission_denied, "refused the connection: go away");
  }
}

TEST_F(Protocol, RefusalWithUnknownCodeBecomesProtocol) {
  std::vector<std::uint8_t> body(8 + 3);
  std::uint32_t fields[2] = {999, 3};
  std::memcpy(body.data(), fields, 8);
  std::memcpy(body.data() + 8, "why", 3);
  expect_error(decode_error(msg(6, body), [](Received& r) { throw_refused(r); }), Errc::protocol,
               "why");
}

TEST_F(Protocol, MalformedHeaders) {
  auto noop = [](Received&) {};
  expect_error(decode_error({1, 2, 3}, noop), Errc::protocol, "shorter than a header");
  auto bad_magic = msg(1, {0, 0, 0, 0});
  bad_magic[0] ^= 0xff;
  expect_error(decode_error(bad_magic, noop), Errc::protocol, "bad message magic");
  // A peer from before core v2, before GPU semaphores, before meta areas or before monitors is
  // named with both
  // versions.
  expect_error(decode_error(msg(1, {0, 0, 0, 0}, 1), noop), Errc::version_mismatch,
               "protocol version 1, this build speaks 5");
  expect_error(decode_error(msg(1, {0, 0, 0, 0}, 2), noop), Errc::version_mismatch,
               "protocol version 2, this build speaks 5");
  expect_error(decode_error(msg(1, {0, 0, 0, 0}, 3), noop), Errc::version_mismatch,
               "protocol version 3, this build speaks 5");
  // Version 5 added the monitor's status messages.
  expect_error(decode_error(msg(1, {0, 0, 0, 0}, 4), noop), Errc::version_mismatch,
               "protocol version 4, this build speaks 5");
  auto lying = msg(1, {0, 0, 0, 0});
  lying[12] = 9;
  expect_error(decode_error(lying, noop), Errc::protocol, "does not match");
  expect_error(decode_error(msg(0, {}), noop), Errc::protocol, "unknown message type 0");
  expect_error(decode_error(msg(9, {}), noop), Errc::protocol, "unknown message type 9");
}

TEST_F(Protocol, MalformedBodies) {
  expect_error(decode_error(msg(1, {0, 0}), [](Received& r) { decode_hello(r); }), Errc::protocol,
               "truncated hello");
  expect_error(decode_error(msg(1, {0, 0, 0, 0, 0}), [](Received& r) { decode_hello(r); }),
               Errc::protocol, "1 stray bytes");
  expect_error(decode_error(msg(1, {2, 0, 0, 0}), [](Received& r) { decode_hello(r); }),
               Errc::protocol, "unknown consume mode 2");
  expect_error(decode_error(msg(5, {1, 2, 3}), [](Received& r) { decode_start(r); }),
               Errc::protocol, "truncated start");
  // A format whose caps length field runs past the message.
  // Fixed part: 4 u64, the tensor, then caps length, slot blob length, slot flag, reserved.
  std::vector<std::uint8_t> fmt(sizeof(std::uint64_t) * 4 + sizeof(TensorDesc) + 16, 0);
  std::uint32_t caps = 100;
  std::memcpy(fmt.data() + fmt.size() - 16, &caps, 4);
  expect_error(decode_error(msg(3, fmt), [](Received& r) { decode_format(r); }), Errc::protocol,
               "truncated format");
  caps = kMaxCapsLength + 1;
  std::memcpy(fmt.data() + fmt.size() - 16, &caps, 4);
  expect_error(decode_error(msg(3, fmt), [](Received& r) { decode_format(r); }), Errc::protocol,
               "exceed the limit");
  std::uint32_t ready_len = 1u << 30;
  std::vector<std::uint8_t> ready(4);
  std::memcpy(ready.data(), &ready_len, 4);
  expect_error(decode_error(msg(4, ready), [](Received& r) { decode_ready(r); }), Errc::protocol,
               "out of range");
}

TEST_F(Protocol, FormatWithBadTensorOrSlotSize) {
  FormatMsg m;
  m.generation = 1;
  m.set_id = 1;
  m.slot_size = 100;
  m.format.tensor = make_tensor(DType::uint8, {200});
  send_format(a_.get(), m);
  Received r = receive();
  try {
    decode_format(r);
    ADD_FAILURE() << "a format larger than its slots decoded";
  } catch (const Error& e) {
    expect_error(e, Errc::protocol, "slots hold 100");
  }
  m.format.tensor.dtype = static_cast<DType>(50);
  send_format(a_.get(), m);
  r = receive();
  try {
    decode_format(r);
    ADD_FAILURE() << "a format with an unknown dtype decoded";
  } catch (const Error& e) {
    expect_error(e, Errc::protocol, "unknown dtype 50");
  }
}

TEST_F(Protocol, ValidateFormatFillsAndChecks) {
  Format f;
  f.tensor = make_tensor(DType::uint16, {10});
  validate_format(f, Errc::invalid_argument);
  EXPECT_EQ(f.max_frame_size, 20u);
  f.max_frame_size = 10;
  EXPECT_THROW(validate_format(f, Errc::invalid_argument), Error);
  Format empty;
  empty.tensor = make_tensor(DType::uint8, {0});
  try {
    validate_format(empty, Errc::invalid_argument);
    ADD_FAILURE();
  } catch (const Error& e) {
    expect_error(e, Errc::invalid_argument, "empty frame");
  }
  Format long_caps;
  long_caps.tensor = make_tensor(DType::uint8, {1});
  long_caps.caps.assign(kMaxCapsLength + 1, 'x');
  EXPECT_THROW(validate_format(long_caps, Errc::invalid_argument), Error);
}

TEST_F(Protocol, HangUpReadsAsClosed) {
  a_.reset();
  RawMessage raw;
  EXPECT_EQ(recv_raw(b_.get(), raw, 1000ms), RecvStatus::closed);
  EXPECT_TRUE(peer_hung_up(b_.get()));
}

TEST_F(Protocol, NothingSentIsATimeout) {
  RawMessage raw;
  EXPECT_EQ(recv_raw(b_.get(), raw, 10ms), RecvStatus::timeout);
  EXPECT_FALSE(peer_hung_up(b_.get()));
}

namespace {

ChannelStatus sample_status() {
  ChannelStatus s;
  s.producer_exe = "/usr/bin/producer";
  s.memory = MemoryKind::cuda;
  s.export_mode = CudaExportMode::vmm;
  s.device = 1;
  s.slot_count = 4;
  s.max_consumers = 8;
  s.max_leases = 3;
  s.meta_size = 65536;
  s.slot_size = 4096;
  s.generation = 2;
  s.format.caps = "video/x-raw";
  s.format.tensor = make_tensor(DType::uint8, {16, 16, 4});
  s.published = 100;
  s.dropped = 7;
  s.descriptor_refusals = 3;
  s.monitors = 1;
  MonitorConsumer c;
  c.id = 5;
  c.pid = 42;
  c.mode = ConsumeMode::latest;
  c.cursor = 90;
  c.lag = 10;
  c.delivered = 80;
  c.skipped = 9;
  c.leases = 2;
  c.evicted = true;
  s.consumers.push_back(c);
  return s;
}

}  // namespace

TEST_F(Protocol, StatusRoundTrip) {
  send_status_request(a_.get());
  Received req = receive();
  ASSERT_EQ(req.type, MsgType::status_request);
  decode_status_request(req);
  send_status(a_.get(), sample_status());
  Received r = receive();
  ASSERT_EQ(r.type, MsgType::status);
  ChannelStatus s = decode_status(r);
  EXPECT_EQ(s.producer_exe, "/usr/bin/producer");
  EXPECT_EQ(s.memory, MemoryKind::cuda);
  EXPECT_EQ(s.export_mode, CudaExportMode::vmm);
  EXPECT_EQ(s.device, 1);
  EXPECT_EQ(s.format.caps, "video/x-raw");
  EXPECT_EQ(s.format.tensor, make_tensor(DType::uint8, {16, 16, 4}));
  EXPECT_EQ(s.descriptor_refusals, 3u);
  ASSERT_EQ(s.consumers.size(), 1u);
  EXPECT_EQ(s.consumers[0].pid, 42);
  EXPECT_EQ(s.consumers[0].lag, 10u);
  EXPECT_EQ(s.consumers[0].leases, 2u);
  EXPECT_TRUE(s.consumers[0].evicted);
}

// A status comes from a process the monitor does not trust: each out-of-range field is named,
// and a string that would drive a terminal is defused.
TEST_F(Protocol, StatusOutOfRange) {
  auto fails = [&](const ChannelStatus& s, const std::string& text) {
    send_status(a_.get(), s);
    Received r = receive();
    try {
      decode_status(r);
      ADD_FAILURE() << "decoded a status that should fail with " << text;
    } catch (const Error& e) {
      expect_error(e, Errc::protocol, text);
    }
  };
  ChannelStatus s = sample_status();
  s.slot_count = 0;
  fails(s, "0 slots");
  s = sample_status();
  s.max_leases = 5;
  fails(s, "5 leases per consumer");
  s = sample_status();
  s.consumers[0].leases = 5;
  fails(s, "holds 5 of 4 slots");
  s = sample_status();
  s.consumers[0].cursor = 101;
  fails(s, "beyond the frames published");
  s = sample_status();
  s.format.max_frame_size = 8192;
  fails(s, "8192-byte frames in 4096-byte slots");
  s = sample_status();
  s.format.tensor.rank = 99;
  fails(s, "rank");

  s = sample_status();
  s.producer_exe = "/bin/\x1b[2Jevil";
  send_status(a_.get(), s);
  Received r = receive();
  EXPECT_EQ(decode_status(r).producer_exe, "/bin/?[2Jevil");

  // Counts the sender's encoder refuses are still checked on receipt.
  expect_error(
      decode_error(msg(8, std::vector<std::uint8_t>(32)), [](Received& rr) { decode_status(rr); }),
      Errc::protocol, "truncated status");
  expect_error(decode_error(msg(7, {1, 0, 0, 0}), [](Received& rr) { decode_status_request(rr); }),
               Errc::protocol, "unknown flags 1");
}
