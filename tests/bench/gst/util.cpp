// Clocks, result files, the spec's (de)serialisation and child processes with deadlines.
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
#include <thread>

#include "gst_bench.hpp"

extern char** environ;

namespace gstbench {

std::vector<std::string> RunSpec::to_args() const {
  return {"transport=" + transport,
          "format=" + format,
          "width=" + std::to_string(width),
          "height=" + std::to_string(height),
          "warmup=" + std::to_string(warmup),
          "frames=" + std::to_string(frames),
          "sink=" + sink_factory,
          "src=" + src_factory,
          "io_mode=" + io_mode,
          std::string("cuda=") + (cuda ? "1" : "0"),
          std::string("feed=") + (feed ? "1" : "0"),
          std::string("metas=") + (metas ? "1" : "0"),
          std::string("appsink=") + (appsink ? "1" : "0"),
          "live_fps=" + std::to_string(live_fps),
          "upstream=" + upstream,
          "clip=" + clip,
          "dir=" + dir,
          "timeout=" + std::to_string(timeout_s),
          "ref0=" + ref0,
          "ref1=" + ref1};
}

RunSpec RunSpec::from_args(const std::vector<std::string>& args) {
  RunSpec s;
  for (const auto& a : args) {
    const auto eq = a.find('=');
    if (eq == std::string::npos) throw std::runtime_error("bad role argument " + a);
    const std::string k = a.substr(0, eq), v = a.substr(eq + 1);
    if (k == "transport")
      s.transport = v;
    else if (k == "format")
      s.format = v;
    else if (k == "width")
      s.width = std::stoi(v);
    else if (k == "height")
      s.height = std::stoi(v);
    else if (k == "warmup")
      s.warmup = std::stoull(v);
    else if (k == "frames")
      s.frames = std::stoull(v);
    else if (k == "sink")
      s.sink_factory = v;
    else if (k == "src")
      s.src_factory = v;
    else if (k == "io_mode")
      s.io_mode = v;
    else if (k == "cuda")
      s.cuda = v == "1";
    else if (k == "metas")
      s.metas = v == "1";
    else if (k == "feed")
      s.feed = v == "1";
    else if (k == "appsink")
      s.appsink = v == "1";
    else if (k == "live_fps")
      s.live_fps = std::stoi(v);
    else if (k == "upstream")
      s.upstream = v;
    else if (k == "clip")
      s.clip = v;
    else if (k == "dir")
      s.dir = v;
    else if (k == "timeout")
      s.timeout_s = std::stoi(v);
    else if (k == "ref0")
      s.ref0 = v;
    else if (k == "ref1")
      s.ref1 = v;
    else
      throw std::runtime_error("unknown role argument " + a);
  }
  return s;
}

std::uint64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t cpu_rusage_ns() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& t) {
    return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u +
           static_cast<std::uint64_t>(t.tv_usec) * 1000u;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

double percentile(std::vector<std::uint64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(q * static_cast<double>(v.size()) + 0.5);
  rank = std::min(std::max<std::size_t>(rank, 1), v.size());
  return static_cast<double>(v[rank - 1]);
}

void write_kv(const std::string& path, const Kv& kv) {
  // The other process polls for this file: it must never see half of it.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    for (const auto& [k, v] : kv) f << k << ' ' << v << '\n';
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp);
}

Kv read_kv(const std::string& path) {
  Kv kv;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    const auto sp = line.find(' ');
    if (sp != std::string::npos) kv[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return kv;
}

std::uint64_t kv_u64(const Kv& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() || it->second.empty() ? 0 : std::stoull(it->second);
}

std::string kv_get(const Kv& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() ? "" : it->second;
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
  const auto bytes = static_cast<std::size_t>(f.tellg());
  std::vector<std::uint64_t> v(bytes / sizeof(std::uint64_t));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()),
         static_cast<std::streamsize>(v.size() * sizeof(std::uint64_t)));
  return v;
}

bool file_exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

void touch(const std::string& path) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot create " + path);
}

bool wait_for_file(const std::string& path, std::uint64_t deadline_ns) {
  while (!file_exists(path)) {
    if (mono_ns() >= deadline_ns) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

namespace {
std::string& self_exe() {
  static std::string p;
  return p;
}
}  // namespace

void set_self_exe(const char* argv0) {
  // /proc/self/exe stays right when argv[0] was a bare name found through PATH.
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  self_exe() = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string(argv0);
}

pid_t spawn_self(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(self_exe().c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, self_exe().c_str(), nullptr, nullptr, argv.data(), environ);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
  return pid;
}

void die_with_parent() {
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // it died before prctl took effect
}

std::vector<int> wait_all(const std::vector<pid_t>& pids, std::uint64_t deadline_ns,
                          std::uint64_t grace_ns) {
  constexpr int kPending = INT_MIN;
  std::vector<int> status(pids.size(), kPending);
  std::uint64_t first_failure = 0;
  for (;;) {
    std::size_t pending = 0;
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != kPending) continue;
      int st = 0;
      const pid_t r = ::waitpid(pids[i], &st, WNOHANG);
      if (r == pids[i]) {
        status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
        if (status[i] != 0 && first_failure == 0) first_failure = mono_ns();
      } else if (r < 0 && errno != EINTR) {
        status[i] = -1;
      } else {
        ++pending;
      }
    }
    if (pending == 0) return status;
    const std::uint64_t now = mono_ns();
    if (now >= deadline_ns || (first_failure && now - first_failure >= grace_ns)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (status[i] != kPending) continue;
    ::kill(pids[i], SIGKILL);
    int st = 0;
    while (::waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
    }
    status[i] = -1000;
  }
  return status;
}

std::string hex(const std::uint8_t* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

std::vector<std::uint8_t> unhex(const std::string& s) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

}  // namespace gstbench
