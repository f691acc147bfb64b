// Producer role: patterned frames (the pattern's seq is the frame's seq), used where the test
// needs the producer in another process, e.g. to kill it, or to starve it of file descriptors.
#include <dirent.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cudaipc/log.hpp"
#include "cudaipc/producer.hpp"
#include "pattern.hpp"
#include "peer_args.hpp"

namespace peer {
namespace {

std::atomic<std::uint64_t> g_logs{0};
std::atomic<std::uint64_t> g_fd_logs{0};
volatile sig_atomic_t g_fds_back = 0;  // SIGUSR1: give the descriptors back

void on_usr1(int) {
  g_fds_back = 1;
}

// The descriptor shortage a test asked for (--fd-headroom, --fd-ballast), and its end on SIGUSR1:
// the ballast is closed, or without one the limit goes back to what it was.
class FdShortage {
 public:
  // False (having said why) when the table or the limit could not be set.
  bool start(std::uint64_t headroom, std::uint64_t ballast);
  // Called from the main loop: ends the shortage once SIGUSR1 came, and says so.
  void poll() {
    if (!g_fds_back || done_) return;
    done_ = true;
    if (!ballast_.empty()) {
      for (int fd : ballast_) ::close(fd);
      ballast_.clear();
    } else if (::setrlimit(RLIMIT_NOFILE, &saved_) != 0) {
      std::printf("error setrlimit(RLIMIT_NOFILE) back failed: %s\n", std::strerror(errno));
      return;
    }
    std::printf("fds returned\n");
  }

 private:
  rlimit saved_{};
  std::vector<int> ballast_;
  bool done_ = false;
};

// Counts what the core logs, so a test can tell a rate-limited warning from a flood of them.
// Only the first few are printed (to stderr, which the test does not read).
void count_log(cudaipc::LogLevel level, const char* message, void*) {
  const std::uint64_t n = g_logs.fetch_add(1, std::memory_order_relaxed);
  if (std::strstr(message, "open files")) g_fd_logs.fetch_add(1, std::memory_order_relaxed);
  if (n < 20) std::fprintf(stderr, "peer log %d: %s\n", static_cast<int>(level), message);
}

// The RLIMIT_NOFILE that leaves exactly `free` descriptor numbers open to this process: the
// limit caps fd numbers, and descriptors inherited high up must not count as room.
long long limit_leaving(std::uint64_t free) {
  std::vector<int> open;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  const int own = ::dirfd(d);  // the listing's own descriptor, closed below
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.' && std::atoi(e->d_name) != own) open.push_back(std::atoi(e->d_name));
  ::closedir(d);
  // Numbers below the limit that nothing holds are the room; the limit ends after the last one.
  std::uint64_t room = 0;
  long long n = 0;
  for (; room < free; ++n)
    if (std::find(open.begin(), open.end(), n) == open.end()) ++room;
  return n;
}

// "consumers n=2 pids=0,0 leases=1,0 evicted=1,0": what the producer knows of its consumers
// (connected ones, and those gone or cut off that still hold slots).
std::string consumers_line(const cudaipc::Producer& producer) {
  const auto cs = producer.stats().consumers;
  std::string pids, leases, evicted;
  for (const auto& c : cs) {
    const char* sep = pids.empty() ? "" : ",";
    pids += sep + std::to_string(c.pid);
    leases += sep + std::to_string(c.leases);
    evicted += sep + std::to_string(c.evicted ? 1 : 0);
  }
  return "consumers n=" + std::to_string(cs.size()) + " pids=" + pids + " leases=" + leases +
         " evicted=" + evicted;
}

// Reports every change of consumers_line() until the test kills us.
[[noreturn]] void watch_consumers(const cudaipc::Producer& producer) {
  std::string last;
  for (;;) {
    std::string line = consumers_line(producer);
    if (line != last) std::printf("%s\n", line.c_str());
    last = std::move(line);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool FdShortage::start(std::uint64_t headroom, std::uint64_t ballast) {
  struct sigaction sa {};
  sa.sa_handler = on_usr1;
  if (::sigaction(SIGUSR1, &sa, nullptr) != 0) {
    std::printf("error sigaction failed: %s\n", std::strerror(errno));
    return false;
  }
  // Room for exactly K more descriptors (plus the ballast), whatever this process holds already.
  const long long limit = limit_leaving(headroom + ballast);
  if (limit < 0 || ::getrlimit(RLIMIT_NOFILE, &saved_) != 0) {
    std::printf("error cannot read the fd table or limit\n");
    return false;
  }
  rlimit rl = saved_;
  rl.rlim_cur = static_cast<rlim_t>(limit);
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    std::printf("error setrlimit(RLIMIT_NOFILE) failed: %s\n", std::strerror(errno));
    return false;
  }
  for (std::uint64_t i = 0; i < ballast; ++i) {
    const int fd = ::eventfd(0, EFD_CLOEXEC);
    if (fd < 0) {
      std::printf("error ballast descriptor %llu: %s\n", static_cast<unsigned long long>(i),
                  std::strerror(errno));
      return false;
    }
    ballast_.push_back(fd);
  }
  std::printf("limit %lld\n", limit);
  return true;
}

}  // namespace

int produce(const Args& a) {
  cudaipc::ProducerOptions opts;
  opts.path = a.str("path");
  opts.slots = static_cast<std::uint32_t>(a.num("slots", 4));
  opts.block_timeout = std::chrono::seconds(10);
  if (a.flag("lease-timeout-ms"))
    opts.lease_timeout = std::chrono::milliseconds(a.num("lease-timeout-ms"));
  if (a.flag("socket-mode"))
    opts.socket_mode =
        static_cast<std::uint32_t>(std::strtoul(a.str("socket-mode").c_str(), nullptr, 8));
  if (a.flag("allowed-gid")) opts.allowed_gid = static_cast<gid_t>(a.num("allowed-gid"));
  const std::uint64_t bytes = a.num("bytes", 4096);
  const std::uint64_t frames = a.num("frames", 10);
  const std::uint64_t want_consumers = a.num("wait-consumers", 0);
  const auto wait = std::chrono::milliseconds(a.num("wait-ms", 10000));
  if (a.flag("count-logs")) cudaipc::set_log_handler(count_log, nullptr);
  cudaipc::Producer producer(opts);
  cudaipc::Format fmt;
  fmt.caps = "test/pattern";
  fmt.tensor = cudaipc::make_tensor(cudaipc::DType::uint8, {static_cast<std::int64_t>(bytes)});
  producer.set_format(fmt);
  FdShortage shortage;
  if (a.flag("fd-headroom") && !shortage.start(a.num("fd-headroom"), a.num("fd-ballast"))) return 4;
  std::printf("listening\n");
  const auto deadline = std::chrono::steady_clock::now() + wait;
  auto next_report = std::chrono::steady_clock::now();
  while (producer.consumer_count() < want_consumers) {
    shortage.poll();
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      std::printf("error no consumer came\n");
      return 4;
    }
    if (a.flag("count-logs") && now >= next_report) {
      next_report = now + std::chrono::milliseconds(100);
      std::printf("logs total=%llu fd=%llu\n",
                  static_cast<unsigned long long>(g_logs.load(std::memory_order_relaxed)),
                  static_cast<unsigned long long>(g_fd_logs.load(std::memory_order_relaxed)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (want_consumers) std::printf("%s\n", consumers_line(producer).c_str());
  std::vector<std::uint8_t> buf(bytes);
  const auto interval = std::chrono::milliseconds(a.num("interval-ms"));
  for (std::uint64_t seq = 1; seq <= frames; ++seq) {
    if (seq > 1) std::this_thread::sleep_for(interval);
    cudaipc::testing::fill_pattern(buf.data(), bytes, seq);
    if (producer.publish(buf.data(), bytes) != cudaipc::PublishStatus::published) {
      std::printf("error frame %llu not published\n", static_cast<unsigned long long>(seq));
      return 4;
    }
  }
  std::printf("published %llu\n", static_cast<unsigned long long>(frames));
  if (a.str("then", "hold") == "hold") {
    for (;;) {  // until the test kills us
      shortage.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (a.str("then") == "watch") watch_consumers(producer);
  producer.end_of_stream();
  // Consumers may still be reading; closing the channel now would cut them off.
  while (std::chrono::steady_clock::now() < deadline + std::chrono::seconds(10)) {
    bool drained = true;
    for (const auto& c : producer.stats().consumers) drained = drained && c.leases == 0;
    if (drained && producer.consumer_count() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}

}  // namespace peer
