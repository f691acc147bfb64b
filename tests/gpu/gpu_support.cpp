#include "gpu_support.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "cudaipc/options.hpp"

extern char** environ;

namespace cudaipc::gputest {
namespace {

std::string peer_program() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("readlink(/proc/self/exe) failed");
  std::string self(buf, static_cast<std::size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "cudaipc-gpu-peer";
}

}  // namespace

int open_fd_count() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n - 1;  // the directory's own fd
}

std::uint64_t frame_count(std::uint64_t normal) {
  const char* v = std::getenv("CUDAIPC_GPU_FRAMES");
  if (!v || !*v) return normal;
  return std::max<std::uint64_t>(1, std::strtoull(v, nullptr, 10));
}

std::string channel_path(const std::string& name) {
  return default_channel_path("gputest-" + name + "-" + std::to_string(::getpid()));
}

Peer::Peer(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const std::string program = peer_program();
  std::vector<std::string> storage;
  storage.push_back(program);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  const int err = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    throw std::runtime_error("posix_spawn(" + program + ") failed: " + std::strerror(err));
  }
  out_fd_ = fds[0];
}

Peer::~Peer() {
  if (status_ < 0 && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

void Peer::drain(int timeout_ms) {
  if (out_fd_ < 0) {
    if (timeout_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return;
  }
  pollfd p{out_fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return;
  char buf[4096];
  const ssize_t n = ::read(out_fd_, buf, sizeof buf);
  if (n > 0) {
    out_.append(buf, static_cast<std::size_t>(n));
  } else if (n == 0 || errno != EINTR) {
    ::close(out_fd_);
    out_fd_ = -1;
  }
}

bool Peer::wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout,
                         std::string* line) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (std::size_t nl; (nl = out_.find('\n', scanned_)) != std::string::npos;) {
      std::string l = out_.substr(scanned_, nl - scanned_);
      scanned_ = nl + 1;
      if (l.compare(0, prefix.size(), prefix) == 0) {
        if (line) *line = l;
        return true;
      }
    }
    if (out_fd_ < 0 || std::chrono::steady_clock::now() >= deadline) return false;
    drain(20);
  }
}

int Peer::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (status_ < 0) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    drain(20);
  }
  while (out_fd_ >= 0) drain(100);  // the rest of its output
  return status_;
}

void Peer::kill(int signal) {
  if (status_ < 0) ::kill(pid_, signal);
}

std::map<std::string, std::uint64_t> Peer::result() const {
  std::map<std::string, std::uint64_t> r;
  const std::size_t at = out_.rfind("RESULT ");
  if (at == std::string::npos) return r;
  std::istringstream in(out_.substr(at + 7, out_.find('\n', at) - at - 7));
  for (std::string kv; in >> kv;) {
    const std::size_t eq = kv.find('=');
    if (eq != std::string::npos)
      r[kv.substr(0, eq)] = std::strtoull(kv.c_str() + eq + 1, nullptr, 10);
  }
  return r;
}

}  // namespace cudaipc::gputest
