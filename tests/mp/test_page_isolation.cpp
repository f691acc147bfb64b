// Finding 1 of core v2: a consumer writes random bytes into everything it can write (its own
// connection page), reconnecting each time it is cut off, while two honest every-frame consumers
// read the whole stream. They must see every frame exactly once and intact, and the producer must
// never stall for good.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "channel_helpers.hpp"
#include "conn_page.hpp"
#include "cudaipc/consumer.hpp"
#include "mapping.hpp"
#include "protocol.hpp"
#include "raw_messages.hpp"
#include "temp_dir.hpp"
#include "unix_socket.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kFrames = 400;
constexpr int kScribbles = 10000;

// One hostile connection: handshake by hand, then its page is ours to spoil.
struct Scribbler {
  UniqueFd sock;
  Mapping page;

  bool connect(const std::string& path) {
    try {
      sock = connect_unix(path);
      send_message(sock.get(), message(static_cast<std::uint32_t>(MsgType::hello), u32_body(0)));
      RawMessage raw;
      if (recv_raw(sock.get(), raw, 2000ms) != RecvStatus::ok) return false;
      Received r = parse_header(std::move(raw));
      if (r.type != MsgType::welcome) return false;
      WelcomeMsg w = decode_welcome(r);
      page = Mapping(w.page_fd.get(), w.page_size, true);
      send_ready(sock.get(), WireBlob{});
      return true;
    } catch (const Error&) {
      return false;  // refused or cut while joining: try again
    }
  }
  bool cut_off() const { return !sock || peer_hung_up(sock.get()); }
};

struct Reader {
  std::uint64_t frames = 0, bad = 0, out_of_order = 0, last = 0;
  std::string error;
};

void read_all(const std::string& path, Reader& out) {
  try {
    ConsumerOptions o;
    o.path = path;
    o.reconnect = false;
    Consumer c(o);
    for (;;) {
      Event ev = c.next(20s);
      if (ev.type == EventType::format) continue;
      if (ev.type == EventType::eos) return;
      if (ev.type != EventType::frame) {
        out.error = "event " + std::to_string(static_cast<int>(ev.type)) + ": " + ev.message;
        return;
      }
      if (ev.frame.seq() != out.last + 1 && out.last != 0) ++out.out_of_order;
      out.last = ev.frame.seq();
      if (check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()) != ev.frame.size())
        ++out.bad;
      ++out.frames;
    }
  } catch (const Error& e) {
    out.error = e.what();
  }
}

}  // namespace

TEST(PageIsolation, GarbageInOnePageHarmsNoOtherConsumer) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.block_timeout = 10s;
  o.lease_timeout = 200ms;
  Producer p(o);
  p.set_format(pattern_format(4096));

  Reader a, b;
  std::thread ta([&] { read_all(o.path, a); });
  std::thread tb([&] { read_all(o.path, b); });
  ASSERT_TRUE(wait_consumers(p, 2));

  std::atomic<bool> stop{false};
  std::atomic<int> scribbles{0}, connections{0};
  std::thread hostile([&] {
    std::mt19937_64 rng(20261122);
    Scribbler s;
    while (!stop.load() && scribbles.load() < kScribbles) {
      if (s.cut_off()) {
        s = Scribbler{};
        if (!s.connect(o.path)) {
          std::this_thread::sleep_for(1ms);
          continue;
        }
        ++connections;
      }
      auto* bytes = static_cast<std::uint64_t*>(s.page.data());
      for (std::size_t i = 0; i < s.page.size() / sizeof(std::uint64_t); ++i) bytes[i] = rng();
      ++scribbles;
      std::this_thread::sleep_for(20us);  // spread the scribbles over the whole stream
    }
    stop = true;
  });

  // Publishing blocks for the honest readers (every frame), never for good for the scribbler.
  int published = 0;
  while (published < kFrames || !stop.load()) {
    ASSERT_EQ(publish_next(p), PublishStatus::published) << "frame " << published + 1;
    ++published;
    std::this_thread::sleep_for(200us);
  }
  p.end_of_stream();
  ta.join();
  tb.join();
  hostile.join();

  for (const Reader* r : {&a, &b}) {
    EXPECT_TRUE(r->error.empty()) << r->error;
    EXPECT_EQ(r->frames, static_cast<std::uint64_t>(published));
    EXPECT_EQ(r->bad, 0u);
    EXPECT_EQ(r->out_of_order, 0u);
  }
  EXPECT_EQ(scribbles.load(), kScribbles);
  EXPECT_GE(connections.load(), 1);
  RecordProperty("scribbles", scribbles.load());
  RecordProperty("connections", connections.load());
}
