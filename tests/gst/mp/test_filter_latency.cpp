// Issue #28, item 4's latency: a frame may stay in cudaipcfilter up to its `timeout`, so a live
// pipeline's latency query must count it: min latency includes the timeout, and so does max when
// upstream's max is not NONE. Asked by the application once frames flow through the filter, with a
// model serving and without one (the pipeline's latency cannot wait for a model to come).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "child_process.hpp"
#include "filter_support.hpp"
#include "mp_support.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::testing;
using namespace cudaipc::testing::gstmp;
using namespace std::chrono_literals;

namespace {

constexpr long long kTimeoutNs = 300000000;

// The filter peer's "latency" line, from a live pipeline whose appsrc reports `src_max_ms` as its
// max latency (NONE when 0).
std::string latency_line(bool with_model, std::uint64_t src_max_ms) {
  TempDir dir;
  const std::string sock = dir.file("model");
  std::unique_ptr<ChildProcess> model;
  if (with_model) {
    model = std::make_unique<ChildProcess>("model", model_argv(sock, "good"));
    EXPECT_TRUE(model->wait_line("serving", 20s)) << model->describe();
  }
  std::vector<std::string> args{
      "--live",         "--sync", "--fps",        "30",
      "--count",        "30",     "--timeout-ms", std::to_string(kTimeoutNs / 1000000),
      "--query-latency"};
  if (src_max_ms) args.insert(args.end(), {"--src-max-latency-ms", std::to_string(src_max_ms)});
  ChildProcess pipeline("filter pipeline", filter_argv(sock, args));
  const auto st = pipeline.wait_exit(30s);
  EXPECT_TRUE(exited_ok(st)) << pipeline.describe();
  const std::string line = pipeline.wait_line("latency ", 0ms).value_or("");
  EXPECT_FALSE(line.empty()) << pipeline.describe();
  std::printf("pipeline: %s\n", line.c_str());
  return line;
}

}  // namespace

TEST(GstMpFilterLatency, MinIncludesTheTimeoutWithAModel) {
  const std::string why = filter_missing({});
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string line = latency_line(true, 0);
  EXPECT_EQ(field(line, "answered"), 1) << line;
  EXPECT_EQ(field(line, "live"), 1) << line;
  EXPECT_GE(field(line, "min"), kTimeoutNs) << line;
  EXPECT_EQ(field(line, "max"), -1) << "upstream's max is NONE: " << line;
}

TEST(GstMpFilterLatency, MinIncludesTheTimeoutWithoutAModel) {
  const std::string why = filter_missing({});
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string line = latency_line(false, 0);
  EXPECT_EQ(field(line, "live"), 1) << line;
  EXPECT_GE(field(line, "min"), kTimeoutNs) << line;
}

TEST(GstMpFilterLatency, MaxIncludesTheTimeoutWhenUpstreamHasOne) {
  const std::string why = filter_missing({});
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string line = latency_line(true, 1000);
  EXPECT_GE(field(line, "min"), kTimeoutNs) << line;
  EXPECT_GE(field(line, "max"), 1000000000 + kTimeoutNs) << line;
}
