#include "cudaipc/error.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "descriptor_shortage.hpp"

namespace cudaipc {

const char* errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::ok:
      return "ok";
    case Errc::invalid_argument:
      return "invalid argument";
    case Errc::system:
      return "system error";
    case Errc::protocol:
      return "protocol error";
    case Errc::version_mismatch:
      return "version mismatch";
    case Errc::permission_denied:
      return "permission denied";
    case Errc::timeout:
      return "timeout";
    case Errc::interrupted:
      return "interrupted";
    case Errc::disconnected:
      return "disconnected";
    case Errc::busy:
      return "busy";
    case Errc::no_cuda:
      return "CUDA unavailable";
    case Errc::cuda:
      return "CUDA error";
    case Errc::unsupported:
      return "unsupported";
  }
  return "unknown error";
}

void throw_errno(const std::string& what) {
  throw_errno(what, errno);
}

void throw_errno(const std::string& what, int err) {
  if (err == EMFILE || err == ENFILE)
    throw DescriptorShortage(Errc::system, what + " failed: " + std::strerror(err), err);
  Errc code = (err == EACCES || err == EPERM) ? Errc::permission_denied : Errc::system;
  throw Error(code, what + " failed: " + std::strerror(err));
}

std::string DescriptorShortage::reason(const std::string& who) const {
  if (err_ == ENFILE)
    return "the system has no file descriptors left (its file table is full: fs.file-max)";
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return who + " has no file descriptors left";
  return who + " has no file descriptors left (limit " + std::to_string(rl.rlim_cur) + ")";
}

}  // namespace cudaipc
