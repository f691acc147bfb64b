#include "replies/server_mark.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "cudaipc/error.hpp"
#include "cudaipc/log.hpp"
#include "cudaipc/reply.hpp"

namespace cudaipc {
namespace {

std::string directory_of(const std::string& path) {
  const std::string::size_type slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Whether a lock of another open file than `fd`'s conflicts with a write lock on the whole file:
// a server holds the mark.
bool held_by_another(int fd, const std::string& path) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) throw_errno("testing the lock of '" + path + "'");
  return fl.l_type != F_UNLCK;
}

// Whether `fd` is the file `path` names now.
bool names(int fd, const std::string& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

}  // namespace

std::string server_mark_path(const std::string& directory) {
  return directory + "/" + kServerMarkName;
}

bool directory_served(const std::string& request_path) {
  const std::string mark = server_mark_path(directory_of(request_path));
  // Non-blocking: whatever the name holds, opening it never waits.
  UniqueFd fd(::open(mark.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    // No mark (no server ever watched here), or one this user may not read (a server of
    // another group): no server this filter can count on.
    if (errno == ENOENT || errno == EACCES || errno == ELOOP || errno == ENXIO || errno == ENOTDIR)
      return false;
    throw_errno("opening the server mark '" + mark + "'");
  }
  return held_by_another(fd.get(), mark);
}

namespace detail {

ServerMark::ServerMark(std::string dir, std::uint32_t mode)
    : dir_(std::move(dir)),
      path_(server_mark_path(dir_)),
      // Readable by the classes the reply channels let in; written by nobody.
      mode_(0600 | ((mode & 0070) ? 0040 : 0) | ((mode & 0007) ? 0004 : 0)) {
  refresh();
}

ServerMark::~ServerMark() {
  if (!fd_) return;
  // Removed unless another server holds it. One that takes it meanwhile finds it gone at its next
  // refresh and makes it again.
  try {
    if (!held_by_another(fd_.get(), path_) && names(fd_.get(), path_) &&
        ::unlink(path_.c_str()) != 0 && errno != ENOENT)
      log(LogLevel::info,
          ("removing the server mark '" + path_ + "': " + std::strerror(errno)).c_str());
  } catch (const std::exception& e) {
    log(LogLevel::info, e.what());
  }
}

void ServerMark::take() {
  fd_.reset();
  int fd = ::open(path_.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  const bool made = fd >= 0;
  if (!made && errno == EEXIST)
    fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return;  // no directory yet: taken once it exists
    throw_errno("making the server mark '" + path_ + "'");
  }
  UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("stat of '" + path_ + "'");
  if (!S_ISREG(st.st_mode))
    throw Error(Errc::busy, "'" + path_ + "' is not a regular file: filters starting in '" + dir_ +
                                "' cannot know that this server watches it");
  // Made with 0600 whatever the umask, then opened to the reply channels' readers.
  if (made && ::fchmod(fd, static_cast<mode_t>(mode_)) != 0)
    throw_errno("chmod of '" + path_ + "'");
  struct flock fl {};
  fl.l_type = F_RDLCK;
  fl.l_whence = SEEK_SET;
  // Servers only share it (read locks): a write lock is someone else's, and the mark is tried
  // again at the next refresh.
  if (::fcntl(fd, F_OFD_SETLK, &fl) != 0) throw_errno("locking the server mark '" + path_ + "'");
  fd_ = std::move(owned);
}

void ServerMark::refresh() noexcept {
  try {
    if (fd_ && names(fd_.get(), path_)) return;
    take();
    said_.clear();
  } catch (const std::exception& e) {
    if (said_ != e.what()) {
      said_ = e.what();
      log(LogLevel::warning, e.what());
    }
  }
}

}  // namespace detail
}  // namespace cudaipc
