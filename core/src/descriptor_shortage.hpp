// An OS call failed because no file descriptor could be had: this process is at its
// RLIMIT_NOFILE (EMFILE) or the system's file table is full (ENFILE). throw_errno throws it for
// those errnos, so whoever must tell a peer why it is turned away (the producer refusing a
// consumer) can name the limit instead of passing on a bare errno.
#pragma once

#include <string>

#include "cudaipc/error.hpp"

namespace cudaipc {

class DescriptorShortage : public Error {
 public:
  DescriptorShortage(Errc code, const std::string& message, int err)
      : Error(code, message), err_(err) {}
  int err() const noexcept { return err_; }
  // "the producer has no file descriptors left (limit N)" for `who` = "the producer", or that
  // the system's table is full; the limit is read now.
  std::string reason(const std::string& who) const;

 private:
  int err_;
};

}  // namespace cudaipc
