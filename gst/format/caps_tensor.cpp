#include "format/caps_tensor.h"

#include "format/caps_messages.h"
#include "format/peer_text.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <memory>
#include <string_view>
#include <vector>

namespace cudaipc::gst {
namespace {

using caps_messages::fail;
using caps_messages::quoted;
using caps_messages::trimmed;

struct CapsUnref {
  void operator()(GstCaps* c) const { gst_caps_unref(c); }
};
using CapsPtr = std::unique_ptr<GstCaps, CapsUnref>;

struct GFree {
  void operator()(gchar* p) const { g_free(p); }
};
using GCharPtr = std::unique_ptr<gchar, GFree>;

// How a video format becomes a tensor (see the header comment).
enum class Layout { packed4, packed3, gray8, gray16, planar_rgb, luma8, luma16 };

struct VideoFormat {
  GstVideoFormat format;
  Layout layout;
};

constexpr VideoFormat kVideoFormats[] = {
    {GST_VIDEO_FORMAT_RGBA, Layout::packed4},     {GST_VIDEO_FORMAT_BGRA, Layout::packed4},
    {GST_VIDEO_FORMAT_RGBx, Layout::packed4},     {GST_VIDEO_FORMAT_BGRx, Layout::packed4},
    {GST_VIDEO_FORMAT_RGB, Layout::packed3},      {GST_VIDEO_FORMAT_BGR, Layout::packed3},
    {GST_VIDEO_FORMAT_RGBP, Layout::planar_rgb},  {GST_VIDEO_FORMAT_BGRP, Layout::planar_rgb},
    {GST_VIDEO_FORMAT_GRAY8, Layout::gray8},      {GST_VIDEO_FORMAT_GRAY16_LE, Layout::gray16},
    {GST_VIDEO_FORMAT_NV12, Layout::luma8},       {GST_VIDEO_FORMAT_I420, Layout::luma8},
    {GST_VIDEO_FORMAT_P010_10LE, Layout::luma16},
};

// Spellings accepted in `types`: the core's names, which are NNStreamer's plus bfloat16 and bool.
constexpr DType kTensorTypes[] = {
    DType::int8,    DType::int16,    DType::int32,   DType::int64,   DType::uint8,
    DType::uint16,  DType::uint32,   DType::uint64,  DType::float16, DType::float32,
    DType::float64, DType::bfloat16, DType::boolean,
};

const VideoFormat* find_video_format(GstVideoFormat format) {
  for (const auto& f : kVideoFormats)
    if (f.format == format) return &f;
  return nullptr;
}

std::string video_format_list(const char* separator) {
  std::string s;
  for (const auto& f : kVideoFormats) {
    if (!s.empty()) s += separator;
    s += gst_video_format_to_string(f.format);
  }
  return s;
}

std::string tensor_type_list() {
  std::string s;
  for (DType t : kTensorTypes) {
    if (!s.empty()) s += ", ";
    s += dtype_name(t);
  }
  return s;
}

const char* format_name(GstVideoFormat format) {
  const char* name = gst_video_format_to_string(format);
  return name ? name : "UNKNOWN";
}

DType layout_dtype(Layout layout) {
  return (layout == Layout::gray16 || layout == Layout::luma16) ? DType::uint16 : DType::uint8;
}

std::string caps_text(const GstCaps* caps) {
  GCharPtr text(gst_caps_to_string(caps));
  return text ? std::string(text.get()) : std::string();
}

std::string value_text(const GValue* value) {
  GCharPtr text(gst_value_serialize(value));
  return text ? std::string(text.get()) : std::string("?");
}

// Names the first field that still holds a choice, so the user knows what to pin down.
std::string unfixed_field(const GstStructure* s) {
  for (gint i = 0; i < gst_structure_n_fields(s); ++i) {
    const gchar* name = gst_structure_nth_field_name(s, static_cast<guint>(i));
    const GValue* value = gst_structure_get_value(s, name);
    if (gst_value_is_fixed(value)) continue;
    std::string field = std::string(name) + "=" + quoted(value_text(value));
    // GStreamer reads an untyped "4:2" as a flag set, which is what bites a rank-2 dimensions.
    if (GST_VALUE_HOLDS_FLAG_SET(value))
      field += " was read as a flag set; write " + std::string(name) + "=(string)...";
    return field;
  }
  return {};
}

// One structure with single values: the only caps that describe one stream.
bool check_single_fixed(const GstCaps* caps, const char* what, std::string* error) {
  if (gst_caps_is_any(caps)) return fail(error, std::string(what) + " are ANY, not fixed");
  guint n = gst_caps_get_size(caps);
  if (n != 1)
    return fail(error, std::string(what) + " have " + std::to_string(n) +
                           " structures; one fixed structure is needed");
  const GstCapsFeatures* features = gst_caps_get_features(caps, 0);
  if (features && gst_caps_features_is_any(features))
    return fail(error, std::string(what) + " have ANY caps features, not fixed");
  std::string field = unfixed_field(gst_caps_get_structure(caps, 0));
  if (!field.empty()) return fail(error, std::string(what) + " are not fixed: " + field);
  if (!gst_caps_is_fixed(caps)) return fail(error, std::string(what) + " are not fixed");
  return true;
}

bool parse_framerate(const GstStructure* s, StreamCaps* out, std::string* error) {
  if (!gst_structure_has_field(s, "framerate")) return true;
  gint n = 0, d = 1;
  if (!gst_structure_get_fraction(s, "framerate", &n, &d))
    return fail(error, "framerate is not a fraction: " +
                           quoted(value_text(gst_structure_get_value(s, "framerate"))));
  if (n < 0 || d <= 0)
    return fail(error, "framerate=" + std::to_string(n) + "/" + std::to_string(d) + " is negative");
  out->fps_n = n;
  out->fps_d = d;
  return true;
}

bool parse_video(const GstCaps* caps, StreamCaps* out, std::string* error) {
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  const gchar* format = gst_structure_get_string(s, "format");
  if (!format) return fail(error, "video caps have no format string");
  GstVideoFormat vf = gst_video_format_from_string(format);
  if (!find_video_format(vf))
    return fail(error, "video format=" + quoted(format) +
                           " is not supported (supported: " + video_format_list(", ") + ")");
  gint width = 0, height = 0;
  if (!gst_structure_get_int(s, "width", &width) || width < 1)
    return fail(error, "video caps need a positive integer width");
  if (!gst_structure_get_int(s, "height", &height) || height < 1)
    return fail(error, "video caps need a positive integer height");
  GstVideoInfo info;
  gst_video_info_init(&info);
  if (!gst_video_info_from_caps(&info, caps))
    return fail(error, "video caps do not parse (a field is malformed or out of range): " +
                           quoted(caps_text(caps)));
  // One buffer per field would halve the rows the tensor describes; nothing here handles that.
  if (GST_VIDEO_INFO_INTERLACE_MODE(&info) == GST_VIDEO_INTERLACE_MODE_ALTERNATE)
    return fail(error, "interlace-mode=alternate is not supported");
  out->kind = MediaKind::video;
  out->video = info;
  out->tensor = TensorDesc{};
  return parse_framerate(s, out, error);
}

std::size_t count_list(std::string_view text) {
  std::size_t n = 1;
  for (char c : text)
    if (c == ',') ++n;
  return n;
}

// NNStreamer's lists: items separated by ','.
std::vector<std::string> split_list(const char* text) {
  std::vector<std::string> out;
  std::string item;
  for (const char* p = text; *p; ++p) {
    if (*p == ',') {
      out.push_back(item);
      item.clear();
    } else {
      item += *p;
    }
  }
  out.push_back(item);
  return out;
}

bool dense_tensor(DType dtype, std::uint32_t rank, const std::int64_t* shape, TensorDesc* out,
                  std::string* error) {
  TensorDesc t{};
  t.dtype = dtype;
  t.rank = rank;
  auto stride = static_cast<std::int64_t>(dtype_size(dtype));
  for (int i = static_cast<int>(rank) - 1; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    if (__builtin_mul_overflow(stride, shape[i], &stride))
      return fail(error, "tensor " + to_string(t) + " is larger than 2^63 bytes");
  }
  t.size = static_cast<std::uint64_t>(stride);
  *out = t;
  return true;
}

bool string_field(const GstStructure* s, const char* name, const gchar** out, std::string* error) {
  const GValue* value = gst_structure_get_value(s, name);
  if (!value) return fail(error, std::string("other/tensors caps have no ") + name);
  if (!G_VALUE_HOLDS_STRING(value) || !g_value_get_string(value))
    return fail(error, std::string("other/tensors ") + name + "=" + quoted(value_text(value)) +
                           " is not a string; write " + name + "=(string)...");
  *out = g_value_get_string(value);
  return true;
}

bool parse_tensors(const GstCaps* caps, StreamCaps* out, std::string* error) {
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  // NNStreamer reads a missing format as static.
  if (gst_structure_has_field(s, "format")) {
    const gchar* format = gst_structure_get_string(s, "format");
    if (!format)
      return fail(error, "other/tensors format=" +
                             quoted(value_text(gst_structure_get_value(s, "format"))) +
                             " is not a string");
    if (std::strcmp(format, "static") != 0)
      return fail(error, "other/tensors format=" + quoted(format) +
                             " is not supported; cudaipc carries format=static");
  }
  gint num_tensors = 0;
  if (!gst_structure_has_field(s, "num_tensors"))
    return fail(error, "other/tensors caps have no num_tensors");
  if (!gst_structure_get_int(s, "num_tensors", &num_tensors))
    return fail(error, "other/tensors num_tensors is not an integer");
  if (num_tensors < 1 || num_tensors > static_cast<gint>(kMaxTensorsPerFrame))
    return fail(error, "other/tensors num_tensors=" + std::to_string(num_tensors) +
                           " is out of range: cudaipc carries 1 to " +
                           std::to_string(kMaxTensorsPerFrame) + " tensors per frame");
  const gchar* types = nullptr;
  if (!string_field(s, "types", &types, error)) return false;
  const gchar* dimensions = nullptr;
  if (!string_field(s, "dimensions", &dimensions, error)) return false;
  const auto n = static_cast<std::size_t>(num_tensors);
  if (std::size_t got = count_list(types); got != n)
    return fail(error, "other/tensors types=" + quoted(types) + " lists " + std::to_string(got) +
                           " tensors, but num_tensors=" + std::to_string(n));
  if (std::size_t got = count_list(dimensions); got != n)
    return fail(error, "other/tensors dimensions=" + quoted(dimensions) + " lists " +
                           std::to_string(got) + " tensors, but num_tensors=" + std::to_string(n));
  const std::vector<std::string> type_list = split_list(types);
  const std::vector<std::string> dims_list = split_list(dimensions);
  std::vector<TensorDesc> tensors;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string at = n > 1 ? " (tensor " + std::to_string(i) + ")" : "";
    DType dtype = dtype_from_name(std::string(trimmed(type_list[i])));
    if (dtype == DType::invalid)
      return fail(error, "other/tensors types=" + quoted(types) + at +
                             ": not a supported tensor type (supported: " + tensor_type_list() +
                             ")");
    std::uint32_t rank = 0;
    std::int64_t shape[kMaxRank] = {};
    std::string why;
    if (!parse_dimensions(dims_list[i].c_str(), &rank, shape, &why))
      return fail(error, "other/tensors " + why + at);
    TensorDesc tensor;
    if (!dense_tensor(dtype, rank, shape, &tensor, &why))
      return fail(error, "other/tensors dimensions=" + quoted(dimensions) + at + ": " + why);
    // Each tensor at the next aligned offset after the one before: both sides know the layout
    // from the caps alone.
    offset = (offset + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
    tensor.byte_offset = offset;
    if (__builtin_add_overflow(offset, tensor.size, &offset))
      return fail(error, "other/tensors " + quoted(dimensions) + " span more than 2^64 bytes");
    tensors.push_back(tensor);
  }
  TensorDesc tensor = tensors[0];
  out->kind = MediaKind::tensors;
  gst_video_info_init(&out->video);
  out->tensor = tensor;
  out->tensors = std::move(tensors);
  return parse_framerate(s, out, error);
}

// Media type and fields of a caps already known to be one fixed structure.
bool parse_structure(const GstCaps* caps, const char* what, StreamCaps* out, std::string* error) {
  const GstStructure* s = gst_caps_get_structure(caps, 0);
  StreamCaps parsed;
  parsed.cuda_memory = out->cuda_memory;
  bool ok;
  if (gst_structure_has_name(s, "video/x-raw")) {
    ok = parse_video(caps, &parsed, error);
  } else if (gst_structure_has_name(s, kTensorsMediaType)) {
    ok = parse_tensors(caps, &parsed, error);
  } else {
    return fail(error, std::string(what) + " have media type " + quoted(gst_structure_get_name(s)) +
                           "; cudaipc carries video/x-raw and other/tensors");
  }
  if (ok) *out = parsed;
  return ok;
}

struct PlaneGeometry {
  std::uint64_t rows;
  std::uint64_t row_bytes;
};

PlaneGeometry plane_geometry(const GstVideoFormatInfo* finfo, guint plane, gint width,
                             gint height) {
  gint comps[GST_VIDEO_MAX_COMPONENTS];
  gst_video_format_info_component(finfo, plane, comps);
  const gint c = comps[0];
  const gint w = GST_VIDEO_FORMAT_INFO_SCALE_WIDTH(finfo, c, width);
  const gint h = GST_VIDEO_FORMAT_INFO_SCALE_HEIGHT(finfo, c, height);
  return {static_cast<std::uint64_t>(h),
          static_cast<std::uint64_t>(w) *
              static_cast<std::uint64_t>(GST_VIDEO_FORMAT_INFO_PSTRIDE(finfo, c))};
}

// The tensor for `info` with the given plane layout, every plane inside `capacity` bytes.
bool video_layout(const GstVideoInfo& info, guint n_planes, const std::uint64_t* offsets,
                  const std::int64_t* pitches, std::uint64_t capacity, TensorDesc* out,
                  std::string* error) {
  const GstVideoFormat format = GST_VIDEO_INFO_FORMAT(&info);
  const VideoFormat* vf = find_video_format(format);
  if (!vf)
    return fail(error, std::string("video format=") + format_name(format) + " is not supported");
  if (GST_VIDEO_INFO_INTERLACE_MODE(&info) == GST_VIDEO_INTERLACE_MODE_ALTERNATE)
    return fail(error, "interlace-mode=alternate is not supported");
  const gint width = GST_VIDEO_INFO_WIDTH(&info);
  const gint height = GST_VIDEO_INFO_HEIGHT(&info);
  if (width < 1 || height < 1)
    return fail(error,
                "video size " + std::to_string(width) + "x" + std::to_string(height) + " is empty");
  if (n_planes != GST_VIDEO_INFO_N_PLANES(&info) || n_planes > kMaxPlanes)
    return fail(error, std::string("format=") + format_name(format) + " has " +
                           std::to_string(GST_VIDEO_INFO_N_PLANES(&info)) + " planes, not " +
                           std::to_string(n_planes));

  TensorDesc t{};
  t.dtype = layout_dtype(vf->layout);
  t.num_planes = n_planes;
  t.byte_offset = offsets[0];
  std::uint64_t end_max = 0;
  for (guint p = 0; p < n_planes; ++p) {
    const std::string plane = "plane " + std::to_string(p);
    if (pitches[p] <= 0)
      return fail(error, plane + " has pitch " + std::to_string(pitches[p]) +
                             "; a positive row pitch is needed");
    const auto pitch = static_cast<std::uint64_t>(pitches[p]);
    const PlaneGeometry g = plane_geometry(info.finfo, p, width, height);
    if (pitch < g.row_bytes)
      return fail(error, plane + " pitch " + std::to_string(pitch) +
                             " is shorter than its row of " + std::to_string(g.row_bytes) +
                             " bytes");
    // The tensor spans [byte_offset, byte_offset + size): a plane before plane 0 would fall out.
    if (offsets[p] < offsets[0])
      return fail(error, plane + " starts at byte " + std::to_string(offsets[p]) +
                             ", before plane 0 at byte " + std::to_string(offsets[0]));
    std::uint64_t end;
    if (__builtin_mul_overflow(pitch, g.rows - 1, &end) ||
        __builtin_add_overflow(end, g.row_bytes, &end) ||
        __builtin_add_overflow(end, offsets[p], &end) || end > capacity)
      return fail(error, plane + " (offset " + std::to_string(offsets[p]) + ", pitch " +
                             std::to_string(pitch) + ", " + std::to_string(g.rows) +
                             " rows) ends beyond the " + std::to_string(capacity) +
                             " bytes available");
    if (end > end_max) end_max = end;
    t.planes[p] = {offsets[p], pitch};
  }
  t.size = end_max - t.byte_offset;

  const std::int64_t h = height, w = width, pitch = pitches[0];
  auto set = [&t](std::initializer_list<std::int64_t> shape,
                  std::initializer_list<std::int64_t> strides) {
    t.rank = static_cast<std::uint32_t>(shape.size());
    std::copy(shape.begin(), shape.end(), t.shape);
    std::copy(strides.begin(), strides.end(), t.strides);
  };
  switch (vf->layout) {
    case Layout::packed4:
      set({h, w, 4}, {pitch, 4, 1});
      break;
    case Layout::packed3:
      set({h, w, 3}, {pitch, 3, 1});
      break;
    case Layout::gray8:
    case Layout::luma8:
      set({h, w}, {pitch, 1});
      break;
    case Layout::gray16:
    case Layout::luma16:
      set({h, w}, {pitch, 2});
      break;
    case Layout::planar_rgb: {
      // One stride can only step between planes when they are equally spaced and equally pitched.
      const std::uint64_t step = offsets[1] - offsets[0];
      if (step > 0 && offsets[2] - offsets[1] == step && pitches[1] == pitch &&
          pitches[2] == pitch && step <= static_cast<std::uint64_t>(INT64_MAX))
        set({3, h, w}, {static_cast<std::int64_t>(step), pitch, 1});
      else
        set({h, w}, {pitch, 1});
      break;
    }
  }
  try {
    validate(t, capacity);
  } catch (const std::exception& e) {
    return fail(error, e.what());
  }
  *out = t;
  return true;
}

bool same_layout(const TensorDesc& a, const TensorDesc& b) {
  if (a.rank != b.rank || a.rank > kMaxRank) return false;
  for (std::uint32_t i = 0; i < a.rank; ++i)
    if (a.shape[i] != b.shape[i] || a.strides[i] != b.strides[i]) return false;
  return true;
}

std::string strides_text(const TensorDesc& t) {
  std::string s = "[";
  for (std::uint32_t i = 0; i < t.rank && i < kMaxRank; ++i) {
    if (i) s += ',';
    s += std::to_string(t.strides[i]);
  }
  return s + "]";
}

// The producer's tensor must be exactly what video_tensor makes of its planes for these caps.
bool check_video_tensor(const GstVideoInfo& info, const TensorDesc& tensor, std::string* error) {
  const GstVideoFormat format = GST_VIDEO_INFO_FORMAT(&info);
  const VideoFormat* vf = find_video_format(format);
  const std::string says = std::string("producer caps say format=") + format_name(format);
  const guint n_planes = GST_VIDEO_INFO_N_PLANES(&info);
  if (tensor.num_planes != n_planes)
    return fail(error, says + " (" + std::to_string(n_planes) + " planes) but the tensor has " +
                           std::to_string(tensor.num_planes) +
                           (tensor.num_planes == 1 ? " plane" : " planes"));
  const DType dtype = layout_dtype(vf->layout);
  if (tensor.dtype != dtype) {
    const char* got = dtype_name(tensor.dtype);
    return fail(error,
                says + " (" + dtype_name(dtype) + ") but the tensor is " +
                    (got ? got : "of dtype " + std::to_string(static_cast<int>(tensor.dtype))));
  }
  const std::string size_text = std::to_string(GST_VIDEO_INFO_WIDTH(&info)) + "x" +
                                std::to_string(GST_VIDEO_INFO_HEIGHT(&info));
  std::uint64_t offsets[kMaxPlanes] = {};
  std::int64_t pitches[kMaxPlanes] = {};
  for (guint p = 0; p < n_planes; ++p) {
    if (tensor.planes[p].pitch > static_cast<std::uint64_t>(INT_MAX))
      return fail(error, "the tensor's plane " + std::to_string(p) + " pitch " +
                             std::to_string(tensor.planes[p].pitch) + " is too large for video");
    offsets[p] = tensor.planes[p].offset;
    pitches[p] = static_cast<std::int64_t>(tensor.planes[p].pitch);
  }
  const std::uint64_t capacity = tensor.byte_offset + tensor.size;  // validated: no overflow
  TensorDesc expected;
  std::string why;
  if (!video_layout(info, n_planes, offsets, pitches, capacity, &expected, &why))
    return fail(error, says + " " + size_text + " but the tensor's planes do not fit: " + why);
  if (tensor.byte_offset != expected.byte_offset)
    return fail(error, "the tensor's byte_offset " + std::to_string(tensor.byte_offset) +
                           " is not plane 0's offset " + std::to_string(expected.byte_offset));
  if (same_layout(tensor, expected)) return true;
  // A producer may describe planar RGB by its first plane alone.
  if (vf->layout == Layout::planar_rgb && tensor.rank == 2 &&
      tensor.shape[0] == expected.shape[1] && tensor.shape[1] == expected.shape[2] &&
      tensor.strides[0] == pitches[0] && tensor.strides[1] == 1)
    return true;
  return fail(error, says + " " + size_text + " but the tensor is " + to_string(tensor) +
                         " with strides " + strides_text(tensor) + " (expected " +
                         to_string(expected) + " with strides " + strides_text(expected) + ")");
}

void set_features(GstCaps* caps, bool cuda_memory) {
  for (guint i = 0; i < gst_caps_get_size(caps); ++i)
    gst_caps_set_features(
        caps, i, cuda_memory ? gst_caps_features_new(kCudaMemoryFeature, nullptr) : nullptr);
}

}  // namespace

GstCaps* template_caps() {
  const std::string video = "format=(string){ " + video_format_list(", ") +
                            " }, width=(int)[ 1, 2147483647 ], height=(int)[ 1, 2147483647 ], "
                            "framerate=(fraction)[ 0/1, 2147483647/1 ]";
  // types and dimensions take any string; caps cannot say "any string", so they are left out,
  // which matches every value.
  const std::string tensors =
      "format=(string)static, num_tensors=(int)[ 1, 16 ], framerate=(fraction)[ 0/1, 2147483647/1 "
      "]";
  const std::string cuda = std::string("(") + kCudaMemoryFeature + "), ";
  const std::string text = "video/x-raw" + cuda + video + "; video/x-raw, " + video + "; " +
                           kTensorsMediaType + cuda + tensors + "; " + kTensorsMediaType + ", " +
                           tensors;
  return gst_caps_from_string(text.c_str());
}

bool parse_caps(const GstCaps* caps, StreamCaps* out, std::string* error) {
  if (!caps) return fail(error, "no caps");
  if (!check_single_fixed(caps, "caps", error)) return false;
  const GstCapsFeatures* features = gst_caps_get_features(caps, 0);
  StreamCaps parsed;
  if (features && !gst_caps_features_is_equal(features, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY)) {
    if (gst_caps_features_get_size(features) != 1 ||
        !gst_caps_features_contains(features, kCudaMemoryFeature)) {
      GCharPtr text(gst_caps_features_to_string(features));
      return fail(error, "caps features " + quoted(text ? text.get() : "?") +
                             " are not supported; cudaipc takes system memory or " +
                             kCudaMemoryFeature);
    }
    parsed.cuda_memory = true;
  }
  if (!parse_structure(caps, "caps", &parsed, error)) return false;
  *out = parsed;
  return true;
}

bool video_tensor(const GstVideoInfo& info, const GstVideoMeta* meta, gsize buffer_size,
                  TensorDesc* out, std::string* error) {
  const GstVideoFormat format = GST_VIDEO_INFO_FORMAT(&info);
  guint n_planes = GST_VIDEO_INFO_N_PLANES(&info);
  if (n_planes > kMaxPlanes || n_planes < 1)
    return fail(error, std::string("format=") + format_name(format) + " has " +
                           std::to_string(n_planes) + " planes");
  std::uint64_t offsets[kMaxPlanes] = {};
  std::int64_t pitches[kMaxPlanes] = {};
  if (meta) {
    if (meta->format != format)
      return fail(error, std::string("the buffer's video meta says format=") +
                             format_name(meta->format) + " but the caps say " +
                             format_name(format));
    if (static_cast<gint64>(meta->width) != GST_VIDEO_INFO_WIDTH(&info) ||
        static_cast<gint64>(meta->height) != GST_VIDEO_INFO_HEIGHT(&info))
      return fail(error, "the buffer's video meta says " + std::to_string(meta->width) + "x" +
                             std::to_string(meta->height) + " but the caps say " +
                             std::to_string(GST_VIDEO_INFO_WIDTH(&info)) + "x" +
                             std::to_string(GST_VIDEO_INFO_HEIGHT(&info)));
    if (meta->n_planes != n_planes)
      return fail(error, "the buffer's video meta has " + std::to_string(meta->n_planes) +
                             " planes but format=" + format_name(format) + " has " +
                             std::to_string(n_planes));
  }
  for (guint p = 0; p < n_planes; ++p) {
    offsets[p] = meta ? meta->offset[p] : GST_VIDEO_INFO_PLANE_OFFSET(&info, p);
    pitches[p] = meta ? meta->stride[p] : GST_VIDEO_INFO_PLANE_STRIDE(&info, p);
  }
  return video_layout(info, n_planes, offsets, pitches, buffer_size, out, error);
}

std::string wire_caps(const GstCaps* caps) {
  if (!caps) return {};
  GstCaps* copy = gst_caps_copy(caps);
  for (guint i = 0; i < gst_caps_get_size(copy); ++i) gst_caps_set_features(copy, i, nullptr);
  if (!gst_caps_is_any(copy) && !gst_caps_is_empty(copy) && !gst_caps_is_fixed(copy))
    copy = gst_caps_fixate(copy);
  CapsPtr owned(copy);
  return caps_text(owned.get());
}

GstCaps* caps_from_wire(const std::string& caps_text, const TensorDesc& tensor, bool cuda_memory,
                        GstVideoInfo* video, std::string* error) {
  // GStreamer's parser recurses and makes any GType a cast names: the producer's text is checked
  // first (a NUL would also stop the parser and let it accept whatever came before).
  std::string refused;
  if (!peer_text_ok(caps_text, &refused)) {
    fail(error,
         "producer caps text refused (" + refused + "): " + quoted(caps_text.substr(0, 200)));
    return nullptr;
  }
  CapsPtr caps(gst_caps_from_string(caps_text.c_str()));
  if (!caps) {
    fail(error, "producer caps text does not parse: " + quoted(caps_text));
    return nullptr;
  }
  if (!check_single_fixed(caps.get(), "producer caps", error)) return nullptr;
  const GstCapsFeatures* features = gst_caps_get_features(caps.get(), 0);
  if (features && !gst_caps_features_is_equal(features, GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY)) {
    GCharPtr text(gst_caps_features_to_string(features));
    fail(error, "producer caps carry caps features " + quoted(text ? text.get() : "?") +
                    "; the wire form has none");
    return nullptr;
  }
  StreamCaps parsed;
  if (!parse_structure(caps.get(), "producer caps", &parsed, error)) return nullptr;
  try {
    validate(tensor, UINT64_MAX);
  } catch (const std::exception& e) {
    fail(error, std::string("producer tensor: ") + e.what());
    return nullptr;
  }

  if (parsed.kind == MediaKind::video) {
    if (!check_video_tensor(parsed.video, tensor, error)) return nullptr;
    set_features(caps.get(), cuda_memory);
    if (video) *video = parsed.video;
    return caps.release();
  }

  const TensorDesc& want = parsed.tensor;
  const GstStructure* sent = gst_caps_get_structure(caps.get(), 0);
  const char* types = gst_structure_get_string(sent, "types");
  const char* dimensions = gst_structure_get_string(sent, "dimensions");
  if (tensor.num_planes != 0) {
    fail(error, "producer caps say other/tensors but the tensor has " +
                    std::to_string(tensor.num_planes) +
                    (tensor.num_planes == 1 ? " video plane" : " video planes"));
    return nullptr;
  }
  if (tensor.dtype != want.dtype) {
    const char* got = dtype_name(tensor.dtype);
    fail(error, "producer caps say types=" + quoted(types) + " but the tensor is " +
                    (got ? got : "of dtype " + std::to_string(static_cast<int>(tensor.dtype))));
    return nullptr;
  }
  if (!same_dimensions(tensor, want)) {
    fail(error, "producer caps say dimensions=" + quoted(dimensions) + " but the tensor is " +
                    to_string(tensor));
    return nullptr;
  }
  if (tensor.size < want.size) {
    fail(error, "producer caps say " + to_string(want) + " (" + std::to_string(want.size) +
                    " bytes) but the tensor's size is " + std::to_string(tensor.size));
    return nullptr;
  }
  // other/tensors buffers are dense and start at the tensor (NNStreamer's convention).
  TensorDesc dense;
  std::string why;
  if (tensor.byte_offset != 0 ||
      !dense_tensor(tensor.dtype, tensor.rank, tensor.shape, &dense, &why) ||
      !std::equal(tensor.strides, tensor.strides + tensor.rank, dense.strides)) {
    fail(error, "the producer's tensor " + to_string(tensor) + " is not dense at offset 0 " +
                    "(strides " + strides_text(tensor) +
                    "); other/tensors carries dense data only");
    return nullptr;
  }

  // Several tensors: the caps as sent (their spelling is the producer's, and the layout of the
  // slot follows from them; check_tensors_span() checks it against the slot).
  if (parsed.tensors.size() > 1) {
    set_features(caps.get(), cuda_memory);
    return caps.release();
  }
  // Downstream filters spell dimensions either way; offer each spelling so any of them intersects.
  std::vector<std::string> spellings = {dimensions};
  std::string canonical = format_dimensions(want);
  std::string padded = canonical;
  for (auto rank = std::count(canonical.begin(), canonical.end(), ':') + 1; rank < 4; ++rank)
    padded += ":1";
  for (const std::string& s : {canonical, padded})
    if (std::find(spellings.begin(), spellings.end(), s) == spellings.end()) spellings.push_back(s);

  CapsPtr result(gst_caps_new_empty());
  for (const std::string& s : spellings) {
    GstStructure* copy = gst_structure_copy(sent);
    gst_structure_set(copy, "dimensions", G_TYPE_STRING, s.c_str(), nullptr);
    gst_caps_append_structure(result.get(), copy);
  }
  set_features(result.get(), cuda_memory);
  return result.release();
}

bool check_frame_tensor(const GstVideoInfo* video, const TensorDesc& format_tensor,
                        std::uint64_t max_frame_size, const TensorDesc& frame, std::string* error) {
  if (frame.byte_offset + frame.size > max_frame_size)  // both validated: no overflow
    return fail(error, "a frame's tensor spans " + std::to_string(frame.byte_offset + frame.size) +
                           " bytes, more than the format's " + std::to_string(max_frame_size));
  if (!video) {
    if (frame == format_tensor) return true;
    return fail(error, "a frame's tensor " + to_string(frame) + " differs from the format's " +
                           to_string(format_tensor));
  }
  if (frame == format_tensor) return true;
  return check_video_tensor(*video, frame, error);
}

std::uint64_t video_rows_end(const GstVideoInfo& info, const TensorDesc& tensor) {
  std::uint64_t end = tensor.byte_offset + tensor.size;
  for (std::uint32_t p = 0; p < tensor.num_planes && p < GST_VIDEO_MAX_PLANES; ++p) {
    gint comp[GST_VIDEO_MAX_COMPONENTS];
    gst_video_format_info_component(info.finfo, p, comp);
    const auto rows = static_cast<std::uint64_t>(GST_VIDEO_INFO_COMP_HEIGHT(&info, comp[0]));
    end = std::max(end, tensor.planes[p].offset + tensor.planes[p].pitch * rows);
  }
  return end;
}

}  // namespace cudaipc::gst
