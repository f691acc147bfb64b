// Scenario (de)serialisation, the backend registry, clocks, result files and process spawning.
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "bench.hpp"

extern char** environ;

namespace bench {

const char* payload_name(Payload p) {
  return p == Payload::control ? "control" : "verify";
}
const char* producer_mode_name(ProducerMode m) {
  return m == ProducerMode::borrowed ? "borrowed" : "copy-in";
}

std::vector<std::string> Scenario::to_args() const {
  auto u = [](std::uint64_t v) { return std::to_string(v); };
  return {"backend=" + backend,
          "variant=" + variant,
          "bytes=" + u(bytes),
          "consumers=" + u(consumers),
          "slots=" + u(slots),
          std::string("payload=") + payload_name(payload),
          std::string("mode=") + producer_mode_name(producer_mode),
          "warmup=" + u(warmup),
          "samples=" + u(samples),
          "frames=" + u(frames),
          "gap_us=" + u(gap_us),
          "pin=" + u(pin)};
}

Scenario Scenario::from_args(const std::vector<std::string>& args) {
  Scenario s;
  for (const auto& a : args) {
    auto eq = a.find('=');
    if (eq == std::string::npos) continue;
    std::string k = a.substr(0, eq), v = a.substr(eq + 1);
    auto u = [&] { return std::strtoull(v.c_str(), nullptr, 10); };
    if (k == "backend")
      s.backend = v;
    else if (k == "variant")
      s.variant = v;
    else if (k == "bytes")
      s.bytes = u();
    else if (k == "consumers")
      s.consumers = static_cast<std::uint32_t>(u());
    else if (k == "slots")
      s.slots = static_cast<std::uint32_t>(u());
    else if (k == "payload")
      s.payload = v == "verify" ? Payload::verify : Payload::control;
    else if (k == "mode")
      s.producer_mode = v == "copy-in" ? ProducerMode::copy_in : ProducerMode::borrowed;
    else if (k == "warmup")
      s.warmup = u();
    else if (k == "samples")
      s.samples = u();
    else if (k == "frames")
      s.frames = u();
    else if (k == "gap_us")
      s.gap_us = u();
    else if (k == "pin")
      s.pin = u() != 0;
  }
  return s;
}

std::string Scenario::describe() const {
  return backend + (variant.empty() ? "" : "/" + variant) + " " + std::to_string(bytes) + " B x" +
         std::to_string(consumers) + " " + payload_name(payload) + " " +
         producer_mode_name(producer_mode);
}

namespace {
std::vector<const Backend*>& registry() {
  static std::vector<const Backend*> r;
  return r;
}
std::vector<const Section*>& section_registry() {
  static std::vector<const Section*> r;
  return r;
}
std::string& self_exe() {
  static std::string p;
  return p;
}
}  // namespace

BackendRegistrar::BackendRegistrar(const Backend* b) {
  registry().push_back(b);
}
std::vector<const Backend*> backends() {
  return registry();
}
const Backend* find_backend(const std::string& name) {
  for (const Backend* b : registry())
    if (name == b->name()) return b;
  return nullptr;
}

SectionRegistrar::SectionRegistrar(const Section* s) {
  section_registry().push_back(s);
}
const Section* find_section(const std::string& name) {
  for (const Section* s : section_registry())
    if (name == s->name()) return s;
  return nullptr;
}

std::uint64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

double percentile(std::vector<std::uint64_t>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(q * static_cast<double>(v.size()) + 0.5);
  rank = std::min(std::max<std::size_t>(rank, 1), v.size());
  return static_cast<double>(v[rank - 1]);
}

void write_kv(const std::string& path, const Kv& kv) {
  std::ofstream f(path);
  for (const auto& [k, v] : kv) f << k << ' ' << std::to_string(v) << '\n';
  if (!f) throw std::runtime_error("cannot write " + path);
}

Kv read_kv(const std::string& path) {
  Kv kv;
  std::ifstream f(path);
  std::string k;
  double v;
  while (f >> k >> v) kv[k] = v;
  return kv;
}

void write_samples(const std::string& path, const std::vector<std::uint64_t>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(std::uint64_t)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<std::uint64_t> read_samples(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return {};
  auto bytes = static_cast<std::size_t>(f.tellg());
  std::vector<std::uint64_t> v(bytes / sizeof(std::uint64_t));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 8));
  return v;
}

void set_self_exe(const char* argv0) {
  // /proc/self/exe stays right even when argv[0] was a bare name found through PATH.
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  self_exe() = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string(argv0);
}

void pin_to(unsigned cpu) {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % static_cast<unsigned>(n > 0 ? n : 1), &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0) std::perror("sched_setaffinity");
}

pid_t spawn_self(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(self_exe().c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, self_exe().c_str(), nullptr, nullptr, argv.data(), environ);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
  return pid;
}

bool wait_ok(pid_t pid, const char* what) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return false;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  if (WIFSIGNALED(status))
    std::fprintf(stderr, "bench: %s (pid %d) killed by signal %d\n", what, pid, WTERMSIG(status));
  else
    std::fprintf(stderr, "bench: %s (pid %d) exited with %d\n", what, pid, WEXITSTATUS(status));
  return false;
}

}  // namespace bench
