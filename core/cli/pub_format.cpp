#include "pub_format.hpp"

#include <cstdlib>
#include <map>
#include <vector>

#include "args.hpp"
#include "cudaipc/tensor.hpp"

namespace cudaipc::cli {
namespace {

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) {
  return (v + to - 1) / to * to;
}

// The caps' fields: "video/x-raw,format=RGBA,width=(int)640" -> {format: RGBA, width: 640}.
std::map<std::string, std::string> caps_fields(const std::string& caps, std::string& media) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  bool first = true;
  while (pos <= caps.size()) {
    std::size_t comma = caps.find(',', pos);
    if (comma == std::string::npos) comma = caps.size();
    std::string item = caps.substr(pos, comma - pos);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (first) {
      media = item;
      first = false;
    } else if (!item.empty()) {
      const auto eq = item.find('=');
      if (eq == std::string::npos) throw UsageError("caps field '" + item + "' has no value");
      std::string value = item.substr(eq + 1);
      if (!value.empty() && value[0] == '(') {
        const auto close = value.find(')');
        if (close != std::string::npos) value = value.substr(close + 1);
      }
      out[item.substr(0, eq)] = value;
    }
    pos = comma + 1;
  }
  return out;
}

std::int64_t positive(const std::map<std::string, std::string>& f, const char* key) {
  auto it = f.find(key);
  if (it == f.end()) throw UsageError(std::string("the caps need a ") + key);
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (*end != '\0' || v < 1 || v > 65536)
    throw UsageError(std::string("caps ") + key + "=" + it->second + " is not a size");
  return v;
}

TensorDesc parse_tensor(const std::string& spec) {
  const auto open = spec.find('[');
  if (open == std::string::npos || spec.back() != ']')
    throw UsageError("--tensor " + spec + ": expected DTYPE[D0,D1,...], e.g. float32[3,224,224]");
  const DType dtype = dtype_from_name(spec.substr(0, open));
  if (dtype == DType::invalid)
    throw UsageError("--tensor " + spec + ": unknown dtype '" + spec.substr(0, open) + "'");
  std::vector<std::int64_t> shape;
  std::string dims = spec.substr(open + 1, spec.size() - open - 2);
  std::size_t pos = 0;
  while (pos < dims.size()) {
    std::size_t comma = dims.find(',', pos);
    if (comma == std::string::npos) comma = dims.size();
    char* end = nullptr;
    const std::string d = dims.substr(pos, comma - pos);
    const long long v = std::strtoll(d.c_str(), &end, 10);
    if (d.empty() || *end != '\0' || v < 1 || v > (1ll << 31))
      throw UsageError("--tensor " + spec + ": bad dimension '" + d + "'");
    shape.push_back(v);
    pos = comma + 1;
  }
  if (shape.empty() || shape.size() > kMaxRank)
    throw UsageError("--tensor " + spec + ": 1 to " + std::to_string(kMaxRank) + " dimensions");
  TensorDesc t{};
  t.dtype = dtype;
  t.rank = static_cast<std::uint32_t>(shape.size());
  std::int64_t stride = static_cast<std::int64_t>(dtype_size(dtype));
  for (int i = static_cast<int>(t.rank) - 1; i >= 0; --i) {
    t.shape[i] = shape[static_cast<std::size_t>(i)];
    t.strides[i] = stride;
    if (__builtin_mul_overflow(stride, t.shape[i], &stride) || stride > (1ll << 34))
      throw UsageError("--tensor " + spec + " is too large");
  }
  t.size = static_cast<std::uint64_t>(stride);
  return t;
}

// Raw video as GStreamer lays it out (rows padded to 4 bytes), as cudaipcsrc's caps mapping
// expects the producer's tensor to be.
TensorDesc video_tensor(const std::string& fmt, std::int64_t w, std::int64_t h) {
  TensorDesc t{};
  t.dtype = DType::uint8;
  t.num_planes = 1;
  auto packed = [&](std::int64_t channels, std::int64_t esize) {
    const auto pitch =
        static_cast<std::int64_t>(round_up(static_cast<std::uint64_t>(w * channels * esize), 4));
    t.planes[0] = {0, static_cast<std::uint64_t>(pitch)};
    t.size = static_cast<std::uint64_t>(pitch * (h - 1) + w * channels * esize);
    if (channels == 1) {
      t.rank = 2;
      t.shape[0] = h;
      t.shape[1] = w;
      t.strides[0] = pitch;
      t.strides[1] = esize;
    } else {
      t.rank = 3;
      t.shape[0] = h;
      t.shape[1] = w;
      t.shape[2] = channels;
      t.strides[0] = pitch;
      t.strides[1] = channels * esize;
      t.strides[2] = esize;
    }
  };
  static const char* kFour[] = {"RGBA", "BGRA", "RGBx", "BGRx", "ARGB", "ABGR", "xRGB", "xBGR"};
  for (const char* f : kFour)
    if (fmt == f) {
      packed(4, 1);
      return t;
    }
  if (fmt == "RGB" || fmt == "BGR") {
    packed(3, 1);
  } else if (fmt == "GRAY8") {
    packed(1, 1);
  } else if (fmt == "GRAY16_LE") {
    t.dtype = DType::uint16;
    packed(1, 2);
  } else if (fmt == "NV12" || fmt == "I420") {
    // The tensor is the luma plane; the chroma planes follow it in the slot.
    packed(1, 1);
    const std::uint64_t y_pitch = t.planes[0].pitch;
    const std::uint64_t y_bytes = y_pitch * round_up(static_cast<std::uint64_t>(h), 2);
    const std::uint64_t c_rows = (static_cast<std::uint64_t>(h) + 1) / 2;
    if (fmt == "NV12") {
      t.num_planes = 2;
      t.planes[1] = {y_bytes, y_pitch};
      t.size = y_bytes + y_pitch * (c_rows - 1) + round_up(static_cast<std::uint64_t>(w), 2);
    } else {
      const std::uint64_t c_width = (static_cast<std::uint64_t>(w) + 1) / 2;
      const std::uint64_t c_pitch = round_up(c_width, 4);
      t.num_planes = 3;
      t.planes[1] = {y_bytes, c_pitch};
      t.planes[2] = {y_bytes + c_pitch * c_rows, c_pitch};
      t.size = t.planes[2].offset + c_pitch * (c_rows - 1) + c_width;
    }
  } else {
    throw UsageError("video format=" + fmt +
                     " is not one pub knows (RGBA BGRA RGBx BGRx ARGB ABGR xRGB xBGR RGB BGR GRAY8 "
                     "GRAY16_LE NV12 I420); give the layout with --tensor");
  }
  return t;
}

}  // namespace

PubFormat pub_format(const std::string& caps, const std::string& tensor) {
  PubFormat out;
  std::string media;
  const auto fields = caps_fields(caps, media);
  if (media.empty()) throw UsageError("--caps needs a media type, e.g. video/x-raw,...");
  out.format.caps = caps;
  if (auto it = fields.find("framerate"); it != fields.end()) {
    const auto slash = it->second.find('/');
    const double num = std::atof(it->second.substr(0, slash).c_str());
    const double den =
        slash == std::string::npos ? 1 : std::atof(it->second.substr(slash + 1).c_str());
    if (num > 0 && den > 0) out.framerate = num / den;
  }
  if (!tensor.empty()) {
    out.format.tensor = parse_tensor(tensor);
  } else if (media == "video/x-raw") {
    auto it = fields.find("format");
    if (it == fields.end()) throw UsageError("video/x-raw caps need a format=");
    out.format.tensor =
        video_tensor(it->second, positive(fields, "width"), positive(fields, "height"));
  } else {
    throw UsageError("caps of type " + media + " need --tensor DTYPE[D0,D1,...] for their layout");
  }
  validate(out.format.tensor, ~std::uint64_t{0});
  return out;
}

}  // namespace cudaipc::cli
