// Where a model server may serve: the checks that turn a wrong path or directory into an error
// naming it and the cause, instead of a wait for a pipeline that can never come, and the identity
// of a channel's socket, so a channel of the wrong kind is tried again only once it is replaced.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace cudaipc::detail {

// A filter's socket-path the server is given. Nothing there yet is a pipeline still to start (the
// default channel directory is made for it, as a producer makes it); a file that is not a socket,
// or a directory that is missing, is an Errc::invalid_argument naming it.
void check_filter_path(const std::string& path);

// The directory whose channels the server serves, without trailing slashes. The default channel
// directory is made when missing (as pipelines make it); any other missing directory, or a path
// that is not a directory, is an Errc::invalid_argument naming it.
std::string check_serve_directory(const std::string& directory);

// Which file is at a path now: a channel replaced (a pipeline restarted) is another file. The
// change time tells a new socket from an old one whose inode number it reuses.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  std::int64_t ctime_ns = 0;
  bool operator==(const FileId& o) const noexcept {
    return dev == o.dev && ino == o.ino && ctime_ns == o.ctime_ns;
  }
  bool operator!=(const FileId& o) const noexcept { return !(*this == o); }
};
// {0, 0} when nothing is there.
FileId file_id(const std::string& path) noexcept;

}  // namespace cudaipc::detail
