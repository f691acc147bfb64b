// What `cudaipc pub --caps` publishes: the tensor (and planes) GStreamer's cudaipcsrc expects for
// raw video caps, or a tensor given with --tensor for any other caps.
#pragma once

#include <string>

#include "cudaipc/frame.hpp"

namespace cudaipc::cli {

struct PubFormat {
  Format format;
  double framerate = 0;  // from the caps' framerate field; 0 when it has none
};

// `tensor` ("uint8[480,640,4]") overrides what the caps say; UsageError naming the problem.
PubFormat pub_format(const std::string& caps, const std::string& tensor);

}  // namespace cudaipc::cli
