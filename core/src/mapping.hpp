// RAII owner of an mmap'ed region, and memfd helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "unique_fd.hpp"

namespace cudaipc {

class Mapping {
 public:
  Mapping() = default;
  // Maps `size` bytes of `fd`; throws Error(system) on failure.
  Mapping(int fd, std::size_t size, bool writable);
  Mapping(Mapping&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  void* data() const noexcept { return addr_; }
  std::size_t size() const noexcept { return size_; }

 private:
  void* addr_ = nullptr;
  std::size_t size_ = 0;
};

// An anonymous memory file of `size` bytes (zeroed), close-on-exec, sealable.
UniqueFd make_memfd(const char* name, std::size_t size);
// Fixes the size forever; with `read_only_for_others`, also forbids any new writable mapping
// (the producer's existing one stays writable), so consumers can only map it read-only.
void seal_memfd(int fd, bool read_only_for_others);
// Size of a received memory file, checked to be a sealed memfd of at least `min_size` bytes.
std::size_t checked_memfd_size(int fd, std::size_t min_size, const char* what);

}  // namespace cudaipc
