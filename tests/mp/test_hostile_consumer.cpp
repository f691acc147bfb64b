// Hostile consumers against a real producer: garbage, truncated, oversized and out-of-order
// messages, wrong versions, stray fds, silence. Each gets a refusal naming the cause (or is cut
// off), the producer frees whatever it had reserved, and it keeps serving good consumers.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include "channel_helpers.hpp"
#include "conn_page.hpp"
#include "control_block.hpp"
#include "cudaipc/consumer.hpp"
#include "mapping.hpp"
#include "peer_process.hpp"
#include "poll_until.hpp"
#include "raw_messages.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

class HostileConsumer : public ::testing::Test {
 protected:
  HostileConsumer() {
    ProducerOptions o;
    o.path = dir_.file("ch");
    o.slots = 4;
    o.max_consumers = 2;
    o.block_timeout = 300ms;
    producer_ = std::make_unique<Producer>(o);
    producer_->set_format(pattern_format(4096));
  }
  ~HostileConsumer() override { expect_still_serving(); }

  // Sends `bytes` (+ fds) as a fresh consumer and returns the producer's refusal.
  Error refusal(const std::vector<std::uint8_t>& bytes, const std::vector<int>& fds = {}) {
    UniqueFd s = connect_unix(producer_->path());
    send_message(s.get(), bytes, fds);
    return read_refusal(s.get());
  }

  static Error read_refusal(int fd) {
    RawMessage raw;
    if (recv_raw(fd, raw, 10000ms) != RecvStatus::ok) return Error(Errc::ok, "no refusal came");
    Received r = parse_header(std::move(raw));
    if (r.type != MsgType::refused) return Error(Errc::ok, "not a refusal");
    try {
      throw_refused(r);
    } catch (const Error& e) {
      // After refusing, the producer hangs up.
      RawMessage more;
      EXPECT_EQ(recv_raw(fd, more, 10000ms), RecvStatus::closed);
      return e;
    }
  }

  // A good consumer connects and gets verified frames; the hostile ones left no entry taken.
  void expect_still_serving() {
    ASSERT_TRUE(wait_consumers(*producer_, 0));
    ConsumerOptions co;
    co.path = producer_->path();
    co.reconnect = false;
    Consumer a(co), b(co);  // max_consumers is 2: both entries must be free again
    ASSERT_TRUE(wait_consumers(*producer_, 2));
    for (int i = 0; i < 3; ++i) ASSERT_EQ(publish_next(*producer_), PublishStatus::published);
    for (Consumer* c : {&a, &b}) {
      Event ev = c->next(5s);
      ASSERT_EQ(ev.type, EventType::format);
      for (int i = 0; i < 3; ++i) {
        ev = c->next(5s);
        ASSERT_EQ(ev.type, EventType::frame);
        EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), ev.frame.size());
      }
    }
  }

  static std::vector<std::uint8_t> hello(std::uint32_t mode = 0) {
    return message(static_cast<std::uint32_t>(MsgType::hello), u32_body(mode));
  }

  TempDir dir_;
  std::unique_ptr<Producer> producer_;
};

#define EXPECT_REFUSED(err, want, text)                                       \
  do {                                                                        \
    Error e_ = (err);                                                         \
    EXPECT_EQ(e_.code(), want) << e_.what();                                  \
    EXPECT_NE(std::string(e_.what()).find(text), std::string::npos)           \
        << "message '" << e_.what() << "' does not mention '" << text << "'"; \
  } while (0)

}  // namespace

TEST_F(HostileConsumer, Garbage) {
  std::vector<std::uint8_t> junk(37);
  for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<std::uint8_t>(i * 97 + 13);
  EXPECT_REFUSED(refusal(junk), Errc::protocol, "bad message magic");
}

TEST_F(HostileConsumer, ShorterThanAHeader) {
  EXPECT_REFUSED(refusal({1, 2, 3, 4, 5}), Errc::protocol, "shorter than a header");
}

TEST_F(HostileConsumer, WrongProtocolVersion) {
  EXPECT_REFUSED(refusal(message(1, u32_body(0), kWireMagic, 7)), Errc::version_mismatch,
                 "protocol version 7");
}

TEST_F(HostileConsumer, Oversized) {
  EXPECT_REFUSED(refusal(message(1, std::vector<std::uint8_t>(70000))), Errc::protocol,
                 "larger than 65536");
}

TEST_F(HostileConsumer, TruncatedHello) {
  EXPECT_REFUSED(refusal(message(1, {})), Errc::protocol, "truncated hello");
}

TEST_F(HostileConsumer, HelloWithStrayBytes) {
  EXPECT_REFUSED(refusal(message(1, std::vector<std::uint8_t>(12))), Errc::protocol, "stray bytes");
}

TEST_F(HostileConsumer, SizeFieldLies) {
  auto m = hello();
  m[12] = 200;  // body_size
  EXPECT_REFUSED(refusal(m), Errc::protocol, "does not match");
}

TEST_F(HostileConsumer, UnknownMessageType) {
  EXPECT_REFUSED(refusal(message(99, {})), Errc::protocol, "unknown message type 99");
}

TEST_F(HostileConsumer, ReadyBeforeHello) {
  EXPECT_REFUSED(refusal(message(static_cast<std::uint32_t>(MsgType::ready), u32_body(0))),
                 Errc::protocol, "unexpected message type 4");
}

TEST_F(HostileConsumer, UnknownConsumeMode) {
  EXPECT_REFUSED(refusal(hello(9)), Errc::protocol, "unknown consume mode 9");
}

TEST_F(HostileConsumer, HelloCarryingAnFd) {
  UniqueFd extra = make_memfd("stray", 4096);
  EXPECT_REFUSED(refusal(hello(), {extra.get()}), Errc::protocol, "carried 1 file descriptors");
}

TEST_F(HostileConsumer, TooManyFds) {
  UniqueFd extra = make_memfd("stray", 4096);
  EXPECT_REFUSED(refusal(hello(), std::vector<int>(70, extra.get())), Errc::protocol,
                 "more than 64 file descriptors");
}

TEST_F(HostileConsumer, SecondHelloAfterWelcomeFreesTheEntry) {
  // More rounds than entries: a refused consumer must give its entry back.
  for (int round = 0; round < 5; ++round) {
    UniqueFd s = connect_unix(producer_->path());
    send_message(s.get(), hello());
    RawMessage raw;
    ASSERT_EQ(recv_raw(s.get(), raw, 10000ms), RecvStatus::ok);
    ASSERT_EQ(parse_header(std::move(raw)).type, MsgType::welcome);
    send_message(s.get(), hello());
    // The format message may come before the refusal.
    for (;;) {
      ASSERT_EQ(recv_raw(s.get(), raw, 10000ms), RecvStatus::ok);
      Received r = parse_header(std::move(raw));
      if (r.type == MsgType::format) continue;
      ASSERT_EQ(r.type, MsgType::refused);
      try {
        throw_refused(r);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unexpected message type 1"), std::string::npos)
            << e.what();
      }
      break;
    }
  }
}

TEST_F(HostileConsumer, HangsUpMidHandshake) {
  for (int round = 0; round < 5; ++round) {
    UniqueFd s = connect_unix(producer_->path());
    send_message(s.get(), hello());
    RawMessage raw;
    ASSERT_EQ(recv_raw(s.get(), raw, 10000ms), RecvStatus::ok);
  }
}

TEST_F(HostileConsumer, SilentConsumerIsCutOff) {
  UniqueFd s = connect_unix(producer_->path());
  RawMessage raw;
  // The producer gives a handshake 5 s.
  EXPECT_EQ(recv_raw(s.get(), raw, 10000ms), RecvStatus::closed);
}

// A full handshake by hand; the test then plays a consumer that writes whatever it likes.
struct RawConsumer {
  UniqueFd sock;
  WelcomeMsg welcome;
  Mapping page;
  ConnPage* pg = nullptr;

  explicit RawConsumer(const std::string& path, std::uint32_t mode = 0) {
    sock = connect_unix(path);
    send_message(sock.get(), message(static_cast<std::uint32_t>(MsgType::hello), u32_body(mode)));
    RawMessage raw;
    EXPECT_EQ(recv_raw(sock.get(), raw, 10000ms), RecvStatus::ok);
    Received r = parse_header(std::move(raw));
    EXPECT_EQ(r.type, MsgType::welcome);
    welcome = decode_welcome(r);
    page = Mapping(welcome.page_fd.get(), welcome.page_size, true);
    pg = static_cast<ConnPage*>(page.data());
    send_ready(sock.get(), WireBlob{});
    for (;;) {
      EXPECT_EQ(recv_raw(sock.get(), raw, 10000ms), RecvStatus::ok);
      if (parse_header(std::move(raw)).type == MsgType::start) break;
    }
  }
  // The reason the producer gave when it hung up on us.
  std::string parting_words() {
    RawMessage raw;
    for (;;) {
      if (recv_raw(sock.get(), raw, 10000ms) != RecvStatus::ok) return "no refusal";
      Received r = parse_header(std::move(raw));
      if (r.type != MsgType::refused) continue;
      try {
        throw_refused(r);
      } catch (const Error& e) {
        return e.what();
      }
    }
  }
};

TEST_F(HostileConsumer, LeaseBitsBeyondTheSlotsVoidTheConsumer) {
  RawConsumer c(producer_->path());
  ASSERT_TRUE(wait_consumers(*producer_, 1));
  c.pg->leases.store(~0ull << 4);
  c.pg->cursor.store(1);
  // What it claims counts for nothing: publishing goes on, and it is cut off with the reason.
  for (int i = 0; i < 8; ++i) EXPECT_EQ(publish_next(*producer_), PublishStatus::published);
  EXPECT_NE(c.parting_words().find("leased slots that do not exist"), std::string::npos);
  ASSERT_TRUE(wait_consumers(*producer_, 0));
}

TEST_F(HostileConsumer, MoreLeasesThanItsLimitVoidTheConsumer) {
  RawConsumer c(producer_->path());
  ASSERT_TRUE(wait_consumers(*producer_, 1));
  c.pg->leases.store(0xf);  // all 4 slots; the limit is 3
  for (int i = 0; i < 8; ++i) EXPECT_EQ(publish_next(*producer_), PublishStatus::published);
  EXPECT_NE(c.parting_words().find("more frames than its limit"), std::string::npos);
}

TEST_F(HostileConsumer, LeasesOfALiveConsumerThatLeftStayOutOfRotation) {
  RawConsumer c(producer_->path());
  ASSERT_TRUE(wait_consumers(*producer_, 1));
  for (int i = 0; i < 4; ++i) ASSERT_EQ(publish_next(*producer_), PublishStatus::published);
  // It holds slots 0-2 (within its limit) and closes its socket while alive: those slots must
  // not be rewritten, so publishing rotates through the one left.
  c.pg->leases.store(0x7);
  c.pg->cursor.store(~0ull);
  c.sock.reset();
  ASSERT_TRUE(wait_consumers(*producer_, 0));
  for (int i = 0; i < 6; ++i) {
    PublishStatus st;
    WriteSlot ws = producer_->begin_frame(&st);
    ASSERT_TRUE(ws) << static_cast<int>(st);
    EXPECT_EQ(ws.index(), 3u);
    producer_->abort(ws);
  }
  auto s = producer_->stats();
  ASSERT_EQ(s.consumers.size(), 1u);
  EXPECT_TRUE(s.consumers[0].evicted);
  EXPECT_EQ(s.consumers[0].leases, 0x7u);
  // Once it releases them, the record goes and every slot is back.
  c.pg->leases.store(0);
  ASSERT_TRUE(poll_until([&] { return producer_->stats().consumers.empty(); }, 5s));
}

TEST_F(HostileConsumer, ProducerRegionAndSlotsCannotBeMadeWritable) {
  RawConsumer c(producer_->path());
  const std::size_t size = c.welcome.control_size;
  const int fd = c.welcome.control_fd.get();
  EXPECT_EQ(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  void* ro = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_NE(::mprotect(ro, size, PROT_READ | PROT_WRITE), 0);
  ::munmap(ro, size);
  std::uint8_t byte = 1;
  EXPECT_LT(::pwrite(fd, &byte, 1, 0), 0);
  // Slots: the format message carries them; each must refuse a writable mapping too.
  RawMessage raw;
  UniqueFd s2 = connect_unix(producer_->path());
  send_message(s2.get(), hello());
  ASSERT_EQ(recv_raw(s2.get(), raw, 10000ms), RecvStatus::ok);  // welcome
  ASSERT_EQ(recv_raw(s2.get(), raw, 10000ms), RecvStatus::ok);  // format with slots
  Received r = parse_header(std::move(raw));
  ASSERT_EQ(r.type, MsgType::format);
  FormatMsg m = decode_format(r);
  ASSERT_FALSE(m.slots.fds.empty());
  for (const auto& f : m.slots.fds) {
    EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, f.get(), 0), MAP_FAILED);
    void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, f.get(), 0);
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_NE(::mprotect(p, 4096, PROT_READ | PROT_WRITE), 0);
    ::munmap(p, 4096);
  }
}

TEST(HostileConsumerThenPeer, ProducerServesAPeerProcessAfterABarrage) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  Producer p(o);
  p.set_format(pattern_format(4096));
  for (int round = 0; round < 20; ++round) {
    UniqueFd s = connect_unix(o.path);
    send_message(s.get(), message(static_cast<std::uint32_t>(round % 7),
                                  std::vector<std::uint8_t>(static_cast<std::size_t>(round * 13))));
  }
  PeerProcess good({"consume", "--path", o.path, "--mode", "every", "--frames", "5"});
  ASSERT_TRUE(good.wait_for("connected", 10s)) << good.transcript();
  ASSERT_TRUE(wait_consumers(p, 1));
  for (int i = 0; i < 5; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  auto done = good.wait_for("done", 10s);
  ASSERT_TRUE(done) << good.transcript();
  EXPECT_EQ(field(*done, "frames"), 5) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
}
