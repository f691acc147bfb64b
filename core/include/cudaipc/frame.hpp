// What a frame carries beside its pixels: timing, flags, its tensor description, user metadata and
// the records of its meta area (cudaipc/metas.hpp). FrameDesc is the shared-memory record a
// producer writes for each published frame.
#pragma once

#include <cstdint>
#include <string>

#include "cudaipc/tensor.hpp"

namespace cudaipc {

inline constexpr std::uint32_t kMaxUserMeta = 256;
// Each slot's meta area (ProducerOptions::meta_size): 64 KiB unless the producer asks otherwise.
inline constexpr std::uint32_t kDefaultMetaSize = 64 * 1024;
inline constexpr std::uint32_t kMaxMetaSize = 16 * 1024 * 1024;
inline constexpr std::uint32_t kMaxCapsLength = 4096;
inline constexpr std::uint64_t kNoTime = ~std::uint64_t{0};

enum FrameFlags : std::uint32_t {
  kFlagDiscont = 1u << 0,
  kFlagKeyframe = 1u << 1,  // not a delta unit
  kFlagGap = 1u << 2,
  kFlagCorrupted = 1u << 3,
  kFlagHeader = 1u << 4,
  kFlagDroppable = 1u << 5,
  kFlagMarker = 1u << 6,
};

struct FrameDesc {
  std::uint64_t seq;         // 1, 2, 3... per producer run; never reused
  std::uint64_t generation;  // format generation this frame belongs to
  std::uint64_t pts;         // ns, kNoTime when unset
  std::uint64_t dts;
  std::uint64_t duration;
  std::uint64_t publish_time_ns;  // producer's CLOCK_MONOTONIC at publish
  std::uint32_t flags;
  std::uint32_t user_meta_size;
  std::uint32_t metas_bytes;  // used bytes of the slot's meta area; 0: no metas
  std::uint32_t reserved;
  TensorDesc tensor;
  std::uint8_t user_meta[kMaxUserMeta];
};

// What a producer says about a frame it publishes. tensor == nullptr means "the format's".
struct FrameInfo {
  std::uint64_t pts = kNoTime;
  std::uint64_t dts = kNoTime;
  std::uint64_t duration = kNoTime;
  std::uint32_t flags = 0;
  const TensorDesc* tensor = nullptr;
  const void* user_meta = nullptr;
  std::uint32_t user_meta_size = 0;
  // The frame's meta area: `metas_size` bytes copied into the slot's area, or nothing copied when
  // `metas` already is the area (WriteSlot::metas(), for writers that encode in place).
  const void* metas = nullptr;
  std::uint32_t metas_size = 0;
};

// A channel's stream format. A new one starts a new generation.
struct Format {
  std::string caps;  // free text for the core (GStreamer caps for the elements)
  TensorDesc tensor{};
  std::uint64_t max_frame_size = 0;  // slot bytes needed; 0 = tensor.byte_offset + tensor.size
};

}  // namespace cudaipc
