// Issue #28, item 3: on-missing=wait with no model process at all. docs/elements.md: the filter
// first gives a model one timeout to come, then passes frames as on-missing=pass would, so 5
// frames at timeout=1 s take about one timeout in all, not five, and every frame comes out once,
// in order, with its own bytes and no result.
// Issue #35, item 6: a filter that starts while its model already serves (its path, or its
// directory) waits for the model to take its channel, so under on-missing=pass frame 0 and every
// frame after it carry their own result; with no model about, on-missing=pass costs no wait.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "child_process.hpp"
#include "filter_support.hpp"
#include "mp_support.hpp"
#include "temp_dir.hpp"

using namespace cudaipc::testing;
using namespace cudaipc::testing::gstmp;
using namespace std::chrono_literals;

TEST(GstMpFilterWait, NoModelCostsOneTimeoutNotOnePerFrame) {
  const std::string why = filter_missing({});
  if (!why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  constexpr std::uint64_t kFrames = 5;
  ChildProcess pipeline(
      "filter pipeline",
      filter_argv(dir.file("model"), {"--count", std::to_string(kFrames), "--on-missing", "wait",
                                      "--timeout-ms", "1000", "--verbose", "--timeout-s", "20"}));
  const auto st = pipeline.wait_exit(30s);
  ASSERT_TRUE(st) << "the pipeline did not end\n" << pipeline.describe();
  ASSERT_TRUE(exited_ok(st)) << describe_status(*st) << "\n" << pipeline.describe();
  const Summary s(pipeline.wait_line("filtered ", 0ms).value_or(""));
  ASSERT_TRUE(s.valid()) << pipeline.describe();
  std::printf("pipeline: %s\n", s.line().c_str());
  EXPECT_TRUE(s.flag("eos")) << s.line();
  const auto out = out_frames(pipeline.output(), "out ");
  EXPECT_EQ(check_order(out, 1, kFrames), "") << pipeline.describe();
  for (const OutFrame& f : out) EXPECT_EQ(f.results, 0) << "frame " << f.id;
  // A behaviour check, not a benchmark: one timeout given (>= 0.9 s), not one per frame (5 s).
  EXPECT_GE(s.num("elapsed_ms"), 900) << s.line();
  EXPECT_LT(s.num("elapsed_ms"), 2500) << s.line();
}

// The model serves before the pipeline starts: given the filter's path, or watching its
// directory (the filter then knows of it by the directory's mark).
class GstMpFilterJoin : public ::testing::TestWithParam<const char*> {};

TEST_P(GstMpFilterJoin, APipelineUnderALiveModelHasItsFirstFrameAnswered) {
  const std::string why = filter_missing({});
  if (!why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cam = dir.file("cam");
  const bool watched = std::string(GetParam()) == "directory";
  ChildProcess model(
      "model", watched ? std::vector<std::string>{filter_model_path(), "--directory", dir.path()}
                       : model_argv(cam, "good", {}));
  ASSERT_TRUE(model.wait_line("serving", 10s)) << model.describe();
  constexpr std::uint64_t kFrames = 8;
  for (int run = 1; run <= 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    ChildProcess pipeline(
        "filter pipeline",
        filter_argv(cam, {"--count", std::to_string(kFrames), "--on-missing", "pass",
                          "--timeout-ms", "5000", "--verbose", "--timeout-s", "30"}));
    const auto st = pipeline.wait_exit(40s);
    ASSERT_TRUE(st) << "the pipeline did not end\n" << pipeline.describe();
    ASSERT_TRUE(exited_ok(st)) << describe_status(*st) << "\n" << pipeline.describe();
    const auto out = out_frames(pipeline.output(), "out ");
    EXPECT_EQ(check_order(out, 1, kFrames), "") << pipeline.describe();
    for (const OutFrame& f : out) {
      EXPECT_EQ(f.results, 1) << "frame " << f.id << " passed without its result\n"
                              << pipeline.describe();
      EXPECT_EQ(f.result, static_cast<long long>(f.id)) << "frame " << f.id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Served, GstMpFilterJoin, ::testing::Values("path", "directory"));

// No model serves the directory (a server SIGKILLed there left its mark; nothing holds it):
// on-missing=pass passes every frame at once, not after a timeout of 10 s.
TEST(GstMpFilterJoin, NoModelAboutCostsNoWait) {
  const std::string why = filter_missing({});
  if (!why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  // The mark's name as docs/protocol.md ("Replies") gives it.
  std::FILE* mark = std::fopen(dir.file(".cudaipc-server").c_str(), "w");
  ASSERT_NE(mark, nullptr);
  std::fclose(mark);
  ChildProcess pipeline(
      "filter pipeline",
      filter_argv(dir.file("cam"), {"--count", "5", "--on-missing", "pass", "--timeout-ms", "10000",
                                    "--verbose", "--timeout-s", "30"}));
  const auto st = pipeline.wait_exit(40s);
  ASSERT_TRUE(st) << "the pipeline did not end\n" << pipeline.describe();
  ASSERT_TRUE(exited_ok(st)) << describe_status(*st) << "\n" << pipeline.describe();
  const Summary s(pipeline.wait_line("filtered ", 0ms).value_or(""));
  ASSERT_TRUE(s.valid()) << pipeline.describe();
  const auto out = out_frames(pipeline.output(), "out ");
  EXPECT_EQ(check_order(out, 1, 5), "") << pipeline.describe();
  for (const OutFrame& f : out) EXPECT_EQ(f.results, 0) << "frame " << f.id;
  // A behaviour check, not a benchmark: no frame waited one timeout (10 s).
  EXPECT_LT(s.num("elapsed_ms"), 5000) << s.line();
}
