// The C API's model side of cudaipcfilter (cudaipc.h, cudaipc/server.hpp): a Server handle whose
// requests are handed out as ordinary frame handles that remember their pipeline.
#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "c_api_handles.hpp"
#include "c_api_reply_results.hpp"
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
  std::shared_ptr<cudaipc::capi::HeldFrames> held = std::make_shared<cudaipc::capi::HeldFrames>();
  // Several threads may take batches at once (cudaipc_server_batch): the descriptions they hand
  // out are numbered under this.
  std::mutex hand_out_mu;
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

cudaipc::Server& open_server(cudaipc_server* s) {
  require(s, "server");
  return *s->s;
}

// The request as a frame handle, and its view.
void hand_out(cudaipc_server* s, cudaipc::Request&& r, cudaipc_request_view* v) {
  // What may throw (the map's node, the handle) comes before the request is moved into its handle:
  // a failure leaves it with `r`, released as it goes, and nothing counted held.
  std::uint32_t tensor_id;
  {
    const cudaipc::FrameDesc& d = r.frame.desc();
    std::lock_guard<std::mutex> lock(s->hand_out_mu);
    Described& seen = s->described[r.pipeline()];
    std::shared_ptr<const void> format = r.format_handle();
    if (seen.format != format || d.tensor != seen.tensor) {
      seen.format = std::move(format);
      seen.tensor = d.tensor;
      seen.tensor_id = ++s->next_tensor_id;
    }
    tensor_id = seen.tensor_id;
  }
  const int device = r.cuda_device();
  std::unique_ptr<cudaipc_frame> f = s->held->take(r.frame.seq());
  f->held = s->held;
  f->cuda_device = device;
  f->f = std::move(r.frame);
  f->route = std::move(r);
  f->routed = true;
  *v = cudaipc_request_view{};
  v->pipeline = f->route.pipeline();
  cudaipc::capi::describe_frame(f.release(), tensor_id, &v->frame);
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
    // Each calling thread's own (its room kept from call to call: no allocation once warm), so
    // threads taking batches at once each get requests of their own.
    thread_local std::vector<cudaipc::Request> batch;
    struct Emptied {  // what a failure part-way left in it goes now, not at this thread's next call
      ~Emptied() { batch.clear(); }
    } emptied;
    // Room for a batch up front (bounded: a caller's max_batch may be far more than will come).
    const std::size_t room = std::min<std::size_t>(std::max<std::uint32_t>(max_batch, 32), 1024);
    if (batch.capacity() < room) batch.reserve(room);
    if (!server.batch(batch, max_batch, to_duration(max_delay_ns), to_duration(timeout_ns)))
      throw cudaipc::Error(cudaipc::Errc::interrupted, "the server was interrupted");
    // Counted once handed out: on a failure part-way the caller releases views[0 .. *count).
    for (cudaipc::Request& r : batch) {
      hand_out(s, std::move(r), &views[*count]);
      ++*count;
    }
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
        {
          std::lock_guard<std::mutex> lock(s->hand_out_mu);
          s->described.erase(s->event.pipeline);
        }
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
    take_answer(request);
    try {
      cudaipc::ResultDetections d;
      if (detections) d = cudaipc::capi::results_of(*detections);
      const std::uint64_t t = server.send_reply_results(request->route, request->f.desc(), stream,
                                                        detections ? &d : nullptr, metas,
                                                        metas_size, cudaipc::capi::encode_results);
      if (ticket) *ticket = t;
    } catch (...) {
      request->answered.store(false);  // not sent: the caller may answer it another way
      throw;
    }
  });
}

int cudaipc_server_reply_results(cudaipc_server* s, void* stream,
                                 const cudaipc_reply_results* replies, uint32_t count, int release,
                                 uint32_t* sent, uint64_t* ticket) {
  return guard([&] {
    require(sent, "sent");
    *sent = 0;
    cudaipc::Server& server = open_server(s);
    if (count) require(replies, "replies");
    for (uint32_t i = 0; i < count; ++i) {
      const cudaipc_reply_results& r = replies[i];
      cudaipc_frame* request = r.request;
      take_answer(request);
      try {
        const bool has = r.flags & CUDAIPC_RESULTS_DETECTIONS;
        cudaipc::ResultDetections d;
        if (has) d = cudaipc::capi::results_of(r);
        const std::uint64_t t =
            server.send_reply_results(request->route, request->f.desc(), stream, has ? &d : nullptr,
                                      r.metas, r.metas_size, cudaipc::capi::encode_results);
        if (ticket) *ticket = t;
      } catch (...) {
        request->answered.store(false);
        throw;
      }
      ++*sent;
      // Released even when ordering the release fails (then said after): the hold never stays.
      if (release) cudaipc::capi::unref(request, stream, true);
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
    // The request's frame is the handle's own (`route` routes the reply only).
    if (cuda_stream) *cuda_stream = cudaipc_frame_cuda_stream(request);
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
