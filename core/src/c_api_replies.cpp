// The C API's model side of cudaipcfilter (cudaipc.h, cudaipc/server.hpp): a reply channel made as
// a producer handle, and one call that answers a request frame on it.
#include <cstring>

#include "c_api_handles.hpp"
#include "cudaipc/cudaipc.h"
#include "cudaipc/server.hpp"

using cudaipc::capi::guard;
using cudaipc::capi::require;

int cudaipc_reply_channel_new(const char* request_path, uint32_t slots, uint32_t meta_size,
                              cudaipc_producer** out) {
  return guard([&] {
    require(request_path, "request path");
    require(out, "out");
    if (!*request_path)
      throw cudaipc::Error(cudaipc::Errc::invalid_argument,
                           "a reply channel needs the filter's path");
    auto h = std::make_unique<cudaipc_producer>();
    h->p = std::make_unique<cudaipc::Producer>(
        cudaipc::reply_channel_options(request_path, slots ? slots : 8, meta_size));
    h->p->set_format(cudaipc::reply_format());
    *out = h.release();
  });
}

int cudaipc_reply_publish(cudaipc_producer* replies, const cudaipc_frame* request,
                          const void* metas, uint32_t metas_size) {
  int status = CUDAIPC_OK;
  const int rc = guard([&] {
    require(replies, "reply channel");
    require(request, "request");
    if (!request->f)
      throw cudaipc::Error(cudaipc::Errc::invalid_argument, "the request was already released");
    if (metas_size && !metas)
      throw cudaipc::Error(cudaipc::Errc::invalid_argument, "metas of a size but no bytes");
    const cudaipc::PublishStatus st =
        cudaipc::publish_reply(*replies->p, request->f.desc(), metas, metas_size);
    if (st != cudaipc::PublishStatus::published) status = CUDAIPC_ERR_TIMEOUT;
  });
  return rc != CUDAIPC_OK ? rc : status;
}
