#include "cudaipc/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace cudaipc {
namespace {

std::mutex g_mu;
LogHandler g_handler = nullptr;
void* g_user = nullptr;

}  // namespace

void set_log_handler(LogHandler handler, void* user_data) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  g_handler = handler;
  g_user = user_data;
}

void log(LogLevel level, const char* message) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_handler) {
    g_handler(level, message, g_user);
  } else if (level <= LogLevel::warning) {
    std::fprintf(stderr, "cudaipc %s: %s\n", level == LogLevel::error ? "error" : "warning",
                 message);
  }
}

}  // namespace cudaipc
