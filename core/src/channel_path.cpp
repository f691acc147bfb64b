#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "channel_path.hpp"
#include "cudaipc/error.hpp"
#include "cudaipc/options.hpp"

namespace cudaipc {
namespace {

// Creates `dir` 0700, or accepts an existing one only if it is ours and closed to others: a
// directory someone else made could let them swap our socket.
void ensure_private_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) {
    // 0700 whatever the umask: a umask with the owner's x bit would leave one we cannot enter.
    if (::chmod(dir.c_str(), 0700) != 0) throw_errno("chmod of '" + dir + "'");
  } else if (errno != EEXIST) {
    throw_errno("mkdir '" + dir + "'");
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) throw_errno("stat '" + dir + "'");
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    throw Error(Errc::permission_denied,
                "'" + dir + "' is not a private directory owned by this user");
  // One made 0600 (under a umask of 0177, say) is ours and private, but no socket can go in it.
  if ((st.st_mode & 0700) != 0700)
    throw Error(Errc::permission_denied, "'" + dir +
                                             "' is not open to its owner (it needs mode 0700): "
                                             "chmod 700 it, or remove it to have it made again");
}

}  // namespace

std::string default_channel_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg && *xdg) return std::string(xdg) + "/cudaipc";
  return "/tmp/cudaipc-" + std::to_string(::geteuid());
}

std::string default_channel_path(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos)
    throw Error(Errc::invalid_argument, "channel name '" + name + "' must be non-empty, no '/'");
  const std::string dir = default_channel_dir();
  ensure_private_dir(dir);
  return dir + "/" + name;
}

void make_default_dir_for(const std::string& path) {
  const std::string::size_type slash = path.rfind('/');
  if (slash == std::string::npos) return;
  const std::string dir = default_channel_dir();
  if (path.compare(0, slash, dir) != 0 || slash != dir.size()) return;
  // Only a missing directory is made: one the user prepared (0750 for a group, say) is theirs.
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0 || errno != ENOENT) return;
  ensure_private_dir(dir);
}

std::vector<std::string> list_channels(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw_errno("reading the directory '" + dir + "'");
  std::vector<std::string> found;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string p = dir + "/" + name;
    struct stat st {};
    if (::lstat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) found.push_back(p);
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace cudaipc
