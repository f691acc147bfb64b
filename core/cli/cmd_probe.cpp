// `cudaipc probe`: what a consumer of the channel gets, measured as one: frames/s, how long after
// publishing each frame is taken (both ends read CLOCK_MONOTONIC), and the frames it missed.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "cudaipc/consumer.hpp"
#include "json.hpp"

namespace cudaipc::cli {
namespace {

const char* kHelp =
    "usage: cudaipc probe PATH [--seconds N] [--json]\n"
    "\n"
    "Joins the channel as a `latest` consumer (it holds back no one: the producer never waits\n"
    "for it, and it takes each newest frame and releases it at once), for N seconds (default 5),\n"
    "then reports:\n"
    "  frames/s          frames taken per second of the run\n"
    "  latency p50/p99   publish -> acquire, from the frame's publish time (the producer's\n"
    "                    CLOCK_MONOTONIC) to the moment next() returned it\n"
    "  gaps              times the seq jumped, and the frames skipped in them (a `latest`\n"
    "                    consumer skips what it is too slow for, by design)\n"
    "It takes one of the channel's consumer places while it runs.\n"
    "\n"
    "  --seconds N  how long to watch (default 5)\n"
    "  --json       one JSON object\n"
    "\n"
    "Exit status: 0, or 1 when it could not join or the producer went away.\n";

std::uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return -1;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

int run_probe(int argc, char** argv) {
  Args args(argc, argv, 2, {"seconds"}, {"json"});
  if (args.flag("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1) throw UsageError("probe takes one channel PATH");
  const std::string path = args.positional()[0];
  const double seconds = args.number("seconds", 5, 0.1, 86400);
  install_stop_signals();
  ConsumerOptions o;
  o.path = path;
  o.mode = ConsumeMode::latest;
  o.reconnect = false;
  Consumer consumer(o);

  std::vector<double> latency_us;
  std::uint64_t frames = 0, gaps = 0, skipped = 0, last_seq = 0, first_seq = 0;
  std::string caps, ended;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (!g_stop.load()) {
    const Clock::time_point now = Clock::now();
    if (now >= end) break;
    const Clock::duration left =
        std::min<Clock::duration>(end - now, std::chrono::milliseconds(100));
    Event ev = consumer.next(left);
    if (ev.type == EventType::frame) {
      const std::uint64_t taken = now_ns();
      const std::uint64_t published = ev.frame.desc().publish_time_ns;
      if (taken >= published) latency_us.push_back(static_cast<double>(taken - published) / 1e3);
      const std::uint64_t seq = ev.frame.seq();
      if (last_seq != 0 && seq > last_seq + 1) {
        ++gaps;
        skipped += seq - last_seq - 1;
      }
      if (first_seq == 0) first_seq = seq;
      last_seq = seq;
      ++frames;
    } else if (ev.type == EventType::format) {
      caps = ev.format.caps;
    } else if (ev.type == EventType::disconnected) {
      ended = ev.message.empty() ? "the producer went away" : ev.message;
      break;
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = static_cast<double>(frames) / elapsed;
  const double p50 = percentile(latency_us, 0.5), p99 = percentile(latency_us, 0.99);
  if (args.flag("json")) {
    Json j;
    j.begin_object()
        .field("path", path)
        .field("seconds", elapsed)
        .field("frames", frames)
        .field("frames_per_second", rate)
        .field("latency_p50_us", p50 < 0 ? std::nan("") : p50)
        .field("latency_p99_us", p99 < 0 ? std::nan("") : p99)
        .field("gaps", gaps)
        .field("skipped", skipped)
        .field("first_seq", first_seq)
        .field("last_seq", last_seq)
        .field("caps", caps);
    if (ended.empty())
      j.null_field("disconnected");
    else
      j.field("disconnected", ended);
    j.end_object();
    std::printf("%s\n", j.text().c_str());
  } else {
    std::printf("%s: %llu frames in %.2f s, %.1f frames/s", path.c_str(),
                static_cast<unsigned long long>(frames), elapsed, rate);
    if (p50 >= 0) std::printf(", latency p50 %.1f us p99 %.1f us", p50, p99);
    std::printf(", %llu gaps (%llu frames skipped)\n", static_cast<unsigned long long>(gaps),
                static_cast<unsigned long long>(skipped));
  }
  if (!ended.empty()) {
    std::fprintf(stderr, "cudaipc probe: %s: %s\n", path.c_str(), ended.c_str());
    return 1;
  }
  return 0;
}

}  // namespace cudaipc::cli
