#include "replies/server_paths.hpp"

#include <sys/stat.h>

#include <cerrno>

#include "channel_path.hpp"
#include "cudaipc/error.hpp"

namespace cudaipc::detail {
namespace {

const char* file_kind(mode_t mode) noexcept {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device file";
  return "not a socket";
}

std::string parent_of(const std::string& path) {
  const std::string::size_type slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void check_filter_path(const std::string& path) {
  make_default_dir_for(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISSOCK(st.st_mode)) return;
    std::string why = "'" + path + "' is " + file_kind(st.st_mode) +
                      ", not a socket: give the server a cudaipcfilter's socket-path (the filter "
                      "creates the socket there)";
    if (S_ISDIR(st.st_mode))
      why += ", or serve every filter channel in it with the directory option";
    throw Error(Errc::invalid_argument, why);
  }
  if (errno == ENOTDIR)
    throw Error(Errc::invalid_argument,
                "a part of '" + path + "' is not a directory: give a cudaipcfilter's socket-path");
  if (errno != ENOENT) throw_errno("stat '" + path + "'");
  // The pipeline is still to start; its filter needs the directory to be there, as the server
  // does for the reply channel beside it.
  const std::string dir = parent_of(path);
  if (::stat(dir.c_str(), &st) != 0)
    throw Error(Errc::invalid_argument, "the directory '" + dir + "' of '" + path +
                                            "' does not exist: create it (the cudaipcfilter "
                                            "does not) or give another socket-path");
}

std::string check_serve_directory(const std::string& directory) {
  std::string dir = directory;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  make_default_dir_for(dir + "/");  // the default directory only
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      throw Error(Errc::invalid_argument,
                  "the directory '" + dir +
                      "' does not exist: create it, and give the pipelines' cudaipcfilters "
                      "socket-paths in it (they do not create it)");
    throw_errno("stat '" + dir + "'");
  }
  if (!S_ISDIR(st.st_mode))
    throw Error(Errc::invalid_argument, "'" + dir + "' is " + file_kind(st.st_mode) +
                                            ", not a directory: give the directory the "
                                            "cudaipcfilters' socket-paths are in");
  return dir;
}

FileId file_id(const std::string& path) noexcept {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileId{};
  return FileId{st.st_dev, st.st_ino,
                static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

}  // namespace cudaipc::detail
