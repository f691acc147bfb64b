// Issue #28, item 3: on-missing=wait with no model process at all. docs/elements.md: the filter
// first gives a model one timeout to come, then passes frames as on-missing=pass would, so 5
// frames at timeout=1 s take about one timeout in all, not five, and every frame comes out once,
// in order, with its own bytes and no result.
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
