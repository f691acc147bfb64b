// Containers made of Linux namespaces, for the tests of docs/deployment.md. No container engine
// is needed: a peer is cloned into new PID, mount, IPC, network and UTS namespaces (and a user
// namespace with id maps where asked, or where the test does not run as root), and
// cudaipc-test-container (tests/peers/container_main.cpp) gives it a private /tmp and /dev/shm,
// its own /proc and one shared directory, the volume, before it runs the peer. Where the kernel or
// the permissions refuse a step, the test skips and says which (CUDAIPC_START_OR_SKIP).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "peer_process.hpp"
#include "temp_dir.hpp"

namespace cudaipc::testing {

// Where the volume appears inside every container: the same path on both sides, as with
// `docker run -v HOST_DIR:/tmp/cudaipc-volume`, though each side has its own /tmp around it.
inline constexpr char kInsideVolume[] = "/tmp/cudaipc-volume";

struct IdMap {
  unsigned inside;
  unsigned outside;
  unsigned count;
};

struct ContainerSpec {
  // New namespaces; CLONE_NEWUSER is added by `user_namespace`.
  int namespaces = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS;
  // A user namespace of its own. Without root nothing else is allowed to make namespaces, so it
  // is on by default there, mapping this user to root inside (`unshare --map-root-user`).
  bool user_namespace = ::geteuid() != 0;
  // Id maps of that user namespace (only root may map other ids); empty: this user as root.
  std::vector<IdMap> uid_map, gid_map;
  std::string volume;  // host directory shared at kInsideVolume; empty: no mounts at all
  bool init = false;   // pid 1 is a reaper and the peer its child (cudaipc-test-container --init)
  std::string ids;     // "U:G[:G2,...]": the peer's ids inside, empty: the namespace's root
  bool deny_peerpidfd = false;  // the peer's getsockopt(SO_PEERPIDFD) fails, as before Linux 6.5
  bool deny_futex_waitv =
      false;  // its futex_waitv fails with EPERM, as in older runtimes' profiles
  // Join this process's PID namespace instead of making one (`docker run --pid=container:X`).
  pid_t share_pid_namespace_of = 0;
};

// A test's volume: a fresh directory (its parent removed with it) that containers share.
class SharedVolume {
 public:
  SharedVolume() : path_(dir_.file("volume")) {
    if (::mkdir(path_.c_str(), 0755) != 0) throw std::runtime_error("mkdir " + path_ + " failed");
  }
  const std::string& path() const { return path_; }
  // Its parent, the test's private directory.
  const TempDir& dir() const { return dir_; }
  // A container with this volume at kInsideVolume.
  ContainerSpec container() const {
    ContainerSpec s;
    s.volume = path_;
    return s;
  }

 private:
  TempDir dir_;
  std::string path_;
};

// The kernel or the permissions would not make the namespaces: the test skips with this.
class NamespacesRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// cudaipc-test-container: from CUDAIPC_TEST_CONTAINER (meson sets it), else beside this binary
// (a directory of binaries copied to the GPU machine).
inline std::string container_program() {
  if (const char* p = std::getenv("CUDAIPC_TEST_CONTAINER")) return p;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<std::size_t>(n));
  return dir.substr(0, dir.rfind('/') + 1) + "cudaipc-test-container";
}

// The pids (in our PID namespace) of `parent`'s children.
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> kids;
  DIR* d = ::opendir("/proc");
  if (!d) return kids;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last
    // ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    char state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent) kids.push_back(pid);
  }
  ::closedir(d);
  return kids;
}

// The inode of `pid`'s namespace of `kind` ("pid", "mnt", "user"), 0 if unreadable.
inline unsigned long long namespace_of(pid_t pid, const char* kind) {
  struct stat st {};
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/" + kind;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
}

namespace detail {

inline void write_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw NamespacesRefused("open " + path + ": " + std::strerror(errno));
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size()))
    throw NamespacesRefused("writing '" + text + "' to " + path + ": " + std::strerror(err));
}

inline std::string map_text(const std::vector<IdMap>& map, unsigned own) {
  std::string text;
  for (const auto& m : map)
    text += std::to_string(m.inside) + " " + std::to_string(m.outside) + " " +
            std::to_string(m.count) + "\n";
  return text.empty() ? "0 " + std::to_string(own) + " 1\n" : text;
}

// Directories the peer needs that a private /tmp would hide: its own, its libcudaipc's
// ($ORIGIN/../../core in the build tree) and LD_LIBRARY_PATH's.
inline std::vector<std::string> peer_directories(const std::string& program) {
  namespace fs = std::filesystem;
  std::vector<std::string> dirs;
  std::error_code ec;
  const fs::path dir = fs::path(program).parent_path();
  for (const fs::path& p : {dir, dir / "../../core"}) {
    const fs::path c = fs::canonical(p, ec);
    if (!ec) dirs.push_back(c.string());
  }
  if (const char* ld = std::getenv("LD_LIBRARY_PATH")) {
    std::stringstream s(ld);
    for (std::string part; std::getline(s, part, ':');) {
      const fs::path c = fs::canonical(part, ec);
      if (!part.empty() && !ec) dirs.push_back(c.string());
    }
  }
  return dirs;
}

}  // namespace detail

// Starts the test peer (CUDAIPC_TEST_PEER) with `args` in a container made as `spec` says, its
// stdout read by the returned PeerProcess; pid() is the container's pid 1 (the peer itself, or
// with `init` its reaper: children_of(pid()) then finds the peer). Throws NamespacesRefused when
// the kernel or the permissions refuse the namespaces or the id maps.
inline std::unique_ptr<PeerProcess> start_in_container(const ContainerSpec& spec,
                                                       const std::vector<std::string>& args) {
  const std::string program = peer_program(), launcher = container_program();
  if (program.empty()) throw std::runtime_error("CUDAIPC_TEST_PEER is not set");
  std::vector<std::string> all{launcher};
  if (!spec.volume.empty()) {
    all.insert(all.end(), {"--volume", spec.volume + ":" + kInsideVolume});
    for (const auto& d : detail::peer_directories(program)) all.insert(all.end(), {"--keep", d});
  }
  if (spec.init) all.push_back("--init");
  if (!spec.ids.empty()) all.insert(all.end(), {"--ids", spec.ids});
  if (spec.deny_peerpidfd) all.push_back("--deny-peerpidfd");
  if (spec.deny_futex_waitv) all.push_back("--deny-futex-waitv");
  all.push_back("--");
  all.push_back(program);
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2], go[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed");
  int flags = spec.namespaces | (spec.user_namespace ? CLONE_NEWUSER : 0);
  int own_pid_ns = -1;
  if (spec.share_pid_namespace_of > 0) {
    // setns on a PID namespace moves only where this thread's next child goes; we move back
    // right after the clone.
    const std::string path = "/proc/" + std::to_string(spec.share_pid_namespace_of) + "/ns/pid";
    own_pid_ns = ::open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const bool joined = own_pid_ns >= 0 && target >= 0 && ::setns(target, CLONE_NEWPID) == 0;
    const int err = errno;
    if (target >= 0) ::close(target);
    if (!joined) {
      if (own_pid_ns >= 0) ::close(own_pid_ns);
      for (int fd : {out[0], out[1], go[0], go[1]}) ::close(fd);
      throw NamespacesRefused("joining the PID namespace of " + path + ": " + std::strerror(err));
    }
    flags &= ~CLONE_NEWPID;
  }
  const bool real_root = ::geteuid() == 0;
  // A raw clone: fork() cannot make namespaces. The child only reads, dup2s and execs.
  const long pid = ::syscall(SYS_clone, static_cast<unsigned long>(flags | SIGCHLD), nullptr,
                             nullptr, nullptr, nullptr);
  const int clone_err = errno;
  if (pid == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(126);  // the parent gave up on us
    // Maps do not change who we are: become the namespace's root, which the maps now name.
    // (Without root our own id already is that; setgroups is off then.)
    if (spec.user_namespace &&
        ((real_root && ::syscall(SYS_setgroups, 0, nullptr) != 0) ||
         ::syscall(SYS_setresgid, 0, 0, 0) != 0 || ::syscall(SYS_setresuid, 0, 0, 0) != 0))
      ::_exit(125);
    ::dup2(out[1], 1);
    ::execve(argv[0], argv.data(), environ);
    ::_exit(127);
  }
  if (own_pid_ns >= 0) {
    const bool back = ::setns(own_pid_ns, CLONE_NEWPID) == 0;
    ::close(own_pid_ns);
    if (!back) std::abort();  // later children of this test would land in the wrong place
  }
  ::close(out[1]);
  ::close(go[0]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(go[1]);
    throw NamespacesRefused(std::string("clone() with new namespaces: ") +
                            std::strerror(clone_err));
  }
  auto peer = std::make_unique<PeerProcess>(static_cast<pid_t>(pid), out[0]);
  try {
    if (spec.user_namespace) {
      const std::string proc = "/proc/" + std::to_string(pid);
      // Without root, the kernel wants setgroups off before an unprivileged gid map.
      if (!real_root) detail::write_file(proc + "/setgroups", "deny");
      detail::write_file(proc + "/uid_map", detail::map_text(spec.uid_map, ::geteuid()));
      detail::write_file(proc + "/gid_map", detail::map_text(spec.gid_map, ::getegid()));
    }
  } catch (...) {
    ::close(go[1]);
    throw;  // the PeerProcess kills and reaps the child
  }
  const bool started = ::write(go[1], "g", 1) == 1;
  ::close(go[1]);
  if (!started) throw std::runtime_error("the container's first process is gone");
  return peer;
}

}  // namespace cudaipc::testing

// Waits up to `timeout` for the container peer's line starting with `prefix` and puts it in
// `line`; skips the test, saying why, when the container could not be set up.
#define CUDAIPC_AWAIT_OR_SKIP(peer, prefix, timeout, line)                       \
  do {                                                                           \
    line = (peer).wait_for_either(prefix, "container-setup-failed", timeout);    \
    ASSERT_TRUE(line) << "no '" << prefix << "' line:\n" << (peer).transcript(); \
    if (line->rfind("container-setup-failed", 0) == 0) GTEST_SKIP() << *line;    \
  } while (0)

// Runs `expr` (a start_in_container call) and skips the test when namespaces are refused.
#define CUDAIPC_START_OR_SKIP(var, expr)                                      \
  std::unique_ptr<::cudaipc::testing::PeerProcess> var;                       \
  try {                                                                       \
    var = (expr);                                                             \
  } catch (const ::cudaipc::testing::NamespacesRefused& refused_) {           \
    GTEST_SKIP() << "the kernel refused the namespaces: " << refused_.what(); \
  }
