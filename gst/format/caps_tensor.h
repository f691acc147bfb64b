// Caps ⇄ tensor description: what a negotiated GstCaps means as the core's TensorDesc, and what
// caps a source offers for a producer's stream. Both elements use it; nothing here touches a pad.
//
// Video: packed RGBA/BGRA/RGBx/BGRx → (H, W, 4) uint8; RGB/BGR → (H, W, 3); GRAY8 → (H, W) uint8;
// GRAY16_LE → (H, W) uint16; planar RGBP/BGRP → (3, H, W) when the planes are evenly spaced, else
// the first plane; NV12, I420 → the luma plane (H, W) uint8, P010_10LE → (H, W) uint16. Every
// plane's offset and pitch is in TensorDesc::planes, taken from the buffer's GstVideoMeta.
// Tensors: NNStreamer's other/tensors (format=static, num_tensors 1..16, types, dimensions
// innermost first, tensors separated by ','). One slot holds all of a frame's tensors, each at the
// next multiple of kTensorAlign after the one before. docs/caps.md is the reference.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cudaipc/tensor.hpp"

namespace cudaipc::gst {

inline constexpr const char kCudaMemoryFeature[] = "memory:CUDAMemory";
inline constexpr const char kTensorsMediaType[] = "other/tensors";
inline constexpr std::uint32_t kMaxTensorsPerFrame = 16;  // NNStreamer's limit for static tensors
inline constexpr std::uint64_t kTensorAlign = 256;

// The caps both pads accept: video/x-raw and other/tensors, each with and without
// memory:CUDAMemory (CUDA first). Transfer full.
GstCaps* template_caps();

enum class MediaKind { video, tensors };

// What a fixed caps says about the stream.
struct StreamCaps {
  MediaKind kind = MediaKind::video;
  bool cuda_memory = false;  // the caps carry memory:CUDAMemory
  GstVideoInfo video{};      // kind == video
  TensorDesc tensor{};       // kind == tensors: dense, row-major, byte_offset 0, no planes
  // kind == tensors: every tensor of a frame (tensors[0] == tensor), each dense at its offset.
  std::vector<TensorDesc> tensors;
  gint fps_n = 0, fps_d = 1;
};

// Parses fixed caps of either kind. False with a message for the user (naming the field) when the
// caps are not fixed, name an unsupported format, dtype, rank or num_tensors, or do not parse.
bool parse_caps(const GstCaps* caps, StreamCaps* out, std::string* error);

// The tensor description of one video buffer (see the header comment): planes from `meta` when the
// buffer has one, else from `info`. False with a message when the layout does not fit in
// `buffer_size` bytes.
bool video_tensor(const GstVideoInfo& info, const GstVideoMeta* meta, gsize buffer_size,
                  TensorDesc* out, std::string* error);

// Bytes from the slot's start to the end of the last plane's last row, padding included: what a
// GstVideoInfo describing the slot must count as its size (GStreamer derives row counts from it).
std::uint64_t video_rows_end(const GstVideoInfo& info, const TensorDesc& tensor);

// The caps text that travels with the stream: `caps` without caps features, fixed. Untrusted on
// the other side, so it is parsed again there (caps_from_wire).
std::string wire_caps(const GstCaps* caps);

// Source side. The producer's caps text and tensor description (both untrusted: validated here,
// and checked against each other: media type, size, format or dtype and shape must agree) become
// caps for downstream, with memory:CUDAMemory when `cuda_memory`. For tensors the result is a
// list of equivalent `dimensions` spellings (as sent, trailing 1s trimmed, padded to rank 4) so
// downstream filters written either way intersect. Sets *video for video streams. Null with a
// message on malformed input. Transfer full.
GstCaps* caps_from_wire(const std::string& caps_text, const TensorDesc& tensor, bool cuda_memory,
                        GstVideoInfo* video, std::string* error);

// Source side, every frame: a frame's own tensor description (untrusted; it may differ from the
// format's, e.g. a sink that publishes a lent slot's layout) must describe the stream the caps
// announced, within `max_frame_size` bytes (the core checked that against the slot). Video: the
// caps' format, size and plane count, planes inside the frame; tensors: the format's tensor.
bool check_frame_tensor(const GstVideoInfo* video, const TensorDesc& format_tensor,
                        std::uint64_t max_frame_size, const TensorDesc& frame, std::string* error);

// Bytes from the slot's start to the last tensor's end.
std::uint64_t tensors_span(const std::vector<TensorDesc>& tensors);

// NNStreamer dimension strings, innermost first, ':' (or '.') separated: "3:640:480" is shape
// {480, 640, 3}. Outermost dimensions of 1 beyond kMaxRank are dropped; a 0, a negative or a
// non-number is refused. format_dimensions writes the canonical spelling (no trailing 1s, at
// least rank 1).
bool parse_dimensions(const char* text, std::uint32_t* rank, std::int64_t* shape,
                      std::string* error);
std::string format_dimensions(const TensorDesc& tensor);
// True when two shapes are equal once outermost 1s are dropped ("3:224:224" == "3:224:224:1").
bool same_dimensions(const TensorDesc& a, const TensorDesc& b);

}  // namespace cudaipc::gst
