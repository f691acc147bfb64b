// main() of the GPU test binaries: gtest's, plus two things. The peer program defaults to the
// cudaipc-gpu-peer beside this binary (tests/common's PeerProcess reads CUDAIPC_TEST_PEER), so
// the binaries also run from a copied directory without meson. The core's info lines are shown.
// And a run in which every test
// skipped (no driver or no GPU) exits with 77, which meson reports as SKIP rather than a pass.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cudaipc/log.hpp"

int main(int argc, char** argv) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<std::size_t>(n));
    dir.erase(dir.rfind('/') + 1);
    ::setenv("CUDAIPC_TEST_PEER", (dir + "cudaipc-gpu-peer").c_str(), 0);
  }
  // Info lines too: which access the driver gave consumer mappings is part of the record.
  cudaipc::set_log_handler(
      [](cudaipc::LogLevel level, const char* message, void*) {
        if (level <= cudaipc::LogLevel::info) std::fprintf(stderr, "cudaipc: %s\n", message);
      },
      nullptr);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const auto* unit = ::testing::UnitTest::GetInstance();
  if (rc == 0 && unit->test_to_run_count() > 0 &&
      unit->skipped_test_count() == unit->test_to_run_count())
    return 77;
  return rc;
}
