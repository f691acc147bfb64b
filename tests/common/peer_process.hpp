// A real child process running the test peer (fork + immediate exec), with its stdout on a pipe
// the test reads line by line against a deadline. The peer reports progress as lines ("held 3",
// "done frames=..."), so tests wait on facts instead of sleeping.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace cudaipc::testing {

// Where meson put the peer program (tests/peers/meson.build).
inline std::string peer_program() {
  const char* p = std::getenv("CUDAIPC_TEST_PEER");
  return p ? p : "";
}

struct RunAs {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;
};

class PeerProcess {
 public:
  explicit PeerProcess(const std::vector<std::string>& args,
                       const std::optional<RunAs>& run_as = std::nullopt) {
    const std::string program = peer_program();
    if (program.empty()) throw std::runtime_error("CUDAIPC_TEST_PEER is not set");
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    // Everything the child needs is built before fork: after it, only async-signal-safe calls.
    std::vector<std::string> all{program};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      if (run_as) {
        // Raw syscalls: glibc's set*id wrappers synchronise with threads the child does not have.
        if (::syscall(SYS_setgroups, run_as->groups.size(), run_as->groups.data()) != 0 ||
            ::syscall(SYS_setresgid, run_as->gid, run_as->gid, run_as->gid) != 0 ||
            ::syscall(SYS_setresuid, run_as->uid, run_as->uid, run_as->uid) != 0)
          ::_exit(126);
      }
      ::execve(argv[0], argv.data(), environ);
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  // Adopts a child started elsewhere (tests/common/container.hpp) whose stdout is the pipe `out`.
  PeerProcess(pid_t pid, int out) : pid_(pid), out_(out) {}
  ~PeerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The next line the peer printed; nullopt at end of output or at the deadline.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        transcript_ += line + "\n";
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || eof_) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      ssize_t n = ::read(out_, chunk, sizeof chunk);
      if (n <= 0) {
        eof_ = true;
      } else {
        buf_.append(chunk, static_cast<std::size_t>(n));
      }
    }
  }

  // Reads until a line starting with `prefix`; earlier lines stay in the transcript.
  std::optional<std::string> wait_for(const std::string& prefix,
                                      std::chrono::milliseconds timeout) {
    return wait_for_either(prefix, prefix, timeout);
  }
  // Reads until a line starting with either prefix.
  std::optional<std::string> wait_for_either(const std::string& prefix, const std::string& other,
                                             std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto line = read_line(std::max(left, std::chrono::milliseconds(0)));
      if (!line) return std::nullopt;
      if (line->compare(0, prefix.size(), prefix) == 0 ||
          line->compare(0, other.size(), other) == 0)
        return line;
    }
  }

  void kill_hard() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
  }

  // The waitpid status once the peer exited, nullopt if it is still running at the deadline.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int st = 0;
      pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        status_ = st;
        return st;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // Everything read so far, for failure messages.
  std::string transcript() const { return transcript_ + buf_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool eof_ = false;
  std::string buf_;
  std::string transcript_;
  std::optional<int> status_;
};

// Value of `key=` in a peer's "done k=v k=v" line, or -1.
inline long long field(const std::string& line, const std::string& key) {
  auto pos = line.find(" " + key + "=");
  if (pos == std::string::npos) return -1;
  return std::strtoll(line.c_str() + pos + key.size() + 2, nullptr, 10);
}

}  // namespace cudaipc::testing
