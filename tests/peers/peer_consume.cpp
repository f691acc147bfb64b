// Consumer role: verifies every frame's payload against its seq and the ordering its mode
// promises, and reports counts the test asserts on.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "pattern.hpp"
#include "peer_args.hpp"

namespace peer {

int consume(const Args& a) {
  cudaipc::ConsumerOptions opts;
  opts.path = a.str("path");
  opts.mode = a.str("mode", "every") == "latest" ? cudaipc::ConsumeMode::latest
                                                 : cudaipc::ConsumeMode::every_frame;
  opts.reconnect = a.flag("reconnect");
  const std::uint64_t max_frames = a.num("frames");
  const auto delay = std::chrono::microseconds(a.num("delay-us"));
  const std::uint64_t hold = a.num("hold");
  const auto hold_for = std::chrono::milliseconds(a.num("hold-ms"));
  const bool hold_all = a.flag("hold-all");
  const bool verbose = a.flag("verbose");
  const auto timeout = std::chrono::milliseconds(a.num("timeout-ms", 10000));
  const bool every = opts.mode == cudaipc::ConsumeMode::every_frame;

  cudaipc::Consumer consumer(opts);
  std::printf("connected\n");
  std::vector<cudaipc::Frame> held;
  std::uint64_t frames = 0, first = 0, last = 0, bad = 0, order = 0, formats = 0, disconnects = 0;
  bool eos = false;
  bool fresh = true;  // the next frame starts a producer's sequence: nothing to compare it with
  for (;;) {
    cudaipc::Event ev = consumer.next(timeout);
    if (ev.type == cudaipc::EventType::format) {
      ++formats;
      if (verbose)
        std::printf("format %llu %llu\n", static_cast<unsigned long long>(ev.generation),
                    static_cast<unsigned long long>(ev.format.tensor.size));
      continue;
    }
    if (ev.type == cudaipc::EventType::eos) {
      eos = true;
      if (verbose) std::printf("eos\n");
      break;
    }
    if (ev.type == cudaipc::EventType::disconnected && opts.reconnect) {
      // Evicted or the producer left: with reconnect the stream goes on, and the test sees why.
      ++disconnects;
      fresh = true;  // a new producer numbers its frames from 1 again
      std::printf("disconnected %s\n", ev.message.c_str());
      continue;
    }
    if (ev.type != cudaipc::EventType::frame) {
      std::printf("event %s %s\n", ev.type == cudaipc::EventType::timeout ? "timeout" : "other",
                  ev.message.c_str());
      return 4;
    }
    cudaipc::Frame& f = ev.frame;
    const std::uint64_t seq = f.seq();
    if (cudaipc::testing::check_pattern(f.data(), f.size(), seq) != f.size()) ++bad;
    if (delay.count()) {
      // Hold the lease a while, then look again: a producer rewriting a leased slot shows here.
      std::this_thread::sleep_for(delay);
      if (cudaipc::testing::check_pattern(f.data(), f.size(), seq) != f.size()) ++bad;
    }
    if (!fresh && (every ? seq != last + 1 : seq <= last)) ++order;
    fresh = false;
    if (frames == 0) first = seq;
    last = seq;
    ++frames;
    if (verbose)
      std::printf("frame %llu %llu %llu\n", static_cast<unsigned long long>(seq),
                  static_cast<unsigned long long>(f.size()),
                  static_cast<unsigned long long>(f.desc().generation));
    if (hold || hold_all) held.push_back(std::move(f));
    if (hold && held.size() == hold) {
      if (a.flag("fork-holder")) {
        // A child forked without exec: it keeps our socket and mappings open, and outlives us
        // when the test kills us, so only a watch on our process can tell that we died.
        const pid_t holder = ::fork();
        if (holder < 0) {
          std::printf("error fork failed\n");
          return 4;
        }
        if (holder == 0) {
          for (;;) ::pause();
        }
        std::printf("holder %d\n", static_cast<int>(holder));
      }
      std::printf("held %llu\n", static_cast<unsigned long long>(hold));
      if (hold_for.count() == 0) {
        // Keep the leases until the test kills us.
        for (;;) ::pause();
      }
      // Keep them a while (whatever happens to our connection meanwhile), then check them again.
      std::this_thread::sleep_for(hold_for);
      break;
    }
    if (max_frames && frames == max_frames) break;
  }
  std::uint64_t recheck = 0;
  for (const auto& f : held)
    if (cudaipc::testing::check_pattern(f.data(), f.size(), f.seq()) != f.size()) ++recheck;
  std::printf(
      "done frames=%llu first=%llu last=%llu bad=%llu order=%llu formats=%llu eos=%d "
      "recheck=%llu held=%zu disconnects=%llu\n",
      static_cast<unsigned long long>(frames), static_cast<unsigned long long>(first),
      static_cast<unsigned long long>(last), static_cast<unsigned long long>(bad),
      static_cast<unsigned long long>(order), static_cast<unsigned long long>(formats), eos ? 1 : 0,
      static_cast<unsigned long long>(recheck), held.size(),
      static_cast<unsigned long long>(disconnects));
  return bad == 0 && order == 0 && recheck == 0 ? 0 : 1;
}

}  // namespace peer
