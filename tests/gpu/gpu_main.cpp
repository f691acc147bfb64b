// main() of the GPU test binaries: gtest's, except that a run in which every test skipped (no
// driver or no GPU) exits with 77, which meson reports as SKIP rather than as a pass.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const auto* unit = ::testing::UnitTest::GetInstance();
  if (rc == 0 && unit->test_to_run_count() > 0 &&
      unit->skipped_test_count() == unit->test_to_run_count())
    return 77;
  return rc;
}
