// libFuzzer's entry points for a target (clang, -Dfuzz=enabled). Seeds come from the loop
// driver's --write-seeds; scripts/dev.sh fuzz wires the two together.
#include <cstddef>
#include <cstdint>

#include "fuzz.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cudaipc::fuzz::init_once();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cudaipc::fuzz::run_input(data, size);
  return 0;
}
