// The process's umask set for one test and given back however the test leaves (a failed ASSERT,
// an exception), so later tests in the binary run under the umask they started with.
#pragma once

#include <sys/stat.h>

namespace cudaipc::testing {

class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

}  // namespace cudaipc::testing
