// What the multi-process pipeline tests share: where gst-launch-1.0 and the mp peer are, which
// elements exist (skip reasons), command lines, frame files and the peers' summary lines.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cudaipc::testing::gstmp {

// From meson (CUDAIPC_GST_LAUNCH, CUDAIPC_GST_MP_PEER); "" when not set.
std::string gst_launch_path();
std::string peer_path();

// Factory names that reach this project's sink and source ("" when not registered).
const std::string& sink();
const std::string& src();

// Why a test needing gst-launch-1.0, the peer (with appsrc and appsink), our elements and
// `elements` cannot run here, or "" when it can.
std::string missing(const std::vector<std::string>& elements);
// The same without gst-launch-1.0, for tests whose processes are all the peer's (or others built
// here).
std::string missing_peer(const std::vector<std::string>& elements);

// gst-launch-1.0 with `description` split at spaces (paths in tests have none): gst-launch joins
// its arguments itself and would escape the spaces inside a single one.
std::vector<std::string> launch_argv(const std::string& description);
std::vector<std::string> peer_argv(const std::vector<std::string>& args);

// A file of `count` frames of `bytes` each with ids first_id, first_id+1, ...
void write_frames_file(const std::string& path, std::size_t bytes, std::uint64_t first_id,
                       std::uint64_t count);

// The frames a filesink wrote, checked: ids in order, how many are damaged.
struct FileFrames {
  std::size_t frames = 0;
  std::size_t bad = 0;
  std::size_t trailing_bytes = 0;  // a partial frame at the end
  std::vector<std::uint64_t> ids;
  bool ids_contiguous_from(std::uint64_t first) const;
  bool ids_increasing() const;
};
FileFrames read_frames_file(const std::string& path, std::size_t bytes);

// The JSON-ish object after "summary " or "produced " in a peer's line.
class Summary {
 public:
  Summary() = default;
  explicit Summary(std::string line) : line_(std::move(line)) {}
  bool valid() const { return line_.find('{') != std::string::npos; }
  long long num(const std::string& key) const;  // -1 when absent
  bool flag(const std::string& key) const;
  std::string str(const std::string& key) const;
  const std::string& line() const { return line_; }

 private:
  std::string line_;
};

inline bool is_socket(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace cudaipc::testing::gstmp

// Skips the test, saying what is missing, unless gst-launch-1.0, the peer and the listed
// elements are all here.
#define GSTMP_REQUIRE(...)                                                           \
  do {                                                                               \
    const std::string gstmp_why = ::cudaipc::testing::gstmp::missing({__VA_ARGS__}); \
    if (!gstmp_why.empty()) GTEST_SKIP() << gstmp_why;                               \
  } while (0)
