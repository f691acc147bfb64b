// What the native rows of python/bench/consumer_overhead.py share (cudaipc-bench-consumer-rate,
// cudaipc-bench-producer-rate): the calling thread's CPU time, argument parsing, percentiles, and a
// main() that reports failures on stderr.
#pragma once

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace cudaipc::bench {

// This thread's CPU time: the rows leave out waiting for the other process.
inline std::uint64_t thread_cpu_ns() {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    throw std::runtime_error(std::string("clock_gettime(CLOCK_THREAD_CPUTIME_ID): ") +
                             std::strerror(errno));
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

inline std::uint64_t parse_count(const std::string& arg, const char* value) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v == 0)
    throw std::invalid_argument("bad value in " + arg + " (a positive integer is expected)");
  return v;
}

inline double pct_us(std::vector<std::uint64_t> xs, double q) {
  std::sort(xs.begin(), xs.end());
  return xs[std::min(xs.size() - 1, static_cast<std::size_t>(q * xs.size()))] / 1e3;
}

// main() of a rate program: `run` returns the exit status; an exception is reported as `name:
// what`.
template <typename Run>
int rate_main(const char* name, Run&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace cudaipc::bench
