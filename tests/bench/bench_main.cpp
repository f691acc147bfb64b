// cudaipc-bench: publish->acquire latency, frames/s and CPU per frame between separate producer
// and consumer processes, beside the floor of a bare cross-process futex ping-pong. Prints tables
// and the targets; it never fails on a timing, only on a lost or corrupted frame.
//   cudaipc-bench [--quick] [--sizes=64K,8M,33M] [--consumers=1,4] [--payload=control,verify] ...
//   cudaipc-bench --gpu-only     (the CUDA section alone; skipped with the reason without a GPU)
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "cudaipc/error.hpp"

namespace bench {
namespace {

constexpr double kLatencyTarget = 1.5;  // publish->acquire p50 <= this x futex one-way p50
constexpr double kFpsTarget = 100'000;  // 64 KiB, one consumer, control path

using Options = RunOptions;

void usage() {
  std::printf(
      "usage: cudaipc-bench [options]\n"
      "  --quick                 ~10x fewer samples and frames\n"
      "  --sizes=LIST            frame sizes, bytes with optional K/M/G (KiB..): 64K,8M,33M\n"
      "  --consumers=LIST        consumer process counts: 1,4\n"
      "  --payload=LIST          control (slots untouched), verify (written + checked): both\n"
      "  --producer-mode=LIST    borrowed (begin_frame/commit), copy-in (publish): borrowed\n"
      "  --backend=LIST          memory backends: host\n"
      "  --samples=N             paced latency samples per consumer (default by size)\n"
      "  --frames=N              full-speed frames for frames/s and CPU (default by size)\n"
      "  --warmup=N              full-speed warm-up frames (default by size)\n"
      "  --gap-us=N              idle time before each paced frame and futex round: 100\n"
      "  --slots=N               channel slots: 4\n"
      "  --floor-samples=N       futex ping-pong rounds: 20000\n"
      "  --no-floor              skip the futex floor\n"
      "  --keep                  keep the raw samples (ns, u64) and result files; prints where\n"
      "  --pin                   producer/ping on CPU 0, consumers/pong on the others\n"
      "  --host-only             only the generic (--backend) table, no GPU section\n"
      "  --gpu-only              only the GPU section (with the futex floor unless --no-floor)\n"
      "  --gpu-sizes=LIST        GPU frame sizes: 8294400,132710400 (1080p RGBA u8, 4K f32)\n"
      "  --export=LIST           GPU export modes: vmm,legacy\n"
      "  (--consumers, --producer-mode, --slots and the counts apply to the GPU section too;\n"
      "   its producer modes default to borrowed,copy-in)\n");
}

std::uint64_t parse_size(const std::string& t) {
  char* end = nullptr;
  std::uint64_t v = std::strtoull(t.c_str(), &end, 10);
  switch (end && *end ? *end : ' ') {
    case 'k':
    case 'K':
      return v << 10;
    case 'm':
    case 'M':
      return v << 20;
    case 'g':
    case 'G':
      return v << 30;
    default:
      return v;
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  bool samples_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto eq = a.find('=');
    std::string k = a.substr(0, eq), v = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (k == "--quick")
      o.quick = true;
    else if (k == "--keep")
      o.keep = true;
    else if (k == "--pin")
      o.pin = true;
    else if (k == "--no-floor")
      o.floor = false;
    else if (k == "--host-only")
      o.gpu_section = false;
    else if (k == "--gpu-only")
      o.host_section = false;
    else if (k == "--gpu-sizes") {
      o.gpu_sizes.clear();
      for (auto& x : split(v)) o.gpu_sizes.push_back(parse_size(x));
    } else if (k == "--export") {
      o.exports.clear();
      for (auto& x : split(v)) {
        if (x != "vmm" && x != "legacy") throw std::runtime_error("unknown export mode " + x);
        o.exports.push_back(x);
      }
    } else if (k == "--sizes") {
      o.sizes.clear();
      for (auto& x : split(v)) o.sizes.push_back(parse_size(x));
    } else if (k == "--consumers") {
      o.consumers.clear();
      for (auto& x : split(v)) o.consumers.push_back(static_cast<std::uint32_t>(std::stoul(x)));
    } else if (k == "--payload") {
      o.payloads.clear();
      for (auto& x : split(v)) {
        if (x != "control" && x != "verify") throw std::runtime_error("unknown payload " + x);
        o.payloads.push_back(x == "verify" ? Payload::verify : Payload::control);
      }
    } else if (k == "--producer-mode") {
      o.modes_set = true;
      o.modes.clear();
      for (auto& x : split(v)) {
        if (x != "borrowed" && x != "copy-in") throw std::runtime_error("unknown mode " + x);
        o.modes.push_back(x == "copy-in" ? ProducerMode::copy_in : ProducerMode::borrowed);
      }
    } else if (k == "--backend")
      o.backends = split(v);
    else if (k == "--samples") {
      o.samples = std::stoull(v);
      samples_set = true;
    } else if (k == "--frames")
      o.frames = std::stoull(v);
    else if (k == "--warmup")
      o.warmup = std::stoull(v);
    else if (k == "--gap-us")
      o.gap_us = std::stoull(v);
    else if (k == "--slots")
      o.slots = static_cast<std::uint32_t>(std::stoul(v));
    else if (k == "--floor-samples")
      o.floor_samples = std::stoull(v);
    else if (k == "--help" || k == "-h") {
      usage();
      std::exit(0);
    } else
      throw std::runtime_error("unknown option " + a + " (--help lists them)");
  }
  if (o.quick && !samples_set) o.floor_samples /= 10;
  if (!o.host_section && !o.gpu_section)
    throw std::runtime_error("--host-only and --gpu-only together leave nothing to run");
  return o;
}

// Sample counts fall with frame size so a full run stays around a minute on two cores while the
// p99 of small frames still rests on thousands of samples.
void apply_counts(const Options& o, Scenario& s) {
  const bool small = s.bytes <= (1u << 20), medium = s.bytes <= (16u << 20);
  s.samples = small ? 20000 : medium ? 1000 : 300;
  s.frames = small ? 100000 : medium ? 500 : 200;
  s.warmup = small ? 1000 : 4 * s.slots;
  if (o.quick) {
    s.samples = std::max<std::uint64_t>(s.samples / 10, 30);
    s.frames = std::max<std::uint64_t>(s.frames / 10, 30);
  }
  if (o.samples) s.samples = o.samples;
  if (o.frames) s.frames = o.frames;
  if (o.warmup) s.warmup = o.warmup;
}

std::string size_name(std::uint64_t b) {
  char buf[32];
  if (b % (1u << 20) == 0)
    std::snprintf(buf, sizeof buf, "%llu MiB", (unsigned long long)(b >> 20));
  else if (b % (1u << 10) == 0)
    std::snprintf(buf, sizeof buf, "%llu KiB", (unsigned long long)(b >> 10));
  else
    std::snprintf(buf, sizeof buf, "%llu B", (unsigned long long)b);
  return buf;
}

std::string first_line(const char* file, const char* key) {
  std::ifstream f(file);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "?";
}

void print_machine() {
  utsname u{};
  ::uname(&u);
  std::printf("machine: %ld cpus, %s, kernel %s\n", ::sysconf(_SC_NPROCESSORS_ONLN),
              first_line("/proc/cpuinfo", "model name").c_str(), u.release);
}

int run(const Options& o) {
  char tmpl[] = "/tmp/cudaipc-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;
  bool ok = true;
  print_machine();

  FloorResult floor;
  if (o.floor) {
    floor = run_futex_floor(o.floor_samples, o.floor_samples / 10 + 10, o.gap_us, o.pin, dir);
    ok = ok && floor.ok;
    std::printf(
        "\nfutex floor (two processes, FUTEX_WAIT/FUTEX_WAKE on a shared memfd, %llu us "
        "idle before each round, %llu rounds)\n",
        (unsigned long long)o.gap_us, (unsigned long long)floor.n);
    std::printf(
        "| one-way = RTT/2 p50 | p99 | direct wake->run p50 | p99 | the waker's FUTEX_WAKE p50 | "
        "p99 |\n|---|---|---|---|---|---|\n");
    std::printf("| %.1f us | %.1f us | %.1f us | %.1f us | %.1f us | %.1f us |\n",
                floor.oneway_p50_us, floor.oneway_p99_us, floor.direct_p50_us, floor.direct_p99_us,
                floor.wake_p50_us, floor.wake_p99_us);
  }

  std::vector<ScenarioResult> results;
  int index = 0;
  for (const auto& bname : o.host_section ? o.backends : std::vector<std::string>{}) {
    const Backend* b = find_backend(bname);
    std::string why = "not built";
    if (!b || !b->available(&why)) {
      std::printf("\nbackend %s skipped: %s\n", bname.c_str(), why.c_str());
      continue;
    }
    std::printf(
        "\n%s memory (%u slots; latency: paced, %llu us idle, all consumers' samples "
        "pooled; frames/s: slowest consumer at full speed; CPU: per frame per process)\n",
        bname.c_str(), o.slots, (unsigned long long)o.gap_us);
    std::printf(
        "| payload | producer | size | cons | samples | p50 us | p99 us | p50/floor | "
        "frames/s | prod CPU us/f | cons CPU us/f | cons CPU us/f paced | verified |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    for (Payload pl : o.payloads)
      for (ProducerMode m : o.modes)
        for (std::uint64_t size : o.sizes)
          for (std::uint32_t n : o.consumers) {
            Scenario s;
            s.backend = bname;
            s.bytes = size;
            s.consumers = n;
            s.slots = o.slots;
            s.payload = pl;
            s.producer_mode = m;
            s.gap_us = o.gap_us;
            s.pin = o.pin;
            apply_counts(o, s);
            ScenarioResult r = run_scenario(s, dir, index++);
            ok = ok && r.ok;
            char ratio[32] = "-";
            if (o.floor && floor.oneway_p50_us > 0)
              std::snprintf(ratio, sizeof ratio, "%.2f", r.lat_p50_us / floor.oneway_p50_us);
            std::printf(
                "| %s | %s | %s | %u | %llu | %.1f | %.1f | %s | %.0f | %.2f | %.2f | %.2f "
                "| %s |\n",
                payload_name(pl), producer_mode_name(m), size_name(size).c_str(), n,
                (unsigned long long)r.lat_n, r.lat_p50_us, r.lat_p99_us, ratio, r.fps,
                r.prod_cpu_us, r.cons_cpu_us, r.cons_cpu_paced_us,
                pl == Payload::verify ? (std::to_string(r.verified) +
                                         (r.bad ? " (" + std::to_string(r.bad) + " BAD)" : ""))
                                            .c_str()
                                      : (r.ok ? "-" : "FAILED"));
            std::fflush(stdout);
            results.push_back(r);
          }
  }

  if (o.host_section) std::printf("\ntargets (reported, not asserted)\n");
  if (o.host_section && o.floor && floor.oneway_p50_us > 0) {
    int met = 0, total = 0;
    for (const auto& r : results) {
      ++total;
      if (r.lat_p50_us <= kLatencyTarget * floor.oneway_p50_us) ++met;
    }
    std::printf(
        "- publish->acquire p50 <= %.1fx futex one-way p50 (%.1f us = %.1f us): met in %d "
        "of %d scenarios\n",
        kLatencyTarget, floor.oneway_p50_us, kLatencyTarget * floor.oneway_p50_us, met, total);
    for (const auto& r : results)
      if (r.s.bytes == (64u << 10) && r.s.consumers == 1 && r.s.payload == Payload::control)
        std::printf("  64 KiB, 1 consumer, control, %s: p50 %.1f us = %.2fx floor: %s\n",
                    producer_mode_name(r.s.producer_mode), r.lat_p50_us,
                    r.lat_p50_us / floor.oneway_p50_us,
                    r.lat_p50_us <= kLatencyTarget * floor.oneway_p50_us ? "MET" : "MISSED");
  }
  for (const auto& r : results)
    if (r.s.bytes == (64u << 10) && r.s.consumers == 1 && r.s.payload == Payload::control)
      std::printf("- >= %.0f frames/s, 64 KiB, 1 consumer, control, %s: %.0f frames/s: %s\n",
                  kFpsTarget, producer_mode_name(r.s.producer_mode), r.fps,
                  r.fps >= kFpsTarget ? "MET" : "MISSED");

  if (o.gpu_section) {
    // Registered by bench_cuda.cpp, which the build has only where cuda.h was found.
    if (const Section* gpu = find_section("cuda"))
      ok = gpu->run(o, floor, dir, index) && ok;
    else
      std::printf("\nGPU section skipped: this build has no CUDA backend (cuda.h not found)\n");
  }

  // Leftovers are only result files and sockets of finished runs.
  std::string cmd = "rm -rf '" + dir + "'";
  if (o.keep)
    std::printf("\nraw samples kept in %s\n", dir.c_str());
  else if (std::system(cmd.c_str()) != 0)
    std::fprintf(stderr, "bench: could not remove %s\n", dir.c_str());
  std::printf("\n%s\n", ok ? "all frames delivered and verified" : "FAILED: see messages above");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  bench::set_self_exe(argv[0]);
  try {
    if (argc > 1 && std::strncmp(argv[1], "--role=", 7) == 0) {
      std::string role = argv[1] + 7;
      std::vector<std::string> args(argv + 2, argv + argc);
      if (role == "producer") return bench::producer_role(args);
      if (role == "consumer") return bench::consumer_role(args);
      if (role == "futex-pong") return bench::futex_pong_role(args);
      std::fprintf(stderr, "bench: unknown role %s\n", role.c_str());
      return 2;
    }
    return bench::run(bench::parse(argc, argv));
  } catch (const cudaipc::Error& e) {
    std::fprintf(stderr, "bench: %s (%s)\n", e.what(), cudaipc::errc_name(e.code()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
  }
  return 1;
}
