// The C API's DLPack calls on host channels: frames exported as DLPack tensors hold their lease
// until every export is deleted and the frame released, in any order; DLPack tensors published by
// copy land intact and are handed back (their deleters run) exactly once; borrowed slots export as
// writable tensors; the per-frame view says what the frame says. The CUDA side of the same calls
// (stream ordering) is in tests/gpu and python/tests/test_gpu.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "c_channel.hpp"
#include "cudaipc/cudaipc.h"
#include "pattern.hpp"

using cudaipc::testing::Channel;
using cudaipc::testing::check_pattern;
using cudaipc::testing::fill_pattern;
using cudaipc::testing::u32_tensor;

namespace {

constexpr std::int64_t kRows = 6, kCols = 10;  // uint32 frames of kRows x kCols

// A DLPack tensor made here, the way an importer's data would be: a compact (or strided) uint32
// matrix whose deleter counts its calls.
struct TestTensor {
  std::vector<std::uint32_t> data;
  std::int64_t shape[2];
  std::int64_t strides[2];
  cudaipc_dl_managed_tensor_versioned versioned{};
  cudaipc_dl_managed_tensor legacy{};
  int deleted = 0;

  TestTensor(std::uint64_t key, std::int64_t rows, std::int64_t cols)
      : data(static_cast<std::size_t>(rows * cols)), shape{rows, cols}, strides{cols, 1} {
    fill_pattern(data.data(), data.size() * 4, key);
    const cudaipc_dl_tensor t{data.data(), {CUDAIPC_DL_CPU, 0}, 2, {1, 32, 1}, shape, strides, 0};
    versioned.version.major = 1;
    versioned.manager_ctx = this;
    versioned.deleter = [](cudaipc_dl_managed_tensor_versioned* m) {
      ++static_cast<TestTensor*>(m->manager_ctx)->deleted;
    };
    versioned.dl_tensor = t;
    legacy.dl_tensor = t;
    legacy.manager_ctx = this;
    legacy.deleter = [](cudaipc_dl_managed_tensor* m) {
      ++static_cast<TestTensor*>(m->manager_ctx)->deleted;
    };
  }
};

template <typename M>
void delete_tensor(void* m) {
  auto* t = static_cast<M*>(m);
  t->deleter(t);
}

}  // namespace

TEST(CApiDlpack, FrameExportsDescribeTheSlotAndHoldTheLease) {
  Channel ch(2);  // one lease per consumer: a held frame stops the next
  ch.format(u32_tensor(kRows, kCols));
  const std::uint64_t bytes = kRows * kCols * 4;
  ch.publish(1, bytes);
  cudaipc_frame_view view;
  cudaipc_frame* f = ch.next(&view);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(view.frame, f);
  EXPECT_EQ(view.seq, 1u);
  EXPECT_EQ(view.data, cudaipc_frame_data(f));
  EXPECT_EQ(view.size, bytes);
  EXPECT_EQ(view.pts, CUDAIPC_NO_TIME);
  EXPECT_EQ(view.cuda_device, -1);
  EXPECT_NE(view.publish_time_ns, 0u);
  const std::uint64_t alive0 = cudaipc_dlpack_exports_alive();

  void* out = nullptr;
  ASSERT_EQ(cudaipc_frame_dlpack(f, nullptr, CUDAIPC_DLPACK_VERSIONED, &out), CUDAIPC_OK)
      << cudaipc_last_error();
  auto* v = static_cast<cudaipc_dl_managed_tensor_versioned*>(out);
  EXPECT_EQ(v->version.major, 1u);
  EXPECT_EQ(v->flags & CUDAIPC_DL_FLAG_READ_ONLY, CUDAIPC_DL_FLAG_READ_ONLY);  // host slots
  EXPECT_EQ(v->dl_tensor.device.device_type, CUDAIPC_DL_CPU);
  EXPECT_EQ(v->dl_tensor.ndim, 2);
  EXPECT_EQ(v->dl_tensor.dtype.code, 1);
  EXPECT_EQ(v->dl_tensor.dtype.bits, 32);
  EXPECT_EQ(v->dl_tensor.dtype.lanes, 1);
  EXPECT_EQ(v->dl_tensor.shape[0], kRows);
  EXPECT_EQ(v->dl_tensor.shape[1], kCols);
  EXPECT_EQ(v->dl_tensor.strides[0], kCols);  // elements, not bytes
  EXPECT_EQ(v->dl_tensor.strides[1], 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v->dl_tensor.data), view.data);
  EXPECT_EQ(check_pattern(v->dl_tensor.data, bytes, 1), bytes);

  void* out2 = nullptr;  // a second export of one frame: the legacy struct
  ASSERT_EQ(cudaipc_frame_dlpack(f, nullptr, 0, &out2), CUDAIPC_OK);
  auto* l = static_cast<cudaipc_dl_managed_tensor*>(out2);
  EXPECT_EQ(l->dl_tensor.data, v->dl_tensor.data);
  EXPECT_EQ(cudaipc_dlpack_exports_alive(), alive0 + 2);

  // Released first, the frame's lease lives on in its exports.
  cudaipc_frame_release(f);
  EXPECT_EQ(ch.held(), 1u);
  ch.publish(2, bytes);
  cudaipc_event ev;
  ASSERT_EQ(cudaipc_consumer_next(ch.c, 200'000'000, &ev), CUDAIPC_OK);
  EXPECT_EQ(ev.type, CUDAIPC_EVENT_TIMEOUT);                     // at the lease limit
  EXPECT_EQ(check_pattern(l->dl_tensor.data, bytes, 1), bytes);  // still frame 1
  uint64_t seqs[4] = {};
  uint32_t n = 0;
  ASSERT_EQ(cudaipc_consumer_held(ch.c, &n, seqs, 4), CUDAIPC_OK);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(seqs[0], 1u);

  delete_tensor<cudaipc_dl_managed_tensor>(out2);
  EXPECT_EQ(ch.held(), 1u);
  delete_tensor<cudaipc_dl_managed_tensor_versioned>(out);
  EXPECT_EQ(ch.held(), 0u);
  EXPECT_EQ(cudaipc_dlpack_exports_alive(), alive0);
  cudaipc_frame* f2 = ch.next();
  ASSERT_NE(f2, nullptr);
  EXPECT_EQ(cudaipc_frame_seq(f2), 2u);
  EXPECT_EQ(check_pattern(reinterpret_cast<const void*>(cudaipc_frame_data(f2)), bytes, 2), bytes);
  // Deleted before the release: the release ends the lease.
  ASSERT_EQ(cudaipc_frame_dlpack(f2, nullptr, CUDAIPC_DLPACK_VERSIONED, &out), CUDAIPC_OK);
  delete_tensor<cudaipc_dl_managed_tensor_versioned>(out);
  EXPECT_EQ(ch.held(), 1u);
  ASSERT_EQ(cudaipc_frame_release_after(f2, nullptr), CUDAIPC_OK);  // host: a plain release
  EXPECT_EQ(ch.held(), 0u);
  EXPECT_EQ(cudaipc_dlpack_exports_alive(), alive0);
}

TEST(CApiDlpack, ManyExportsOfManyFramesLeaveNothing) {
  Channel ch(4);
  ch.format(u32_tensor(kRows, kCols));
  const std::uint64_t bytes = kRows * kCols * 4;
  const std::uint64_t alive0 = cudaipc_dlpack_exports_alive();
  for (std::uint64_t seq = 1; seq <= 200; ++seq) {
    ch.publish(seq, bytes);
    cudaipc_frame* f = ch.next();
    ASSERT_NE(f, nullptr);
    std::vector<void*> exports(seq % 4);
    for (void*& e : exports)
      ASSERT_EQ(cudaipc_frame_dlpack(f, nullptr, CUDAIPC_DLPACK_VERSIONED, &e), CUDAIPC_OK);
    if (seq % 2) cudaipc_frame_release(f);
    for (void* e : exports) {
      EXPECT_EQ(check_pattern(static_cast<cudaipc_dl_managed_tensor_versioned*>(e)->dl_tensor.data,
                              bytes, seq),
                bytes);
      delete_tensor<cudaipc_dl_managed_tensor_versioned>(e);
    }
    if (seq % 2 == 0) cudaipc_frame_release(f);
    ASSERT_EQ(ch.held(), 0u) << "frame " << seq;
  }
  EXPECT_EQ(cudaipc_dlpack_exports_alive(), alive0);
}

TEST(CApiDlpack, StridesThatAreNotWholeElementsAreRefused) {
  Channel ch;
  cudaipc_tensor t = u32_tensor(kRows, kCols);
  t.strides[0] = kCols * 4 + 2;  // a pitch of half an element
  t.size = static_cast<std::uint64_t>((kRows - 1) * t.strides[0] + kCols * 4);
  ch.format(t);
  ch.publish(1, t.size);
  cudaipc_frame* f = ch.next();
  ASSERT_NE(f, nullptr);
  void* out = nullptr;
  EXPECT_EQ(cudaipc_frame_dlpack(f, nullptr, CUDAIPC_DLPACK_VERSIONED, &out),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_last_error_code(), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(cudaipc_last_error(), "not a multiple of the uint32 item size"), nullptr)
      << cudaipc_last_error();
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(ch.held(), 1u);  // the frame's own hold only
  cudaipc_frame_release(f);
  EXPECT_EQ(ch.held(), 0u);
}

TEST(CApiDlpack, PublishedTensorsLandAndAreHandedBackOnce) {
  Channel ch(2);
  TestTensor a(7, kRows, kCols);
  cudaipc_publish r = CUDAIPC_PUBLISHED;
  // No format yet: nothing is taken.
  ASSERT_EQ(cudaipc_producer_publish_dlpack(ch.p, &a.versioned, CUDAIPC_DLPACK_VERSIONED, nullptr,
                                            nullptr, &r),
            CUDAIPC_OK)
      << cudaipc_last_error();
  EXPECT_EQ(r, CUDAIPC_NEEDS_FORMAT);
  EXPECT_EQ(a.deleted, 0);
  cudaipc_tensor described{};
  int32_t type = 0, id = -1;
  ASSERT_EQ(cudaipc_dlpack_describe(&a.versioned, CUDAIPC_DLPACK_VERSIONED, &described, &type, &id),
            CUDAIPC_OK);
  const cudaipc_tensor want = u32_tensor(kRows, kCols);
  EXPECT_EQ(std::memcmp(&described, &want, sizeof want), 0);
  EXPECT_EQ(type, CUDAIPC_DL_CPU);
  EXPECT_EQ(id, 0);
  ch.format(described);

  cudaipc_frame_info info{42, CUDAIPC_NO_TIME, 5, 0, nullptr, nullptr, 0, nullptr, 0};
  ASSERT_EQ(cudaipc_producer_publish_dlpack(ch.p, &a.versioned, CUDAIPC_DLPACK_VERSIONED, nullptr,
                                            &info, &r),
            CUDAIPC_OK)
      << cudaipc_last_error();
  EXPECT_EQ(r, CUDAIPC_PUBLISHED);
  EXPECT_EQ(a.deleted, 1);  // host memory: copied before publish returned
  EXPECT_EQ(cudaipc_producer_written(ch.p, cudaipc_producer_last_seq(ch.p)), 1);
  cudaipc_frame_view view;
  cudaipc_frame* f = ch.next(&view);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(view.pts, 42u);
  EXPECT_EQ(view.duration, 5u);
  EXPECT_EQ(check_pattern(reinterpret_cast<const void*>(view.data), a.data.size() * 4, 7),
            a.data.size() * 4);
  cudaipc_frame_release(f);

  // The legacy struct, and a drop: handed back at once too.
  TestTensor b(8, kRows, kCols);
  ASSERT_EQ(cudaipc_producer_publish_dlpack(ch.p, &b.legacy, 0, nullptr, nullptr, &r), CUDAIPC_OK);
  EXPECT_EQ(r, CUDAIPC_PUBLISHED);
  TestTensor c(9, kRows, kCols);
  ASSERT_EQ(cudaipc_producer_publish_dlpack(ch.p, &c.legacy, 0, nullptr, nullptr, &r), CUDAIPC_OK);
  EXPECT_EQ(r, CUDAIPC_PUBLISHED);
  TestTensor d(10, kRows, kCols);  // both slots unread by the every-frame consumer: dropped
  ASSERT_EQ(cudaipc_producer_publish_dlpack(ch.p, &d.legacy, 0, nullptr, nullptr, &r), CUDAIPC_OK);
  EXPECT_EQ(r, CUDAIPC_DROPPED);
  EXPECT_EQ(b.deleted + c.deleted + d.deleted, 3);
  for (std::uint64_t key : {8, 9}) {
    cudaipc_frame* g = ch.next(&view);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(check_pattern(reinterpret_cast<const void*>(view.data), b.data.size() * 4, key),
              b.data.size() * 4);
    cudaipc_frame_release(g);
  }
  EXPECT_EQ(a.deleted, 1);
}

TEST(CApiDlpack, PublishRefusesWhatItCannotCopyAndLeavesItToTheCaller) {
  Channel ch;
  ch.format(u32_tensor(kRows, kCols));
  TestTensor t(1, kRows, kCols);
  cudaipc_publish r = CUDAIPC_PUBLISHED;

  t.strides[0] = 1;  // column-major: not C-contiguous
  t.strides[1] = kRows;
  EXPECT_EQ(cudaipc_producer_publish_dlpack(ch.p, &t.versioned, CUDAIPC_DLPACK_VERSIONED, nullptr,
                                            nullptr, &r),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(cudaipc_last_error(), "C-contiguous"), nullptr) << cudaipc_last_error();
  t.strides[0] = kCols;
  t.strides[1] = 1;

  t.versioned.dl_tensor.device = {CUDAIPC_DL_CUDA, 0};
  EXPECT_EQ(cudaipc_producer_publish_dlpack(ch.p, &t.versioned, CUDAIPC_DLPACK_VERSIONED, nullptr,
                                            nullptr, &r),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(cudaipc_last_error(), "host-memory channel"), nullptr)
      << cudaipc_last_error();
  t.versioned.dl_tensor.device = {CUDAIPC_DL_CPU, 0};

  t.versioned.dl_tensor.dtype = {2, 8, 1};  // float8: not a cudaipc dtype
  EXPECT_EQ(cudaipc_producer_publish_dlpack(ch.p, &t.versioned, CUDAIPC_DLPACK_VERSIONED, nullptr,
                                            nullptr, &r),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(cudaipc_last_error(), "not one cudaipc carries"), nullptr);
  t.versioned.dl_tensor.dtype = {1, 32, 1};

  t.versioned.version.major = 2;
  EXPECT_EQ(cudaipc_producer_publish_dlpack(ch.p, &t.versioned, CUDAIPC_DLPACK_VERSIONED, nullptr,
                                            nullptr, &r),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(cudaipc_last_error(), "DLPack version 2"), nullptr);
  EXPECT_EQ(t.deleted, 0);  // every refusal left the tensor to its owner
  EXPECT_EQ(cudaipc_producer_publish_dlpack(nullptr, &t.versioned, 0, nullptr, nullptr, &r),
            CUDAIPC_ERR_INVALID_ARGUMENT);
}

TEST(CApiDlpack, BorrowedSlotExportsAsAWritableTensor) {
  Channel ch;
  ch.format(u32_tensor(kRows, kCols));
  const std::uint64_t bytes = kRows * kCols * 4;
  void* out = nullptr;
  EXPECT_EQ(cudaipc_producer_slot_dlpack(ch.p, nullptr, CUDAIPC_DLPACK_VERSIONED, &out),
            CUDAIPC_ERR_INVALID_ARGUMENT);  // nothing borrowed
  const std::uint64_t alive0 = cudaipc_dlpack_exports_alive();
  for (std::uint64_t seq = 1; seq <= 3; ++seq) {
    uintptr_t addr = 0;
    uint64_t capacity = 0;
    cudaipc_publish r;
    ASSERT_EQ(cudaipc_producer_begin(ch.p, &addr, &capacity, &r), CUDAIPC_OK);
    ASSERT_EQ(cudaipc_producer_slot_dlpack(ch.p, nullptr, CUDAIPC_DLPACK_VERSIONED, &out),
              CUDAIPC_OK)
        << cudaipc_last_error();
    auto* v = static_cast<cudaipc_dl_managed_tensor_versioned*>(out);
    EXPECT_EQ(v->flags & CUDAIPC_DL_FLAG_READ_ONLY, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v->dl_tensor.data), addr);
    EXPECT_EQ(v->dl_tensor.shape[1], kCols);
    fill_pattern(v->dl_tensor.data, bytes, 100 + seq);
    delete_tensor<cudaipc_dl_managed_tensor_versioned>(out);
    cudaipc_frame_info info{seq, CUDAIPC_NO_TIME, CUDAIPC_NO_TIME, 0, nullptr, nullptr, 0, nullptr,
                            0};
    ASSERT_EQ(cudaipc_producer_commit(ch.p, &info), CUDAIPC_OK) << cudaipc_last_error();
    cudaipc_frame_view view;
    cudaipc_frame* f = ch.next(&view);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(view.pts, seq);
    EXPECT_EQ(check_pattern(reinterpret_cast<const void*>(view.data), bytes, 100 + seq), bytes);
    cudaipc_frame_release(f);
  }
  EXPECT_EQ(cudaipc_dlpack_exports_alive(), alive0);
}

TEST(CApiDlpack, TensorIdChangesWithTheTensorDescription) {
  Channel ch;
  ch.format(u32_tensor(kRows, kCols));
  ch.publish(1, kRows * kCols * 4);
  ch.publish(2, kRows * kCols * 4);
  cudaipc_frame_view v1, v2, v3;
  cudaipc_frame* f = ch.next(&v1);
  cudaipc_frame_release(f);
  f = ch.next(&v2);
  cudaipc_frame_release(f);
  EXPECT_EQ(v1.tensor_id, v2.tensor_id);
  ch.format(u32_tensor(kCols, kRows));
  ch.publish(3, kRows * kCols * 4);
  f = ch.next(&v3);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(v3.tensor_id, v2.tensor_id);
  EXPECT_EQ(cudaipc_frame_tensor(f)->shape[0], kCols);
  cudaipc_frame_release(f);
}

TEST(CApiDlpack, CapsuleCallsNeedTheCapsuleApi) {
  // Without a runtime the capsule calls cannot make objects; they refuse instead of guessing.
  cudaipc_tensor out{};
  EXPECT_EQ(cudaipc_capsule_describe(nullptr, &out, nullptr, nullptr),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(cudaipc_last_error(), "cudaipc_set_capsule_api"), nullptr);
  cudaipc_capsule_api api{};
  EXPECT_EQ(cudaipc_set_capsule_api(&api), CUDAIPC_ERR_INVALID_ARGUMENT);
}

// A slot's view is made once and shows every frame that slot carries, holds no lease (the frames
// come and go around it), keeps its set mapped past the consumer's end, and leaves nothing once
// deleted.
TEST(CApiDlpack, SlotViewsShowEachFrameOfTheirSlotAndHoldNoLease) {
  constexpr std::uint32_t kSlots = 2;
  const std::uint64_t bytes = kRows * kCols * 4;
  const std::uint64_t views0 = cudaipc_dlpack_views_alive();
  const std::uint64_t exports0 = cudaipc_dlpack_exports_alive();
  void* views[kSlots] = {};
  const void* set0 = nullptr;
  {
    Channel ch(kSlots);
    ch.format(u32_tensor(kRows, kCols));
    for (std::uint64_t seq = 1; seq <= 12; ++seq) {
      ch.publish(seq, bytes);
      cudaipc_frame_view fv;
      cudaipc_frame* f = ch.next(&fv);
      ASSERT_NE(f, nullptr);
      std::uint32_t slot = 99;
      const void* set = nullptr;
      ASSERT_EQ(cudaipc_frame_slot(f, &slot, &set), CUDAIPC_OK) << cudaipc_last_error();
      ASSERT_LT(slot, kSlots);
      if (!set0) set0 = set;
      EXPECT_EQ(set, set0) << "frame " << seq;  // one format, one set
      if (!views[slot]) {
        ASSERT_EQ(cudaipc_frame_slot_view(f, CUDAIPC_DLPACK_VERSIONED, &views[slot]), CUDAIPC_OK)
            << cudaipc_last_error();
      }
      auto* v = static_cast<cudaipc_dl_managed_tensor_versioned*>(views[slot]);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v->dl_tensor.data), fv.data) << "frame " << seq;
      EXPECT_EQ(v->dl_tensor.shape[0], kRows);
      EXPECT_EQ(v->dl_tensor.strides[0], kCols);  // elements
      EXPECT_EQ(v->flags & CUDAIPC_DL_FLAG_READ_ONLY, CUDAIPC_DL_FLAG_READ_ONLY);
      EXPECT_EQ(check_pattern(v->dl_tensor.data, bytes, seq), bytes) << "frame " << seq;
      EXPECT_EQ(cudaipc_frame_order_release(f, nullptr), CUDAIPC_OK);  // host: nothing to order
      EXPECT_EQ(cudaipc_frame_order_release_event(f, nullptr), CUDAIPC_OK);  // nor after an event
      cudaipc_frame_release(f);
      EXPECT_EQ(ch.held(), 0u) << "a view holds no lease, frame " << seq;
    }
    EXPECT_EQ(cudaipc_dlpack_views_alive(), views0 + kSlots);
    EXPECT_EQ(cudaipc_dlpack_exports_alive(), exports0);
    // The last frame (12) was in a slot whose view still reads it after the channel goes.
  }
  for (void* view : views) {
    auto* v = static_cast<cudaipc_dl_managed_tensor_versioned*>(view);
    const std::uint64_t found = check_pattern(v->dl_tensor.data, bytes, 12);
    const std::uint64_t older = check_pattern(v->dl_tensor.data, bytes, 11);
    EXPECT_TRUE(found == bytes || older == bytes) << "the set stays mapped while a view lives";
    delete_tensor<cudaipc_dl_managed_tensor_versioned>(view);
  }
  EXPECT_EQ(cudaipc_dlpack_views_alive(), views0);
}

TEST(CApiDlpack, SlotViewCallsRefuseNullArguments) {
  std::uint32_t slot = 0;
  const void* set = nullptr;
  void* out = nullptr;
  EXPECT_EQ(cudaipc_frame_slot(nullptr, &slot, &set), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_frame_slot_view(nullptr, 0, &out), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_frame_order_release(nullptr, nullptr), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_frame_order_release_event(nullptr, nullptr), CUDAIPC_ERR_INVALID_ARGUMENT);
  Channel ch;
  ch.format(u32_tensor(kRows, kCols));
  ch.publish(1, kRows * kCols * 4);
  cudaipc_frame* f = ch.next();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(cudaipc_frame_slot(f, nullptr, &set), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_frame_slot_view(f, 0, nullptr), CUDAIPC_ERR_INVALID_ARGUMENT);
  cudaipc_frame_release(f);
}

// Memory the caller owns as a DLPack tensor: described as given (strides in elements, read-only
// when asked), published by copy like any tensor, and `done` told exactly once, when the tensor is
// deleted (by the publish's copy here). What cannot be a DLPack tensor is refused, `done` untold.
TEST(CApiDlpack, WrappedMemoryIsDescribedPublishedAndHandedBackOnce) {
  Channel ch(4);
  const cudaipc_tensor t = u32_tensor(kRows, kCols);
  ch.format(t);
  int done = 0;
  auto count = [](void* ctx) { ++*static_cast<int*>(ctx); };
  for (uint32_t flags : {CUDAIPC_DLPACK_VERSIONED | CUDAIPC_DLPACK_READ_ONLY, 0u}) {
    const std::uint64_t key = 20 + flags;
    std::vector<std::uint32_t> data(static_cast<std::size_t>(kRows * kCols));
    fill_pattern(data.data(), data.size() * 4, key);
    void* m = nullptr;
    ASSERT_EQ(cudaipc_dlpack_wrap(&t, data.data(), {CUDAIPC_DL_CPU, 0}, flags, count, &done, &m),
              CUDAIPC_OK)
        << cudaipc_last_error();
    EXPECT_EQ(cudaipc_dlpack_wrapped_alive(), 1u);
    const bool versioned = flags & CUDAIPC_DLPACK_VERSIONED;
    const cudaipc_dl_tensor& dl =
        versioned ? static_cast<cudaipc_dl_managed_tensor_versioned*>(m)->dl_tensor
                  : static_cast<cudaipc_dl_managed_tensor*>(m)->dl_tensor;
    EXPECT_EQ(dl.data, data.data());
    EXPECT_EQ(dl.ndim, 2);
    EXPECT_EQ(dl.shape[0], kRows);
    EXPECT_EQ(dl.shape[1], kCols);
    EXPECT_EQ(dl.strides[0], kCols);
    EXPECT_EQ(dl.strides[1], 1);
    EXPECT_EQ(dl.dtype.code, 1);
    EXPECT_EQ(dl.dtype.bits, 32);
    if (versioned) {
      EXPECT_EQ(static_cast<cudaipc_dl_managed_tensor_versioned*>(m)->flags,
                CUDAIPC_DL_FLAG_READ_ONLY);
    }
    cudaipc_publish r = CUDAIPC_DROPPED;
    ASSERT_EQ(cudaipc_producer_publish_dlpack(ch.p, m, flags, nullptr, nullptr, &r), CUDAIPC_OK)
        << cudaipc_last_error();
    EXPECT_EQ(r, CUDAIPC_PUBLISHED);
    EXPECT_EQ(done, versioned ? 1 : 2);  // host memory: copied and handed back before it returned
    EXPECT_EQ(cudaipc_dlpack_wrapped_alive(), 0u);
    cudaipc_frame_view view;
    cudaipc_frame* f = ch.next(&view);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(check_pattern(reinterpret_cast<const void*>(view.data), data.size() * 4, key),
              data.size() * 4);
    cudaipc_frame_release(f);
  }
  // Strides DLPack cannot count in elements, a dtype it has no code for: refused, nothing made.
  cudaipc_tensor odd = t;
  odd.strides[0] = kCols * 4 + 2;
  std::vector<std::uint32_t> data(static_cast<std::size_t>(kRows * (kCols + 1)));
  void* m = nullptr;
  EXPECT_EQ(cudaipc_dlpack_wrap(&odd, data.data(), {CUDAIPC_DL_CPU, 0}, 0, count, &done, &m),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("not a multiple"), std::string::npos)
      << cudaipc_last_error();
  cudaipc_tensor negative = t;
  negative.shape[1] = -1;
  EXPECT_EQ(cudaipc_dlpack_wrap(&negative, data.data(), {CUDAIPC_DL_CPU, 0}, 0, count, &done, &m),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  cudaipc_tensor bad = t;
  bad.dtype = 99;
  EXPECT_EQ(cudaipc_dlpack_wrap(&bad, data.data(), {CUDAIPC_DL_CPU, 0}, 0, count, &done, &m),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_dlpack_wrap(nullptr, data.data(), {CUDAIPC_DL_CPU, 0}, 0, count, &done, &m),
            CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(done, 2);
  EXPECT_EQ(cudaipc_dlpack_wrapped_alive(), 0u);
}

// A frame copied into host memory (host channels: the slot's bytes, the CUDA side in the GPU
// suites): whole or its first bytes, never more than it has, never once released.
TEST(CApiDlpack, FramesCopyToTheHost) {
  Channel ch(4);
  ch.format(u32_tensor(kRows, kCols));
  const std::uint64_t bytes = kRows * kCols * 4;
  ch.publish(31, bytes);
  cudaipc_frame* f = ch.next();
  ASSERT_NE(f, nullptr);
  std::vector<std::uint8_t> out(bytes + 16, 0xAB);
  ASSERT_EQ(cudaipc_frame_copy_to_host(f, out.data(), bytes), CUDAIPC_OK) << cudaipc_last_error();
  EXPECT_EQ(check_pattern(out.data(), bytes, 31), bytes);
  EXPECT_EQ(out[bytes], 0xAB);  // not a byte past it
  std::vector<std::uint8_t> part(8, 0);
  ASSERT_EQ(cudaipc_frame_copy_to_host(f, part.data(), 8), CUDAIPC_OK);
  EXPECT_EQ(std::memcmp(part.data(), out.data(), 8), 0);
  EXPECT_EQ(cudaipc_frame_copy_to_host(f, out.data(), bytes + 1), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("from a frame of"), std::string::npos)
      << cudaipc_last_error();
  EXPECT_EQ(cudaipc_frame_copy_to_host(f, nullptr, bytes), CUDAIPC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_frame_copy_to_host(nullptr, out.data(), bytes), CUDAIPC_ERR_INVALID_ARGUMENT);
  // A hold of its own (a binding's, around a copy without its lock): the frame stays until both
  // holds are released, in either order.
  ASSERT_EQ(cudaipc_frame_retain(f), CUDAIPC_OK);
  cudaipc_frame_release(f);
  EXPECT_EQ(ch.held(), 1u);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_EQ(cudaipc_frame_copy_to_host(f, out.data(), bytes), CUDAIPC_OK) << cudaipc_last_error();
  EXPECT_EQ(check_pattern(out.data(), bytes, 31), bytes);
  cudaipc_frame_release(f);
  EXPECT_EQ(ch.held(), 0u);
  EXPECT_EQ(cudaipc_frame_retain(nullptr), CUDAIPC_ERR_INVALID_ARGUMENT);
}
