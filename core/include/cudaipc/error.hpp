// Errors thrown by the core. Every failure carries a code (for the C API and callers that branch)
// and a message that names the cause, so it can be shown to a user as it is.
#pragma once

#include <stdexcept>
#include <string>

namespace cudaipc {

enum class Errc : int {
  ok = 0,
  invalid_argument = 1,  // the caller passed something out of range
  system = 2,            // an OS call failed (errno in the message)
  protocol = 3,          // the peer sent something malformed or out of range
  version_mismatch = 4,  // the peer speaks another layout/protocol version
  permission_denied = 5,
  timeout = 6,
  interrupted = 7,
  disconnected = 8,  // the peer went away
  busy = 9,          // another producer is live on the path, or no consumer entry is free
  no_cuda = 10,      // no driver, no device, or the build has no CUDA backend
  cuda = 11,         // a CUDA driver call failed
  unsupported = 12,
};

const char* errc_name(Errc code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

// Throws Error(Errc::system) naming `what` and strerror(errno).
[[noreturn]] void throw_errno(const std::string& what);
[[noreturn]] void throw_errno(const std::string& what, int err);

}  // namespace cudaipc
