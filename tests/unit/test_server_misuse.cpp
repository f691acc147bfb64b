// A model server pointed at what is not a cudaipcfilter's channel says so, naming the path and the
// cause, instead of waiting for ever or answering frames no filter sent: a regular file, a
// directory, a missing directory, and a cudaipcsink's channel (a plain producer's), whether it
// is there when the server starts or takes the path later; a directory's sink channels are left
// alone. A path with nothing there yet is still a pipeline to wait for.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "cudaipc/error.hpp"
#include "cudaipc/producer.hpp"
#include "cudaipc/reply.hpp"
#include "cudaipc/server.hpp"
#include "log_capture.hpp"
#include "poll_until.hpp"
#include "temp_dir.hpp"

using namespace cudaipc;
using namespace cudaipc::testing;
using namespace std::chrono_literals;

namespace {

// A channel as `role` makes it, in host memory, whose frames are 4 uint32 {n, n+1, n+2, n+3}.
std::unique_ptr<Producer> channel(const std::string& path, ChannelRole role) {
  ProducerOptions po;
  po.path = path;
  po.slots = 4;
  po.role = role;
  po.on_full = FullPolicy::drop;
  auto p = std::make_unique<Producer>(po);
  Format f;
  f.caps = "test/frames";
  f.tensor = make_tensor(DType::uint32, {4});
  p->set_format(f);
  return p;
}

void publish(Producer& p, std::uint32_t n) {
  const std::uint32_t v[4] = {n, n + 1, n + 2, n + 3};
  ASSERT_EQ(p.publish(v, sizeof v, FrameInfo{}), PublishStatus::published);
}

// The Error constructing a server with `so` throws (Errc::ok when it does not).
Error construction_error(const ServerOptions& so) {
  try {
    Server s(so);
  } catch (const Error& e) {
    return e;
  }
  return Error(Errc::ok, "the server was made");
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

#define EXPECT_MENTIONS(text, word)                          \
  EXPECT_NE(std::string(text).find(word), std::string::npos) \
      << "'" << (text) << "' lacks '" << (word) << "'"

}  // namespace

TEST(ServerMisuse, RegularFileIsNotAFilterChannel) {
  TempDir dir;
  const std::string path = dir.file("detector");
  std::ofstream(path) << "not a socket";
  ServerOptions so;
  so.path = path;
  const Error e = construction_error(so);
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_MENTIONS(e.what(), "'" + path + "' is a regular file, not a socket");
  EXPECT_MENTIONS(e.what(), "socket-path");
  EXPECT_FALSE(exists(reply_path(path))) << "no reply channel is left beside it";
}

TEST(ServerMisuse, DirectoryGivenAsAPathSaysToServeIt) {
  TempDir dir;
  ServerOptions so;
  so.path = dir.path();
  const Error e = construction_error(so);
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_MENTIONS(e.what(), "'" + dir.path() + "' is a directory, not a socket");
  EXPECT_MENTIONS(e.what(), "directory option");
}

TEST(ServerMisuse, PathInAMissingDirectory) {
  TempDir dir;
  const std::string missing = dir.file("nowhere");
  ServerOptions so;
  so.path = missing + "/detector";
  const Error e = construction_error(so);
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_MENTIONS(e.what(), "the directory '" + missing + "'");
  EXPECT_MENTIONS(e.what(), "does not exist");
}

TEST(ServerMisuse, MissingOrRegularFileDirectory) {
  TempDir dir;
  ServerOptions so;
  so.directory = dir.file("nowhere");
  Error e = construction_error(so);
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_MENTIONS(e.what(), "the directory '" + so.directory + "' does not exist");

  so.directory = dir.file("file");
  std::ofstream(so.directory) << "x";
  e = construction_error(so);
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_MENTIONS(e.what(), "'" + so.directory + "' is a regular file, not a directory");
}

TEST(ServerMisuse, NothingThereYetIsAPipelineToWaitFor) {
  TempDir dir;
  const std::string path = dir.file("detector");
  ServerOptions so;
  so.path = path;
  Server server(so);
  auto info = server.pipelines();
  ASSERT_EQ(info.size(), 1u);
  EXPECT_FALSE(info[0].connected);
  // The filter starts: its frames are served.
  auto filter = channel(path, ChannelRole::requests);
  ASSERT_TRUE(poll_until([&] { return filter->consumer_count() == 1; }, 5000ms));
  publish(*filter, 7);
  ServerEvent ev;
  do ev = server.next(5s);
  while (ev.type == ServerEventType::format);
  ASSERT_EQ(ev.type, ServerEventType::request) << ev.message;
  const auto* v = static_cast<const std::uint32_t*>(ev.request.frame.data());
  EXPECT_EQ(v[0], 7u);
  EXPECT_EQ(v[3], 10u);
}

TEST(ServerMisuse, LivePipelineIsConnectedOnceMade) {
  TempDir dir;
  const std::string path = dir.file("detector");
  auto filter = channel(path, ChannelRole::requests);
  ServerOptions so;
  so.path = path;
  Server server(so);
  auto info = server.pipelines();
  ASSERT_EQ(info.size(), 1u);
  EXPECT_TRUE(info[0].connected) << "a server says at once which paths still wait";
}

TEST(ServerMisuse, SinkChannelIsRefusedAtOnce) {
  TempDir dir;
  const std::string path = dir.file("cam0");
  auto sink = channel(path, ChannelRole::frames);
  ServerOptions so;
  so.path = path;
  const Error e = construction_error(so);
  EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  EXPECT_MENTIONS(e.what(), "'" + path + "' is a cudaipcsink's channel");
  EXPECT_MENTIONS(e.what(), "not a cudaipcfilter's: point the server at the filter's socket-path");
  EXPECT_EQ(sink->consumer_count(), 0u);
  EXPECT_FALSE(exists(reply_path(path)));
}

// A sink that takes the path while the server waits: its frames never become requests, it is
// said once (log and event), the sink is not held back by a reader, and the filter that comes
// after it on the same path is served.
TEST(ServerMisuse, SinkTakingThePathLaterIsNeverServed) {
  TempDir dir;
  const std::string path = dir.file("cam0");
  LogCapture logs;
  ServerOptions so;
  so.path = path;
  Server server(so);
  {
    auto sink = channel(path, ChannelRole::frames);
    for (std::uint32_t n = 1; n <= 3; ++n) publish(*sink, n);
    bool told = false;
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (std::chrono::steady_clock::now() < until) {
      ServerEvent ev = server.next(100ms);
      ASSERT_NE(ev.type, ServerEventType::request) << "a sink's frame was handed out";
      if (ev.type == ServerEventType::disconnected) {
        EXPECT_MENTIONS(ev.message, "'" + path + "' is a cudaipcsink's channel");
        EXPECT_EQ(ev.path, path);
        told = true;
      }
    }
    EXPECT_TRUE(told);
    EXPECT_EQ(sink->consumer_count(), 0u);
    EXPECT_FALSE(server.pipelines()[0].connected);
    EXPECT_NE(logs.find({path, "cudaipcsink's channel"}), "");
  }
  auto filter = channel(path, ChannelRole::requests);
  ASSERT_TRUE(poll_until([&] { return filter->consumer_count() == 1; }, 5000ms));
  publish(*filter, 40);
  ServerEvent ev;
  do ev = server.next(5s);
  while (ev.type == ServerEventType::format || ev.type == ServerEventType::disconnected);
  ASSERT_EQ(ev.type, ServerEventType::request) << ev.message;
  EXPECT_EQ(static_cast<const std::uint32_t*>(ev.request.frame.data())[0], 40u);
}

// A directory the filters share with sinks: only the filters' channels are served, and the sinks
// see no reader and get no reply channel beside theirs.
TEST(ServerMisuse, DirectoryServesOnlyFilterChannels) {
  TempDir dir;
  auto sink = channel(dir.file("cam0"), ChannelRole::frames);
  auto filter = channel(dir.file("detector"), ChannelRole::requests);
  ServerOptions so;
  so.directory = dir.path();
  so.scan_interval = 20ms;
  Server server(so);
  std::this_thread::sleep_for(200ms);  // several scans
  const auto info = server.pipelines();
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].path, dir.file("detector"));
  EXPECT_EQ(sink->consumer_count(), 0u);
  EXPECT_FALSE(exists(reply_path(dir.file("cam0"))));
  EXPECT_TRUE(exists(reply_path(dir.file("detector"))));
  // A sink that restarts as a filter on the same path is picked up.
  sink.reset();
  sink = channel(dir.file("cam0"), ChannelRole::requests);
  ASSERT_TRUE(poll_until([&] { return server.pipelines().size() == 2; }, 5000ms));
}

// The default channel directory is made when missing, as a pipeline's cudaipcfilter makes it:
// a server started first waits there for the pipelines.
TEST(ServerMisuse, DefaultDirectoryIsMadeAsPipelinesMakeIt) {
  TempDir runtime;
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  const std::string kept = old ? old : "";
  ::setenv("XDG_RUNTIME_DIR", runtime.path().c_str(), 1);
  ServerOptions so;
  so.directory = runtime.file("cudaipc") + "/";
  try {
    Server server(so);
    struct stat st {};
    ASSERT_EQ(::stat(runtime.file("cudaipc").c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
  if (old)
    ::setenv("XDG_RUNTIME_DIR", kept.c_str(), 1);
  else
    ::unsetenv("XDG_RUNTIME_DIR");
}
