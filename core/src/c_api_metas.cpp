// The C API's meta-area writer for the common case of a frame's detections alone (cudaipc.h):
// Python's publish(detections=...) hands its arrays over in one call. The record is the one
// cudaipc_metas_add_analytics writes (c_api_metas_analytics.cpp).
#include "c_api_handles.hpp"
#include "c_api_metas_writer.hpp"
#include "cudaipc/cudaipc.h"

int64_t cudaipc_metas_detections_area(const cudaipc_detections* d) {
  int64_t size = 0;
  const int rc = cudaipc::capi::guard([&] {
    using cudaipc::Errc;
    using cudaipc::Error;
    if (!d) throw Error(Errc::invalid_argument, "detections area: no detections given");
    if (!d->area) throw Error(Errc::invalid_argument, "detections area: the area is NULL");
    static thread_local cudaipc::capi::MetasWriter w;
    w.begin(d->area, d->capacity);
    w.analytics(cudaipc::capi::kAnalyticsName, cudaipc::capi::analytics_of(*d));
    size = w.finish();
  });
  return rc == CUDAIPC_OK ? size : -rc;
}
