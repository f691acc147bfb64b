// A forked copy of the test process that runs one function and reports through a pipe, for
// tests that must change process-wide state (RLIMIT_NOFILE, a full fd table) without touching the
// test process. Fork it while the test process has no other thread: the child then owns every
// lock it inherits. The parent steps it along with go() and reads what it says with read_line().
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace cudaipc::testing {

class ForkedChild {
 public:
  // `body` runs in the child with this object as its channel to the parent; its return value is
  // the child's exit status.
  explicit ForkedChild(const std::function<int(ForkedChild&)>& body) {
    int up[2], down[2];
    if (::pipe2(up, O_CLOEXEC) != 0 || ::pipe2(down, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::close(up[0]);
      ::close(down[1]);
      in_ = down[0];
      out_ = up[1];
      int rc = 99;
      try {
        rc = body(*this);
      } catch (const std::exception& e) {
        say(std::string("child threw ") + e.what());
      }
      // No destructors or atexit handlers of the parent's copy: they belong to the parent.
      ::_exit(rc);
    }
    ::close(up[1]);
    ::close(down[0]);
    in_ = up[0];
    out_ = down[1];
  }
  ~ForkedChild() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    ::close(in_);
    ::close(out_);
  }
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;

  pid_t pid() const { return pid_; }

  // Child side: one line to the parent.
  void say(const std::string& line) {
    std::string l = line + "\n";
    const char* p = l.data();
    std::size_t left = l.size();
    while (left > 0) {
      ssize_t n = ::write(out_, p, left);
      if (n <= 0) return;
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  // Child side: waits for the parent's go(); false if the parent went away.
  bool wait_go() {
    char c;
    return ::read(in_, &c, 1) == 1;
  }

  // Parent side.
  void go() {
    char c = 'g';
    if (::write(out_, &c, 1) != 1) throw std::runtime_error("the forked child is gone");
  }
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{in_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[1024];
      ssize_t n = ::read(in_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  // The child's exit status, nullopt if it still runs at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        reaped_ = true;
        return st;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      ::usleep(2000);
    }
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string buf_;
};

// Child side: lowers RLIMIT_NOFILE, fills the fd table and frees exactly `free_fds` descriptors,
// so the next `free_fds` opens succeed and the one after fails with EMFILE. False on failure.
inline bool leave_free_fds(int free_fds) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  rl.rlim_cur = rl.rlim_max < 256 ? rl.rlim_max : 256;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  int last = -1;
  for (;;) {
    int fd = ::fcntl(0, F_DUPFD_CLOEXEC, 0);
    if (fd < 0 && (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) break;
    last = fd;
  }
  if (errno != EMFILE) return false;
  // Descriptors are handed out lowest first, so freeing the top ones frees exactly those.
  for (int i = 0; i < free_fds; ++i)
    if (last - i < 0 || ::close(last - i) != 0) return false;
  return true;
}

}  // namespace cudaipc::testing
