// What a gst-launch-1.0 user sees on a socket path that can never serve (issue #34): the sink,
// the filter and the source each fail at once, printing an error that names the path and what
// is there, and nothing else: no "Another cudaipc producer is live", no "Waiting for a cudaipc
// producer" for ever, and no GStreamer "state change failed and some element failed to post a
// proper error message" beside the element's own error.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "foreign_listener.hpp"
#include "mp_support.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::testing;
using namespace cudaipc::testing::gstmp;
using namespace std::chrono_literals;

namespace {

constexpr auto kWait = 15s;
const std::string kGeneric = "failed to post a proper error message";

// Runs `description` in gst-launch-1.0 and checks that it fails on its own within kWait, printing
// an ERROR line with each of `says` and no generic state-change error.
void expect_failure_naming(const std::string& label, const std::string& description,
                           const std::vector<std::string>& says, bool waits_first = false) {
  ChildProcess p(label, launch_argv(description));
  const auto st = p.wait_exit(kWait);
  ASSERT_TRUE(st) << label << " waited instead of failing\n" << p.describe();
  EXPECT_FALSE(exited_ok(st)) << describe_status(*st) << "\n" << p.describe();
  const auto error = p.wait_line("ERROR: from element", 0ms);
  ASSERT_TRUE(error) << p.describe();
  std::printf("%s: %s\n", label.c_str(), error->c_str());
  for (const std::string& text : says)
    EXPECT_NE(error->find(text), std::string::npos) << "'" << *error << "' lacks '" << text << "'";
  EXPECT_EQ(p.output().find(kGeneric), std::string::npos) << p.describe();
  EXPECT_EQ(p.output().find("Another cudaipc producer"), std::string::npos) << p.describe();
  if (!waits_first) {
    EXPECT_EQ(p.output().find("Waiting for a cudaipc producer"), std::string::npos) << p.describe();
  }
}

}  // namespace

TEST(GstMpMisuse, RegularFileOrDirectoryAsSocketPath) {
  GSTMP_REQUIRE("videotestsrc", "fakesink", "cudaipcfilter");
  TempDir dir;
  const std::string file = dir.file("file");
  std::ofstream(file) << "precious";
  const std::string subdir = dir.file("subdir");
  ASSERT_EQ(::mkdir(subdir.c_str(), 0700), 0);

  expect_failure_naming(
      "sink on a file",
      "videotestsrc num-buffers=5 ! " + sink() + " ipc-mode=host socket-path=" + file,
      {file, "not a socket", "regular file"});
  expect_failure_naming("source on a file", src() + " socket-path=" + file + " ! fakesink",
                        {file, "is a regular file, not a socket"});
  expect_failure_naming("source on a directory", src() + " socket-path=" + subdir + " ! fakesink",
                        {subdir, "is a directory, not a socket"});
  expect_failure_naming("filter on a file",
                        "videotestsrc num-buffers=5 ! cudaipcfilter ipc-mode=host socket-path=" +
                            file + " ! fakesink",
                        {file, "not a socket", "regular file"});
  std::string content;
  std::getline(std::ifstream(file), content);
  EXPECT_EQ(content, "precious");
}

TEST(GstMpMisuse, SourceOnAListenerThatIsNotCudaipc) {
  GSTMP_REQUIRE("fakesink");
  TempDir dir;
  const std::string stream = dir.file("stream");
  ForeignListener listener(stream, SOCK_STREAM, "hi");
  expect_failure_naming("source on a stream socket",
                        src() + " socket-path=" + stream + " ! fakesink",
                        {stream, "socket of another type", "not a cudaipc producer"});
  const std::string silent = dir.file("silent");
  ForeignListener quiet(silent, SOCK_SEQPACKET);
  // A silent listener looks like a producer whose process is stopped: waited for (said on the
  // bus) until connect-timeout, then the error names it.
  expect_failure_naming("source on a silent listener",
                        src() + " socket-path=" + silent + " connect-timeout=4000000000 ! fakesink",
                        {silent, "answered the cudaipc handshake", "not a cudaipc producer"},
                        /*waits_first=*/true);
}
