// A hostile producer: bad control blocks, malformed handshake messages, and out-of-range values
// written into shared memory. The consumer must fail with a clear Error naming the cause: no
// crash, no hang, no read outside its mappings.
#include <gtest/gtest.h>

#include <functional>

#include "cudaipc/consumer.hpp"
#include "fake_producer.hpp"
#include "raw_messages.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

class HostileProducer : public ::testing::Test {
 protected:
  ConsumerOptions options() const {
    ConsumerOptions o;
    o.path = path_;
    o.reconnect = false;
    return o;
  }
  // The Error the consumer's constructor throws while `fake` runs `script`.
  Error connect_error(std::function<void(FakeProducer&, int)> script) {
    FakeProducer fake(path_);
    fake.run([&](int fd) { script(fake, fd); });
    try {
      Consumer c(options());
    } catch (const Error& e) {
      return e;
    }
    return Error(Errc::ok, "the consumer accepted it");
  }
  // The Error next() throws after an honest handshake and `lie` written into the control block.
  Error next_error(std::function<void(FakeProducer&)> lie) {
    FakeProducer fake(path_);
    fake.run_honest_handshake();
    Consumer c(options());
    lie(fake);
    try {
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (std::chrono::steady_clock::now() < deadline) {
        Event ev = c.next(100ms);
        if (ev.type == EventType::disconnected) return Error(Errc::ok, "disconnected");
      }
    } catch (const Error& e) {
      return e;
    }
    return Error(Errc::ok, "no error within 10 s");
  }

  TempDir dir_;
  std::string path_ = dir_.file("ch");
};

#define EXPECT_ERROR(err, want, text)                                         \
  do {                                                                        \
    Error e_ = (err);                                                         \
    EXPECT_EQ(e_.code(), want) << e_.what();                                  \
    EXPECT_NE(std::string(e_.what()).find(text), std::string::npos)           \
        << "message '" << e_.what() << "' does not mention '" << text << "'"; \
  } while (0)

}  // namespace

TEST_F(HostileProducer, ControlBlockWithBadMagic) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 f.cb().magic = 0x1122334455667788ull;
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
               }),
               Errc::protocol, "bad magic");
}

TEST_F(HostileProducer, ControlBlockWithOtherLayoutVersion) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 f.cb().version = 99;
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
               }),
               Errc::version_mismatch, "layout version 99");
}

TEST_F(HostileProducer, ControlBlockWithUnknownRole) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 f.cb().role = 0;
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
               }),
               Errc::protocol, "control block states the role 0");
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 f.cb().role = 0x7fffffff;
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
               }),
               Errc::protocol, "is no channel role");
}

TEST_F(HostileProducer, ControlBlockHeaderDisagreesWithWelcome) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 f.cb().slot_count = 7;
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
               }),
               Errc::protocol, "disagrees");
}

TEST_F(HostileProducer, ControlBlockTooSmall) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 WelcomeMsg w = f.welcome();
                 w.control_size = 64;
                 send_welcome(fd, w);
               }),
               Errc::protocol, "smaller than");
}

TEST_F(HostileProducer, ControlBlockNotASealedMemfd) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 WelcomeMsg w = f.welcome();
                 w.control_fd = make_memfd("unsealed", w.control_size);
                 send_welcome(fd, w);
               }),
               Errc::protocol, "unsealed");
}

TEST_F(HostileProducer, MetaAreasPastTheControlRegion) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 f.cb().meta_stride = ~std::uint64_t{0} / 2;  // slot 1's area wraps past the end
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
               }),
               Errc::protocol, "meta areas");
}

TEST_F(HostileProducer, MetaAreaLargerThanItsStride) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 f.cb().meta_size = FakeProducer::kMetaBytes * 2;
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
               }),
               Errc::protocol, "meta areas");
}

TEST_F(HostileProducer, MetaAreaInsideTheControlBlock) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 f.cb().meta_offset = 64;
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
               }),
               Errc::protocol, "meta areas");
}

TEST_F(HostileProducer, WelcomeAnnouncesTooManySlots) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 WelcomeMsg w = f.welcome();
                 w.slot_count = 200;
                 send_welcome(fd, w);
               }),
               Errc::protocol, "200 slots");
}

TEST_F(HostileProducer, WelcomeAllowsMoreLeasesThanSlots) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 WelcomeMsg w = f.welcome();
                 w.max_leases = 1000;
                 send_welcome(fd, w);
               }),
               Errc::protocol, "allows 1000 leases");
}

TEST_F(HostileProducer, ConnectionPageTooSmall) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 WelcomeMsg w = f.welcome();
                 w.page_size = 16;
                 send_welcome(fd, w);
               }),
               Errc::protocol, "connection page of 16 bytes");
}

TEST_F(HostileProducer, ConnectionPageWithoutItsHeader) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 WelcomeMsg w = f.welcome();
                 w.page_fd = make_memfd("blank", 4096);
                 seal_memfd(w.page_fd.get(), false);
                 send_welcome(fd, w);
               }),
               Errc::protocol, "connection page header");
}

TEST_F(HostileProducer, MessageWithWrongMagic) {
  EXPECT_ERROR(connect_error([](FakeProducer&, int fd) {
                 FakeProducer::expect_message(fd);
                 send_message(fd, message(2, std::vector<std::uint8_t>(24), 0xdeadbeef));
               }),
               Errc::protocol, "bad message magic");
}

TEST_F(HostileProducer, MessageWithOtherProtocolVersion) {
  EXPECT_ERROR(connect_error([](FakeProducer&, int fd) {
                 FakeProducer::expect_message(fd);
                 // A producer of layout/protocol version 1 (before core v2).
                 send_message(fd, message(2, std::vector<std::uint8_t>(24), kWireMagic, 1));
               }),
               Errc::version_mismatch, "protocol version 1, this build speaks 5");
}

TEST_F(HostileProducer, TruncatedWelcome) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 UniqueFd control = f.welcome().control_fd;
                 send_message(fd, message(2, u32_body(0)), {control.get()});
               }),
               Errc::protocol, "truncated welcome");
}

TEST_F(HostileProducer, OversizedMessage) {
  EXPECT_ERROR(connect_error([](FakeProducer&, int fd) {
                 FakeProducer::expect_message(fd);
                 send_message(fd, message(2, std::vector<std::uint8_t>(70000)));
               }),
               Errc::protocol, "larger than 65536");
}

TEST_F(HostileProducer, TooManyFileDescriptors) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 UniqueFd control = f.welcome().control_fd;
                 send_message(fd, message(2, std::vector<std::uint8_t>(24)),
                              std::vector<int>(70, control.get()));
               }),
               Errc::protocol, "more than 64 file descriptors");
}

TEST_F(HostileProducer, WelcomeWithoutControlBlockFd) {
  EXPECT_ERROR(connect_error([](FakeProducer&, int fd) {
                 FakeProducer::expect_message(fd);
                 // id, slots, memory kind host, control size, page size, lease limit, no sync
                 const std::uint32_t body[8] = {0, FakeProducer::kSlots, 1, 4096, 4096, 3, 0, 0};
                 std::vector<std::uint8_t> b(sizeof body);
                 std::memcpy(b.data(), body, sizeof body);
                 send_message(fd, message(2, b));
               }),
               Errc::protocol, "carried 0 file descriptors, expected 2");
}

TEST_F(HostileProducer, StartInsteadOfWelcome) {
  EXPECT_ERROR(connect_error([](FakeProducer&, int fd) {
                 FakeProducer::expect_message(fd);
                 send_start(fd, StartMsg{0});
               }),
               Errc::protocol, "instead of a welcome");
}

TEST_F(HostileProducer, FormatLargerThanItsSlots) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
                 FormatMsg m = f.format();
                 m.format.tensor = make_tensor(DType::uint8, {8192});
                 m.format.max_frame_size = 0;
                 send_format(fd, m);
               }),
               Errc::protocol, "slots hold 4096");
}

TEST_F(HostileProducer, FormatSlotBlobForTooFewSlots) {
  EXPECT_ERROR(connect_error([](FakeProducer& f, int fd) {
                 FakeProducer::expect_message(fd);
                 send_welcome(fd, f.welcome());
                 FormatMsg m = f.format();
                 m.slots.fds.pop_back();
                 send_format(fd, m);
               }),
               Errc::protocol, "host slot blob");
}

TEST_F(HostileProducer, ProducerVanishesDuringHandshake) {
  EXPECT_ERROR(connect_error([](FakeProducer&, int fd) {
                 FakeProducer::expect_message(fd);
                 ::shutdown(fd, SHUT_RDWR);
               }),
               Errc::disconnected, "closed the connection");
}

TEST_F(HostileProducer, RingNamesSlot200) {
  EXPECT_ERROR(next_error([](FakeProducer& f) { f.publish_raw(1, 200, 0, f.good_desc(1)); }),
               Errc::protocol, "names slot 200");
}

TEST_F(HostileProducer, TensorLargerThanSlot) {
  EXPECT_ERROR(next_error([](FakeProducer& f) {
                 FrameDesc d = f.good_desc(1);
                 d.tensor = make_tensor(DType::uint8, {FakeProducer::kSlotBytes + 1});
                 f.publish_raw(1, 0, 0, d);
               }),
               Errc::protocol, "exceeds the slot");
}

TEST_F(HostileProducer, TensorOffsetPastSlot) {
  EXPECT_ERROR(next_error([](FakeProducer& f) {
                 FrameDesc d = f.good_desc(1);
                 d.tensor.byte_offset = ~std::uint64_t{0} - 10;
                 f.publish_raw(1, 0, 0, d);
               }),
               Errc::protocol, "byte_offset");
}

TEST_F(HostileProducer, UnknownDtype) {
  EXPECT_ERROR(next_error([](FakeProducer& f) {
                 FrameDesc d = f.good_desc(1);
                 d.tensor.dtype = static_cast<DType>(77);
                 f.publish_raw(1, 0, 0, d);
               }),
               Errc::protocol, "unknown dtype 77");
}

TEST_F(HostileProducer, RankOutOfRange) {
  EXPECT_ERROR(next_error([](FakeProducer& f) {
                 FrameDesc d = f.good_desc(1);
                 d.tensor.rank = 1000;
                 f.publish_raw(1, 0, 0, d);
               }),
               Errc::protocol, "rank 1000");
}

TEST_F(HostileProducer, UserMetaSize9999) {
  EXPECT_ERROR(next_error([](FakeProducer& f) {
                 FrameDesc d = f.good_desc(1);
                 d.user_meta_size = 9999;
                 f.publish_raw(1, 0, 0, d);
               }),
               Errc::protocol, "user metadata");
}

TEST_F(HostileProducer, FrameClaimsMoreMetasThanItsArea) {
  EXPECT_ERROR(next_error([](FakeProducer& f) {
                 FrameDesc d = f.good_desc(1);
                 d.metas_bytes = FakeProducer::kMetaBytes + 1;
                 f.publish_raw(1, 0, 0, d);
               }),
               Errc::protocol, "bytes of metas");
}

TEST_F(HostileProducer, DescriptorOfAnotherFrame) {
  EXPECT_ERROR(next_error([](FakeProducer& f) { f.publish_raw(1, 0, 0, f.good_desc(7)); }),
               Errc::protocol, "describes frame 7");
}

TEST_F(HostileProducer, RepublishesIntoALeasedSlot) {
  FakeProducer fake(path_);
  fake.run_honest_handshake();
  Consumer c(options());
  fake.publish_raw(1, 0, 0, fake.good_desc(1));
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::format);
  ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  Frame held = std::move(ev.frame);
  fake.publish_raw(2, 0, 0, fake.good_desc(2));
  try {
    c.next(5s);
    ADD_FAILURE() << "a frame in a slot we lease was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::protocol);
    EXPECT_NE(std::string(e.what()).find("still lease"), std::string::npos) << e.what();
  }
}

TEST_F(HostileProducer, HonestFakeIsAccepted) {
  // The fake itself is sound: without lies, its frame is delivered.
  FakeProducer fake(path_);
  fake.run_honest_handshake();
  Consumer c(options());
  // Metas filling the whole area are within bounds.
  FrameDesc d = fake.good_desc(1);
  d.metas_bytes = FakeProducer::kMetaBytes;
  auto* area = reinterpret_cast<std::uint8_t*>(&fake.cb()) + FakeProducer::kMetaOffset;
  for (std::uint32_t i = 0; i < FakeProducer::kMetaBytes; ++i)
    area[i] = static_cast<std::uint8_t>(i * 7);
  fake.publish_raw(1, 0, 0, d);
  Event ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::format);
  EXPECT_EQ(ev.format.caps, "test/fake");
  ev = c.next(5s);
  ASSERT_EQ(ev.type, EventType::frame);
  EXPECT_EQ(ev.frame.seq(), 1u);
  EXPECT_EQ(ev.frame.size(), 1024u);
  EXPECT_EQ(ev.frame.metas_size(), FakeProducer::kMetaBytes);
  ASSERT_NE(ev.frame.metas(), nullptr);
  for (std::uint32_t i = 0; i < FakeProducer::kMetaBytes; ++i)
    ASSERT_EQ(ev.frame.metas()[i], static_cast<std::uint8_t>(i * 7)) << "byte " << i;
}

// Core v2, finding 5: a producer that announces a generation and drips (or withholds) its format
// message holds no next() past its timeout; after the handshake timeout it is a protocol error.
TEST_F(HostileProducer, WithheldFormatKeepsToNextsTimeoutThenFails) {
  FakeProducer fake(path_);
  fake.run_honest_handshake();
  Consumer c(options());
  ASSERT_EQ(c.next(5s).type, EventType::format);
  FrameDesc d = fake.good_desc(1);
  d.generation = 2;  // no format for it is ever sent
  fake.cb().generation.store(2);
  fake.publish_raw(1, 0, 0, d);
  const auto start = std::chrono::steady_clock::now();
  bool failed = false;
  int timeouts = 0;
  while (std::chrono::steady_clock::now() - start < 10s && !failed) {
    const auto call = std::chrono::steady_clock::now();
    try {
      Event ev = c.next(100ms);
      EXPECT_EQ(ev.type, EventType::timeout);
      ++timeouts;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::protocol) << e.what();
      EXPECT_NE(std::string(e.what()).find("sent no format"), std::string::npos) << e.what();
      failed = true;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - call, 1s);
  }
  EXPECT_TRUE(failed);
  EXPECT_GE(timeouts, 10);
}
