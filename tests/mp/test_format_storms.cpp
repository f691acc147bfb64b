// Format changes in quick succession (issue #7, findings 12 and 14): latest consumers that join
// or rejoin between a format change and its first frame, and a consumer that stops reading its
// socket while hundreds of formats go by. Every consumer sees each frame's format before the
// frame, every frame intact, and one stopped consumer costs the others nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "channel_helpers.hpp"
#include "cudaipc/consumer.hpp"
#include "peer_process.hpp"
#include "poll_until.hpp"
#include "protocol.hpp"
#include "raw_messages.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kBaseSlot = 16384;

// The storm's formats: the tensor size changes every time; every 50th change outgrows the slots
// (a new slot set), the others fit the current set and reuse it.
struct Storm {
  std::uint64_t slot = kBaseSlot;
  std::uint64_t sets = 1;
  Format next(int i) {
    std::uint64_t size;
    if (i % 50 == 0) {
      slot += 8192;
      ++sets;
      size = slot;
    } else {
      size = slot - 64 * static_cast<std::uint64_t>(i % 7) - 8 * static_cast<std::uint64_t>(i % 3);
    }
    return pattern_format(size, "test/pattern,storm=" + std::to_string(i));
  }
};

// Every frame line of a verbose peer transcript ("frame seq size gen") must follow the format
// line of its generation ("format gen size") and carry that format's size. Returns the format
// lines' sizes in order.
std::vector<long long> check_transcript(const std::string& transcript) {
  std::istringstream in(transcript);
  std::vector<long long> sizes;
  long long gen = -1, size = -1;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    std::string kind;
    long long a = 0, b = 0, c = 0;
    l >> kind >> a >> b >> c;
    if (kind == "format") {
      gen = a;
      size = b;
      sizes.push_back(b);
    } else if (kind == "frame") {
      EXPECT_EQ(c, gen) << "frame " << a << " came before its format";
      EXPECT_EQ(b, size) << "frame " << a << " has another format's size";
    }
  }
  return sizes;
}

// The handshake by hand, then silence: a consumer that never reads its socket again.
struct SilentConsumer {
  UniqueFd sock;
  explicit SilentConsumer(const std::string& path) {
    sock = connect_unix(path);
    send_message(sock.get(), message(static_cast<std::uint32_t>(MsgType::hello),
                                     u32_body(static_cast<std::uint32_t>(ConsumeMode::latest))));
    RawMessage raw;
    EXPECT_EQ(recv_raw(sock.get(), raw, 10000ms), RecvStatus::ok);
    Received r = parse_header(std::move(raw));
    EXPECT_EQ(r.type, MsgType::welcome);
    send_ready(sock.get(), WireBlob{});
  }
};

}  // namespace

// Finding 12: a latest consumer starts at the newest frame. Joining right after set_format(),
// that frame is of the generation before, whose format it never got: it must wait for the first
// frame of the format it was given, not fail on the old one.
TEST(FormatStorms, LatestConsumerJoiningBetweenAFormatAndItsFirstFrame) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  Producer p(o);
  p.set_format(pattern_format(4096));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  ConsumerOptions co;
  co.path = o.path;
  co.mode = ConsumeMode::latest;
  co.reconnect = false;
  for (int round = 1; round <= 30; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Alternately a size the slots hold and one that needs a new slot set.
    const std::uint64_t size = round % 2 ? 2048 + 8 * round : 4096 + 4096 * round;
    p.set_format(pattern_format(size, "test/pattern,round=" + std::to_string(round)));
    const std::uint64_t gen = p.stats().generation;
    Consumer c(co);
    ASSERT_TRUE(wait_consumers(p, 1));
    Event ev = c.next(5s);
    ASSERT_EQ(ev.type, EventType::format) << ev.message;
    EXPECT_EQ(ev.generation, gen);
    EXPECT_EQ(ev.format.tensor.size, size);
    // The newest frame is the old format's: nothing to deliver until the new one's first frame.
    ev = c.next(50ms);
    ASSERT_EQ(ev.type, EventType::timeout) << "event " << static_cast<int>(ev.type);
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    ev = c.next(5s);
    ASSERT_EQ(ev.type, EventType::frame) << "event " << static_cast<int>(ev.type) << ev.message;
    EXPECT_EQ(ev.frame.desc().generation, gen);
    EXPECT_EQ(ev.frame.seq(), p.stats().published);
    ASSERT_EQ(ev.frame.size(), size);
    EXPECT_EQ(check_pattern(ev.frame.data(), ev.frame.size(), ev.frame.seq()), size);
  }
}

// Finding 12, the other way in: a slow latest consumer that holds every slot is evicted and
// reconnects on its own while the format changes every few frames. Whenever it rejoins, the newest
// frame may be of a format it was never sent.
TEST(FormatStorms, EvictedLatestConsumerRejoinsDuringFormatChanges) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 2;
  o.max_leases_per_consumer = 2;  // it may hold the whole ring, so holding on stalls publishing
  o.lease_timeout = 100ms;
  o.block_timeout = 10s;
  Producer p(o);
  p.set_format(pattern_format(4096));

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> frames{0}, disconnects{0}, bad{0};
  std::string failure;
  std::thread reader([&] {
    ConsumerOptions co;
    co.path = o.path;
    co.mode = ConsumeMode::latest;
    co.reconnect = true;
    co.reconnect_interval = 10ms;
    try {
      Consumer c(co);
      std::map<std::uint64_t, std::uint64_t> sizes;  // generation -> tensor size it announced
      std::vector<Frame> held;
      while (!stop.load()) {
        Event ev = c.next(100ms);
        if (ev.type == EventType::format) {
          sizes[ev.generation] = ev.format.tensor.size;
        } else if (ev.type == EventType::disconnected) {
          ++disconnects;
        } else if (ev.type == EventType::frame) {
          const Frame& f = ev.frame;
          auto it = sizes.find(f.desc().generation);
          if (it == sizes.end() || it->second != f.size() ||
              check_pattern(f.data(), f.size(), f.seq()) != f.size())
            ++bad;
          // Now and then hold two frames (the whole ring) past the lease timeout.
          if (++frames % 7 == 0 || !held.empty()) held.push_back(std::move(ev.frame));
          if (held.size() == 2) {
            std::this_thread::sleep_for(300ms);
            for (const Frame& h : held)
              if (check_pattern(h.data(), h.size(), h.seq()) != h.size()) ++bad;
            held.clear();
          }
        }
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  ASSERT_TRUE(wait_consumers(p, 1));
  const auto end = std::chrono::steady_clock::now() + 3s;
  for (int i = 1; std::chrono::steady_clock::now() < end && failure.empty(); ++i) {
    if (i % 3 == 0) {
      const std::uint64_t size =
          i % 30 == 0 ? 4096 + 16 * static_cast<std::uint64_t>(i) : 1024 + 8 * (i % 64);
      p.set_format(pattern_format(size, "test/pattern,i=" + std::to_string(i)));
    }
    ASSERT_EQ(publish_next(p), PublishStatus::published);
    std::this_thread::sleep_for(1ms);
  }
  stop = true;
  reader.join();
  EXPECT_EQ(failure, "") << "next() threw";
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(frames.load(), 20u);
  EXPECT_GE(disconnects.load(), 1u)
      << "the slow consumer was never evicted: the test saw no rejoin";
}

// Finding 14: one consumer stopped (SIGSTOP) while 300 formats go by, some of them new slot sets.
// The healthy consumer sees every format and every frame intact and is never dropped. The stopped
// one, a latest consumer with reconnect, may be evicted for not reading its socket (the design
// evicts a consumer whose socket is full) or may find every format queued; either way, once
// continued, it reads on and reaches end-of-stream with intact frames.
TEST(FormatStorms, StoppedConsumerDuringThreeHundredFormatChanges) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  o.block_timeout = 10s;
  // Where the kernel limits descriptors in flight (per user, by the sender's RLIMIT_NOFILE;
  // not for root), every slot fd in every format message used to count: 300 x 4 went far past it.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lowered = saved;
  lowered.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 512);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  struct Restore {
    rlimit r;
    ~Restore() { ::setrlimit(RLIMIT_NOFILE, &r); }
  } restore{saved};

  Producer p(o);
  Storm storm;
  p.set_format(pattern_format(kBaseSlot));
  std::vector<long long> sizes{static_cast<long long>(kBaseSlot)};
  PeerProcess healthy(
      {"consume", "--path", o.path, "--mode", "every", "--verbose", "--timeout-ms", "20000"});
  PeerProcess stopped({"consume", "--path", o.path, "--mode", "latest", "--reconnect", "--verbose",
                       "--timeout-ms", "20000"});
  ASSERT_TRUE(healthy.wait_for("connected", 10s)) << healthy.transcript();
  ASSERT_TRUE(stopped.wait_for("connected", 10s)) << stopped.transcript();
  ASSERT_TRUE(wait_consumers(p, 2));
  for (int i = 0; i < 2; ++i) ASSERT_EQ(publish_next(p), PublishStatus::published);
  ASSERT_TRUE(stopped.wait_for("frame 2", 10s)) << stopped.transcript();
  ASSERT_EQ(::kill(stopped.pid(), SIGSTOP), 0);

  std::uint64_t published = 2;
  for (int i = 1; i <= 300; ++i) {
    Format f = storm.next(i);
    sizes.push_back(static_cast<long long>(f.tensor.size));
    p.set_format(f);
    for (int k = 0; k < 2; ++k) ASSERT_EQ(publish_next(p), PublishStatus::published) << i;
    published += 2;
  }
  ASSERT_EQ(::kill(stopped.pid(), SIGCONT), 0);
  p.end_of_stream();

  auto done = healthy.wait_for("done", 30s);
  ASSERT_TRUE(done) << healthy.transcript();
  EXPECT_EQ(field(*done, "frames"), static_cast<long long>(published)) << *done;
  EXPECT_EQ(field(*done, "bad"), 0) << *done;
  EXPECT_EQ(field(*done, "order"), 0) << *done;
  EXPECT_EQ(field(*done, "eos"), 1) << *done;
  EXPECT_EQ(check_transcript(healthy.transcript()), sizes);

  auto sdone = stopped.wait_for("done", 30s);
  ASSERT_TRUE(sdone) << stopped.transcript();
  EXPECT_EQ(field(*sdone, "bad"), 0) << *sdone;
  EXPECT_EQ(field(*sdone, "order"), 0) << *sdone;
  EXPECT_EQ(field(*sdone, "eos"), 1) << *sdone;
  EXPECT_EQ(field(*sdone, "last"), static_cast<long long>(published)) << *sdone;
  check_transcript(stopped.transcript());
  std::printf("stopped consumer: %s\n", sdone->c_str());
}

// Finding 14, the mechanism: slot descriptors travel once per connection and slot set. A consumer
// that never reads again finds in its socket, per format, descriptors only for a set it has not
// met; 300 formats over 7 sets queue 7 sets' worth, not 300. Every generation comes, in order,
// until its socket is full and the producer evicts it (how many fit depends on the kernel's socket
// buffer size).
TEST(FormatStorms, SlotDescriptorsTravelOncePerConnectionAndSet) {
  TempDir dir;
  ProducerOptions o;
  o.path = dir.file("ch");
  o.slots = 4;
  Producer p(o);
  p.set_format(pattern_format(kBaseSlot));
  SilentConsumer silent(o.path);
  ASSERT_TRUE(wait_consumers(p, 1));
  Storm storm;
  for (int i = 1; i <= 300; ++i) {
    p.set_format(storm.next(i));
    ASSERT_EQ(publish_next(p), PublishStatus::published);
  }
  const std::uint64_t final_gen = p.stats().generation;
  std::vector<std::uint64_t> seen_sets;
  std::uint64_t formats = 0, fds = 0, last_gen = 0;
  bool evicted = false;
  for (;;) {
    RawMessage raw;
    // Until the last format, or the end of what the producer queued before it evicted us.
    if (last_gen == final_gen) break;
    const RecvStatus st = recv_raw(silent.sock.get(), raw, 5000ms);
    ASSERT_NE(st, RecvStatus::timeout) << "neither the last format nor a hang-up came";
    if (st == RecvStatus::closed) {
      evicted = true;
      break;
    }
    Received r = parse_header(std::move(raw));
    if (r.type == MsgType::refused) {
      evicted = true;
      continue;
    }
    if (r.type == MsgType::start) continue;
    ASSERT_EQ(r.type, MsgType::format);
    FormatMsg m = decode_format(r);
    ++formats;
    if (last_gen) {
      EXPECT_EQ(m.generation, last_gen + 1) << "a format went missing";
    }
    last_gen = m.generation;
    const bool first_time =
        std::find(seen_sets.begin(), seen_sets.end(), m.set_id) == seen_sets.end();
    EXPECT_EQ(m.has_slots, first_time) << "generation " << m.generation << " set " << m.set_id;
    EXPECT_EQ(m.slots.fds.size(), first_time ? o.slots : 0u) << "generation " << m.generation;
    fds += m.slots.fds.size();
    if (first_time) seen_sets.push_back(m.set_id);
  }
  std::printf("silent consumer: %llu formats, %llu descriptors, %s\n",
              static_cast<unsigned long long>(formats), static_cast<unsigned long long>(fds),
              evicted ? "then evicted: its socket was full" : "all of them");
  // The initial format (set 1) comes with the handshake; the six that grew the slots follow.
  EXPECT_GE(formats, 1u);
  EXPECT_LE(fds, storm.sets * o.slots);
  if (!evicted) {
    EXPECT_EQ(formats, 301u);
    EXPECT_EQ(fds, storm.sets * o.slots);
  }
}
