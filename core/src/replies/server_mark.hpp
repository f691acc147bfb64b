// A Server that watches a directory says so there (docs/protocol.md, "Replies"): it holds a
// shared lock on the directory's mark file (kServerMarkName) for as long as it watches, so a
// filter that starts in the directory knows that a model will take its channel
// (directory_served, cudaipc/reply.hpp) and waits for it rather than pass its first frames on.
// The kernel drops the lock with the process, however it ends: a mark left behind says nothing.
#pragma once

#include <cstdint>
#include <string>

#include "unique_fd.hpp"

namespace cudaipc::detail {

class ServerMark {
 public:
  // `mode`: the reply channels' (socket_mode); the mark is readable by whom they let in.
  ServerMark(std::string dir, std::uint32_t mode);
  // Removes the mark unless another server holds it too.
  ~ServerMark();
  ServerMark(const ServerMark&) = delete;
  ServerMark& operator=(const ServerMark&) = delete;

  // Makes (or takes) the mark when it is missing or is not the one held: the directory did not
  // exist before, or a server that left removed it as this one took it. Failures are said once.
  void refresh() noexcept;

 private:
  void take();

  const std::string dir_, path_;
  const std::uint32_t mode_;
  UniqueFd fd_;  // the mark, locked
  std::string said_;
};

}  // namespace cudaipc::detail
