// cudaipc_metas_writer (cudaipc.h): records added to a caller's area with the core's writers
// (cudaipc/metas.hpp). A record that does not fit ends the writing; the sizes of it and of every
// record after it are still counted, so that the error names what the whole area needed.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "c_api_handles.hpp"
#include "c_api_metas_writer.hpp"
#include "cudaipc/cudaipc.h"
#include "metas/text.hpp"

namespace {

using cudaipc::Errc;
using cudaipc::Error;
using namespace cudaipc::metas;
using cudaipc::capi::guard;
using cudaipc::capi::MetasWriter;
using cudaipc::capi::name_arg;
using cudaipc::capi::record_name;

constexpr std::size_t pad8(std::size_t n) {
  return (n + 7) & ~std::size_t{7};
}

[[noreturn]] void refuse(const std::string& why) {
  throw Error(Errc::invalid_argument, why);
}

std::string_view view(const char* p, std::uint32_t n, const char* what) {
  if (n && !p) refuse(std::string(what) + " is NULL with a size of " + std::to_string(n));
  return std::string_view(n ? p : "", n);
}

}  // namespace

namespace cudaipc::capi {

std::string_view name_arg(const char* p, std::uint32_t n, const char* what, std::size_t limit) {
  const std::string_view s = view(p, n, what);
  if (std::memchr(s.data(), 0, s.size()))
    refuse(std::string(what) + " " + text::quoted(s) + " holds a NUL character");
  if (!text::valid_utf8(s)) refuse(std::string(what) + " " + text::quoted(s) + " is not UTF-8");
  if (s.size() > limit)
    refuse(std::string(what) + " is " + std::to_string(s.size()) + " bytes, more than the " +
           std::to_string(limit) + " allowed");
  return s;
}

std::string_view record_name(const char* p, std::uint32_t n) {
  return name_arg(p, n, "a record's name", kMaxNameLength);
}

void MetasWriter::begin(std::uint8_t* area, std::uint32_t capacity) {
  if (capacity && !area) refuse("the area is NULL with a capacity of " + std::to_string(capacity));
  area_ = area;
  capacity_ = capacity;
  w_.emplace(area, capacity);
  need_ = kAreaHeaderSize;
  records_ = 0;
  overflow_ = false;
  custom_.reset();
}

std::uint8_t* MetasWriter::reserve(RecordKind kind, std::string_view name, std::size_t body) {
  if (custom_) refuse("a custom record is still open: custom_end it first");
  if (!w_) refuse("the writer has no area: begin one first");
  ++records_;
  const std::size_t start = need_;
  need_ += 8 + pad8(name.size()) + pad8(body);
  if (overflow_) return nullptr;
  std::uint8_t* p = records_ <= 0xffff ? w_->begin_record(kind, name, body) : nullptr;
  // The area's records lie back to back from byte 16: the core's writer puts this one where the
  // counting says, so sizes computed from need_ (tensor data's alignment) are the written ones.
  if (!p || w_->body_offset() != start + 8 + pad8(name.size())) {
    if (p) w_->cancel_record();
    overflow_ = true;
    return nullptr;
  }
  return p;
}

void MetasWriter::commit(std::size_t body) {
  w_->commit_record(body);
}

std::int64_t MetasWriter::finish() {
  if (custom_) refuse("a custom record is still open: custom_end it first");
  if (records_ > 0xffff) refuse(std::to_string(records_) + " meta records: at most 65535 a frame");
  if (overflow_) {
    if (capacity_ == 0)
      refuse("the frame's metas need " + std::to_string(need_) +
             " bytes and the channel has no meta area (its meta_size is 0)");
    refuse("the frame's metas need " + std::to_string(need_) +
           " bytes, more than the channel's meta area of " + std::to_string(capacity_) +
           " bytes per slot");
  }
  return w_ ? static_cast<std::int64_t>(w_->size()) : 0;
}

void MetasWriter::raw(std::uint32_t kind, std::string_view name, const void* body,
                      std::size_t size) {
  if (kind < 1 || kind > 0xffff)
    refuse("record kind " + std::to_string(kind) + " is not between 1 and 65535");
  if (size > 0xffffffffu - 1024) refuse("a record body of " + std::to_string(size) + " bytes");
  std::uint8_t* p = reserve(static_cast<RecordKind>(kind), name, size);
  if (!p) return;
  if (size) std::memcpy(p, body, size);
  commit(size);
}

void MetasWriter::timestamp(std::string_view name, const ReferenceTimestamp& ts) {
  const std::size_t body = 24 + pad8(ts.caps.size());
  std::uint8_t* p = reserve(RecordKind::reference_timestamp, name, body);
  if (!p) return;
  commit(write_reference_timestamp(p, body, ts));
}

void MetasWriter::tensors(std::string_view name, const Tensor* ts, std::uint32_t count) {
  if (count > kMaxTensors)
    refuse(std::to_string(count) + " tensors: at most " + std::to_string(kMaxTensors) + " a frame");
  // Entries first, then each tensor's data on a 64-byte boundary of the area.
  std::size_t entries = 0;
  for (std::uint32_t i = 0; i < count; ++i) entries += TensorsWriter::entry_bytes(ts[i]);
  const std::size_t body_at = need_ + 8 + pad8(name.size());
  std::size_t end = 8 + entries;
  for (std::uint32_t i = 0; i < count; ++i) {
    end = (body_at + end + 63) / 64 * 64 - body_at;
    end += ts[i].data_size;
  }
  const std::size_t body = pad8(end);
  std::uint8_t* p = reserve(RecordKind::tensors, name, body);
  if (!p) return;
  TensorsWriter tw(p, body, body_at, count, entries);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint8_t* data = tw.add(ts[i]);
    if (!data) refuse("tensor " + std::to_string(i) + " could not be laid out");
    if (ts[i].data_size) std::memcpy(data, ts[i].data, ts[i].data_size);
  }
  commit(tw.finish());
}

}  // namespace cudaipc::capi

int cudaipc_metas_writer_new(cudaipc_metas_writer** out) {
  return guard([&] {
    cudaipc::capi::require(out, "out");
    *out = std::make_unique<cudaipc_metas_writer>().release();
  });
}

void cudaipc_metas_writer_free(cudaipc_metas_writer* w) {
  std::unique_ptr<cudaipc_metas_writer> owned(w);
}

int cudaipc_metas_writer_begin(cudaipc_metas_writer* w, uint8_t* area, uint32_t capacity) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    w->w.begin(area, capacity);
  });
}

int64_t cudaipc_metas_writer_finish(cudaipc_metas_writer* w) {
  int64_t size = 0;
  const int rc = guard([&] {
    cudaipc::capi::require(w, "the writer");
    size = w->w.finish();
  });
  return rc == CUDAIPC_OK ? size : -rc;
}

int cudaipc_metas_add_raw(cudaipc_metas_writer* w, uint32_t kind, const char* name,
                          uint32_t name_size, const void* body, uint32_t body_size) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    if (body_size && !body) refuse("the record's body is NULL");
    w->w.raw(kind, record_name(name, name_size), body, body_size);
  });
}

int cudaipc_metas_add_timestamp(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                                uint64_t timestamp, uint64_t duration, const char* caps,
                                uint32_t caps_size) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    const std::string_view c = view(caps, caps_size, "the reference caps");
    if (!text::valid_utf8(c)) refuse("the reference caps are not UTF-8");
    w->w.timestamp(record_name(name, name_size), ReferenceTimestamp{timestamp, duration, c});
  });
}

int cudaipc_metas_add_tensors(cudaipc_metas_writer* w, const char* name, uint32_t name_size,
                              const cudaipc_metas_tensor_in* tensors, uint32_t count,
                              const char* text, uint32_t text_size) {
  return guard([&] {
    cudaipc::capi::require(w, "the writer");
    if (count && !tensors) refuse("the tensors are NULL");
    if (count > kMaxTensors)
      refuse(std::to_string(count) + " tensors: at most " + std::to_string(kMaxTensors) +
             " a frame");
    const std::string_view names = view(text, text_size, "the tensors' text");
    static thread_local std::vector<Tensor> ts;
    ts.assign(count, Tensor{});
    for (std::uint32_t i = 0; i < count; ++i) {
      const cudaipc_metas_tensor_in& in = tensors[i];
      auto part = [&](std::uint32_t off, std::uint32_t n, const char* what) {
        if (off > names.size() || n > names.size() - off)
          refuse("tensor " + std::to_string(i) + "'s " + what + " lies past the text's " +
                 std::to_string(names.size()) + " bytes");
        return names.substr(off, n);
      };
      Tensor& t = ts[i];
      t.id = part(in.id_offset, in.id_size, "id");
      t.dtype = part(in.dtype_offset, in.dtype_size, "data type");
      name_arg(t.id.data(), static_cast<std::uint32_t>(t.id.size()), "a tensor's id", 0xffff);
      if (!tensor_dtype_known(t.dtype))
        refuse("tensor " + text::quoted(t.id) + ": unknown data type " + text::quoted(t.dtype));
      if (in.num_dims > kMaxTensorDims)
        refuse("tensor " + text::quoted(t.id) + ": " + std::to_string(in.num_dims) +
               " dims, at most " + std::to_string(kMaxTensorDims));
      if (in.dims_order > 1)
        refuse("tensor " + text::quoted(t.id) + ": dims order " + std::to_string(in.dims_order));
      t.num_dims = in.num_dims;
      t.dims_order = in.dims_order;
      unsigned __int128 elements = 1;
      for (std::uint32_t k = 0; k < in.num_dims; ++k) {
        t.dims[k] = in.dims[k];
        elements = std::min<unsigned __int128>(elements * in.dims[k],
                                               static_cast<unsigned __int128>(1) << 70);
      }
      const std::uint32_t bits = tensor_dtype_bits(t.dtype);
      if (bits && (elements * bits + 7) / 8 != in.data_size)
        refuse("tensor " + text::quoted(t.id) + ": " + std::to_string(in.data_size) +
               " bytes of data for its dims of " + std::string(t.dtype));
      if (in.data_size && !in.data) refuse("tensor " + text::quoted(t.id) + "'s data is NULL");
      t.data = static_cast<const std::uint8_t*>(in.data);
      t.data_size = in.data_size;
    }
    w->w.tensors(record_name(name, name_size), ts.data(), count);
  });
}
