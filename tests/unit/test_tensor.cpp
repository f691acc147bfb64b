// TensorDesc: the checks run on every descriptor a peer writes, dtype names, and make_tensor.
#include <gtest/gtest.h>

#include <climits>

#include "cudaipc/error.hpp"
#include "cudaipc/tensor.hpp"

using namespace cudaipc;

namespace {

void expect_invalid(const TensorDesc& t, std::uint64_t capacity, const std::string& cause) {
  try {
    validate(t, capacity);
    ADD_FAILURE() << "accepted " << to_string(t) << ", expected a complaint about " << cause;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::protocol);
    EXPECT_NE(std::string(e.what()).find(cause), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Tensor, MakeTensorIsDenseRowMajor) {
  TensorDesc t = make_tensor(DType::float32, {2, 3, 4});
  EXPECT_EQ(t.rank, 3u);
  EXPECT_EQ(t.strides[0], 48);
  EXPECT_EQ(t.strides[1], 16);
  EXPECT_EQ(t.strides[2], 4);
  EXPECT_EQ(t.size, 96u);
  EXPECT_EQ(t.byte_offset, 0u);
  EXPECT_EQ(to_string(t), "float32[2,3,4]");
  EXPECT_NO_THROW(validate(t, 96));
}

TEST(Tensor, MakeTensorRejectsBadInput) {
  EXPECT_THROW(make_tensor(DType::invalid, {1}), Error);
  EXPECT_THROW(make_tensor(DType::uint8, {1, -2}), Error);
  EXPECT_THROW(make_tensor(DType::uint8, {1, 1, 1, 1, 1, 1, 1, 1, 1}), Error);
}

TEST(Tensor, GoodShapesValidate) {
  EXPECT_NO_THROW(validate(make_tensor(DType::uint8, {}), 1));      // a scalar
  EXPECT_NO_THROW(validate(make_tensor(DType::uint8, {0, 5}), 0));  // empty
  TensorDesc padded = make_tensor(DType::uint8, {480, 640, 4});
  padded.strides[0] = 4096;  // pitched rows
  padded.size = 479 * 4096 + 640 * 4;
  padded.byte_offset = 128;
  EXPECT_NO_THROW(validate(padded, padded.size + 128));
  TensorDesc broadcast = make_tensor(DType::int16, {8, 8});
  broadcast.strides[0] = 0;  // every row the same bytes
  broadcast.size = 16;
  EXPECT_NO_THROW(validate(broadcast, 16));
}

TEST(Tensor, BadDescriptionsNameTheField) {
  TensorDesc t = make_tensor(DType::uint8, {16});
  expect_invalid(t, 15, "exceeds the slot");

  TensorDesc dt = t;
  dt.dtype = static_cast<DType>(99);
  expect_invalid(dt, 16, "unknown dtype 99");

  TensorDesc rank = t;
  rank.rank = 9;
  expect_invalid(rank, 16, "rank 9");

  TensorDesc planes = t;
  planes.num_planes = 5;
  expect_invalid(planes, 16, "5 planes");

  TensorDesc plane_out = t;
  plane_out.num_planes = 1;
  plane_out.planes[0] = {16, 4};
  expect_invalid(plane_out, 16, "plane 0");

  TensorDesc neg_shape = t;
  neg_shape.shape[0] = -1;
  expect_invalid(neg_shape, 16, "negative dimension");

  TensorDesc neg_stride = t;
  neg_stride.strides[0] = -1;
  expect_invalid(neg_stride, 16, "negative stride");

  TensorDesc reach = t;
  reach.strides[0] = 2;  // element 15 lies at byte 30
  expect_invalid(reach, 64, "reach 31 bytes");
}

TEST(Tensor, OverflowIsCaught) {
  TensorDesc off = make_tensor(DType::uint8, {16});
  off.byte_offset = ~std::uint64_t{0} - 4;
  expect_invalid(off, ~std::uint64_t{0}, "byte_offset");

  TensorDesc huge = make_tensor(DType::uint64, {2, 2});
  huge.shape[0] = LLONG_MAX;
  huge.strides[0] = LLONG_MAX;
  expect_invalid(huge, ~std::uint64_t{0}, "overflow");

  TensorDesc sum = make_tensor(DType::uint8, {3, 3});
  sum.shape[0] = sum.shape[1] = (1ll << 62) + 1;
  sum.strides[0] = sum.strides[1] = 2;
  expect_invalid(sum, ~std::uint64_t{0}, "overflow");
}

TEST(Tensor, EqualityComparesWhatMatters) {
  TensorDesc a = make_tensor(DType::uint8, {4, 4});
  TensorDesc b = a;
  b.shape[5] = 1234;  // beyond the rank: not part of the description
  EXPECT_EQ(a, b);
  b.strides[1] = 2;
  EXPECT_NE(a, b);
}

TEST(DType, NamesRoundTrip) {
  const DType all[] = {DType::int8,    DType::int16,   DType::int32,   DType::int64,
                       DType::uint8,   DType::uint16,  DType::uint32,  DType::uint64,
                       DType::float16, DType::float32, DType::float64, DType::bfloat16,
                       DType::boolean};
  for (DType t : all) {
    ASSERT_NE(dtype_name(t), nullptr);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
    EXPECT_GT(dtype_size(t), 0u);
  }
  EXPECT_STREQ(dtype_name(DType::uint8), "uint8");
  EXPECT_STREQ(dtype_name(DType::boolean), "bool");
  EXPECT_EQ(dtype_size(DType::bfloat16), 2u);
  EXPECT_EQ(dtype_size(DType::float64), 8u);
  EXPECT_EQ(dtype_name(DType::invalid), nullptr);
  EXPECT_EQ(dtype_name(static_cast<DType>(42)), nullptr);
  EXPECT_EQ(dtype_size(static_cast<DType>(42)), 0u);
  EXPECT_EQ(dtype_from_name("float128"), DType::invalid);
  EXPECT_EQ(dtype_from_name(""), DType::invalid);
}
