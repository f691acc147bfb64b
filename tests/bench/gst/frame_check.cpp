// Frame stamps (latency and order without any transport's help) and the solid-colour check.
#include <algorithm>
#include <cstring>

#include "gst_bench.hpp"

namespace gstbench {
namespace {

// Plane 0's byte offset in the buffer: a GstVideoMeta's when there is one (cudaipcsrc adds
// one with the slot's layout), else the caps' default layout.
gsize plane0_offset(GstBuffer* buf, const GstVideoInfo& info) {
  if (const GstVideoMeta* m = gst_buffer_get_video_meta(buf)) return m->offset[0];
  return GST_VIDEO_INFO_PLANE_OFFSET(&info, 0);
}

struct PlaneRows {
  guint8* data;
  gint stride;
  gsize row_bytes;  // bytes of pixels in one row (no padding)
  gint rows;
  gsize group;  // bytes of one pixel group: the plane's pixel stride
};

PlaneRows plane_rows(GstVideoFrame* f, guint plane) {
  gint comp[GST_VIDEO_MAX_COMPONENTS];
  gst_video_format_info_component(f->info.finfo, plane, comp);
  const gint pstride = GST_VIDEO_FRAME_COMP_PSTRIDE(f, comp[0]);
  return {static_cast<guint8*>(GST_VIDEO_FRAME_PLANE_DATA(f, plane)),
          GST_VIDEO_FRAME_PLANE_STRIDE(f, plane),
          static_cast<gsize>(GST_VIDEO_FRAME_COMP_WIDTH(f, comp[0])) * static_cast<gsize>(pstride),
          GST_VIDEO_FRAME_COMP_HEIGHT(f, comp[0]), static_cast<gsize>(pstride)};
}

}  // namespace

FrameCheck FrameCheck::from(const RunSpec& s) {
  FrameCheck fc;
  gst_video_info_set_format(&fc.info, gst_video_format_from_string(s.format.c_str()),
                            static_cast<guint>(s.width), static_cast<guint>(s.height));
  fc.ref[0] = unhex(s.ref0);
  fc.ref[1] = unhex(s.ref1);
  return fc;
}

bool write_stamp(GstBuffer** buf, const FrameCheck& fc, const Stamp& st, bool* copied) {
  GstBuffer* before = *buf;
  *buf = gst_buffer_make_writable(*buf);
  *copied = *buf != before;
  const gsize offset = plane0_offset(*buf, fc.info);
  GstMemory* mem = gst_buffer_peek_memory(*buf, 0);
  if (is_cuda_memory(mem)) return cuda_write(mem, offset, &st, sizeof st);
  // A read-only memory would be replaced by a copy inside gst_buffer_fill.
  for (guint i = 0; i < gst_buffer_n_memory(*buf); ++i)
    if (!gst_memory_is_writable(gst_buffer_peek_memory(*buf, i))) *copied = true;
  return gst_buffer_fill(*buf, offset, &st, sizeof st) == sizeof st;
}

bool read_stamp(GstBuffer* buf, const FrameCheck& fc, Stamp* out) {
  const gsize offset = plane0_offset(buf, fc.info);
  GstMemory* mem = gst_buffer_peek_memory(buf, 0);
  if (is_cuda_memory(mem)) return cuda_read(mem, offset, out, sizeof *out);
  return gst_buffer_extract(buf, offset, out, sizeof *out) == sizeof *out;
}

bool check_solid(GstBuffer* buf, const FrameCheck& fc, std::string* why) {
  GstVideoFrame f;
  GstVideoInfo info = fc.info;
  if (!gst_video_frame_map(&f, &info, buf, GST_MAP_READ)) {
    *why = "could not map the frame";
    return false;
  }
  bool ok = true;
  for (guint p = 0; ok && p < GST_VIDEO_FRAME_N_PLANES(&f) && p < 2; ++p) {
    const std::vector<std::uint8_t>& ref = fc.ref[p];
    if (ref.empty()) continue;
    const PlaneRows pr = plane_rows(&f, p);
    if (ref.size() != pr.group) {
      *why = "expected colour has " + std::to_string(ref.size()) + " bytes per pixel, plane " +
             std::to_string(p) + " has " + std::to_string(pr.group);
      ok = false;
      break;
    }
    // First, middle and last row: a wrong layout, a torn or a stale frame shows in one of them.
    const gint rows[] = {0, pr.rows / 2, pr.rows - 1};
    for (gint r : rows) {
      const guint8* row = pr.data + static_cast<gsize>(r) * static_cast<gsize>(pr.stride);
      // The stamp covers the first bytes of plane 0; skip whole pixel groups over it.
      gsize start = 0;
      if (p == 0 && r == 0) start = (kStampBytes + pr.group - 1) / pr.group * pr.group;
      for (gsize b = start; b < pr.row_bytes; ++b) {
        if (row[b] == ref[b % pr.group]) continue;
        *why = "plane " + std::to_string(p) + " row " + std::to_string(r) + " byte " +
               std::to_string(b) + ": " + hex(&row[b], 1) + ", expected " +
               hex(&ref[b % pr.group], 1);
        ok = false;
        break;
      }
      if (!ok) break;
    }
  }
  gst_video_frame_unmap(&f);
  return ok;
}

bool check_same(GstBuffer* buf, GstBuffer* ref, const FrameCheck& fc, std::string* why) {
  GstVideoFrame f, r;
  GstVideoInfo info = fc.info, ref_info = fc.info;
  if (!gst_video_frame_map(&f, &info, buf, GST_MAP_READ)) {
    *why = "could not map the frame";
    return false;
  }
  if (!gst_video_frame_map(&r, &ref_info, ref, GST_MAP_READ)) {
    gst_video_frame_unmap(&f);
    *why = "could not map the reference frame";
    return false;
  }
  bool ok = true;
  for (guint p = 0; ok && p < GST_VIDEO_FRAME_N_PLANES(&f); ++p) {
    const PlaneRows a = plane_rows(&f, p), b = plane_rows(&r, p);
    const gint rows[] = {0, a.rows / 2, a.rows - 1};
    for (gint row : rows) {
      const guint8* x = a.data + static_cast<gsize>(row) * static_cast<gsize>(a.stride);
      const guint8* y = b.data + static_cast<gsize>(row) * static_cast<gsize>(b.stride);
      const auto diff = std::mismatch(x, x + a.row_bytes, y);
      if (diff.first == x + a.row_bytes) continue;
      *why = "plane " + std::to_string(p) + " row " + std::to_string(row) + " byte " +
             std::to_string(diff.first - x) + ": " + hex(diff.first, 1) + ", expected " +
             hex(diff.second, 1);
      ok = false;
      break;
    }
  }
  gst_video_frame_unmap(&r);
  gst_video_frame_unmap(&f);
  return ok;
}

bool pixel_groups(GstBuffer* buf, const FrameCheck& fc, std::string* p0, std::string* p1) {
  GstVideoFrame f;
  GstVideoInfo info = fc.info;
  if (!gst_video_frame_map(&f, &info, buf, GST_MAP_READ)) return false;
  std::string* out[2] = {p0, p1};
  for (guint p = 0; p < 2; ++p) {
    out[p]->clear();
    if (p >= GST_VIDEO_FRAME_N_PLANES(&f)) continue;
    const PlaneRows pr = plane_rows(&f, p);
    const guint8* last = pr.data + static_cast<gsize>(pr.rows - 1) * static_cast<gsize>(pr.stride) +
                         pr.row_bytes - pr.group;
    *out[p] = hex(last, pr.group);
  }
  gst_video_frame_unmap(&f);
  return true;
}

}  // namespace gstbench
