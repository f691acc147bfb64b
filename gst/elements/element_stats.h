// The `stats` structures both elements expose (docs/elements.md, "Statistics").
#pragma once

#include <gst/gst.h>

#include "cudaipc/consumer.hpp"
#include "cudaipc/producer.hpp"

namespace cudaipc::gst {

// What cudaipcsink counts beside the producer's own numbers.
struct SinkCounts {
  guint64 in_place = 0;  // frames upstream wrote into lent slots (slot pools)
  guint64 copied = 0;    // frames copied into a slot
};

// cudaipcsink-stats: transfer full.
GstStructure* sink_stats(const ProducerStats& ps, const SinkCounts& counts);
// cudaipcsrc-stats: transfer full.
GstStructure* source_stats(const ConsumerCounters& c, bool connected);

}  // namespace cudaipc::gst
