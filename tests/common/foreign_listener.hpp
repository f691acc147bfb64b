// A program other than a cudaipc producer listening on a channel's path: a socket of another type,
// or a SOCK_SEQPACKET listener that never answers or answers garbage. What a consumer pointed at
// the wrong path meets; it must fail naming the cause, not wait for ever.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace cudaipc::testing {

class ForeignListener {
 public:
  // Listens on `path` with a socket of `type`. With `answer` empty it never accepts (connections
  // wait in its backlog); else it accepts each connection and sends `answer` on it.
  ForeignListener(const std::string& path, int type, const std::string& answer = {}) {
    fd_ = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << path;
    EXPECT_EQ(::listen(fd_, 8), 0) << path;
    if (!answer.empty()) thread_ = std::thread([this, answer] { serve(answer); });
  }
  ~ForeignListener() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : taken_) ::close(fd);
    if (fd_ >= 0) ::close(fd_);
  }
  ForeignListener(const ForeignListener&) = delete;
  ForeignListener& operator=(const ForeignListener&) = delete;

 private:
  void serve(const std::string& answer) {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) != 1) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      taken_.push_back(c);  // kept open: the peer reads the answer, not a hang-up
      if (::send(c, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) continue;
    }
  }

  int fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::vector<int> taken_;  // the serving thread's, closed after it is joined
};

}  // namespace cudaipc::testing
