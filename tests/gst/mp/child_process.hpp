// A real child process (gst-launch-1.0 or the mp peer) with stdout and stderr on one pipe that a
// thread drains as it is written, so a chatty child never blocks on a full pipe while the test
// waits on something else. Tests wait for lines with a deadline instead of sleeping.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace cudaipc::testing::gstmp {

class ChildProcess {
 public:
  ChildProcess(std::string label, const std::vector<std::string>& argv) : label_(std::move(label)) {
    if (argv.empty()) throw std::runtime_error("empty argv");
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    // gtest or meson may have changed signal handling; the child starts with the defaults.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const int rc = ::posix_spawn(&pid_, cargv[0], &fa, &attr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      pid_ = -1;
      throw std::runtime_error("posix_spawn " + args[0] + " failed: " + std::to_string(rc));
    }
    reader_ = std::thread([this, fd = fds[0]] { drain(fd); });
  }

  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    if (reader_.joinable()) reader_.join();
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The first line at or after line `*from` that contains `needle`; `*from` moves past it.
  std::optional<std::string> wait_line(const std::string& needle, std::chrono::milliseconds timeout,
                                       std::size_t* from = nullptr) {
    std::size_t start = from ? *from : 0;
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (std::size_t i = start; i < lines_.size(); ++i) {
        if (lines_[i].find(needle) != std::string::npos) {
          if (from) *from = i + 1;
          return lines_[i];
        }
      }
      start = lines_.size();
      if (eof_ || std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      cv_.wait_until(lock, deadline);
    }
  }

  // Complete lines so far that start with `prefix`.
  std::size_t count_lines(const std::string& prefix) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t n = 0;
    for (const auto& l : lines_)
      if (l.compare(0, prefix.size(), prefix) == 0) ++n;
    return n;
  }

  void send_signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }

  // The waitpid status once the child exited (its output then read to the end), nullopt if it
  // still runs at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (pid_ > 0) {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      for (;;) {
        int st = 0;
        if (::waitpid(pid_, &st, WNOHANG) == pid_) {
          pid_ = -1;
          status_ = st;
          break;
        }
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      // A grandchild could keep the pipe open; the output is complete in all but that case.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(2), [this] { return eof_; });
    }
    return status_;
  }

  bool running() {
    if (pid_ <= 0) return false;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      status_ = st;
      return false;
    }
    return true;
  }

  std::string output() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const auto& l : lines_) all += l + "\n";
    return all + partial_;
  }

  // For failure messages: who this is and everything it printed.
  std::string describe() const {
    return "--- " + label_ + " (pid " + std::to_string(pid_) + ") output:\n" + output() + "---\n";
  }

 private:
  void drain(int fd) {
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (n <= 0) {
        if (!partial_.empty()) lines_.push_back(partial_);
        partial_.clear();
        eof_ = true;
        cv_.notify_all();
        break;
      }
      partial_.append(chunk, static_cast<std::size_t>(n));
      std::size_t nl;
      while ((nl = partial_.find('\n')) != std::string::npos) {
        lines_.push_back(partial_.substr(0, nl));
        partial_.erase(0, nl + 1);
      }
      cv_.notify_all();
    }
    ::close(fd);
  }

  std::string label_;
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::string partial_;
  bool eof_ = false;
};

// "exit 0", "exit 1", "signal 9": how a waitpid status reads in a failure message.
inline std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "signal " + std::to_string(WTERMSIG(st));
  return "status " + std::to_string(st);
}

inline bool exited_ok(const std::optional<int>& st) {
  return st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
}

}  // namespace cudaipc::testing::gstmp
