#include "mp_support.hpp"

#include <gst/gst.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "element_names.hpp"
#include "frame_pattern.hpp"

namespace cudaipc::testing::gstmp {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::string gst_launch_path() {
  return env("CUDAIPC_GST_LAUNCH");
}
std::string peer_path() {
  return env("CUDAIPC_GST_MP_PEER");
}

const std::string& sink() {
  static const std::string name = sink_factory();
  return name;
}

const std::string& src() {
  static const std::string name = src_factory();
  return name;
}

std::string missing(const std::vector<std::string>& elements) {
  const std::string gl = gst_launch_path();
  if (gl.empty()) return "gst-launch-1.0 was not found when the build was configured";
  if (::access(gl.c_str(), X_OK) != 0) return "gst-launch-1.0 is not executable at " + gl;
  return missing_peer(elements);
}

std::string missing_peer(const std::vector<std::string>& elements) {
  const std::string peer = peer_path();
  if (peer.empty() || ::access(peer.c_str(), X_OK) != 0)
    return "cudaipc-gst-mp-peer is not built (CUDAIPC_GST_MP_PEER='" + peer + "')";
  if (sink().empty()) return "no cudaipcsink of this project in the registry (plugin not found)";
  if (src().empty()) return "no cudaipcsrc of this project in the registry (plugin not found)";
  // The peer's own pipelines.
  std::vector<std::string> all{"appsrc", "appsink"};
  all.insert(all.end(), elements.begin(), elements.end());
  for (const auto& e : all) {
    GstElementFactory* f = gst_element_factory_find(e.c_str());
    if (!f) return "element '" + e + "' is not available in this GStreamer installation";
    gst_object_unref(f);
  }
  return "";
}

std::vector<std::string> launch_argv(const std::string& description) {
  std::vector<std::string> argv{gst_launch_path()};
  std::istringstream in(description);
  std::string token;
  while (in >> token) argv.push_back(token);
  return argv;
}

std::vector<std::string> peer_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv{peer_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

void write_frames_file(const std::string& path, std::size_t bytes, std::uint64_t first_id,
                       std::uint64_t count) {
  std::ofstream out(path, std::ios::binary);
  std::vector<char> frame(bytes);
  for (std::uint64_t i = 0; i < count; ++i) {
    fill_frame(frame.data(), bytes, first_id + i);
    out.write(frame.data(), static_cast<std::streamsize>(bytes));
  }
  if (!out) throw std::runtime_error("could not write " + path);
}

FileFrames read_frames_file(const std::string& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FileFrames r;
  r.frames = all.size() / bytes;
  r.trailing_bytes = all.size() % bytes;
  for (std::size_t i = 0; i < r.frames; ++i) {
    const char* f = all.data() + i * bytes;
    r.ids.push_back(frame_id(f));
    if (!frame_intact(f, bytes)) ++r.bad;
  }
  return r;
}

bool FileFrames::ids_contiguous_from(std::uint64_t first) const {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] != first + i) return false;
  return true;
}

bool FileFrames::ids_increasing() const {
  for (std::size_t i = 1; i < ids.size(); ++i)
    if (ids[i] <= ids[i - 1]) return false;
  return true;
}

long long Summary::num(const std::string& key) const {
  const auto pos = line_.find("\"" + key + "\":");
  if (pos == std::string::npos) return -1;
  return std::strtoll(line_.c_str() + pos + key.size() + 3, nullptr, 10);
}

bool Summary::flag(const std::string& key) const {
  const auto pos = line_.find("\"" + key + "\":");
  return pos != std::string::npos && line_.compare(pos + key.size() + 3, 4, "true") == 0;
}

std::string Summary::str(const std::string& key) const {
  const auto pos = line_.find("\"" + key + "\":\"");
  if (pos == std::string::npos) return "";
  const auto start = pos + key.size() + 4;
  const auto end = line_.find('"', start);
  return end == std::string::npos ? "" : line_.substr(start, end - start);
}

}  // namespace cudaipc::testing::gstmp
