// The `cudaipc` tool run as a real child process (fork + exec), its stdout and stderr on one pipe
// (or one pseudo-terminal, for what the tool does on a terminal) the test reads line by line
// against deadlines, optionally as another user. Every wait is bounded, so a tool that hangs
// fails the test instead of stalling it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "peer_process.hpp"

extern char** environ;

namespace cudaipc::testing {

// Where meson put the tool (tests/cli/meson.build).
inline std::string cli_program() {
  const char* p = std::getenv("CUDAIPC_CLI");
  if (!p) throw std::runtime_error("CUDAIPC_CLI is not set");
  return p;
}

// Whether this machine gives out pseudo-terminals (a container may have no /dev/pts).
inline bool pseudo_terminals() {
  const int fd = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  char name[128];
  const bool ok = ::grantpt(fd) == 0 && ::unlockpt(fd) == 0 &&
                  ::ptsname_r(fd, name, sizeof name) == 0 && ::access(name, R_OK | W_OK) == 0;
  ::close(fd);
  return ok;
}

class CliProcess {
 public:
  // `program` empty: the cudaipc tool. `uid` >= 0: run as that uid and gid. `terminal`: its
  // output goes to a pseudo-terminal (isatty is true for it) instead of a pipe.
  explicit CliProcess(const std::vector<std::string>& args, long uid = -1,
                      const std::string& program = "", bool terminal = false) {
    int fds[2];
    if (terminal) {
      fds[0] = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
      char name[128];
      if (fds[0] < 0 || ::grantpt(fds[0]) != 0 || ::unlockpt(fds[0]) != 0 ||
          ::ptsname_r(fds[0], name, sizeof name) != 0 ||
          (fds[1] = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
        throw std::runtime_error("no pseudo-terminal");
    } else if (::pipe2(fds, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe2 failed");
    }
    std::vector<std::string> all{program.empty() ? cli_program() : program};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      if (uid >= 0) {
        const gid_t none[1] = {static_cast<gid_t>(uid)};
        if (::syscall(SYS_setgroups, 1, none) != 0 ||
            ::syscall(SYS_setresgid, uid, uid, uid) != 0 ||
            ::syscall(SYS_setresuid, uid, uid, uid) != 0)
          ::_exit(126);
      }
      ::execve(argv[0], argv.data(), environ);
      ::_exit(127);
    }
    ::close(fds[1]);
    io_.emplace(pid, fds[0]);  // reads its output (a pipe's end, or EIO from the terminal)
  }

  pid_t pid() const { return io_->pid(); }

  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    return io_->read_line(timeout);
  }

  // Reads until a line containing `text`; nullopt at the deadline or the end of output.
  std::optional<std::string> wait_for(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto line = read_line(left(deadline));
      if (!line) return std::nullopt;
      if (line->find(text) != std::string::npos) return line;
    }
  }

  // Everything until the process exits (within `timeout`), and its waitpid status; nullopt status
  // when it was still running at the deadline (it is then killed).
  std::optional<int> finish(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (read_line(left(deadline))) {
    }
    return io_->wait_exit(left(deadline));
  }

  void signal(int sig) {
    if (io_->pid() > 0) ::kill(io_->pid(), sig);
  }

  std::string transcript() const { return io_->transcript(); }

 private:
  static std::chrono::milliseconds left(std::chrono::steady_clock::time_point deadline) {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  }

  std::optional<PeerProcess> io_;  // owns the child: killed and reaped with it
};

// Runs the tool to its end: {exit code (-1: killed or timed out), everything it printed}.
inline std::pair<int, std::string> run_cli(
    const std::vector<std::string>& args,
    std::chrono::milliseconds timeout = std::chrono::seconds(20), long uid = -1) {
  CliProcess p(args, uid);
  auto st = p.finish(timeout);
  const int code = st && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  return {code, p.transcript()};
}

}  // namespace cudaipc::testing
