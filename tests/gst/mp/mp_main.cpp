// main() of the multi-process pipeline tests: GStreamer is initialised here once (the registry
// is then up to date before any child process starts, so children never rebuild it at the same
// time), and a run in which every test skipped exits with 77, which meson reports as SKIP.
#include <gst/gst.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const auto* unit = ::testing::UnitTest::GetInstance();
  if (rc == 0 && unit->test_to_run_count() > 0 &&
      unit->skipped_test_count() == unit->test_to_run_count())
    return 77;
  return rc;
}
