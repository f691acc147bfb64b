// Caps ⇄ tensor mapping (gst/caps_tensor.h) without loading the plugin: every supported video
// format and tensor dtype, the wire round trip, and malformed input from either side.
#include "format/caps_tensor.h"
#include "format/peer_text.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace cudaipc::gst {
namespace {

class GstEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { gst_init(nullptr, nullptr); }
};

// gtest_main owns main(); a registered environment is how gst_init runs before any test.
[[maybe_unused]] ::testing::Environment* const kGstEnvironment =
    ::testing::AddGlobalTestEnvironment(new GstEnvironment);

struct CapsUnref {
  void operator()(GstCaps* c) const { gst_caps_unref(c); }
};
using CapsPtr = std::unique_ptr<GstCaps, CapsUnref>;

struct BufferUnref {
  void operator()(GstBuffer* b) const { gst_buffer_unref(b); }
};
using BufferPtr = std::unique_ptr<GstBuffer, BufferUnref>;

CapsPtr caps_of(const std::string& text) {
  GstCaps* caps = gst_caps_from_string(text.c_str());
  EXPECT_NE(caps, nullptr) << text;
  return CapsPtr(caps);
}

std::string to_text(const GstCaps* caps) {
  gchar* s = gst_caps_to_string(caps);
  std::string text = s;
  g_free(s);
  return text;
}

CapsPtr without_features(const GstCaps* caps) {
  GstCaps* copy = gst_caps_copy(caps);
  for (guint i = 0; i < gst_caps_get_size(copy); ++i) gst_caps_set_features(copy, i, nullptr);
  return CapsPtr(copy);
}

bool has_cuda_feature(const GstCaps* caps, guint index) {
  const GstCapsFeatures* f = gst_caps_get_features(caps, index);
  return f && gst_caps_features_contains(f, kCudaMemoryFeature) &&
         gst_caps_features_get_size(f) == 1;
}

bool is_system_memory(const GstCaps* caps, guint index) {
  const GstCapsFeatures* f = gst_caps_get_features(caps, index);
  return !f || gst_caps_features_is_equal(f, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY);
}

std::vector<std::int64_t> shape_of(const TensorDesc& t) {
  return std::vector<std::int64_t>(t.shape, t.shape + t.rank);
}
std::vector<std::int64_t> strides_of(const TensorDesc& t) {
  return std::vector<std::int64_t>(t.strides, t.strides + t.rank);
}

// ---------------------------------------------------------------------------------------------
// Video formats, described independently of GStreamer's tables.

enum class Shape { packed, planar, flat };

struct PlaneSpec {
  int w_sub;  // width divisor (chroma subsampling), rounded up
  int h_sub;
  int bytes_per_pixel;
};

struct FormatSpec {
  const char* name;
  DType dtype;
  Shape shape;
  int channels;  // packed: innermost dimension
  std::vector<PlaneSpec> planes;
};

const std::vector<FormatSpec>& format_specs() {
  static const std::vector<FormatSpec> specs = {
      {"RGBA", DType::uint8, Shape::packed, 4, {{1, 1, 4}}},
      {"BGRA", DType::uint8, Shape::packed, 4, {{1, 1, 4}}},
      {"RGBx", DType::uint8, Shape::packed, 4, {{1, 1, 4}}},
      {"BGRx", DType::uint8, Shape::packed, 4, {{1, 1, 4}}},
      {"RGB", DType::uint8, Shape::packed, 3, {{1, 1, 3}}},
      {"BGR", DType::uint8, Shape::packed, 3, {{1, 1, 3}}},
      {"RGBP", DType::uint8, Shape::planar, 0, {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}}},
      {"BGRP", DType::uint8, Shape::planar, 0, {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}}},
      {"GRAY8", DType::uint8, Shape::flat, 0, {{1, 1, 1}}},
      {"GRAY16_LE", DType::uint16, Shape::flat, 0, {{1, 1, 2}}},
      {"NV12", DType::uint8, Shape::flat, 0, {{1, 1, 1}, {2, 2, 2}}},
      {"I420", DType::uint8, Shape::flat, 0, {{1, 1, 1}, {2, 2, 1}, {2, 2, 1}}},
      {"P010_10LE", DType::uint16, Shape::flat, 0, {{1, 1, 2}, {2, 2, 4}}},
  };
  return specs;
}

std::uint64_t plane_rows(const PlaneSpec& p, int height) {
  return static_cast<std::uint64_t>((height + p.h_sub - 1) / p.h_sub);
}
std::uint64_t plane_row_bytes(const PlaneSpec& p, int width) {
  return static_cast<std::uint64_t>((width + p.w_sub - 1) / p.w_sub * p.bytes_per_pixel);
}

std::string video_caps_text(const char* format, int w, int h, bool cuda) {
  return std::string("video/x-raw") + (cuda ? "(memory:CUDAMemory)" : "") + ", format=(string)" +
         format + ", width=(int)" + std::to_string(w) + ", height=(int)" + std::to_string(h) +
         ", framerate=(fraction)30000/1001";
}

// The tensor the header promises for `spec`, given plane offsets and pitches.
TensorDesc expected_video(const FormatSpec& spec, int w, int h,
                          const std::vector<std::uint64_t>& offsets,
                          const std::vector<std::int64_t>& pitches) {
  TensorDesc t{};
  t.dtype = spec.dtype;
  t.num_planes = static_cast<std::uint32_t>(spec.planes.size());
  t.byte_offset = offsets[0];
  std::uint64_t end = 0;
  for (std::size_t p = 0; p < spec.planes.size(); ++p) {
    t.planes[p] = {offsets[p], static_cast<std::uint64_t>(pitches[p])};
    std::uint64_t e = offsets[p] +
                      static_cast<std::uint64_t>(pitches[p]) * (plane_rows(spec.planes[p], h) - 1) +
                      plane_row_bytes(spec.planes[p], w);
    end = std::max(end, e);
  }
  t.size = end - t.byte_offset;
  const std::int64_t elem = spec.dtype == DType::uint16 ? 2 : 1;
  std::vector<std::int64_t> shape, strides;
  if (spec.shape == Shape::packed) {
    shape = {h, w, spec.channels};
    strides = {pitches[0], spec.channels, 1};
  } else if (spec.shape == Shape::planar && offsets[1] - offsets[0] == offsets[2] - offsets[1] &&
             offsets[1] > offsets[0] && pitches[0] == pitches[1] && pitches[1] == pitches[2]) {
    shape = {3, h, w};
    strides = {static_cast<std::int64_t>(offsets[1] - offsets[0]), pitches[0], 1};
  } else {
    shape = {h, w};
    strides = {pitches[0], elem};
  }
  t.rank = static_cast<std::uint32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), t.shape);
  std::copy(strides.begin(), strides.end(), t.strides);
  return t;
}

void expect_tensor_eq(const TensorDesc& got, const TensorDesc& want) {
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(shape_of(got), shape_of(want));
  EXPECT_EQ(strides_of(got), strides_of(want));
  EXPECT_EQ(got.byte_offset, want.byte_offset);
  EXPECT_EQ(got.size, want.size);
  ASSERT_EQ(got.num_planes, want.num_planes);
  for (std::uint32_t p = 0; p < want.num_planes; ++p) {
    EXPECT_EQ(got.planes[p].offset, want.planes[p].offset) << "plane " << p;
    EXPECT_EQ(got.planes[p].pitch, want.planes[p].pitch) << "plane " << p;
  }
  EXPECT_TRUE(got == want);
}

struct VideoCase {
  const FormatSpec* spec;
  int width;
  int height;
};

std::vector<VideoCase> video_cases() {
  std::vector<VideoCase> cases;
  for (const auto& spec : format_specs())
    for (auto [w, h] : {std::pair{64, 48}, std::pair{320, 240}, std::pair{33, 17}})
      cases.push_back({&spec, w, h});
  return cases;
}

class VideoFormatTest : public ::testing::TestWithParam<VideoCase> {
 protected:
  void SetUp() override {
    const auto& c = GetParam();
    caps_ = caps_of(video_caps_text(c.spec->name, c.width, c.height, false));
    std::string error;
    ASSERT_TRUE(parse_caps(caps_.get(), &parsed_, &error)) << error;
  }
  const FormatSpec& spec() const { return *GetParam().spec; }
  int w() const { return GetParam().width; }
  int h() const { return GetParam().height; }

  // A buffer whose planes sit at padded offsets and pitches, none of them GStreamer's defaults.
  void make_padded_buffer(std::vector<std::uint64_t>* offsets, std::vector<std::int64_t>* pitches,
                          gsize* size) {
    std::uint64_t offset = 128;
    std::uint64_t end = 0;
    gsize meta_offsets[GST_VIDEO_MAX_PLANES] = {};
    gint meta_strides[GST_VIDEO_MAX_PLANES] = {};
    for (std::size_t p = 0; p < spec().planes.size(); ++p) {
      const auto row = plane_row_bytes(spec().planes[p], w());
      const auto pitch = static_cast<std::int64_t>((row + 63) / 64 * 64 + 64);
      offsets->push_back(offset);
      pitches->push_back(pitch);
      meta_offsets[p] = offset;
      meta_strides[p] = static_cast<gint>(pitch);
      end = offset + static_cast<std::uint64_t>(pitch) * plane_rows(spec().planes[p], h());
      offset = end + 256;
    }
    *size = end + 100;
    buffer_.reset(gst_buffer_new_allocate(nullptr, *size, nullptr));
    ASSERT_NE(gst_buffer_add_video_meta_full(
                  buffer_.get(), GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&parsed_.video),
                  static_cast<guint>(w()), static_cast<guint>(h()),
                  static_cast<guint>(spec().planes.size()), meta_offsets, meta_strides),
              nullptr);
  }

  CapsPtr caps_;
  StreamCaps parsed_;
  BufferPtr buffer_;
};

TEST_P(VideoFormatTest, ParsesCaps) {
  EXPECT_EQ(parsed_.kind, MediaKind::video);
  EXPECT_FALSE(parsed_.cuda_memory);
  EXPECT_STREQ(gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&parsed_.video)), spec().name);
  EXPECT_EQ(GST_VIDEO_INFO_WIDTH(&parsed_.video), w());
  EXPECT_EQ(GST_VIDEO_INFO_HEIGHT(&parsed_.video), h());
  EXPECT_EQ(parsed_.fps_n, 30000);
  EXPECT_EQ(parsed_.fps_d, 1001);

  StreamCaps cuda;
  std::string error;
  auto cuda_caps = caps_of(video_caps_text(spec().name, w(), h(), true));
  ASSERT_TRUE(parse_caps(cuda_caps.get(), &cuda, &error)) << error;
  EXPECT_TRUE(cuda.cuda_memory);
  EXPECT_TRUE(gst_video_info_is_equal(&cuda.video, &parsed_.video));
}

TEST_P(VideoFormatTest, DefaultLayout) {
  const GstVideoInfo& info = parsed_.video;
  ASSERT_EQ(GST_VIDEO_INFO_N_PLANES(&info), spec().planes.size());
  std::vector<std::uint64_t> offsets;
  std::vector<std::int64_t> pitches;
  for (std::size_t p = 0; p < spec().planes.size(); ++p) {
    offsets.push_back(GST_VIDEO_INFO_PLANE_OFFSET(&info, p));
    pitches.push_back(GST_VIDEO_INFO_PLANE_STRIDE(&info, p));
    // GStreamer's default pitch: the row rounded up to 4 bytes.
    EXPECT_EQ(static_cast<std::uint64_t>(pitches[p]),
              (plane_row_bytes(spec().planes[p], w()) + 3) / 4 * 4)
        << "plane " << p;
  }
  TensorDesc t{};
  std::string error;
  ASSERT_TRUE(video_tensor(info, nullptr, GST_VIDEO_INFO_SIZE(&info), &t, &error)) << error;
  const TensorDesc want = expected_video(spec(), w(), h(), offsets, pitches);
  expect_tensor_eq(t, want);
  EXPECT_EQ(t.byte_offset, 0u);
  EXPECT_LE(t.size, GST_VIDEO_INFO_SIZE(&info));
  if (spec().shape == Shape::planar) {
    EXPECT_EQ(t.rank, 3u);  // default planes are evenly spaced
  }

  // The last byte of the last plane is what the buffer must hold; one byte less is refused.
  ASSERT_TRUE(video_tensor(info, nullptr, t.size, &t, &error)) << error;
  error.clear();
  EXPECT_FALSE(video_tensor(info, nullptr, t.size - 1, &t, &error));
  EXPECT_NE(error.find("bytes"), std::string::npos) << error;
}

TEST_P(VideoFormatTest, PaddedMetaLayout) {
  std::vector<std::uint64_t> offsets;
  std::vector<std::int64_t> pitches;
  gsize size = 0;
  make_padded_buffer(&offsets, &pitches, &size);
  const GstVideoMeta* meta = gst_buffer_get_video_meta(buffer_.get());
  ASSERT_NE(meta, nullptr);
  TensorDesc t{};
  std::string error;
  ASSERT_TRUE(video_tensor(parsed_.video, meta, gst_buffer_get_size(buffer_.get()), &t, &error))
      << error;
  const TensorDesc want = expected_video(spec(), w(), h(), offsets, pitches);
  expect_tensor_eq(t, want);
  EXPECT_EQ(t.byte_offset, 128u);
  if (spec().shape == Shape::planar) {
    EXPECT_EQ(t.rank, 3u);
    EXPECT_EQ(t.strides[0], static_cast<std::int64_t>(offsets[1] - offsets[0]));
  }

  const std::uint64_t end = t.byte_offset + t.size;
  EXPECT_TRUE(video_tensor(parsed_.video, meta, end, &t, &error)) << error;
  error.clear();
  EXPECT_FALSE(video_tensor(parsed_.video, meta, end - 1, &t, &error));
  EXPECT_NE(error.find("plane"), std::string::npos) << error;
}

TEST_P(VideoFormatTest, WireRoundTrip) {
  for (bool cuda : {false, true}) {
    SCOPED_TRACE(cuda ? "CUDA" : "system memory");
    auto caps = caps_of(video_caps_text(spec().name, w(), h(), cuda));
    const std::string text = wire_caps(caps.get());
    EXPECT_EQ(text.find("memory:"), std::string::npos) << text;

    for (bool padded : {false, true}) {
      SCOPED_TRACE(padded ? "padded meta" : "default layout");
      TensorDesc tensor{};
      std::string error;
      if (padded) {
        std::vector<std::uint64_t> offsets;
        std::vector<std::int64_t> pitches;
        gsize size = 0;
        make_padded_buffer(&offsets, &pitches, &size);
        ASSERT_TRUE(video_tensor(parsed_.video, gst_buffer_get_video_meta(buffer_.get()), size,
                                 &tensor, &error))
            << error;
      } else {
        ASSERT_TRUE(video_tensor(parsed_.video, nullptr, GST_VIDEO_INFO_SIZE(&parsed_.video),
                                 &tensor, &error))
            << error;
      }
      GstVideoInfo video;
      gst_video_info_init(&video);
      CapsPtr out(caps_from_wire(text, tensor, cuda, &video, &error));
      ASSERT_NE(out, nullptr) << error;
      ASSERT_EQ(gst_caps_get_size(out.get()), 1u);
      EXPECT_EQ(has_cuda_feature(out.get(), 0), cuda);
      EXPECT_EQ(is_system_memory(out.get(), 0), !cuda);
      EXPECT_TRUE(gst_caps_is_equal(out.get(), caps.get()))
          << to_text(out.get()) << " vs " << to_text(caps.get());
      EXPECT_TRUE(
          gst_caps_is_equal(without_features(out.get()).get(), without_features(caps.get()).get()));
      EXPECT_TRUE(gst_video_info_is_equal(&video, &parsed_.video));
      CapsPtr templ(template_caps());
      EXPECT_TRUE(gst_caps_is_subset(out.get(), templ.get())) << to_text(out.get());
    }
  }
}

std::string video_case_name(const ::testing::TestParamInfo<VideoCase>& info) {
  return std::string(info.param.spec->name) + "_" + std::to_string(info.param.width) + "x" +
         std::to_string(info.param.height);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, VideoFormatTest, ::testing::ValuesIn(video_cases()),
                         video_case_name);

// ---------------------------------------------------------------------------------------------
// Planar RGB falls back to its first plane when one stride cannot step between planes.

GstVideoInfo rgbp_info(int w, int h) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, GST_VIDEO_FORMAT_RGBP, static_cast<guint>(w),
                            static_cast<guint>(h));
  return info;
}

TensorDesc rgbp_with_meta(const gsize (&offsets)[3], const gint (&strides)[3], gsize size, bool* ok,
                          std::string* error) {
  BufferPtr buffer(gst_buffer_new_allocate(nullptr, size, nullptr));
  gsize o[GST_VIDEO_MAX_PLANES] = {offsets[0], offsets[1], offsets[2]};
  gint s[GST_VIDEO_MAX_PLANES] = {strides[0], strides[1], strides[2]};
  GstVideoMeta* meta = gst_buffer_add_video_meta_full(buffer.get(), GST_VIDEO_FRAME_FLAG_NONE,
                                                      GST_VIDEO_FORMAT_RGBP, 40, 10, 3, o, s);
  TensorDesc t{};
  GstVideoInfo info = rgbp_info(40, 10);
  *ok = video_tensor(info, meta, size, &t, error);
  return t;
}

TEST(PlanarRgb, UnevenSpacingGivesFirstPlane) {
  bool ok = false;
  std::string error;
  TensorDesc t = rgbp_with_meta({0, 400, 1000}, {40, 40, 40}, 1400, &ok, &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(shape_of(t), (std::vector<std::int64_t>{10, 40}));
  EXPECT_EQ(strides_of(t), (std::vector<std::int64_t>{40, 1}));
  EXPECT_EQ(t.size, 1000u + 40 * 9 + 40);
  ASSERT_EQ(t.num_planes, 3u);
  EXPECT_EQ(t.planes[2].offset, 1000u);
}

TEST(PlanarRgb, UnequalPitchGivesFirstPlane) {
  bool ok = false;
  std::string error;
  TensorDesc t = rgbp_with_meta({0, 640, 1280}, {40, 48, 40}, 1280 + 400, &ok, &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(shape_of(t), (std::vector<std::int64_t>{10, 40}));
  EXPECT_EQ(strides_of(t), (std::vector<std::int64_t>{40, 1}));
  EXPECT_EQ(t.size, 1280u + 40 * 9 + 40);
  EXPECT_EQ(t.planes[1].pitch, 48u);
}

TEST(PlanarRgb, EvenSpacingGivesThreePlanes) {
  bool ok = false;
  std::string error;
  TensorDesc t = rgbp_with_meta({64, 564, 1064}, {48, 48, 48}, 2000, &ok, &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(shape_of(t), (std::vector<std::int64_t>{3, 10, 40}));
  EXPECT_EQ(strides_of(t), (std::vector<std::int64_t>{500, 48, 1}));
  EXPECT_EQ(t.byte_offset, 64u);
  EXPECT_EQ(t.size, 1000u + 48 * 9 + 40);
}

// ---------------------------------------------------------------------------------------------
// video_tensor refusals.

struct MetaBuffer {
  BufferPtr buffer;
  GstVideoMeta* meta = nullptr;
};

MetaBuffer meta_buffer(GstVideoFormat format, guint w, guint h, guint n_planes,
                       std::vector<gsize> offsets, std::vector<gint> strides, gsize size) {
  MetaBuffer m;
  m.buffer.reset(gst_buffer_new_allocate(nullptr, size, nullptr));
  gsize o[GST_VIDEO_MAX_PLANES] = {};
  gint s[GST_VIDEO_MAX_PLANES] = {};
  for (std::size_t i = 0; i < offsets.size(); ++i) o[i] = offsets[i];
  for (std::size_t i = 0; i < strides.size(); ++i) s[i] = strides[i];
  m.meta = gst_buffer_add_video_meta_full(m.buffer.get(), GST_VIDEO_FRAME_FLAG_NONE, format, w, h,
                                          n_planes, o, s);
  return m;
}

void expect_video_tensor_fails(const GstVideoInfo& info, const GstVideoMeta* meta, gsize size,
                               const char* word) {
  TensorDesc t{};
  std::string error;
  EXPECT_FALSE(video_tensor(info, meta, size, &t, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_NE(error.find(word), std::string::npos) << error;
}

TEST(VideoTensor, RefusesMismatchedOrBrokenMeta) {
  GstVideoInfo nv12;
  gst_video_info_set_format(&nv12, GST_VIDEO_FORMAT_NV12, 64, 48);
  {
    auto m = meta_buffer(GST_VIDEO_FORMAT_I420, 64, 48, 3, {0, 3072, 3840}, {64, 32, 32}, 8192);
    expect_video_tensor_fails(nv12, m.meta, 8192, "I420");
  }
  {
    auto m = meta_buffer(GST_VIDEO_FORMAT_NV12, 64, 40, 2, {0, 3072}, {64, 64}, 8192);
    expect_video_tensor_fails(nv12, m.meta, 8192, "64x40");
  }
  {  // pitch shorter than a row
    auto m = meta_buffer(GST_VIDEO_FORMAT_NV12, 64, 48, 2, {0, 3072}, {32, 64}, 8192);
    expect_video_tensor_fails(nv12, m.meta, 8192, "pitch");
  }
  {  // negative pitch (bottom-up rows)
    auto m = meta_buffer(GST_VIDEO_FORMAT_NV12, 64, 48, 2, {3008, 3072}, {-64, 64}, 8192);
    expect_video_tensor_fails(nv12, m.meta, 8192, "pitch");
  }
  {  // chroma before luma
    auto m = meta_buffer(GST_VIDEO_FORMAT_NV12, 64, 48, 2, {2048, 0}, {64, 64}, 8192);
    expect_video_tensor_fails(nv12, m.meta, 8192, "before plane 0");
  }
  {  // luma plane past the buffer's end
    auto m = meta_buffer(GST_VIDEO_FORMAT_NV12, 64, 48, 2, {0, 3072}, {64, 64}, 8192);
    expect_video_tensor_fails(nv12, m.meta, 4000, "plane 1");
  }
  {  // an offset near 2^64 must not wrap around
    auto m = meta_buffer(GST_VIDEO_FORMAT_NV12, 64, 48, 2, {0, G_MAXSIZE - 10}, {64, 64}, 8192);
    expect_video_tensor_fails(nv12, m.meta, 8192, "plane 1");
  }
}

TEST(VideoTensor, RefusesUnsupportedFormat) {
  GstVideoInfo yuy2;
  gst_video_info_set_format(&yuy2, GST_VIDEO_FORMAT_YUY2, 64, 48);
  expect_video_tensor_fails(yuy2, nullptr, GST_VIDEO_INFO_SIZE(&yuy2), "YUY2");
}

// ---------------------------------------------------------------------------------------------
// Tensors.

const DType kAllDTypes[] = {
    DType::int8,    DType::int16,    DType::int32,   DType::int64,   DType::uint8,
    DType::uint16,  DType::uint32,   DType::uint64,  DType::float16, DType::float32,
    DType::float64, DType::bfloat16, DType::boolean,
};

std::size_t elem_size(DType t) {
  switch (t) {
    case DType::int8:
    case DType::uint8:
    case DType::boolean:
      return 1;
    case DType::int16:
    case DType::uint16:
    case DType::float16:
    case DType::bfloat16:
      return 2;
    case DType::int32:
    case DType::uint32:
    case DType::float32:
      return 4;
    case DType::int64:
    case DType::uint64:
    case DType::float64:
      return 8;
    default:
      return 0;
  }
}

std::string tensor_caps_text(const std::string& types, const std::string& dims, bool cuda,
                             const std::string& extra = "") {
  return std::string("other/tensors") + (cuda ? "(memory:CUDAMemory)" : "") +
         ", format=(string)static, num_tensors=(int)1, types=(string)" + types +
         ", dimensions=(string)" + dims + ", framerate=(fraction)15/1" + extra;
}

TEST(Tensors, EveryDTypeAndRank) {
  const std::int64_t inner_first[] = {3, 5, 7, 2, 4, 6, 9, 10};
  for (DType dtype : kAllDTypes) {
    for (std::uint32_t rank = 1; rank <= kMaxRank; ++rank) {
      std::string dims;
      for (std::uint32_t i = 0; i < rank; ++i)
        dims += (i ? ":" : "") + std::to_string(inner_first[i]);
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + dims);
      for (bool cuda : {false, true}) {
        auto caps = caps_of(tensor_caps_text(dtype_name(dtype), dims, cuda));
        StreamCaps parsed;
        std::string error;
        ASSERT_TRUE(parse_caps(caps.get(), &parsed, &error)) << error;
        EXPECT_EQ(parsed.kind, MediaKind::tensors);
        EXPECT_EQ(parsed.cuda_memory, cuda);
        EXPECT_EQ(parsed.fps_n, 15);
        EXPECT_EQ(parsed.fps_d, 1);
        const TensorDesc& t = parsed.tensor;
        EXPECT_EQ(t.dtype, dtype);
        ASSERT_EQ(t.rank, rank);
        std::int64_t stride = static_cast<std::int64_t>(elem_size(dtype));
        for (std::uint32_t i = 0; i < rank; ++i) {
          const std::uint32_t axis = rank - 1 - i;  // outermost first
          EXPECT_EQ(t.shape[axis], inner_first[i]);
          EXPECT_EQ(t.strides[axis], stride);
          stride *= inner_first[i];
        }
        EXPECT_EQ(t.size, static_cast<std::uint64_t>(stride));
        EXPECT_EQ(t.byte_offset, 0u);
        EXPECT_EQ(t.num_planes, 0u);
        EXPECT_EQ(format_dimensions(t), dims);

        const std::string text = wire_caps(caps.get());
        EXPECT_EQ(text.find("memory:"), std::string::npos) << text;
        CapsPtr out(caps_from_wire(text, t, cuda, nullptr, &error));
        ASSERT_NE(out, nullptr) << error;
        // Canonical spelling sent: the padded one follows only below rank 4.
        ASSERT_EQ(gst_caps_get_size(out.get()), rank < 4 ? 2u : 1u);
        EXPECT_EQ(has_cuda_feature(out.get(), 0), cuda);
        EXPECT_EQ(is_system_memory(out.get(), 0), !cuda);
        CapsPtr first(gst_caps_copy_nth(out.get(), 0));
        EXPECT_TRUE(gst_caps_is_equal(first.get(), caps.get()))
            << to_text(first.get()) << " vs " << to_text(caps.get());
        CapsPtr templ(template_caps());
        EXPECT_TRUE(gst_caps_is_subset(out.get(), templ.get())) << to_text(out.get());
      }
    }
  }
}

TEST(Tensors, MissingFormatReadsAsStatic) {
  auto caps = caps_of("other/tensors, num_tensors=1, types=uint8, dimensions=(string)4:2");
  StreamCaps parsed;
  std::string error;
  ASSERT_TRUE(parse_caps(caps.get(), &parsed, &error)) << error;
  EXPECT_EQ(shape_of(parsed.tensor), (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(parsed.fps_n, 0);
  EXPECT_EQ(parsed.fps_d, 1);
}

// ---------------------------------------------------------------------------------------------
// Dimension strings.

std::vector<std::int64_t> parse_ok(const char* text) {
  std::uint32_t rank = 99;
  std::int64_t shape[kMaxRank] = {};
  std::string error;
  EXPECT_TRUE(parse_dimensions(text, &rank, shape, &error)) << text << ": " << error;
  if (rank > kMaxRank) return {};
  return std::vector<std::int64_t>(shape, shape + rank);
}

void expect_dims_refused(const char* text, const char* word) {
  std::uint32_t rank = 0;
  std::int64_t shape[kMaxRank] = {};
  std::string error;
  EXPECT_FALSE(parse_dimensions(text, &rank, shape, &error)) << (text ? text : "(null)");
  EXPECT_FALSE(error.empty());
  EXPECT_NE(error.find(word), std::string::npos) << (text ? text : "(null)") << ": " << error;
}

TensorDesc tensor_of(DType dtype, std::vector<std::int64_t> shape) {
  TensorDesc t{};
  t.dtype = dtype;
  t.rank = static_cast<std::uint32_t>(shape.size());
  std::int64_t stride = static_cast<std::int64_t>(elem_size(dtype));
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    t.shape[i] = shape[static_cast<std::size_t>(i)];
    t.strides[i] = stride;
    stride *= t.shape[i];
  }
  t.size = static_cast<std::uint64_t>(stride);
  return t;
}

TEST(Dimensions, Parse) {
  EXPECT_EQ(parse_ok("3:224:224"), (std::vector<std::int64_t>{224, 224, 3}));
  EXPECT_EQ(parse_ok("3.224.224"), (std::vector<std::int64_t>{224, 224, 3}));
  EXPECT_EQ(parse_ok("3:640:480"), (std::vector<std::int64_t>{480, 640, 3}));
  EXPECT_EQ(parse_ok("3:224:224:1"), (std::vector<std::int64_t>{1, 224, 224, 3}));
  EXPECT_EQ(parse_ok("1:3"), (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(parse_ok("7"), (std::vector<std::int64_t>{7}));
  EXPECT_EQ(parse_ok("1"), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(parse_ok(" 3 : 4 "), (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(parse_ok("9223372036854775807"), (std::vector<std::int64_t>{INT64_MAX}));
  EXPECT_EQ(parse_ok("2:3:4:5:6:7:8:9"), (std::vector<std::int64_t>{9, 8, 7, 6, 5, 4, 3, 2}));
  // Outermost 1s beyond rank 8 are dropped; inner ones are kept.
  EXPECT_EQ(parse_ok("2:3:4:5:6:7:8:9:1:1:1:1:1:1:1:1"),
            (std::vector<std::int64_t>{9, 8, 7, 6, 5, 4, 3, 2}));
  EXPECT_EQ(parse_ok("1:1:1:1:1:1:1:5:1:1"), (std::vector<std::int64_t>{5, 1, 1, 1, 1, 1, 1, 1}));
}

TEST(Dimensions, Refused) {
  expect_dims_refused(nullptr, "missing");
  expect_dims_refused("", "empty");
  expect_dims_refused("   ", "empty");
  expect_dims_refused("3::4", "empty");
  expect_dims_refused(":3", "empty");
  expect_dims_refused("3:", "empty");
  expect_dims_refused("3..4", "empty");
  expect_dims_refused("0:3", "'0'");
  expect_dims_refused("3:0", "positive");
  expect_dims_refused("-1", "'-1'");
  expect_dims_refused("3:-4", "positive");
  expect_dims_refused("a:b", "'a'");
  expect_dims_refused("3:4x", "'4x'");
  expect_dims_refused("+3", "positive");
  expect_dims_refused("3,4", "positive");
  expect_dims_refused("3 4", "positive");
  expect_dims_refused("0x10", "positive");
  expect_dims_refused("9223372036854775808", "64 bits");
  expect_dims_refused("99999999999999999999999", "64 bits");
  expect_dims_refused("2:3:4:5:6:7:8:9:10", "rank 9");
  expect_dims_refused("2:3:4:5:6:7:8:9:10", "at most rank 8");
  expect_dims_refused("1:1:1:1:1:1:1:1:1:5", "rank 10");
}

TEST(Dimensions, Format) {
  EXPECT_EQ(format_dimensions(tensor_of(DType::uint8, {224, 224, 3})), "3:224:224");
  EXPECT_EQ(format_dimensions(tensor_of(DType::uint8, {1, 224, 224, 3})), "3:224:224");
  EXPECT_EQ(format_dimensions(tensor_of(DType::uint8, {1, 1, 5})), "5");
  EXPECT_EQ(format_dimensions(tensor_of(DType::uint8, {5, 1, 3})), "3:1:5");
  EXPECT_EQ(format_dimensions(tensor_of(DType::uint8, {2, 1})), "1:2");
  EXPECT_EQ(format_dimensions(tensor_of(DType::uint8, {1, 1})), "1");
  EXPECT_EQ(format_dimensions(tensor_of(DType::uint8, {})), "1");
  EXPECT_EQ(format_dimensions(tensor_of(DType::float32, {8, 7, 6, 5, 4, 3, 2, 9})),
            "9:2:3:4:5:6:7:8");
}

TEST(Dimensions, Same) {
  const TensorDesc a = tensor_of(DType::uint8, {224, 224, 3});
  const TensorDesc b = tensor_of(DType::uint8, {1, 224, 224, 3});
  const TensorDesc c = tensor_of(DType::uint8, {1, 1, 1, 1, 1, 224, 224, 3});
  EXPECT_TRUE(same_dimensions(a, b));
  EXPECT_TRUE(same_dimensions(b, a));
  EXPECT_TRUE(same_dimensions(a, c));
  EXPECT_TRUE(same_dimensions(a, a));
  EXPECT_FALSE(same_dimensions(a, tensor_of(DType::uint8, {224, 224, 3, 1})));
  EXPECT_FALSE(same_dimensions(a, tensor_of(DType::uint8, {224, 3, 224})));
  EXPECT_FALSE(same_dimensions(a, tensor_of(DType::uint8, {224, 224})));
  EXPECT_FALSE(same_dimensions(a, tensor_of(DType::uint8, {2, 224, 224, 3})));
  EXPECT_TRUE(same_dimensions(tensor_of(DType::uint8, {1}), tensor_of(DType::uint8, {})));
  EXPECT_TRUE(same_dimensions(tensor_of(DType::uint8, {1, 1}), tensor_of(DType::uint8, {1})));
  TensorDesc bad = a;
  bad.rank = kMaxRank + 1;
  EXPECT_FALSE(same_dimensions(bad, a));
}

// caps_from_wire offers each spelling, the producer's first, so filters written either way match.
std::vector<std::string> dimension_spellings(const GstCaps* caps) {
  std::vector<std::string> out;
  for (guint i = 0; i < gst_caps_get_size(caps); ++i)
    out.push_back(gst_structure_get_string(gst_caps_get_structure(caps, i), "dimensions"));
  return out;
}

TEST(Dimensions, WireSpellings) {
  struct Case {
    const char* sent;
    std::vector<std::int64_t> tensor_shape;
    std::vector<std::string> offered;
  };
  const Case cases[] = {
      {"3:224:224", {224, 224, 3}, {"3:224:224", "3:224:224:1"}},
      {"3:224:224", {1, 224, 224, 3}, {"3:224:224", "3:224:224:1"}},
      {"3:224:224:1", {224, 224, 3}, {"3:224:224:1", "3:224:224"}},
      {"3:224:224:1", {1, 224, 224, 3}, {"3:224:224:1", "3:224:224"}},
      {"3.224.224", {224, 224, 3}, {"3.224.224", "3:224:224", "3:224:224:1"}},
      {"3:224:224:1:1", {224, 224, 3}, {"3:224:224:1:1", "3:224:224", "3:224:224:1"}},
      {"10", {10}, {"10", "10:1:1:1"}},
      {"1", {1}, {"1", "1:1:1:1"}},
      {"4:3:2:5", {5, 2, 3, 4}, {"4:3:2:5"}},
      {"4:3:2:5:6", {6, 5, 2, 3, 4}, {"4:3:2:5:6"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sent);
    for (bool cuda : {false, true}) {
      const std::string text = tensor_caps_text("float32", c.sent, false);
      std::string error;
      CapsPtr out(
          caps_from_wire(text, tensor_of(DType::float32, c.tensor_shape), cuda, nullptr, &error));
      ASSERT_NE(out, nullptr) << error;
      EXPECT_EQ(dimension_spellings(out.get()), c.offered);
      for (guint i = 0; i < gst_caps_get_size(out.get()); ++i) {
        EXPECT_EQ(has_cuda_feature(out.get(), i), cuda);
        const GstStructure* s = gst_caps_get_structure(out.get(), i);
        EXPECT_STREQ(gst_structure_get_string(s, "types"), "float32");
        EXPECT_STREQ(gst_structure_get_string(s, "format"), "static");
        gint n = 0, d = 0;
        EXPECT_TRUE(gst_structure_get_fraction(s, "framerate", &n, &d));
        EXPECT_EQ(n, 15);
        EXPECT_EQ(d, 1);
      }
      // A capsfilter written in any offered spelling intersects, with and without the feature.
      for (const std::string& spelling : c.offered) {
        const std::string feature = cuda ? "(memory:CUDAMemory)" : "";
        auto filter = caps_of("other/tensors" + feature + ", dimensions=(string)" + spelling);
        EXPECT_TRUE(gst_caps_can_intersect(out.get(), filter.get())) << spelling;
        CapsPtr both(gst_caps_intersect(filter.get(), out.get()));
        CapsPtr fixed(gst_caps_fixate(gst_caps_ref(both.get())));
        StreamCaps parsed;
        ASSERT_TRUE(parse_caps(fixed.get(), &parsed, &error)) << error;
        EXPECT_TRUE(same_dimensions(parsed.tensor, tensor_of(DType::float32, c.tensor_shape)));
        EXPECT_EQ(parsed.cuda_memory, cuda);
      }
      auto other = caps_of("other/tensors, dimensions=(string)3:224:225");
      EXPECT_FALSE(gst_caps_can_intersect(without_features(out.get()).get(), other.get()));
    }
  }
}

TEST(Dimensions, CapsfilterInEitherSpelling) {
  std::string error;
  for (const char* producer : {"3:224:224", "3:224:224:1"}) {
    StreamCaps sent;
    auto caps = caps_of(tensor_caps_text("uint8", producer, true));
    ASSERT_TRUE(parse_caps(caps.get(), &sent, &error)) << error;
    CapsPtr out(caps_from_wire(wire_caps(caps.get()), sent.tensor, true, nullptr, &error));
    ASSERT_NE(out, nullptr) << error;
    for (const char* filter_dims : {"3:224:224", "3:224:224:1"}) {
      auto filter = caps_of(std::string("other/tensors(memory:CUDAMemory), format=static, "
                                        "num_tensors=1, types=uint8, dimensions=") +
                            filter_dims);
      CapsPtr both(gst_caps_intersect(out.get(), filter.get()));
      ASSERT_FALSE(gst_caps_is_empty(both.get())) << producer << " vs " << filter_dims;
      CapsPtr fixed(gst_caps_fixate(gst_caps_ref(both.get())));
      EXPECT_STREQ(gst_structure_get_string(gst_caps_get_structure(fixed.get(), 0), "dimensions"),
                   filter_dims);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Template caps.

TEST(TemplateCaps, FourStructuresCudaFirst) {
  CapsPtr caps(template_caps());
  ASSERT_NE(caps, nullptr);
  ASSERT_EQ(gst_caps_get_size(caps.get()), 4u);
  const char* names[] = {"video/x-raw", "video/x-raw", "other/tensors", "other/tensors"};
  for (guint i = 0; i < 4; ++i) {
    EXPECT_TRUE(gst_structure_has_name(gst_caps_get_structure(caps.get(), i), names[i]));
    EXPECT_EQ(has_cuda_feature(caps.get(), i), i % 2 == 0) << i;
    EXPECT_EQ(is_system_memory(caps.get(), i), i % 2 == 1) << i;
  }
  for (guint i = 0; i < 2; ++i) {
    const GstStructure* s = gst_caps_get_structure(caps.get(), i);
    const GValue* formats = gst_structure_get_value(s, "format");
    ASSERT_TRUE(GST_VALUE_HOLDS_LIST(formats));
    std::vector<std::string> got;
    for (guint j = 0; j < gst_value_list_get_size(formats); ++j)
      got.push_back(g_value_get_string(gst_value_list_get_value(formats, j)));
    std::vector<std::string> want;
    for (const auto& spec : format_specs()) want.push_back(spec.name);
    EXPECT_EQ(got, want);
    for (const char* field : {"width", "height"}) {
      const GValue* v = gst_structure_get_value(s, field);
      ASSERT_TRUE(GST_VALUE_HOLDS_INT_RANGE(v)) << field;
      EXPECT_EQ(gst_value_get_int_range_min(v), 1);
      EXPECT_EQ(gst_value_get_int_range_max(v), G_MAXINT);
    }
    EXPECT_TRUE(GST_VALUE_HOLDS_FRACTION_RANGE(gst_structure_get_value(s, "framerate")));
  }
  for (guint i = 2; i < 4; ++i) {
    const GstStructure* s = gst_caps_get_structure(caps.get(), i);
    EXPECT_STREQ(gst_structure_get_string(s, "format"), "static");
    const GValue* n = gst_structure_get_value(s, "num_tensors");
    ASSERT_TRUE(n && GST_VALUE_HOLDS_INT_RANGE(n));
    EXPECT_EQ(gst_value_get_int_range_min(n), 1);
    EXPECT_EQ(gst_value_get_int_range_max(n), 16);
    EXPECT_TRUE(GST_VALUE_HOLDS_FRACTION_RANGE(gst_structure_get_value(s, "framerate")));
    // Any types and dimensions string matches.
    EXPECT_FALSE(gst_structure_has_field(s, "types"));
    EXPECT_FALSE(gst_structure_has_field(s, "dimensions"));
  }
  auto yuy2 = caps_of("video/x-raw, format=YUY2, width=64, height=48");
  EXPECT_FALSE(gst_caps_can_intersect(caps.get(), yuy2.get()));
  auto flexible = caps_of("other/tensors, format=flexible, num_tensors=1");
  EXPECT_FALSE(gst_caps_can_intersect(caps.get(), flexible.get()));
  auto sixteen = caps_of("other/tensors, format=static, num_tensors=16");
  EXPECT_TRUE(gst_caps_can_intersect(caps.get(), sixteen.get()));
  auto seventeen = caps_of("other/tensors, format=static, num_tensors=17");
  EXPECT_FALSE(gst_caps_can_intersect(caps.get(), seventeen.get()));
}

// ---------------------------------------------------------------------------------------------
// parse_caps refusals.

void expect_parse_refused(const std::string& text, const char* word) {
  auto caps = caps_of(text);
  ASSERT_NE(caps, nullptr);
  StreamCaps out;
  out.fps_n = 77;
  std::string error;
  EXPECT_FALSE(parse_caps(caps.get(), &out, &error)) << text;
  EXPECT_FALSE(error.empty()) << text;
  EXPECT_NE(error.find(word), std::string::npos) << text << ": " << error;
  EXPECT_EQ(out.fps_n, 77) << "output touched on failure";
}

TEST(ParseCaps, RefusesMalformedVideo) {
  StreamCaps out;
  std::string error;
  EXPECT_FALSE(parse_caps(nullptr, &out, &error));
  EXPECT_FALSE(error.empty());

  expect_parse_refused("ANY", "ANY");
  expect_parse_refused("EMPTY", "0 structures");
  expect_parse_refused("video/x-raw, format=YUY2, width=64, height=48", "YUY2");
  expect_parse_refused("video/x-raw, format=NOTAFORMAT, width=64, height=48", "NOTAFORMAT");
  expect_parse_refused("video/x-raw, format={RGBA, BGRA}, width=64, height=48", "format");
  expect_parse_refused("video/x-raw, format={RGBA, BGRA}, width=64, height=48", "not fixed");
  expect_parse_refused("video/x-raw, format=RGBA, width=[1, 100], height=48", "width");
  expect_parse_refused("video/x-raw, format=RGBA, width=64, height=48, framerate=[0/1, 30/1]",
                       "framerate");
  expect_parse_refused(
      "video/x-raw, format=RGBA, width=64, height=48; video/x-raw, format=BGRA, width=64, "
      "height=48",
      "2 structures");
  expect_parse_refused("video/x-raw, width=64, height=48", "format");
  expect_parse_refused("video/x-raw, format=(int)5, width=64, height=48", "format");
  expect_parse_refused("video/x-raw, format=RGBA, height=48", "width");
  expect_parse_refused("video/x-raw, format=RGBA, width=64", "height");
  expect_parse_refused("video/x-raw, format=RGBA, width=64, height=0", "height");
  expect_parse_refused("video/x-raw, format=RGBA, width=-64, height=48", "width");
  expect_parse_refused("video/x-raw, format=RGBA, width=64, height=48, framerate=abc", "framerate");
  expect_parse_refused("video/x-raw, format=RGBA, width=64, height=48, framerate=-30/1",
                       "framerate");
  expect_parse_refused("audio/x-raw, format=S16LE, rate=48000, channels=2", "audio/x-raw");
  expect_parse_refused("audio/x-raw, format=S16LE, rate=48000, channels=2", "media type");
  expect_parse_refused("video/x-raw(memory:GLMemory), format=RGBA, width=64, height=48",
                       "memory:GLMemory");
  expect_parse_refused(
      "video/x-raw(memory:CUDAMemory, meta:GstVideoOverlayComposition), format=RGBA, width=64, "
      "height=48",
      "features");
  expect_parse_refused("video/x-raw(ANY), format=RGBA, width=64, height=48", "ANY");
  expect_parse_refused(
      "video/x-raw(format:Interlaced), format=RGBA, width=64, height=48, "
      "interlace-mode=alternate",
      "format:Interlaced");
}

TEST(ParseCaps, RefusesMalformedTensors) {
  const std::string head = "other/tensors, format=static, num_tensors=1, ";
  expect_parse_refused(
      "other/tensors, format=flexible, num_tensors=1, types=uint8, dimensions=(string)3",
      "flexible");
  expect_parse_refused(
      "other/tensors, format=sparse, num_tensors=1, types=uint8, dimensions=(string)3", "format");
  expect_parse_refused(
      "other/tensors, format=(int)1, num_tensors=1, types=uint8, dimensions=(string)3", "format");
  expect_parse_refused(
      "other/tensors, format=static, num_tensors=17, types=uint8, dimensions=(string)3",
      "1 to 16 tensors");
  expect_parse_refused(
      "other/tensors, format=static, num_tensors=3, types=\"uint8,uint8\", "
      "dimensions=\"3,3,3\"",
      "lists 2 tensors, but num_tensors=3");
  expect_parse_refused(
      "other/tensors, format=static, num_tensors=2, types=\"uint8,uint8\", dimensions=\"3,0\"",
      "(tensor 1)");
  expect_parse_refused(
      "other/tensors, format=static, num_tensors=2, types=\"uint8,cfloat\", dimensions=\"3,3\"",
      "(tensor 1)");
  expect_parse_refused(
      "other/tensors, format=static, num_tensors=0, types=uint8, dimensions=(string)3",
      "num_tensors=0");
  expect_parse_refused("other/tensors, format=static, types=uint8, dimensions=(string)3",
                       "num_tensors");
  expect_parse_refused(
      "other/tensors, format=static, num_tensors=(string)one, types=uint8, dimensions=(string)3",
      "num_tensors");
  expect_parse_refused(head + "types=\"uint8,float32\", dimensions=(string)3",
                       "lists 2 tensors, but num_tensors=1");
  expect_parse_refused(head + "types=uint8, dimensions=\"3:4,5:6\"",
                       "lists 2 tensors, but num_tensors=1");
  expect_parse_refused(head + "types=complex64, dimensions=(string)3", "complex64");
  expect_parse_refused(head + "types=UINT8, dimensions=(string)3", "types");
  expect_parse_refused(head + "types=(int)5, dimensions=(string)3", "types");
  expect_parse_refused(head + "dimensions=(string)3", "types");
  expect_parse_refused(head + "types=uint8", "dimensions");
  expect_parse_refused(head + "types=uint8, dimensions=(int)3", "dimensions");
  expect_parse_refused(head + "types=uint8, dimensions=3::4", "empty");
  expect_parse_refused(head + "types=uint8, dimensions=(string)0:3", "'0'");
  expect_parse_refused(head + "types=uint8, dimensions=(string)-1", "'-1'");
  expect_parse_refused(head + "types=uint8, dimensions=(string)a:b", "'a'");
  expect_parse_refused(head + "types=uint8, dimensions=2:3:4:5:6:7:8:9:10", "rank 9");
  expect_parse_refused(head + "types=uint8, dimensions=(string)\"\"", "empty");
  expect_parse_refused(head + "types=uint64, dimensions=(string)4294967296:4294967296", "2^63");
  expect_parse_refused(head + "types=uint8, dimensions={ 3:4, 4:3 }", "not fixed");
  // Untyped, GStreamer reads "4:2" as a flag set; the message says how to write it.
  expect_parse_refused(head + "types=uint8, dimensions=4:2", "(string)");
  expect_parse_refused(head + "types=uint8, dimensions=3", "(string)");
  expect_parse_refused(head + "types=uint8, dimensions=-1", "not a string");
  expect_parse_refused(head + "types=uint8, dimensions=-1", "'-1'");
  expect_parse_refused(head + "types=uint8, dimensions=(string)3, framerate=(string)fast",
                       "framerate");
}

// ---------------------------------------------------------------------------------------------
// caps_from_wire refusals.

TensorDesc video_tensor_of(const char* format, int w, int h) {
  GstVideoInfo info;
  gst_video_info_set_format(&info, gst_video_format_from_string(format), static_cast<guint>(w),
                            static_cast<guint>(h));
  TensorDesc t{};
  std::string error;
  EXPECT_TRUE(video_tensor(info, nullptr, GST_VIDEO_INFO_SIZE(&info), &t, &error)) << error;
  return t;
}

void expect_wire_refused(const std::string& text, const TensorDesc& tensor, const char* word) {
  for (bool cuda : {false, true}) {
    GstVideoInfo video;
    gst_video_info_init(&video);
    const GstVideoInfo before = video;
    std::string error;
    CapsPtr out(caps_from_wire(text, tensor, cuda, &video, &error));
    EXPECT_EQ(out, nullptr) << text << " -> " << (out ? to_text(out.get()) : "");
    EXPECT_FALSE(error.empty()) << text;
    EXPECT_NE(error.find(word), std::string::npos) << text << ": " << error;
    EXPECT_EQ(std::memcmp(&video, &before, sizeof video), 0) << "video info touched on failure";
  }
}

std::string wire_video(const char* format, int w, int h) {
  auto caps = caps_of(video_caps_text(format, w, h, false));
  return wire_caps(caps.get());
}

TEST(CapsFromWire, RefusesMalformedText) {
  const TensorDesc rgba = video_tensor_of("RGBA", 64, 48);
  expect_wire_refused("this is (not caps", rgba, "does not parse");
  expect_wire_refused("", rgba, "0 structures");
  expect_wire_refused("EMPTY", rgba, "0 structures");
  expect_wire_refused("ANY", rgba, "ANY");
  expect_wire_refused(wire_video("RGBA", 64, 48) + "; " + wire_video("RGBA", 64, 48), rgba,
                      "2 structures");
  expect_wire_refused(video_caps_text("RGBA", 64, 48, true), rgba, "features");
  expect_wire_refused(video_caps_text("RGBA", 64, 48, true), rgba, "memory:CUDAMemory");
  expect_wire_refused(
      "video/x-raw(meta:GstVideoAffineTransformation), format=RGBA, width=64, "
      "height=48",
      rgba, "features");
  expect_wire_refused("video/x-raw, format={RGBA, BGRA}, width=64, height=48", rgba, "not fixed");
  expect_wire_refused("video/x-raw, format=RGBA, width=64, height=[1, 48]", rgba, "height");
  expect_wire_refused("image/jpeg, width=64, height=48", rgba, "media type");
  expect_wire_refused("video/x-raw, format=YUY2, width=64, height=48", rgba, "YUY2");
  expect_wire_refused("video/x-raw, width=64, height=48", rgba, "format");
  expect_wire_refused("video/x-raw, format=RGBA, width=0, height=48", rgba, "width");
  expect_wire_refused(wire_video("RGBA", 64, 48) + std::string(1, '\0') + "; junk", rgba, "NUL");
  expect_wire_refused(std::string("\x1b[2J\x07, a=b ("), rgba, "'?[2J?, a=b ('");
  // A long hostile text is quoted, not echoed whole.
  const std::string junk = "=" + std::string(100000, 'x');
  GstVideoInfo video;
  std::string error;
  CapsPtr out(caps_from_wire(junk, rgba, false, &video, &error));
  EXPECT_EQ(out, nullptr);
  EXPECT_LT(error.size(), 400u) << error.size();
}

TEST(CapsFromWire, RefusesVideoTensorMismatch) {
  const std::string nv12 = wire_video("NV12", 64, 48);
  expect_wire_refused(nv12, video_tensor_of("GRAY8", 64, 48),
                      "format=NV12 (2 planes) but the tensor has 1 plane");
  expect_wire_refused(wire_video("I420", 64, 48), video_tensor_of("NV12", 64, 48), "2 planes");
  expect_wire_refused(wire_video("GRAY16_LE", 64, 48), video_tensor_of("GRAY8", 64, 48),
                      "the tensor is uint8");
  expect_wire_refused(wire_video("P010_10LE", 64, 48), video_tensor_of("NV12", 64, 48), "uint16");
  expect_wire_refused(wire_video("RGBA", 64, 48), video_tensor_of("RGBA", 64, 40), "plane 0");
  expect_wire_refused(wire_video("RGBA", 64, 48), video_tensor_of("RGB", 64, 48), "pitch");
  expect_wire_refused(wire_video("RGBA", 32, 48), video_tensor_of("RGBA", 64, 48),
                      "uint8[48,64,4]");
  expect_wire_refused(wire_video("RGB", 64, 48), video_tensor_of("RGBA", 64, 48),
                      "producer caps say format=RGB 64x48 but the tensor is uint8[48,64,4]");

  TensorDesc shape = video_tensor_of("RGBA", 64, 48);
  shape.shape[1] = 60;
  expect_wire_refused(wire_video("RGBA", 64, 48), shape, "uint8[48,60,4]");

  TensorDesc strides = video_tensor_of("RGBA", 64, 48);
  strides.strides[1] = 3;
  expect_wire_refused(wire_video("RGBA", 64, 48), strides, "strides [256,3,1]");

  TensorDesc offset = video_tensor_of("GRAY8", 64, 48);
  offset.byte_offset = 64;  // consistent on its own, but not where plane 0 starts
  expect_wire_refused(wire_video("GRAY8", 64, 48), offset, "byte_offset");

  TensorDesc broken = video_tensor_of("GRAY8", 64, 48);
  broken.size = 100;  // shorter than the rows it describes
  expect_wire_refused(wire_video("GRAY8", 64, 48), broken, "producer tensor");

  TensorDesc planar = video_tensor_of("RGBP", 64, 48);
  ASSERT_EQ(planar.rank, 3u);
  planar.strides[0] -= 64;  // a plane step the planes do not have
  expect_wire_refused(wire_video("RGBP", 64, 48), planar, "strides [3008,64,1]");

  TensorDesc bad_dtype = video_tensor_of("GRAY8", 64, 48);
  bad_dtype.dtype = static_cast<DType>(99);
  expect_wire_refused(wire_video("GRAY8", 64, 48), bad_dtype, "dtype");
}

TEST(CapsFromWire, AcceptsPlanarRgbFirstPlane) {
  TensorDesc planar = video_tensor_of("RGBP", 64, 48);
  TensorDesc first = planar;
  first.rank = 2;
  first.shape[0] = 48;
  first.shape[1] = 64;
  first.strides[0] = planar.strides[1];
  first.strides[1] = 1;
  std::string error;
  CapsPtr out(caps_from_wire(wire_video("RGBP", 64, 48), first, false, nullptr, &error));
  EXPECT_NE(out, nullptr) << error;
}

TEST(CapsFromWire, RefusesTensorMismatch) {
  const std::string text = tensor_caps_text("float32", "3:224:224", false);
  expect_wire_refused(text, tensor_of(DType::uint8, {224, 224, 3}),
                      "types='float32' but the tensor is uint8");
  expect_wire_refused(text, tensor_of(DType::float32, {224, 3, 224}), "dimensions='3:224:224'");
  expect_wire_refused(text, tensor_of(DType::float32, {224, 224, 3, 1}), "dimensions");
  expect_wire_refused(text, tensor_of(DType::float32, {224, 224}), "float32[224,224]");

  TensorDesc planes = tensor_of(DType::float32, {224, 224, 3});
  planes.num_planes = 1;
  planes.planes[0] = {0, 224 * 3 * 4};
  expect_wire_refused(text, planes, "1 video plane");

  TensorDesc broadcast = tensor_of(DType::float32, {224, 224, 3});
  broadcast.strides[0] = 0;  // valid, but not the dense bytes the caps promise
  broadcast.size = 224 * 3 * 4;
  expect_wire_refused(text, broadcast, "size");

  TensorDesc short_size = tensor_of(DType::float32, {224, 224, 3});
  short_size.size -= 1;
  expect_wire_refused(text, short_size, "producer tensor");

  const TensorDesc ok = tensor_of(DType::uint8, {3});
  expect_wire_refused(
      "other/tensors, format=flexible, num_tensors=1, types=uint8, dimensions=(string)3", ok,
      "flexible");
  expect_wire_refused(
      "other/tensors, format=static, num_tensors=2, types=\"float32,uint8\", dimensions=\"3,3\"",
      ok, "types");
  expect_wire_refused(
      "other/tensors, format=static, num_tensors=1, types=cfloat, dimensions=(string)3", ok,
      "cfloat");
  expect_wire_refused(
      "other/tensors, format=static, num_tensors=1, types=uint8, dimensions=(string)3:0", ok,
      "positive");
  expect_wire_refused(
      "other/tensors, format=static, num_tensors=1, types=uint8, "
      "dimensions=3:3:3:3:3:3:3:3:3",
      ok, "rank 9");
  expect_wire_refused(
      "other/tensors(memory:CUDAMemory), format=static, num_tensors=1, types=uint8, "
      "dimensions=(string)3",
      ok, "features");
}

// ---------------------------------------------------------------------------------------------
// wire_caps.

TEST(WireCaps, DropsFeaturesAndFixates) {
  EXPECT_EQ(wire_caps(nullptr), "");
  auto cuda = caps_of(video_caps_text("NV12", 64, 48, true));
  EXPECT_EQ(wire_caps(cuda.get()),
            "video/x-raw, format=(string)NV12, width=(int)64, height=(int)48, "
            "framerate=(fraction)30000/1001");
  auto open = caps_of("video/x-raw, format={NV12, I420}, width=[1, 100], height=48");
  const std::string text = wire_caps(open.get());
  auto parsed = caps_of(text);
  EXPECT_TRUE(gst_caps_is_fixed(parsed.get())) << text;
  EXPECT_EQ(text.find('{'), std::string::npos) << text;
}

// Every frame's own tensor (untrusted) is held to the format the caps announced.
TEST(FrameTensor, MustDescribeTheAnnouncedStream) {
  GstVideoInfo info;
  ASSERT_TRUE(gst_video_info_set_format(&info, GST_VIDEO_FORMAT_NV12, 64, 48));
  const TensorDesc format = video_tensor_of("NV12", 64, 48);
  const std::uint64_t max = format.byte_offset + format.size + 4096;
  std::string error;
  EXPECT_TRUE(check_frame_tensor(&info, format, max, format, &error)) << error;

  TensorDesc wide = format;  // a pitch that reaches past the slot
  wide.planes[0].pitch = max;
  EXPECT_FALSE(check_frame_tensor(&info, format, max, wide, &error));
  EXPECT_FALSE(error.empty());

  TensorDesc far = format;  // a chroma plane that starts at the slot's last byte
  far.planes[1].offset = max - 1;
  error.clear();
  EXPECT_FALSE(check_frame_tensor(&info, format, max, far, &error));
  EXPECT_FALSE(error.empty());

  TensorDesc one_plane = format;
  one_plane.num_planes = 1;
  error.clear();
  EXPECT_FALSE(check_frame_tensor(&info, format, max, one_plane, &error));
  EXPECT_NE(error.find("plane"), std::string::npos) << error;

  TensorDesc long_span = format;
  long_span.size = max + 1 - long_span.byte_offset;
  error.clear();
  EXPECT_FALSE(check_frame_tensor(&info, format, max, long_span, &error));
  EXPECT_NE(error.find("more than the format"), std::string::npos) << error;

  const TensorDesc tensor = tensor_of(DType::float32, {3, 4});
  EXPECT_TRUE(check_frame_tensor(nullptr, tensor, 48, tensor, &error));
  TensorDesc other = tensor_of(DType::float32, {4, 3});
  error.clear();
  EXPECT_FALSE(check_frame_tensor(nullptr, tensor, 48, other, &error));
  EXPECT_NE(error.find("differs"), std::string::npos) << error;
}

TEST(CapsFromWire, RefusesStridedOrOffsetTensors) {
  const std::string text = tensor_caps_text("float32", "4:3", false);
  TensorDesc offset = tensor_of(DType::float32, {3, 4});
  offset.byte_offset = 16;
  expect_wire_refused(text, offset, "not dense at offset 0");
  TensorDesc transposed = tensor_of(DType::float32, {3, 4});
  transposed.strides[0] = 4;
  transposed.strides[1] = 12;
  expect_wire_refused(text, transposed, "not dense");
}

// Several tensors in one slot: each dense, each at the next 256-byte boundary after the one
// before, the first as the frame's tensor.
TEST(ParseCaps, SeveralTensorsLieOneAfterAnotherOnAlignedOffsets) {
  auto caps = caps_of(
      "other/tensors, format=static, num_tensors=3, types=\"uint8,float32,int64\", "
      "dimensions=\"3:2,4:100,1\", framerate=30/1");
  StreamCaps out;
  std::string error;
  ASSERT_TRUE(parse_caps(caps.get(), &out, &error)) << error;
  ASSERT_EQ(out.tensors.size(), 3u);
  EXPECT_EQ(out.tensor, out.tensors[0]);
  EXPECT_EQ(out.tensors[0].byte_offset, 0u);
  EXPECT_EQ(out.tensors[0].size, 6u);
  EXPECT_EQ(out.tensors[1].byte_offset, 256u);
  EXPECT_EQ(out.tensors[1].size, 1600u);
  EXPECT_EQ(out.tensors[1].shape[0], 100);
  EXPECT_EQ(out.tensors[1].shape[1], 4);
  EXPECT_EQ(out.tensors[2].byte_offset, 2048u);
  EXPECT_EQ(out.tensors[2].dtype, DType::int64);
  EXPECT_EQ(tensors_span(out.tensors), 2056u);
  // Sixteen, NNStreamer's limit.
  std::string types, dims;
  for (int i = 0; i < 16; ++i) {
    types += std::string(i ? "," : "") + "uint8";
    dims += std::string(i ? "," : "") + std::to_string(i + 1);
  }
  auto sixteen = caps_of("other/tensors, format=static, num_tensors=16, types=\"" + types +
                         "\", dimensions=\"" + dims + "\"");
  ASSERT_TRUE(parse_caps(sixteen.get(), &out, &error)) << error;
  ASSERT_EQ(out.tensors.size(), 16u);
  EXPECT_EQ(out.tensors[15].byte_offset, 15u * 256);
  EXPECT_EQ(out.tensors[15].size, 16u);
}

// A hostile producer's caps text never reaches GStreamer's recursive parser unchecked: nesting past
// the limit, casts to types GLib refuses (criticals under G_DEBUG=fatal-criticals), and the same
// inside a quoted structure are refused with the reason; ordinary caps with casts, features,
// lists and ranges pass.
TEST(CapsFromWire, RefusesTextGStreamersParserWouldRecurseOrFailOn) {
  const TensorDesc rgba = video_tensor_of("RGBA", 64, 48);
  const std::string ok = wire_video("RGBA", 64, 48);
  expect_wire_refused(
      ok + ", a=(GstValueArray)" + std::string(30000, '<') + "1" + std::string(30000, '>'), rgba,
      "nested more than");
  expect_wire_refused(ok + ", a=" + std::string(17, '{') + "1" + std::string(17, '}'), rgba,
                      "nested more than");
  expect_wire_refused(ok + ", a=(void)1", rgba, "'void'");
  expect_wire_refused(ok + ", a=(GInterface)x", rgba, "'GInterface'");
  expect_wire_refused(ok + ", a=(GEnum)x", rgba, "'GEnum'");
  expect_wire_refused(ok + ", a=(structure)\"s\\, b\\=(void)1\\;\"", rgba, "'void'");
  // Structure names GStreamer's parser hands to gst_structure_new_empty unchecked (a critical).
  expect_wire_refused("timestamp;/x-ntp, host=a", rgba, "'/x-ntp'");
  expect_wire_refused("\"9x\", a=1", rgba, "structure named");
  expect_wire_refused(ok + ", a=(structure)\"9s\\, b\\=1\\;\"", rgba, "'9s'");
  std::string why;
  for (const std::string& fine :
       {ok, ok + ", a=(int)[ 1, 10 ], b=(string){ x, y }, c=(GstValueArray)< 1, 2 >",
        std::string("video/x-raw(memory:CUDAMemory), format=(string)RGBA, width=(int)64"),
        ok + ", title=(string)\"a (void) in plain text\"",
        ok + ", s=(structure)\"inner\\, x\\=(int)1\\;\""})
    EXPECT_TRUE(peer_text_ok(fine, &why)) << fine << ": " << why;
}

}  // namespace
}  // namespace cudaipc::gst
