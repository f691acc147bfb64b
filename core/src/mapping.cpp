#include "mapping.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>

#include "cudaipc/error.hpp"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

namespace cudaipc {

Mapping::Mapping(int fd, std::size_t size, bool writable) : size_(size) {
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* p = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw_errno("mmap of " + std::to_string(size) + " bytes");
  addr_ = p;
}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (addr_) ::munmap(addr_, size_);
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Mapping::~Mapping() {
  if (addr_) ::munmap(addr_, size_);
}

UniqueFd dup_fd(int fd) {
  int d = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) throw_errno("dup of a file descriptor");
  return UniqueFd(d);
}

UniqueFd make_memfd(const char* name, std::size_t size) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) throw_errno("memfd_create");
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    throw_errno("ftruncate of a memfd to " + std::to_string(size) + " bytes");
  return fd;
}

void seal_memfd(int fd, bool read_only_for_others) {
  int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (read_only_for_others) seals |= F_SEAL_FUTURE_WRITE;
  if (::fcntl(fd, F_ADD_SEALS, seals) != 0) throw_errno("sealing a memfd");
}

std::size_t checked_memfd_size(int fd, std::size_t min_size, const char* what) {
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0)
    throw Error(Errc::protocol, std::string("peer sent a ") + what + " that is not a memfd");
  if (!(seals & F_SEAL_SHRINK))
    throw Error(Errc::protocol, std::string("peer sent an unsealed ") + what +
                                    " (it could shrink under our mapping)");
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno(std::string("fstat of a received ") + what);
  if (st.st_size < 0 || static_cast<std::size_t>(st.st_size) < min_size)
    throw Error(Errc::protocol, std::string("peer sent a ") + what + " of " +
                                    std::to_string(st.st_size) + " bytes, expected at least " +
                                    std::to_string(min_size));
  return static_cast<std::size_t>(st.st_size);
}

}  // namespace cudaipc
