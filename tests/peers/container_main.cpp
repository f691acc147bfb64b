// The inside of a container, for the tests that run a peer the way container engines run one
// (docs/deployment.md). A test starts it as the first process of new namespaces
// (tests/common/container.hpp clones with CLONE_NEWPID, CLONE_NEWNS, ... and writes the id maps);
// it gives its mount namespace what a container's has, then runs the program:
//   cudaipc-test-container [--volume HOST_DIR:DIR] [--keep DIR]... [--init] [--ids U:G[:G2,...]]
//                          [--deny-peerpidfd] [--deny-futex-waitv] -- PROGRAM [ARG...]
//   --volume          an empty tmpfs on /tmp and on /dev/shm, a /proc of the new PID namespace,
//                     and HOST_DIR bind-mounted at DIR (under /tmp): the one directory the two
//                     sides share, as `docker run -v HOST_DIR:DIR` gives it
//   --keep DIR        DIR (the program, its libraries) stays visible at its own path when the
//                     private /tmp would hide it
//   --init            stays as the namespace's pid 1, reaping orphans, and runs PROGRAM as its
//                     child (what `docker run --init` does), so PROGRAM can be killed while what
//                     it forked lives on; exits with PROGRAM's status once nothing is left
//   --ids U:G[:G2,...] runs PROGRAM as uid U, gid G and supplementary groups G2... (ids of the
//                     user namespace)
//   --deny-peerpidfd  getsockopt(SO_PEERPIDFD) fails with ENOPROTOOPT in PROGRAM, as on a kernel
//                     before Linux 6.5 (a seccomp filter)
//   --deny-futex-waitv  futex_waitv fails with EPERM, as container runtimes' default seccomp
//                     profiles made it until about 2023
// A step the kernel or its permissions refuse prints "container-setup-failed: STEP: ERROR" on
// stdout and exits 125, so the test can skip and say why.
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#define CONTAINER_AUDIT_ARCH 0xc000003eu  // AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CONTAINER_AUDIT_ARCH 0xc00000b7u  // AUDIT_ARCH_AARCH64
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

namespace {

[[noreturn]] void refuse(const std::string& step, int err) {
  std::printf("container-setup-failed: %s: %s\n", step.c_str(), std::strerror(err));
  std::fflush(stdout);
  ::_exit(125);
}

void check(bool ok, const std::string& step) {
  if (!ok) refuse(step, errno);
}

void mkdir_p(const std::string& path) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string part = path.substr(0, slash);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) refuse("mkdir " + part, errno);
    if (slash == std::string::npos) return;
  }
}

bool under_tmp(const std::string& path) {
  return path.rfind("/tmp/", 0) == 0;
}

// Bind-mounts what `fd` (O_PATH, opened before /tmp was covered) names at `at`.
void bind_fd(int fd, const std::string& at) {
  const std::string source = "/proc/self/fd/" + std::to_string(fd);
  mkdir_p(at);
  check(::mount(source.c_str(), at.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0,
        "bind-mount onto " + at);
}

int open_dir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  check(fd >= 0, "open " + path);
  return fd;
}

void make_container_mounts(const std::string& volume, const std::vector<std::string>& keep) {
  const auto colon = volume.find(':');
  if (colon == std::string::npos || !under_tmp(volume.substr(colon + 1)))
    refuse("--volume wants HOST_DIR:DIR with DIR under /tmp", EINVAL);
  const std::string host = volume.substr(0, colon), inside = volume.substr(colon + 1);
  // Nothing mounted here may reach the namespace it came from.
  check(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0, "make / private");
  const int volume_fd = open_dir(host);
  std::vector<int> keep_fds;
  for (const auto& k : keep) keep_fds.push_back(under_tmp(k) ? open_dir(k) : -1);
  check(::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") == 0,
        "mount a tmpfs on /tmp");
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0)
    check(::mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777") == 0,
          "mount a tmpfs on /dev/shm");
  for (std::size_t i = 0; i < keep.size(); ++i)
    if (keep_fds[i] >= 0) bind_fd(keep_fds[i], keep[i]);
  bind_fd(volume_fd, inside);
  ::close(volume_fd);
  for (int fd : keep_fds)
    if (fd >= 0) ::close(fd);
  // The PID namespace's own /proc, as a container has. Some hosts refuse it (a /proc with
  // masked paths cannot be mounted afresh from a user namespace); nothing of cudaipc reads /proc
  // for peers, so the host's view stays then, and the test goes on.
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    std::fprintf(stderr, "container: /proc not mounted afresh: %s\n", std::strerror(errno));
}

// A seccomp filter refusing what `deny_peerpidfd` and `deny_futex_waitv` name, the way an older
// kernel or a container runtime's profile would.
void install_seccomp(bool deny_peerpidfd, bool deny_futex_waitv) {
#if defined(CONTAINER_AUDIT_ARCH)
  std::vector<sock_filter> f = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CONTAINER_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
  if (deny_futex_waitv) {
    // Refused with EPERM, as Docker's and Podman's default profiles answered it until 2023.
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 449 /* futex_waitv */, 0, 1));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
  }
  if (deny_peerpidfd) {
    // getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD): ENOPROTOOPT, as before Linux 6.5. The low halves
    // of the arguments (both architectures are little-endian).
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getsockopt, 0, 5));
    f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])));
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_SOCKET, 0, 3));
    f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])));
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_PEERPIDFD, 0, 1));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOPROTOOPT));
  }
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  check(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS");
  check(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, "install the seccomp filter");
#else
  (void)deny_peerpidfd;
  (void)deny_futex_waitv;
  refuse("a seccomp filter on this architecture", ENOSYS);
#endif
}

void switch_ids(const std::string& spec) {
  std::vector<gid_t> groups;
  unsigned long uid = 0, gid = 0;
  char* end = nullptr;
  uid = std::strtoul(spec.c_str(), &end, 10);
  if (*end != ':') refuse("--ids wants U:G[:G2,...]", EINVAL);
  gid = std::strtoul(end + 1, &end, 10);
  while (*end == ':' || *end == ',')
    groups.push_back(static_cast<gid_t>(std::strtoul(end + 1, &end, 10)));
  if (*end != '\0') refuse("--ids wants U:G[:G2,...]", EINVAL);
  check(::setgroups(groups.size(), groups.data()) == 0, "setgroups");
  check(::setresgid(static_cast<gid_t>(gid), static_cast<gid_t>(gid), static_cast<gid_t>(gid)) == 0,
        "setresgid " + std::to_string(gid));
  check(::setresuid(static_cast<uid_t>(uid), static_cast<uid_t>(uid), static_cast<uid_t>(uid)) == 0,
        "setresuid " + std::to_string(uid));
}

// pid 1's job: reap everything, leave when nothing is left, with the program's status.
[[noreturn]] void reap_until_empty(pid_t program) {
  int result = 0;
  for (;;) {
    int st = 0;
    const pid_t p = ::waitpid(-1, &st, 0);
    if (p < 0) {
      if (errno == EINTR) continue;
      ::_exit(result);  // ECHILD: nobody left
    }
    if (p == program) result = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string volume, ids;
  std::vector<std::string> keep;
  bool init = false, deny_peerpidfd = false, deny_futex_waitv = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--init") {
      init = true;
    } else if (a == "--deny-peerpidfd") {
      deny_peerpidfd = true;
    } else if (a == "--deny-futex-waitv") {
      deny_futex_waitv = true;
    } else if (i + 1 < argc && a == "--volume") {
      volume = argv[++i];
    } else if (i + 1 < argc && a == "--keep") {
      keep.emplace_back(argv[++i]);
    } else if (i + 1 < argc && a == "--ids") {
      ids = argv[++i];
    } else {
      std::fprintf(stderr, "cudaipc-test-container: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (i + 1 >= argc) {
    std::fprintf(stderr,
                 "usage: %s [--volume HOST:DIR] [--keep DIR]... [--init] [--ids U:G] "
                 "[--deny-peerpidfd] [--deny-futex-waitv] -- PROGRAM [ARG...]\n",
                 argv[0]);
    return 2;
  }
  if (!volume.empty()) make_container_mounts(volume, keep);
  if (deny_peerpidfd || deny_futex_waitv) install_seccomp(deny_peerpidfd, deny_futex_waitv);
  if (init) {
    const pid_t program = ::fork();
    check(program >= 0, "fork");
    if (program > 0) reap_until_empty(program);
  }
  if (!ids.empty()) switch_ids(ids);
  ::execv(argv[i + 1], argv + i + 1);
  refuse(std::string("exec ") + argv[i + 1], errno);
}
