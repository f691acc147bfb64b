// The C API's model side of cudaipcfilter (cudaipc.h, cudaipc/server.hpp): a Server handle whose
// requests are handed out as ordinary frame handles that remember their pipeline.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "c_api_handles.hpp"
#include "c_api_metas_writer.hpp"
#include "cudaipc/cudaipc.h"
#include "cudaipc/server.hpp"

using cudaipc::capi::guard;
using cudaipc::capi::require;
using cudaipc::capi::to_duration;

namespace {

// What a pipeline's last request looked like, for the views' tensor_id.
struct Described {
  cudaipc::TensorDesc tensor{};
  std::shared_ptr<const void> format;
  std::uint32_t tensor_id = 0;
};

}  // namespace

struct cudaipc_server {
  std::unique_ptr<cudaipc::Server> s;
  std::vector<cudaipc::Request> batch;
  std::shared_ptr<cudaipc::capi::HeldFrames> held = std::make_shared<cudaipc::capi::HeldFrames>();
  std::unordered_map<std::uint32_t, Described> described;
  std::uint32_t next_tensor_id = 0;
  std::vector<std::string> paths;  // of the last cudaipc_server_pipelines
  cudaipc::ServerEvent event;      // the last cudaipc_server_next_event's
};

namespace {

// A request handed out by a server, not released, and answered now (once only).
void take_answer(cudaipc_frame* request) {
  require(request, "request");
  if (!request->route.pipeline())
    throw cudaipc::Error(cudaipc::Errc::invalid_argument, "the frame is not a server's request");
  if (!request->f)
    throw cudaipc::Error(cudaipc::Errc::invalid_argument, "the request was already released");
  if (request->answered.exchange(true))
    throw cudaipc::Error(cudaipc::Errc::invalid_argument,
                         "request " + std::to_string(request->f.seq()) + " was already answered");
}

// The most labels named in decimal beyond a names table (a label past it is a model's class the
// caller gave no name; a larger one is refused by the writer as the host path's would be).
constexpr std::int64_t kMaxDecimalLabel = 65536;

// Labels past `d`'s names table get their decimal text, as Python's host path names them: the
// table is extended into `text`/`offsets` (which `d` then points to). The labels were read by the
// GPU's copies only now, so this cannot happen before.
void name_every_label(cudaipc_detections& d, std::string& text,
                      std::vector<std::uint32_t>& offsets) {
  if (!d.labels || !d.n) return;
  std::int64_t top = -1;
  for (std::uint32_t i = 0; i < d.n; ++i) top = std::max(top, d.labels[i]);
  if (top < static_cast<std::int64_t>(d.name_count) || top >= kMaxDecimalLabel) return;
  offsets.push_back(0);
  for (std::uint32_t k = 0; k < d.name_count; ++k) {
    text.append(reinterpret_cast<const char*>(d.names) + d.name_offsets[k],
                d.name_offsets[k + 1] - d.name_offsets[k]);
    offsets.push_back(static_cast<std::uint32_t>(text.size()));
  }
  for (std::int64_t k = d.name_count; k <= top; ++k) {
    text += std::to_string(k);
    offsets.push_back(static_cast<std::uint32_t>(text.size()));
  }
  d.names = reinterpret_cast<const std::uint8_t*>(text.data());
  d.name_offsets = offsets.data();
  d.name_count = static_cast<std::uint32_t>(top + 1);
}

cudaipc::Server& open_server(cudaipc_server* s) {
  require(s, "server");
  return *s->s;
}

// The request as a frame handle, and its view.
void hand_out(cudaipc_server* s, cudaipc::Request&& r, cudaipc_request_view* v) {
  auto f = std::make_unique<cudaipc_frame>();
  f->held = s->held;
  f->cuda_device = r.cuda_device();
  f->held->add(r.frame.seq());
  f->f = std::move(r.frame);
  f->route = std::move(r);
  const cudaipc::FrameDesc& d = f->f.desc();
  Described& seen = s->described[f->route.pipeline()];
  std::shared_ptr<const void> format = f->route.format_handle();
  if (seen.format != format || std::memcmp(&d.tensor, &seen.tensor, sizeof d.tensor) != 0) {
    seen.format = std::move(format);
    seen.tensor = d.tensor;
    seen.tensor_id = ++s->next_tensor_id;
  }
  *v = cudaipc_request_view{};
  v->pipeline = f->route.pipeline();
  cudaipc::capi::describe_frame(f.release(), seen.tensor_id, &v->frame);
}

}  // namespace

extern "C" {

void cudaipc_server_options_init(cudaipc_server_options* o) {
  if (!o) return;
  *o = cudaipc_server_options{};
  o->cuda_device = -1;
  o->reply_meta_size = cudaipc::kDefaultMetaSize;
  o->queue_depth = 16;
  o->socket_mode = 0600;
  o->allowed_gid = -1;
}

int cudaipc_server_new(const cudaipc_server_options* o, cudaipc_server** out) {
  return guard([&] {
    require(o, "options");
    require(out, "out");
    cudaipc::ServerOptions so;
    if (o->path_count) require(o->paths, "paths");
    for (uint32_t i = 0; i < o->path_count; ++i) {
      require(o->paths[i], "a path");
      so.paths.emplace_back(o->paths[i]);
    }
    if (o->directory) so.directory = o->directory;
    if (o->scan_interval_ns)
      so.scan_interval =
          std::chrono::duration_cast<std::chrono::milliseconds>(to_duration(o->scan_interval_ns));
    if (so.scan_interval.count() < 1) so.scan_interval = std::chrono::milliseconds(1);
    so.cuda.device = o->cuda_device;
    so.reply_slots = o->reply_slots ? o->reply_slots : 8;
    so.reply_meta_size = o->reply_meta_size;
    so.queue_depth = o->queue_depth;
    so.socket_mode = o->socket_mode;
    if (o->allowed_gid >= 0) so.allowed_gid = static_cast<gid_t>(o->allowed_gid);
    auto h = std::make_unique<cudaipc_server>();
    h->s = std::make_unique<cudaipc::Server>(so);
    h->batch.reserve(cudaipc::kMaxInflight);
    *out = h.release();
  });
}

void cudaipc_server_free(cudaipc_server* s) {
  std::unique_ptr<cudaipc_server> owned(s);
}

int cudaipc_server_add(cudaipc_server* s, const char* path, uint32_t* pipeline) {
  return guard([&] {
    require(path, "path");
    const std::uint32_t id = open_server(s).add(path);
    if (pipeline) *pipeline = id;
  });
}

int cudaipc_server_batch(cudaipc_server* s, uint32_t max_batch, uint64_t max_delay_ns,
                         uint64_t timeout_ns, cudaipc_request_view* views, uint32_t* count,
                         uint32_t* events) {
  return guard([&] {
    require(views, "views");
    require(count, "count");
    *count = 0;
    cudaipc::Server& server = open_server(s);
    if (!server.batch(s->batch, max_batch, to_duration(max_delay_ns), to_duration(timeout_ns)))
      throw cudaipc::Error(cudaipc::Errc::interrupted, "the server was interrupted");
    // Counted once handed out: on a failure part-way the caller releases views[0 .. *count).
    for (cudaipc::Request& r : s->batch) {
      hand_out(s, std::move(r), &views[*count]);
      ++*count;
    }
    s->batch.clear();
    if (events) *events = static_cast<uint32_t>(server.events());
  });
}

int cudaipc_server_next_event(cudaipc_server* s, cudaipc_server_event* out) {
  return guard([&] {
    require(out, "out");
    *out = cudaipc_server_event{};
    if (!open_server(s).event(s->event)) return;
    switch (s->event.type) {
      case cudaipc::ServerEventType::eos:
        out->type = CUDAIPC_SERVER_EOS;
        break;
      case cudaipc::ServerEventType::disconnected:
        out->type = CUDAIPC_SERVER_DISCONNECTED;
        break;
      case cudaipc::ServerEventType::joined:
        out->type = CUDAIPC_SERVER_JOINED;
        break;
      case cudaipc::ServerEventType::left:
        out->type = CUDAIPC_SERVER_LEFT;
        s->described.erase(s->event.pipeline);
        break;
      default:
        return;  // requests and formats are never kept
    }
    out->pipeline = s->event.pipeline;
    out->path = s->event.path.c_str();
    out->message = s->event.message.c_str();
  });
}

int cudaipc_server_reply(cudaipc_server* s, cudaipc_frame* request, const void* metas,
                         uint32_t metas_size) {
  int status = CUDAIPC_OK;
  const int rc = guard([&] {
    cudaipc::Server& server = open_server(s);
    take_answer(request);
    try {
      if (!server.send_reply(request->route, request->f.desc(), metas, metas_size))
        status = CUDAIPC_ERR_TIMEOUT;
    } catch (...) {
      request->answered.store(false);
      throw;
    }
  });
  return rc != CUDAIPC_OK ? rc : status;
}

int cudaipc_server_reply_after(cudaipc_server* s, cudaipc_frame* request, void* stream,
                               const cudaipc_detections* detections, const void* metas,
                               uint32_t metas_size, uint64_t* ticket) {
  return guard([&] {
    cudaipc::Server& server = open_server(s);
    if (metas_size && !metas)
      throw cudaipc::Error(cudaipc::Errc::invalid_argument, "metas of a size but no bytes");
    take_answer(request);
    // What is needed at encoding time is copied now: the detections' description (its arrays
    // stay the caller's until the ticket is done) and the records ready on the host.
    std::optional<cudaipc_detections> d;
    if (detections) d = *detections;
    std::vector<std::uint8_t> ready(static_cast<const std::uint8_t*>(metas),
                                    static_cast<const std::uint8_t*>(metas) + metas_size);
    auto encode = [d, ready = std::move(ready)](std::uint8_t* area, std::uint32_t capacity) {
      cudaipc::capi::MetasWriter w;
      w.begin(area, capacity);
      if (d) {
        cudaipc_detections named = *d;
        std::string text;
        std::vector<std::uint32_t> offsets;
        name_every_label(named, text, offsets);
        w.analytics(cudaipc::capi::kAnalyticsName, cudaipc::capi::analytics_of(named));
      }
      if (!ready.empty()) {
        cudaipc::metas::AreaReader r(ready.data(), ready.size());
        cudaipc::metas::Record rec;
        while (r.next(&rec))
          w.raw(static_cast<std::uint32_t>(rec.kind), rec.name, rec.body.data, rec.body.size);
        if (r.error())
          throw cudaipc::Error(cudaipc::Errc::invalid_argument,
                               std::string("the reply's host records: ") + r.error());
      }
      return static_cast<std::uint32_t>(w.finish());
    };
    try {
      const std::uint64_t t =
          server.send_reply_after(request->route, request->f.desc(), stream, std::move(encode));
      if (ticket) *ticket = t;
    } catch (...) {
      request->answered.store(false);  // not sent: the caller may answer it another way
      throw;
    }
  });
}

uint64_t cudaipc_server_replies_done(cudaipc_server* s) {
  return s && s->s ? s->s->replies_done() : 0;
}

int cudaipc_request_format(const cudaipc_frame* request, const char** caps, uint64_t* generation,
                           void** cuda_stream) {
  return guard([&] {
    require(request, "request");
    if (!request->route.pipeline())
      throw cudaipc::Error(cudaipc::Errc::invalid_argument, "the frame is not a server's request");
    if (caps) *caps = request->route.format().caps.c_str();
    if (generation) *generation = request->route.format_generation();
    if (cuda_stream) *cuda_stream = request->route.cuda_stream();
  });
}

void cudaipc_server_interrupt(cudaipc_server* s) {
  if (s && s->s) s->s->interrupt();
}

int cudaipc_server_pipelines(cudaipc_server* s, cudaipc_server_pipeline* out, uint32_t capacity,
                             uint32_t* count) {
  return guard([&] {
    require(count, "count");
    const std::vector<cudaipc::ServerPipelineInfo> all = open_server(s).pipelines();
    *count = static_cast<uint32_t>(all.size());
    if (capacity) require(out, "out");
    s->paths.clear();
    for (const auto& p : all) s->paths.push_back(p.path);
    for (uint32_t i = 0; i < capacity && i < all.size(); ++i) {
      out[i] = cudaipc_server_pipeline{};
      out[i].id = all[i].id;
      out[i].connected = all[i].connected ? 1 : 0;
      out[i].queued = all[i].queued;
      out[i].requests = all[i].requests;
      out[i].replies = all[i].replies;
      out[i].replies_lost = all[i].replies_lost;
      out[i].path = s->paths[i].c_str();
    }
  });
}

}  // extern "C"
