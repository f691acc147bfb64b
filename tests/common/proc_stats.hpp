// What this process holds right now, to prove connect/disconnect and crash handling leak nothing.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

namespace cudaipc::testing {

// Entries of a /proc directory (fd, task), "." and ".." left out.
inline std::size_t proc_entries(const std::string& dir) {
  std::size_t n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

inline std::size_t open_fd_count() {
  return proc_entries("/proc/self/fd") - 1;  // the directory stream's own fd
}

// Descriptors another process of ours holds.
inline std::size_t open_fd_count(pid_t pid) {
  return proc_entries("/proc/" + std::to_string(pid) + "/fd");
}

// Threads of this process (entries of /proc/self/task).
inline std::size_t thread_count() {
  return proc_entries("/proc/self/task");
}

// Lines of /proc/self/maps containing `needle` (all lines when empty).
inline std::size_t mapping_count(const std::string& needle = {}) {
  std::ifstream in("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);)
    if (needle.empty() || line.find(needle) != std::string::npos) ++n;
  return n;
}

// CPU time (user + system) process `pid` has used so far, in milliseconds; -1 if it is gone.
inline long long process_cpu_ms(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  // The command name may hold spaces and parentheses: fields are counted after its last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  // state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  const long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? (utime + stime) * 1000 / ticks : -1;
}

}  // namespace cudaipc::testing
