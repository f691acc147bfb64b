// cudaipc-bench: shared types. A Scenario says what one measurement runs; a Backend knows how to
// put a payload into a slot and check it for one kind of memory; the generic runner
// (bench_runner.cpp) drives the producer and consumer processes and times them. Adding a memory
// kind (bench_cuda.cpp) means adding a Backend, not touching the runner or the report.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cudaipc/consumer.hpp"
#include "cudaipc/producer.hpp"

namespace bench {

enum class Payload { control, verify };         // untouched slots, or written + checked every frame
enum class ProducerMode { borrowed, copy_in };  // begin_frame/commit in place, or publish() a copy

struct Scenario {
  std::string backend = "host";  // Backend::name(); "cuda" once bench_cuda.cpp exists
  std::string variant;           // backend-specific detail (e.g. "vmm"/"legacy"); empty for host
  std::string label;             // optional size label for the table ("1080p RGBA u8")
  std::uint64_t bytes = 64 << 10;
  std::uint32_t consumers = 1;
  std::uint32_t slots = 4;
  Payload payload = Payload::control;
  ProducerMode producer_mode = ProducerMode::borrowed;
  // Frames: warm-up at full speed, then paced (latency samples), then full speed (frames/s, CPU).
  std::uint64_t warmup = 100;
  std::uint64_t samples = 1000;
  std::uint64_t frames = 1000;
  std::uint64_t gap_us = 100;  // idle time between paced frames, so consumers sleep on the futex
  // Producer on CPU 0, consumers spread over the others: separates scheduler placement effects.
  bool pin = false;

  std::vector<std::string> to_args() const;
  static Scenario from_args(const std::vector<std::string>& args);
  std::uint64_t total() const { return warmup + samples + frames; }
  std::string describe() const;
};

const char* payload_name(Payload p);
const char* producer_mode_name(ProducerMode m);

// Writes (or leaves) frame `seq`'s payload and publishes it. Seq numbers are the channel's: the
// runner publishes every frame, so the n-th call carries seq n.
class ProducerSide {
 public:
  virtual ~ProducerSide() = default;
  virtual cudaipc::PublishStatus produce(cudaipc::Producer& p, std::uint64_t seq) = 0;
};

// Checks a leased frame (verify mode) or only its description (control mode). Runs after the
// acquire timestamp and before release, so a check never lands in the latency it would distort.
class ConsumerSide {
 public:
  virtual ~ConsumerSide() = default;
  virtual bool check(const cudaipc::Frame& f) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Whether this build and machine can run `s` (a CUDA backend would look for a device here).
  virtual bool available(std::string* why) const = 0;
  virtual void configure(const Scenario& s, cudaipc::ProducerOptions& o) const = 0;
  virtual void configure(const Scenario& s, cudaipc::ConsumerOptions& o) const = 0;
  virtual std::unique_ptr<ProducerSide> producer_side(const Scenario& s) const = 0;
  // Gets the consumer because a device-memory check must be ordered on the consumer's own stream.
  virtual std::unique_ptr<ConsumerSide> consumer_side(const Scenario& s,
                                                      cudaipc::Consumer& c) const = 0;
};

// Backends register themselves from their own translation unit (see BackendRegistrar), so a new
// one is a new file plus a line in meson.build.
const Backend* find_backend(const std::string& name);
std::vector<const Backend*> backends();
struct BackendRegistrar {
  explicit BackendRegistrar(const Backend* b);
};

// ---- measurement helpers ----

std::uint64_t mono_ns();
std::uint64_t cpu_ns();  // CLOCK_PROCESS_CPUTIME_ID: every thread of this process
// Nearest-rank percentile of `v` (sorted in place); 0 when empty.
double percentile(std::vector<std::uint64_t>& v, double q);

// Results from a child process: "key value" lines in a file, plus raw sample files.
using Kv = std::map<std::string, double>;
void write_kv(const std::string& path, const Kv& kv);
Kv read_kv(const std::string& path);
void write_samples(const std::string& path, const std::vector<std::uint64_t>& v);
std::vector<std::uint64_t> read_samples(const std::string& path);

// Starts this executable again with `args`; returns the pid.
pid_t spawn_self(const std::vector<std::string>& args);
// Waits for `pid`; true when it exited with status 0.
bool wait_ok(pid_t pid, const char* what);
void set_self_exe(const char* argv0);
// Restricts this process to `cpu` modulo the online CPU count.
void pin_to(unsigned cpu);

// ---- what main() composes ----

// The command line, for main's generic table and for sections that build their own scenarios.
struct RunOptions {
  std::vector<std::uint64_t> sizes = {64ull << 10, 8ull << 20, 33ull << 20};
  std::vector<std::uint32_t> consumers = {1, 4};
  std::vector<Payload> payloads = {Payload::control, Payload::verify};
  std::vector<ProducerMode> modes = {ProducerMode::borrowed};
  std::vector<std::string> backends = {"host"};
  std::uint64_t samples = 0, frames = 0, warmup = 0;  // 0: by frame size
  std::uint64_t floor_samples = 20000;
  std::uint64_t gap_us = 100;
  std::uint32_t slots = 4;
  bool quick = false;
  bool floor = true;
  bool pin = false;
  bool keep = false;
  bool host_section = true;  // the generic table (--backend list); off with --gpu-only
  bool gpu_section = true;   // the GPU section; off with --host-only
  // GPU section only; empty: its own defaults (1080p RGBA u8 and 4K RGBA f32; vmm and legacy).
  std::vector<std::uint64_t> gpu_sizes;
  std::vector<std::string> exports;
  // The GPU section's modes default to both; --producer-mode narrows both tables.
  bool modes_set = false;
};

struct ScenarioResult {
  Scenario s;
  bool ok = false;
  std::uint64_t lat_n = 0;
  double lat_p50_us = 0, lat_p99_us = 0;
  double fps = 0;                // slowest consumer, full-speed phase
  double prod_cpu_us = 0;        // per frame, full-speed phase
  double cons_cpu_us = 0;        // per frame per consumer (mean), full-speed phase
  double cons_cpu_paced_us = 0;  // per frame per consumer (mean), paced phase: the wake path
  std::uint64_t verified = 0;    // frames whose payload was checked, all consumers
  std::uint64_t bad = 0;
};

// Runs one scenario in fresh processes below `dir` (socket and result files).
ScenarioResult run_scenario(const Scenario& s, const std::string& dir, int index);
// Child roles; return the process exit status.
int producer_role(const std::vector<std::string>& args);
int consumer_role(const std::vector<std::string>& args);

struct FloorResult {
  bool ok = false;
  std::uint64_t n = 0;
  double oneway_p50_us = 0, oneway_p99_us = 0;  // round trip / 2
  double direct_p50_us = 0, direct_p99_us = 0;  // waker's clock before wake -> wakee's after
  // The waker's own time in FUTEX_WAKE of a sleeping process: what any publish that wakes a
  // reader (a model's reply) costs its caller at least on this machine.
  double wake_p50_us = 0, wake_p99_us = 0;
};
FloorResult run_futex_floor(std::uint64_t samples, std::uint64_t warmup, std::uint64_t gap_us,
                            bool pin, const std::string& dir);
int futex_pong_role(const std::vector<std::string>& args);

// A part of the report with its own scenarios, floors and targets (the GPU section), registered
// from its own translation unit like a Backend. run() returns false when a frame was lost or bad.
class Section {
 public:
  virtual ~Section() = default;
  virtual const char* name() const = 0;
  virtual bool run(const RunOptions& o, const FloorResult& futex, const std::string& dir,
                   int& index) const = 0;
};
const Section* find_section(const std::string& name);
struct SectionRegistrar {
  explicit SectionRegistrar(const Section* s);
};

}  // namespace bench
