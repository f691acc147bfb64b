// What this process holds right now, to prove connect/disconnect and crash handling leak nothing.
#pragma once

#include <dirent.h>

#include <cstddef>
#include <fstream>
#include <string>

namespace cudaipc::testing {

inline std::size_t open_fd_count() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n - 1;  // the directory stream's own fd
}

// Lines of /proc/self/maps containing `needle` (all lines when empty).
inline std::size_t mapping_count(const std::string& needle = {}) {
  std::ifstream in("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);)
    if (needle.empty() || line.find(needle) != std::string::npos) ++n;
  return n;
}

}  // namespace cudaipc::testing
