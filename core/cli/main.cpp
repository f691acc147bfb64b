// `cudaipc`: see, probe and feed channels from a shell (issue #21).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "args.hpp"
#include "commands.hpp"
#include "cudaipc/error.hpp"

namespace cudaipc::cli {

std::atomic<bool> g_stop{false};

namespace {

void on_stop_signal(int) {
  g_stop.store(true);
}

const char* kUsage =
    "usage: cudaipc COMMAND [ARGS]\n"
    "\n"
    "See, probe and feed cudaipc channels from a shell.\n"
    "\n"
    "commands:\n"
    "  ls [DIR|PATH...]      channels, their producers, formats, rates and consumers\n"
    "  top [DIR|PATH...]     the same, refreshed live, busiest first\n"
    "  probe PATH            join as a `latest` consumer: frames/s, latency, gaps\n"
    "  cat PATH              write frames as .npy and the format as JSON\n"
    "  pub PATH --caps CAPS  publish a test pattern (the frame index in the pixels)\n"
    "\n"
    "Channels live in $XDG_RUNTIME_DIR/cudaipc, else /tmp/cudaipc-UID.\n"
    "`cudaipc COMMAND --help` describes each command.\n";

}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a blocking wait returns, and the loop sees the flag.
  if (::sigaction(SIGINT, &sa, nullptr) != 0 || ::sigaction(SIGTERM, &sa, nullptr) != 0)
    throw_errno("sigaction for SIGINT/SIGTERM");
}

bool sleep_unless_stopped(double seconds) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::max(seconds, 0.0)));
  while (!g_stop.load()) {
    const Clock::time_point now = Clock::now();
    if (now >= end) return true;
    const Clock::duration left = end - now;
    std::this_thread::sleep_for(std::min<Clock::duration>(left, std::chrono::milliseconds(20)));
  }
  return false;
}

}  // namespace cudaipc::cli

int main(int argc, char** argv) {
  using namespace cudaipc::cli;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "ls") return run_ls(argc, argv);
    if (cmd == "top") return run_top(argc, argv);
    if (cmd == "probe") return run_probe(argc, argv);
    if (cmd == "cat") return run_cat(argc, argv);
    if (cmd == "pub") return run_pub(argc, argv);
    std::fprintf(stderr, "cudaipc: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "cudaipc %s: %s (see cudaipc %s --help)\n", cmd.c_str(), e.what(),
                 cmd.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudaipc %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
