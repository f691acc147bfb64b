// The C API's results of replies computed on the GPU (cudaipc_server_reply_results,
// cudaipc_server_reply_after): their description as the core's server takes it, and the encoder
// that writes a reply's meta area from them on the server's thread.
#pragma once

#include "cudaipc/cudaipc.h"
#include "cudaipc/server.hpp"

namespace cudaipc::capi {

ResultDetections results_of(const cudaipc_reply_results& r);
ResultDetections results_of(const cudaipc_detections& d);

// The detections as one analytics record, then the host records; reuses its buffers (one per
// thread), so a reply allocates nothing once they are large enough.
std::uint32_t encode_results(const ReadyResults& r, std::uint8_t* area, std::uint32_t capacity);

}  // namespace cudaipc::capi
