// The element messages an application reacts to instead of polling `stats` (docs/elements.md,
// "Element messages"): a sink's consumers coming and going, a filter's model arriving and leaving.
#pragma once

#include <gst/gst.h>

#include <string>

#include "cudaipc/options.hpp"

namespace cudaipc::gst {

// cudaipcsink-consumer: event joined|left|evicted, pid, mode, reason, consumers.
void post_consumer_change(GstElement* sink, const ConsumerChange& change);

// cudaipcfilter-model: event serving|left, path (the model's reply channel), reason.
void post_model_change(GstElement* filter, bool serving, const std::string& path,
                       const std::string& reason);

}  // namespace cudaipc::gst
