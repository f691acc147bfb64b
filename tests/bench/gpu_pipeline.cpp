// cudaipc-bench-gpu-pipeline: a GPU pipeline whose two processes both run kernels on every frame
// (issue #8), and what a CUDA consumer attaching costs the producer. Prints tables; it fails only
// on a lost or corrupted frame, a failed attach or a process that did not finish, never on a
// timing.
//
//   pipeline: 1080p RGBA u8, every-frame consumer. The producer fills each borrowed slot with
//     Kernels::fill on the channel's stream (key = frame index, sent as pts); the consumer checks
//     each frame with Kernels::verify on its own stream and reads the bad-word counter at the end.
//     In the same run, the same two kernels in one process on one stream: the baseline.
//   attach: the producer publishes paced frames while another process creates a CUDA Consumer,
//     takes a few frames and destroys it, again and again; the producer's time in begin_frame +
//     commit near an attach against far from any, for each export mode.
//
// Every role is a fresh exec of this program (--role=NAME key=value...), so processes share only
// the channel and the GPU. The parent never creates a CUDA context: one more context would be
// one more client of the GPU's time-slicing (or of the MPS server). Without a driver or a GPU it
// prints "skipped: <why>" and exits 0. --help lists the options.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "test_kernels.hpp"

namespace {

namespace cu = cudaipc::cuda;
using bench::cpu_ns;
using bench::mono_ns;
using cudaipc::gputest::Kernels;

constexpr std::uint64_t kFrameBytes = 1920ull * 1080 * 4;  // 8,294,400
// A child that takes longer than this to start (CUDA context, channel) has hung.
constexpr auto kStartLimit = std::chrono::seconds(30);

void usage() {
  std::printf(
      "usage: cudaipc-bench-gpu-pipeline [options]\n"
      "  --scenario=LIST      pipeline (kernels on both sides), attach (publishing while a\n"
      "                       consumer attaches): both\n"
      "  --label=TEXT         names this run in the tables, e.g. \"MPS on\" (default: what the\n"
      "                       MPS check found)\n"
      "pipeline:\n"
      "  --warmup=N           full-speed frames before measuring: 100\n"
      "  --samples=N          paced frames (publish->acquire latency): 2000\n"
      "  --rt-every=N         every N-th paced frame also times the round trip: 4\n"
      "  --frames=N           full-speed frames (frames/s, CPU): 5000; also the baseline's\n"
      "  --gap-us=N           idle time before each paced frame: 200\n"
      "  --slots=N            channel slots: 4\n"
      "attach:\n"
      "  --export=LIST        vmm,legacy\n"
      "  --attaches=N         consumers created and destroyed, one at a time: 20\n"
      "  --attach-frames=N    frames each one takes: 3\n"
      "  --attach-gap-ms=N    pause after each attach: 100\n"
      "  --interval-us=N      the producer publishes every N us: 500\n"
      "  --window-ms=N        a frame this close to an attach counts as near it: 20\n"
      "both:\n"
      "  --time-limit=S       each process is killed after S seconds: 120\n"
      "  --keep               keep the result files (printed where)\n");
}

// ---- the command line, parent and children ----

struct Options {
  bool pipeline = true, attach = true;
  std::string label;
  std::uint64_t warmup = 100, samples = 2000, rt_every = 4, frames = 5000, gap_us = 200;
  std::uint64_t slots = 4;
  std::vector<std::string> exports = {"vmm", "legacy"};
  std::uint64_t attaches = 20, attach_frames = 3, attach_gap_ms = 100, interval_us = 500;
  std::uint64_t window_ms = 20;
  std::uint64_t time_limit_s = 120;
  bool keep = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// A child's "key=value" arguments.
class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      const auto eq = a.find('=');
      if (eq != std::string::npos) kv_[a.substr(0, eq)] = a.substr(eq + 1);
    }
  }
  const std::string& str(const std::string& k) const {
    auto it = kv_.find(k);
    if (it == kv_.end()) throw std::runtime_error("missing argument " + k);
    return it->second;
  }
  std::uint64_t num(const std::string& k) const { return std::stoull(str(k)); }

 private:
  std::map<std::string, std::string> kv_;
};

std::string kv(const char* k, std::uint64_t v) {
  return std::string(k) + "=" + std::to_string(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    const std::string k = a.substr(0, eq), v = eq == std::string::npos ? "" : a.substr(eq + 1);
    auto num = [&] { return std::stoull(v); };
    if (k == "--help" || k == "-h") {
      usage();
      std::exit(0);
    } else if (k == "--scenario") {
      o.pipeline = o.attach = false;
      for (const auto& s : split(v)) {
        if (s != "pipeline" && s != "attach") throw std::runtime_error("unknown scenario " + s);
        (s == "pipeline" ? o.pipeline : o.attach) = true;
      }
    } else if (k == "--label")
      o.label = v;
    else if (k == "--warmup")
      o.warmup = num();
    else if (k == "--samples")
      o.samples = num();
    else if (k == "--rt-every")
      o.rt_every = std::max<std::uint64_t>(num(), 1);
    else if (k == "--frames")
      o.frames = num();
    else if (k == "--gap-us")
      o.gap_us = num();
    else if (k == "--slots")
      o.slots = std::max<std::uint64_t>(num(), 2);
    else if (k == "--export") {
      o.exports = split(v);
      for (const auto& e : o.exports)
        if (e != "vmm" && e != "legacy") throw std::runtime_error("unknown export mode " + e);
    } else if (k == "--attaches")
      o.attaches = num();
    else if (k == "--attach-frames")
      o.attach_frames = std::max<std::uint64_t>(num(), 1);
    else if (k == "--attach-gap-ms")
      o.attach_gap_ms = num();
    else if (k == "--interval-us")
      o.interval_us = num();
    else if (k == "--window-ms")
      o.window_ms = num();
    else if (k == "--time-limit")
      o.time_limit_s = std::max<std::uint64_t>(num(), 10);
    else if (k == "--keep")
      o.keep = true;
    else
      throw std::runtime_error("unknown option " + a + " (--help lists them)");
  }
  return o;
}

// ---- helpers for the roles ----

cudaipc::Format rgba_1080p() {
  cudaipc::Format f;
  f.caps = "video/x-raw,format=RGBA,width=1920,height=1080";
  f.tensor = cudaipc::make_tensor(cudaipc::DType::uint8, {1080, 1920, 4});
  return f;
}

template <typename Pred>
void wait_until(Pred done, std::chrono::seconds limit, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error(what);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void synchronize(const Kernels& k, CUstream s) {
  cu::ScopedContext current(k.context()->get());
  cu::check(cu::driver().cuStreamSynchronize(s), "cuStreamSynchronize");
}

struct Published {
  bool ok = false;
  std::uint64_t begin_ns = 0;  // just before begin_frame
  std::uint64_t spent_ns = 0;  // inside begin_frame and commit
};

// Borrows a slot, fills it with frame `key`'s pattern on the channel's stream and commits it with
// pts = key and the begin_frame time in the user metadata (the consumer's round trip starts
// there). The fill's launch is left out of spent_ns: it costs the same without a channel.
Published publish_frame(cudaipc::Producer& p, Kernels& k, std::uint64_t key) {
  Published r;
  r.begin_ns = mono_ns();
  cudaipc::WriteSlot slot = p.begin_frame();
  const std::uint64_t t1 = mono_ns();
  r.spent_ns = t1 - r.begin_ns;
  if (!slot) return r;
  k.fill(static_cast<CUstream>(p.cuda_stream()), slot.address(), kFrameBytes, key);
  cudaipc::FrameInfo info;
  info.pts = key;
  info.user_meta = &r.begin_ns;
  info.user_meta_size = sizeof r.begin_ns;
  const std::uint64_t t2 = mono_ns();
  p.commit(slot, info);
  r.spent_ns += mono_ns() - t2;
  r.ok = true;
  return r;
}

std::uint64_t begin_ns_of(const cudaipc::FrameDesc& d) {
  std::uint64_t t = 0;
  if (d.user_meta_size == sizeof t) std::memcpy(&t, d.user_meta, sizeof t);
  return t;
}

cudaipc::CudaExportMode export_mode(const std::string& name) {
  if (name == "vmm") return cudaipc::CudaExportMode::vmm;
  if (name == "legacy") return cudaipc::CudaExportMode::legacy;
  return cudaipc::CudaExportMode::automatic;
}

cudaipc::ProducerOptions producer_options(const Args& a) {
  cudaipc::ProducerOptions o;
  o.path = a.str("path");
  o.slots = static_cast<std::uint32_t>(a.num("slots"));
  o.memory = cudaipc::MemoryKind::cuda;
  o.cuda.export_mode = export_mode(a.str("export"));
  o.on_full = cudaipc::FullPolicy::block;
  return o;
}

double per_frame_us(std::uint64_t ns, std::uint64_t frames) {
  return frames ? static_cast<double>(ns) / 1e3 / static_cast<double>(frames) : 0.0;
}

double frames_per_s(std::uint64_t frames, std::uint64_t ns) {
  return ns ? static_cast<double>(frames) * 1e9 / static_cast<double>(ns) : 0.0;
}

// ---- pipeline roles ----
// Frames by seq: 1..warmup at full speed; the next `samples` paced (the producer waits until the
// consumer has released the previous frame, then `gap_us`, so the consumer sleeps in next() when
// a frame lands); the last `frames` at full speed.

struct Phases {
  explicit Phases(const Args& a)
      : lat_first(a.num("warmup") + 1),
        lat_last(a.num("warmup") + a.num("samples")),
        last(lat_last + a.num("frames")),
        rt_every(a.num("rt_every")) {}
  bool paced(std::uint64_t seq) const { return seq >= lat_first && seq <= lat_last; }
  bool round_trip(std::uint64_t seq) const {
    return paced(seq) && (seq - lat_first) % rt_every == 0;
  }
  std::uint64_t lat_first, lat_last, last, rt_every;
};

int pipeline_producer(const Args& a) {
  const Phases ph(a);
  const auto gap = std::chrono::microseconds(a.num("gap_us"));
  Kernels kernels;
  cudaipc::ProducerOptions o = producer_options(a);
  o.block_timeout = std::chrono::seconds(30);
  cudaipc::Producer p(o);
  p.set_format(rgba_1080p());
  wait_until([&] { return p.consumer_count() >= 1; }, kStartLimit, "the consumer did not connect");

  auto publish = [&](std::uint64_t key) {
    if (!publish_frame(p, kernels, key).ok)
      throw std::runtime_error("frame " + std::to_string(key) + " found no free slot");
  };
  // The consumer has taken frame `seq` and holds nothing (a sampled round trip included). A
  // consumer that died ends the run here rather than at the time limit.
  auto idle = [&](std::uint64_t seq) {
    const cudaipc::ProducerStats st = p.stats();
    if (st.consumers.empty()) throw std::runtime_error("the consumer left");
    bool done = true;
    for (const auto& c : st.consumers) done = done && c.cursor >= seq && c.leases == 0;
    return done;
  };

  std::uint64_t key = 0;
  while (key + 1 < ph.lat_first) publish(++key);
  wait_until([&] { return idle(key); }, kStartLimit, "the consumer fell behind in the warm-up");
  std::this_thread::sleep_for(gap);
  while (key < ph.lat_last) {
    publish(++key);
    std::this_thread::sleep_for(gap);
    if (!idle(key)) {
      wait_until([&] { return idle(key); }, kStartLimit, "the consumer stopped releasing");
      std::this_thread::sleep_for(gap);
    }
  }
  const std::uint64_t c0 = cpu_ns(), t0 = mono_ns();
  while (key < ph.last) publish(++key);
  const std::uint64_t c1 = cpu_ns(), t1 = mono_ns();

  p.end_of_stream();
  wait_until([&] { return p.consumer_count() == 0; }, kStartLimit, "the consumer did not leave");
  const std::uint64_t n = ph.last - ph.lat_last;
  bench::write_kv(a.str("out") + ".kv", {{"published", static_cast<double>(p.stats().published)},
                                         {"cpu_us", per_frame_us(c1 - c0, n)},
                                         {"fps", frames_per_s(n, t1 - t0)}});
  return 0;
}

int pipeline_consumer(const Args& a) {
  const Phases ph(a);
  Kernels kernels;
  cudaipc::ConsumerOptions o;
  o.path = a.str("path");
  o.mode = cudaipc::ConsumeMode::every_frame;
  o.reconnect = false;
  cudaipc::Consumer c(o);

  std::vector<std::uint64_t> acquire, rt_begin, rt_publish;
  std::uint64_t expect = 1, errors = 0, checked = 0;
  std::uint64_t paced_c0 = 0, paced_c1 = 0, tp_c0 = 0, tp_t0 = 0, tp_c1 = 0, tp_t1 = 0;
  for (;;) {
    cudaipc::Event ev = c.next(std::chrono::seconds(30));
    if (ev.type == cudaipc::EventType::format) continue;
    if (ev.type == cudaipc::EventType::eos) break;
    if (ev.type != cudaipc::EventType::frame)
      throw std::runtime_error("no frame after seq " + std::to_string(expect - 1) + " (" +
                               (ev.type == cudaipc::EventType::timeout ? "timeout" : ev.message) +
                               ")");
    const std::uint64_t now = mono_ns();
    const cudaipc::FrameDesc& d = ev.frame.desc();
    if (d.seq != expect || d.pts != d.seq || ev.frame.size() != kFrameBytes) {
      if (errors++ < 5)
        std::fprintf(stderr, "consumer: seq %llu (expected %llu), pts %llu, %llu bytes\n",
                     static_cast<unsigned long long>(d.seq),
                     static_cast<unsigned long long>(expect),
                     static_cast<unsigned long long>(d.pts),
                     static_cast<unsigned long long>(ev.frame.size()));
    }
    expect = d.seq + 1;
    if (d.seq == ph.lat_first) paced_c0 = cpu_ns();
    if (d.seq == ph.lat_last + 1) {
      tp_c0 = cpu_ns();
      tp_t0 = now;
    }
    if (ph.paced(d.seq)) acquire.push_back(now - d.publish_time_ns);

    // Every frame's every word is checked, on the stream the channel orders this consumer's
    // reads on, behind its wait for the producer's fill.
    const auto stream = static_cast<CUstream>(c.cuda_stream());
    kernels.verify(stream, reinterpret_cast<CUdeviceptr>(ev.frame.data()), ev.frame.size(), d.pts);
    ++checked;
    // Sampled frames wait for the read to finish: the round trip ends when the consumer's kernel
    // has read the frame, not when it was queued. The last frame waits too, so frames/s counts
    // the GPU's work and not only its enqueueing.
    if (ph.round_trip(d.seq) || d.seq == ph.last) {
      synchronize(kernels, stream);
      const std::uint64_t done = mono_ns();
      if (ph.round_trip(d.seq)) {
        rt_begin.push_back(done - begin_ns_of(d));
        rt_publish.push_back(done - d.publish_time_ns);
      }
      if (d.seq == ph.last) tp_t1 = done;
    }
    ev.frame.release();
    if (d.seq == ph.lat_last) paced_c1 = cpu_ns();
    if (d.seq == ph.last) tp_c1 = cpu_ns();
  }
  const cudaipc::gputest::Counters k = kernels.counters(static_cast<CUstream>(c.cuda_stream()));
  if (expect != ph.last + 1) {
    std::fprintf(stderr, "consumer: the stream ended after seq %llu of %llu\n",
                 static_cast<unsigned long long>(expect - 1),
                 static_cast<unsigned long long>(ph.last));
    ++errors;
  }
  const std::string out = a.str("out");
  bench::write_samples(out + ".acquire", acquire);
  bench::write_samples(out + ".rt_begin", rt_begin);
  bench::write_samples(out + ".rt_publish", rt_publish);
  const std::uint64_t tp = ph.last - ph.lat_last, paced = ph.lat_last - ph.lat_first + 1;
  bench::write_kv(out + ".kv", {{"checked", static_cast<double>(checked)},
                                {"errors", static_cast<double>(errors)},
                                {"bad_words", static_cast<double>(k.bad)},
                                {"fps", frames_per_s(tp, tp_t1 - tp_t0)},
                                {"cpu_us", per_frame_us(tp_c1 - tp_c0, tp)},
                                {"paced_cpu_us", per_frame_us(paced_c1 - paced_c0, paced)}});
  return errors == 0 && k.bad == 0 ? 0 : 1;
}

// The same fill and verify in one process on one stream, into as many buffers as the channel
// has slots: what the GPU work costs with no second context and no channel.
int baseline(const Args& a) {
  Kernels kernels;
  const CUstream s = kernels.own_stream();
  std::vector<cu::DeviceAllocation> buffers;
  for (std::uint64_t i = 0; i < a.num("slots"); ++i)
    buffers.push_back(cu::make_device_allocation(kernels.context(), kFrameBytes));
  std::uint64_t key = 0;
  auto frame = [&] {
    ++key;
    const CUdeviceptr b = buffers[key % buffers.size()].get();
    kernels.fill(s, b, kFrameBytes, key);
    kernels.verify(s, b, kFrameBytes, key);
  };
  for (std::uint64_t i = 0; i < a.num("warmup"); ++i) frame();
  synchronize(kernels, s);
  std::vector<std::uint64_t> lat;
  for (std::uint64_t i = 0; i < a.num("samples"); ++i) {
    const std::uint64_t t0 = mono_ns();
    frame();
    synchronize(kernels, s);
    lat.push_back(mono_ns() - t0);
  }
  const std::uint64_t n = a.num("frames"), t0 = mono_ns();
  for (std::uint64_t i = 0; i < n; ++i) frame();
  synchronize(kernels, s);
  const std::uint64_t t1 = mono_ns();
  const cudaipc::gputest::Counters k = kernels.counters(s);
  const std::string out = a.str("out");
  bench::write_samples(out + ".lat", lat);
  bench::write_kv(out + ".kv", {{"checked", static_cast<double>(key)},
                                {"bad_words", static_cast<double>(k.bad)},
                                {"fps", frames_per_s(n, t1 - t0)}});
  return k.bad == 0 ? 0 : 1;
}

// ---- attach roles ----

// Publishes a frame every interval_us until the stop file appears, recording when each frame
// began and how long begin_frame + commit took. The first frames (first-use costs) are not kept.
int attach_producer(const Args& a) {
  constexpr std::uint64_t kUnrecorded = 50;
  Kernels kernels;
  cudaipc::ProducerOptions o = producer_options(a);
  // Short: a frame that finds no free slot is counted, not waited for.
  o.block_timeout = std::chrono::milliseconds(100);
  cudaipc::Producer p(o);
  p.set_format(rgba_1080p());
  const std::string stop = a.str("stop");
  const std::uint64_t interval_ns = a.num("interval_us") * 1000;
  // Stop on its own before the time limit kills it, so what it measured still gets written.
  const std::uint64_t give_up = mono_ns() + (a.num("limit") - 5) * 1'000'000'000ull;
  std::vector<std::uint64_t> begins, spent;
  std::uint64_t missed = 0;
  timespec next{};
  ::clock_gettime(CLOCK_MONOTONIC, &next);
  for (std::uint64_t key = 1; ::access(stop.c_str(), F_OK) != 0 && mono_ns() < give_up; ++key) {
    const Published r = publish_frame(p, kernels, key);
    missed += r.ok ? 0 : 1;
    if (key > kUnrecorded) {
      begins.push_back(r.begin_ns);
      spent.push_back(r.spent_ns);
    }
    // A fixed cadence; after a late frame it restarts from now instead of publishing a burst.
    std::uint64_t t = static_cast<std::uint64_t>(next.tv_sec) * 1'000'000'000ull +
                      static_cast<std::uint64_t>(next.tv_nsec) + interval_ns;
    t = std::max(t, mono_ns());
    next.tv_sec = static_cast<time_t>(t / 1'000'000'000ull);
    next.tv_nsec = static_cast<long>(t % 1'000'000'000ull);
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) == EINTR) {
    }
  }
  p.end_of_stream();
  const std::string out = a.str("out");
  bench::write_samples(out + ".begin", begins);
  bench::write_samples(out + ".spent", spent);
  bench::write_kv(out + ".kv", {{"published", static_cast<double>(p.stats().published)},
                                {"missed", static_cast<double>(missed)}});
  return 0;
}

// Creates a CUDA consumer, takes attach_frames frames (verifying each on its stream), waits for
// its reads and destroys it; `attaches` times, attach_gap_ms apart. Its CUDA context is made
// before the first attach and a gap ahead of it, so creating the context is not counted as an
// attach.
int attacher(const Args& a) {
  Kernels kernels;
  const auto gap = std::chrono::milliseconds(a.num("attach_gap_ms"));
  std::this_thread::sleep_for(gap);
  std::vector<std::uint64_t> starts, firsts, ends;
  std::uint64_t failed = 0, frames = 0;
  for (std::uint64_t i = 0; i < a.num("attaches"); ++i) {
    const std::uint64_t t0 = mono_ns();
    std::uint64_t first = 0;
    try {
      cudaipc::ConsumerOptions o;
      o.path = a.str("path");
      // latest: the producer never waits for this consumer's pace, only for its held slots.
      o.mode = cudaipc::ConsumeMode::latest;
      o.reconnect = false;
      cudaipc::Consumer c(o);
      for (std::uint64_t taken = 0; taken < a.num("attach_frames");) {
        cudaipc::Event ev = c.next(std::chrono::seconds(2));
        if (ev.type == cudaipc::EventType::format) continue;
        if (ev.type != cudaipc::EventType::frame)
          throw std::runtime_error(ev.type == cudaipc::EventType::timeout ? "no frame in 2 s"
                                                                          : ev.message);
        if (!first) first = mono_ns();
        kernels.verify(static_cast<CUstream>(c.cuda_stream()),
                       reinterpret_cast<CUdeviceptr>(ev.frame.data()), ev.frame.size(),
                       ev.frame.desc().pts);
        ++taken;
        ++frames;
      }
      synchronize(kernels, static_cast<CUstream>(c.cuda_stream()));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attacher: attach %llu failed: %s\n",
                   static_cast<unsigned long long>(i + 1), e.what());
      ++failed;
    }
    starts.push_back(t0);
    firsts.push_back(first ? first : t0);
    ends.push_back(mono_ns());
    std::this_thread::sleep_for(gap);
  }
  const cudaipc::gputest::Counters k = kernels.counters(kernels.own_stream());
  const std::string out = a.str("out");
  bench::write_samples(out + ".start", starts);
  bench::write_samples(out + ".first", firsts);
  bench::write_samples(out + ".end", ends);
  bench::write_kv(out + ".kv", {{"failed", static_cast<double>(failed)},
                                {"frames", static_cast<double>(frames)},
                                {"bad_words", static_cast<double>(k.bad)}});
  return failed == 0 && k.bad == 0 ? 0 : 1;
}

int run_role(const std::string& role, const Args& a) {
  // The per-process time limit: SIGALRM's default action ends a hung child, and the parent's
  // wait reports the signal.
  ::alarm(static_cast<unsigned>(a.num("limit")));
  if (role == "pipeline-producer") return pipeline_producer(a);
  if (role == "pipeline-consumer") return pipeline_consumer(a);
  if (role == "baseline") return baseline(a);
  if (role == "attach-producer") return attach_producer(a);
  if (role == "attacher") return attacher(a);
  throw std::runtime_error("unknown role " + role);
}

// ---- the parent: starts the roles and prints the tables ----

struct Mps {
  bool active = false;
  std::string line;
};

// The control pipe of an MPS daemon in the directory clients look in. It is only a hint: a client
// that cannot reach a daemon through it runs without MPS and says nothing, which is why
// run-mps.sh also logs the daemon's server list, and why --label can name the run instead.
Mps detect_mps() {
  const char* env = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string dir = env && *env ? env : "/tmp/nvidia-mps";
  const std::string pipe = dir + "/control";
  struct stat st {};
  Mps m;
  // A FIFO in older releases, a unix socket in CUDA 13's.
  m.active = ::stat(pipe.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
  m.line = std::string(m.active ? "MPS: active as far as this process can tell (control pipe "
                                : "MPS: not active (no control pipe at ") +
           pipe + (env && *env ? ", from CUDA_MPS_PIPE_DIRECTORY)" : ", the default directory)");
  return m;
}

std::string device_description() {
  const cu::Driver& d = cu::driver();
  CUdevice dev = 0;
  cu::check(d.cuDeviceGet(&dev, 0), "cuDeviceGet");
  char name[256] = {};
  cu::check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  return "CUDA device 0 (" + std::string(name) + "), driver API " + std::to_string(d.version);
}

bool wait_for_socket(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + kStartLimit;
  while (::access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

struct Pct {
  double p50 = 0, p99 = 0, max = 0;
  std::size_t n = 0;
};

Pct pct_us(std::vector<std::uint64_t> v) {
  Pct p;
  p.n = v.size();
  p.p50 = bench::percentile(v, 0.50) / 1e3;
  p.p99 = bench::percentile(v, 0.99) / 1e3;
  p.max = bench::percentile(v, 1.0) / 1e3;
  return p;
}

std::string p50_p99(const Pct& p) {
  if (!p.n) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f / %.1f", p.p50, p.p99);
  return buf;
}

pid_t start(const Options& o, const std::string& role, const std::string& out,
            const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--role=" + role, "out=" + out, kv("limit", o.time_limit_s),
                                   kv("slots", o.slots)};
  args.insert(args.end(), extra.begin(), extra.end());
  return bench::spawn_self(args);
}

std::uint64_t u64(const bench::Kv& k, const char* key) {
  auto it = k.find(key);
  return it == k.end() ? 0 : static_cast<std::uint64_t>(it->second);
}

bool run_pipeline(const Options& o, const std::string& dir, const std::string& label) {
  const std::vector<std::string> counts = {kv("warmup", o.warmup), kv("samples", o.samples),
                                           kv("frames", o.frames), kv("rt_every", o.rt_every),
                                           kv("gap_us", o.gap_us)};
  // Alone, before the channel's processes start: nothing else on the GPU.
  const std::string base_out = dir + "/baseline";
  bool ok = bench::wait_ok(start(o, "baseline", base_out, counts), "baseline");

  const std::string path = dir + "/pipeline.sock", prod_out = dir + "/producer",
                    cons_out = dir + "/consumer";
  std::vector<std::string> channel = counts;
  channel.push_back("path=" + path);
  channel.push_back("export=auto");
  const pid_t producer = start(o, "pipeline-producer", prod_out, channel);
  // The consumer connects without reconnect, so the socket must exist first.
  if (wait_for_socket(path)) {
    ok = bench::wait_ok(start(o, "pipeline-consumer", cons_out, channel), "consumer") && ok;
  } else {
    std::fprintf(stderr, "pipeline: the producer made no socket\n");
    ok = false;
  }
  ok = bench::wait_ok(producer, "producer") && ok;

  const bench::Kv bk = bench::read_kv(base_out + ".kv"), pk = bench::read_kv(prod_out + ".kv"),
                  ck = bench::read_kv(cons_out + ".kv");
  const std::uint64_t total = o.warmup + o.samples + o.frames;
  const std::uint64_t checked = u64(ck, "checked"), bad = u64(ck, "bad_words");
  ok = ok && checked == total && bad == 0 && u64(ck, "errors") == 0 &&
       u64(pk, "published") == total && u64(bk, "bad_words") == 0;

  std::printf(
      "\npipeline: kernels on both sides (1080p RGBA u8, %llu B a frame, %llu slots, one "
      "every-frame consumer; the producer fills each borrowed slot on the channel's stream, the "
      "consumer verifies every word of every frame on its own stream)\n"
      "frames/s: %llu frames at full speed, up to the consumer's stream finishing the last; "
      "publish->acquire: %llu paced frames, %llu us idle before each; round trip: every %llu-th "
      "paced frame, from just before begin_frame (or from publish) to the consumer's verify "
      "having finished (cuStreamSynchronize); one-process row: fill + verify + synchronize of one "
      "frame\n",
      static_cast<unsigned long long>(kFrameBytes), static_cast<unsigned long long>(o.slots),
      static_cast<unsigned long long>(o.frames), static_cast<unsigned long long>(o.samples),
      static_cast<unsigned long long>(o.gap_us), static_cast<unsigned long long>(o.rt_every));
  std::printf(
      "| label | run | frames/s | publish->acquire p50 / p99 us | round trip p50 / p99 us | "
      "publish->read done p50 / p99 us | prod CPU us/f | cons CPU us/f | cons CPU us/f paced | "
      "frames checked | bad words |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::printf("| %s | one process, one stream | %.0f | - | %s | - | - | - | - | %llu | %llu |\n",
              label.c_str(), bk.count("fps") ? bk.at("fps") : 0.0,
              p50_p99(pct_us(bench::read_samples(base_out + ".lat"))).c_str(),
              static_cast<unsigned long long>(u64(bk, "checked")),
              static_cast<unsigned long long>(u64(bk, "bad_words")));
  std::printf(
      "| %s | two processes | %.0f | %s | %s | %s | %.2f | %.2f | %.2f | %llu of %llu | %llu |\n",
      label.c_str(), ck.count("fps") ? ck.at("fps") : 0.0,
      p50_p99(pct_us(bench::read_samples(cons_out + ".acquire"))).c_str(),
      p50_p99(pct_us(bench::read_samples(cons_out + ".rt_begin"))).c_str(),
      p50_p99(pct_us(bench::read_samples(cons_out + ".rt_publish"))).c_str(),
      pk.count("cpu_us") ? pk.at("cpu_us") : 0.0, ck.count("cpu_us") ? ck.at("cpu_us") : 0.0,
      ck.count("paced_cpu_us") ? ck.at("paced_cpu_us") : 0.0,
      static_cast<unsigned long long>(checked), static_cast<unsigned long long>(total),
      static_cast<unsigned long long>(bad));
  std::fflush(stdout);
  return ok;
}

struct AttachResult {
  std::string mode;
  bool ok = false;
  std::uint64_t done = 0, failed = 0, frames_taken = 0, bad_words = 0, published = 0, missed = 0;
  Pct inside, near, far;  // the producer's begin_frame + commit, by distance to an attach
  Pct to_first, whole;    // each attach: Consumer created -> first frame, -> destroyed
};

AttachResult run_attach(const Options& o, const std::string& dir, const std::string& mode) {
  AttachResult r;
  r.mode = mode;
  const std::string base = dir + "/attach-" + mode, path = base + ".sock",
                    prod_out = base + "-producer", att_out = base + "-attacher",
                    stop = base + ".stop";
  const pid_t producer =
      start(o, "attach-producer", prod_out,
            {"path=" + path, "export=" + mode, kv("interval_us", o.interval_us), "stop=" + stop});
  bool ok = wait_for_socket(path);
  if (ok)
    ok = bench::wait_ok(
        start(o, "attacher", att_out,
              {"path=" + path, kv("attaches", o.attaches), kv("attach_frames", o.attach_frames),
               kv("attach_gap_ms", o.attach_gap_ms)}),
        "attacher");
  else
    std::fprintf(stderr, "attach %s: the producer made no socket\n", mode.c_str());
  // One more window of frames after the last attach, then the producer stops.
  std::this_thread::sleep_for(std::chrono::milliseconds(o.window_ms));
  if (std::FILE* f = std::fopen(stop.c_str(), "w")) std::fclose(f);
  ok = bench::wait_ok(producer, "attach producer") && ok;

  const bench::Kv pk = bench::read_kv(prod_out + ".kv"), ak = bench::read_kv(att_out + ".kv");
  r.failed = u64(ak, "failed");
  r.frames_taken = u64(ak, "frames");
  r.bad_words = u64(ak, "bad_words");
  r.published = u64(pk, "published");
  r.missed = u64(pk, "missed");
  const auto begins = bench::read_samples(prod_out + ".begin"),
             spent = bench::read_samples(prod_out + ".spent");
  const auto starts = bench::read_samples(att_out + ".start"),
             firsts = bench::read_samples(att_out + ".first"),
             ends = bench::read_samples(att_out + ".end");
  r.done = starts.size();
  const std::uint64_t w = o.window_ms * 1'000'000ull;
  std::vector<std::uint64_t> inside, near, far, to_first, whole;
  for (std::size_t i = 0; i < begins.size() && i < spent.size(); ++i) {
    bool in = false, close = false;
    for (std::size_t k = 0; k < starts.size() && k < ends.size(); ++k) {
      in = in || (begins[i] >= starts[k] && begins[i] <= ends[k]);
      close = close || (begins[i] + w >= starts[k] && begins[i] <= ends[k] + w);
    }
    if (in) inside.push_back(spent[i]);
    (close ? near : far).push_back(spent[i]);
  }
  for (std::size_t k = 0; k < starts.size() && k < firsts.size() && k < ends.size(); ++k) {
    to_first.push_back(firsts[k] - starts[k]);
    whole.push_back(ends[k] - starts[k]);
  }
  r.inside = pct_us(inside);
  r.near = pct_us(near);
  r.far = pct_us(far);
  r.to_first = pct_us(to_first);
  r.whole = pct_us(whole);
  r.ok = ok && r.failed == 0 && r.bad_words == 0 && r.done == o.attaches;
  return r;
}

void print_attach(const Options& o, const std::string& label,
                  const std::vector<AttachResult>& results) {
  std::printf(
      "\nattach: publishing while a CUDA consumer attaches (1080p RGBA u8, a frame every %llu us, "
      "%llu slots; %llu attaches, %llu ms apart, each a latest-mode Consumer in another process "
      "that takes %llu frames, verifies them on its stream and is destroyed)\n"
      "time: the producer's begin_frame + commit, the fill's launch left out; inside: from "
      "creating the Consumer to its destructor returning; near: within +-%llu ms of that; far: "
      "the rest\n"
      "| label | export | attaches ok | frames | which | n | p50 us | p99 us | max us |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      static_cast<unsigned long long>(o.interval_us), static_cast<unsigned long long>(o.slots),
      static_cast<unsigned long long>(o.attaches), static_cast<unsigned long long>(o.attach_gap_ms),
      static_cast<unsigned long long>(o.attach_frames),
      static_cast<unsigned long long>(o.window_ms));
  for (const auto& r : results) {
    const std::pair<const char*, const Pct*> rows[] = {
        {"inside an attach", &r.inside}, {"near an attach", &r.near}, {"far from any", &r.far}};
    for (const auto& [which, p] : rows)
      std::printf(
          "| %s | %s | %llu/%llu | %llu | %s | %zu | %.1f | %.1f | %.1f |\n", label.c_str(),
          r.mode.c_str(), static_cast<unsigned long long>(r.done - std::min(r.done, r.failed)),
          static_cast<unsigned long long>(o.attaches), static_cast<unsigned long long>(r.published),
          which, p->n, p->p50, p->p99, p->max);
  }
  for (const auto& r : results)
    std::printf(
        "- %s: Consumer created -> first frame p50 / max %.2f / %.2f ms, -> destroyed %.2f / %.2f "
        "ms; %llu frames taken, %llu bad words; %llu frames found no free slot%s\n",
        r.mode.c_str(), r.to_first.p50 / 1e3, r.to_first.max / 1e3, r.whole.p50 / 1e3,
        r.whole.max / 1e3, static_cast<unsigned long long>(r.frames_taken),
        static_cast<unsigned long long>(r.bad_words), static_cast<unsigned long long>(r.missed),
        r.ok ? "" : " (FAILED)");
  std::fflush(stdout);
}

int run_all(const Options& o) {
  const std::string why = cudaipc::gputest::gpu_unavailable_reason();
  if (!why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return 0;
  }
  const Mps mps = detect_mps();
  const std::string label = o.label.empty() ? (mps.active ? "MPS on" : "MPS off") : o.label;
  std::printf("GPU: %s\n%s\nlabel: %s\n", device_description().c_str(), mps.line.c_str(),
              label.c_str());
  std::fflush(stdout);
  char tmpl[] = "/tmp/cudaipc-gpu-pipeline-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;

  bool ok = true;
  if (o.pipeline) ok = run_pipeline(o, dir, label) && ok;
  if (o.attach) {
    std::vector<AttachResult> results;
    for (const auto& mode : o.exports) {
      results.push_back(run_attach(o, dir, mode));
      ok = ok && results.back().ok;
    }
    print_attach(o, label, results);
  }
  if (o.keep)
    std::printf("\nresult files kept in %s\n", dir.c_str());
  else
    std::filesystem::remove_all(dir);
  std::printf(ok ? "\nevery frame arrived and verified, every attach worked (exit 0)\n"
                 : "\nFAILED: a process failed, a frame was lost or bad, or an attach failed "
                   "(exit 1; messages on stderr)\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  bench::set_self_exe(argv[0]);
  const bool child = argc > 1 && std::strncmp(argv[1], "--role=", 7) == 0;
  const std::string who = child ? argv[1] + 7 : "gpu-pipeline";
  try {
    if (child) return run_role(who, Args(argc, argv));
    return run_all(parse(argc, argv));
  } catch (const cudaipc::Error& e) {
    std::fprintf(stderr, "%s: %s (%s)\n", who.c_str(), e.what(), cudaipc::errc_name(e.code()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", who.c_str(), e.what());
  }
  return 1;
}
