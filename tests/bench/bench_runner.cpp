// The generic runner: one producer process and N consumer processes per scenario, each a fresh
// exec of this program, so no allocator, page-cache or futex state is shared except through the
// channel. Phases, by seq number (all processes derive them from the scenario):
//   1..warmup                 full speed; faults the slots in, warms caches and the socket thread
//   next `samples` frames     paced: the producer publishes only once every consumer has released
//                             the previous frame and `gap_us` has passed, so each consumer is
//                             asleep on the futex and publish->acquire measures the wake path
//   last `frames` frames      full speed (FullPolicy::block): frames/s and CPU per frame
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "bench.hpp"
#include "cudaipc/error.hpp"

namespace bench {
namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(60);

std::string arg_value(const std::vector<std::string>& args, const std::string& key) {
  for (const auto& a : args)
    if (a.rfind(key + "=", 0) == 0) return a.substr(key.size() + 1);
  throw std::runtime_error("missing argument " + key);
}

cudaipc::Format format_for(const Scenario& s) {
  cudaipc::Format f;
  f.caps =
      "other/tensors,format=static,num_tensors=1,types=uint8,dimensions=" + std::to_string(s.bytes);
  f.tensor = cudaipc::make_tensor(cudaipc::DType::uint8, {static_cast<std::int64_t>(s.bytes)});
  return f;
}

// Until every one of `n` consumers has taken frame `seq` and released everything it held; true
// when it had to wait. After end_of_stream a consumer may already have left, so the final drain
// passes n = 0.
bool wait_idle(cudaipc::Producer& p, std::uint64_t seq, std::uint32_t n) {
  const auto deadline = std::chrono::steady_clock::now() + kIdleTimeout;
  for (bool waited = false;; waited = true) {
    auto st = p.stats();
    bool idle = st.consumers.size() >= n;
    for (const auto& c : st.consumers) idle = idle && c.delivered >= seq && c.leases == 0;
    if (idle) return waited;
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("consumers did not catch up with frame " + std::to_string(seq));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void produce_one(cudaipc::Producer& p, ProducerSide& side, std::uint64_t seq) {
  cudaipc::PublishStatus st = side.produce(p, seq);
  if (st != cudaipc::PublishStatus::published)
    throw std::runtime_error("frame " + std::to_string(seq) + " not published (no free slot)");
}

}  // namespace

int producer_role(const std::vector<std::string>& args) {
  const Scenario s = Scenario::from_args(args);
  const Backend* b = find_backend(s.backend);
  if (!b) throw std::runtime_error("no backend " + s.backend);
  if (s.pin) pin_to(0);
  cudaipc::ProducerOptions o;
  o.path = arg_value(args, "path");
  o.slots = s.slots;
  o.on_full = cudaipc::FullPolicy::block;
  o.block_timeout = std::chrono::seconds(30);
  b->configure(s, o);
  cudaipc::Producer p(o);
  p.set_format(format_for(s));
  auto side = b->producer_side(s);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (p.consumer_count() < s.consumers) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("consumers did not connect");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  std::uint64_t seq = 0;
  while (seq < s.warmup) produce_one(p, *side, ++seq);
  wait_idle(p, seq, s.consumers);

  // The producer sleeps right after each publish, as the futex floor's waker does: had it kept
  // running (polling for the release), the scheduler's habit of waking the consumer on the
  // waker's CPU would charge the poll to the latency. A consumer still busy after the gap (large
  // verified frames) gets a fresh gap once it is done, so it is always asleep at the next publish.
  const auto gap = std::chrono::microseconds(s.gap_us);
  std::this_thread::sleep_for(gap);
  for (std::uint64_t i = 0; i < s.samples; ++i) {
    produce_one(p, *side, ++seq);
    std::this_thread::sleep_for(gap);
    if (wait_idle(p, seq, s.consumers)) std::this_thread::sleep_for(gap);
  }

  const std::uint64_t c0 = cpu_ns(), t0 = mono_ns();
  for (std::uint64_t i = 0; i < s.frames; ++i) produce_one(p, *side, ++seq);
  const std::uint64_t c1 = cpu_ns(), t1 = mono_ns();

  p.end_of_stream();
  wait_idle(p, seq, 0);
  Kv kv;
  kv["published"] = static_cast<double>(p.stats().published);
  if (s.frames) {
    kv["cpu_us_per_frame"] = static_cast<double>(c1 - c0) / 1e3 / static_cast<double>(s.frames);
    kv["fps"] = static_cast<double>(s.frames) * 1e9 / static_cast<double>(t1 - t0);
  }
  write_kv(arg_value(args, "out"), kv);
  return 0;
}

int consumer_role(const std::vector<std::string>& args) {
  const Scenario s = Scenario::from_args(args);
  const Backend* b = find_backend(s.backend);
  if (!b) throw std::runtime_error("no backend " + s.backend);
  if (s.pin) {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    const auto k = static_cast<unsigned>(std::stoul(arg_value(args, "index")));
    pin_to(n > 1 ? 1 + k % static_cast<unsigned>(n - 1) : 0);
  }
  cudaipc::ConsumerOptions o;
  o.path = arg_value(args, "path");
  o.mode = cudaipc::ConsumeMode::every_frame;
  o.reconnect = false;
  b->configure(s, o);
  cudaipc::Consumer c(o);
  auto side = b->consumer_side(s, c);

  const std::uint64_t lat_first = s.warmup + 1, lat_last = s.warmup + s.samples;
  const std::uint64_t tp_first = lat_last + 1, last = s.total();
  std::vector<std::uint64_t> lat;
  lat.reserve(s.samples);
  std::uint64_t expect = 1, good = 0, bad = 0;
  std::uint64_t paced_c0 = 0, paced_c1 = 0, tp_c0 = 0, tp_t0 = 0, tp_c1 = 0, tp_t1 = 0;
  for (;;) {
    cudaipc::Event ev = c.next(std::chrono::seconds(60));
    if (ev.type == cudaipc::EventType::format) continue;
    if (ev.type == cudaipc::EventType::eos) break;
    if (ev.type != cudaipc::EventType::frame) {
      std::fprintf(stderr, "consumer: no frame after seq %llu (%s)\n",
                   static_cast<unsigned long long>(expect - 1),
                   ev.type == cudaipc::EventType::timeout ? "timeout" : ev.message.c_str());
      return 1;
    }
    const std::uint64_t now = mono_ns();
    const std::uint64_t seq = ev.frame.seq();
    if (seq >= lat_first && seq <= lat_last) lat.push_back(now - ev.frame.desc().publish_time_ns);
    if (seq == lat_first) paced_c0 = cpu_ns();
    if (seq == tp_first) {
      tp_c0 = cpu_ns();
      tp_t0 = now;
    }
    if (seq != expect) {
      std::fprintf(stderr, "consumer: got seq %llu, expected %llu\n",
                   static_cast<unsigned long long>(seq), static_cast<unsigned long long>(expect));
      ++bad;
    }
    expect = seq + 1;
    if (side->check(ev.frame))
      ++good;
    else
      ++bad;
    ev.frame.release();
    if (seq == lat_last) paced_c1 = cpu_ns();
    if (seq == last) {
      tp_c1 = cpu_ns();
      tp_t1 = mono_ns();
    }
  }
  if (expect != last + 1) {
    std::fprintf(stderr, "consumer: stream ended after seq %llu of %llu\n",
                 static_cast<unsigned long long>(expect - 1),
                 static_cast<unsigned long long>(last));
    ++bad;
  }
  Kv kv;
  kv["good"] = static_cast<double>(good);
  kv["bad"] = static_cast<double>(bad);
  if (s.samples > 1)
    kv["paced_cpu_us_per_frame"] =
        static_cast<double>(paced_c1 - paced_c0) / 1e3 / static_cast<double>(s.samples);
  if (s.frames > 1) {
    kv["cpu_us_per_frame"] =
        static_cast<double>(tp_c1 - tp_c0) / 1e3 / static_cast<double>(s.frames);
    // First acquire to last release spans all `frames` frames of work.
    kv["fps"] = static_cast<double>(s.frames) * 1e9 / static_cast<double>(tp_t1 - tp_t0);
  }
  write_samples(arg_value(args, "lat"), lat);
  write_kv(arg_value(args, "out"), kv);
  return bad == 0 ? 0 : 1;
}

ScenarioResult run_scenario(const Scenario& s, const std::string& dir, int index) {
  ScenarioResult r;
  r.s = s;
  const std::string base = dir + "/s" + std::to_string(index);
  const std::string path = base + ".sock";
  std::vector<std::string> common = s.to_args();
  common.push_back("path=" + path);

  std::vector<std::string> pargs = {"--role=producer", "out=" + base + ".producer"};
  pargs.insert(pargs.end(), common.begin(), common.end());
  pid_t producer = spawn_self(pargs);
  // Consumers connect without reconnect, so the socket must exist first.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (::access(path.c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));

  std::vector<pid_t> consumers;
  for (std::uint32_t k = 0; k < s.consumers; ++k) {
    const std::string cb = base + ".c" + std::to_string(k);
    std::vector<std::string> cargs = {"--role=consumer", "out=" + cb, "lat=" + cb + ".lat",
                                      "index=" + std::to_string(k)};
    cargs.insert(cargs.end(), common.begin(), common.end());
    consumers.push_back(spawn_self(cargs));
  }
  bool ok = true;
  for (pid_t pid : consumers) ok = wait_ok(pid, "consumer") && ok;
  ok = wait_ok(producer, "producer") && ok;

  Kv pk = read_kv(base + ".producer");
  r.prod_cpu_us = pk["cpu_us_per_frame"];
  ok = ok && static_cast<std::uint64_t>(pk["published"]) == s.total();
  std::vector<std::uint64_t> lat;
  double cpu = 0, paced = 0;
  r.fps = 0;
  for (std::uint32_t k = 0; k < s.consumers; ++k) {
    const std::string cb = base + ".c" + std::to_string(k);
    Kv ck = read_kv(cb);
    auto l = read_samples(cb + ".lat");
    lat.insert(lat.end(), l.begin(), l.end());
    cpu += ck["cpu_us_per_frame"];
    paced += ck["paced_cpu_us_per_frame"];
    r.fps = k == 0 ? ck["fps"] : std::min(r.fps, ck["fps"]);
    if (s.payload == Payload::verify) r.verified += static_cast<std::uint64_t>(ck["good"]);
    r.bad += static_cast<std::uint64_t>(ck["bad"]);
    ok = ok && static_cast<std::uint64_t>(ck["good"]) == s.total();
  }
  r.cons_cpu_us = cpu / s.consumers;
  r.cons_cpu_paced_us = paced / s.consumers;
  r.lat_n = lat.size();
  r.lat_p50_us = percentile(lat, 0.50) / 1e3;
  r.lat_p99_us = percentile(lat, 0.99) / 1e3;
  r.ok = ok && r.bad == 0 && r.lat_n == s.samples * s.consumers;
  return r;
}

}  // namespace bench
