// The C API's record of held frames (c_api_handles.hpp's HeldFrames): every seq handed out is
// listed until its handle comes back, in whatever order, past the fixed arrays' room too (a
// server's pipelines hold more requests at once than a consumer's slots), and a handle given back
// is the one handed out next.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "c_api_handles.hpp"

using cudaipc::capi::HeldFrames;

namespace {

std::vector<std::uint64_t> sorted_of(const std::set<std::uint64_t>& s) {
  return {s.begin(), s.end()};
}

// Takes `count` handles for seqs from `first`, then gives them back in a shuffled order, checking
// the held list after every step.
void take_and_give_back(HeldFrames& held, std::uint64_t first, int count, unsigned seed) {
  std::set<std::uint64_t> expected;
  std::vector<std::pair<std::uint64_t, std::unique_ptr<cudaipc_frame>>> out;
  for (int i = 0; i < count; ++i) {
    const std::uint64_t seq = first + std::uint64_t(i);
    out.emplace_back(seq, held.take(seq));
    ASSERT_TRUE(out.back().second);
    expected.insert(seq);
    ASSERT_EQ(held.sorted(), sorted_of(expected)) << "after taking " << seq;
  }
  std::shuffle(out.begin(), out.end(), std::mt19937(seed));
  for (auto& [seq, handle] : out) {
    held.give_back(seq, std::move(handle));
    expected.erase(seq);
    ASSERT_EQ(held.sorted(), sorted_of(expected)) << "after giving back " << seq;
  }
}

TEST(HeldFrames, ListsEveryHeldSeqWithinTheArrays) {
  HeldFrames held;
  take_and_give_back(held, 1, 5, 1);
  EXPECT_TRUE(held.sorted().empty());
}

TEST(HeldFrames, ListsEveryHeldSeqBeyondTheArrays) {
  HeldFrames held;
  for (unsigned seed = 0; seed < 4; ++seed) take_and_give_back(held, 1000 * (seed + 1), 200, seed);
  EXPECT_TRUE(held.sorted().empty());
}

TEST(HeldFrames, HandsOutTheHandleGivenBack) {
  HeldFrames held;
  std::unique_ptr<cudaipc_frame> a = held.take(1);
  cudaipc_frame* const address = a.get();
  a->cuda_device = 3;
  a->refs.store(5);
  held.give_back(1, std::move(a));
  std::unique_ptr<cudaipc_frame> b = held.take(2);
  EXPECT_EQ(b.get(), address);
  // Emptied as a new one is.
  EXPECT_EQ(b->cuda_device, -1);
  EXPECT_EQ(b->refs.load(), 1u);
  EXPECT_EQ(held.sorted(), std::vector<std::uint64_t>{2});
  held.give_back(2, std::move(b));
}

TEST(HeldFrames, ASeqNotHeldChangesNothing) {
  HeldFrames held;
  std::unique_ptr<cudaipc_frame> a = held.take(7);
  held.give_back(8, nullptr);
  EXPECT_EQ(held.sorted(), std::vector<std::uint64_t>{7});
  held.give_back(7, std::move(a));
  EXPECT_TRUE(held.sorted().empty());
}

}  // namespace
