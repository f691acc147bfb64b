// The `stats` structures both elements expose (docs/elements.md, "Statistics").
#pragma once

#include <gst/gst.h>

#include "cudaipc/consumer.hpp"
#include "cudaipc/producer.hpp"

namespace cudaipc::gst {

// What cudaipcsink counts beside the producer's own numbers.
struct SinkCounts {
  guint64 in_place = 0;           // frames upstream wrote into lent slots (slot pools)
  guint64 copied = 0;             // frames copied into a slot
  guint64 metas_sent = 0;         // metas that crossed in meta areas
  guint64 metas_oversized = 0;    // left out: they did not fit (meta-size)
  guint64 metas_unsupported = 0;  // left out: no way to encode them here
};

// What cudaipcsrc counts of the metas it got.
struct SourceMetaCounts {
  guint64 received = 0;  // attached to buffers
  guint64 unknown = 0;   // of kinds this process cannot attach
  guint64 bad = 0;       // malformed, dropped
  guint64 filtered = 0;  // left out by forward-metas
};

// cudaipcsink-stats: transfer full.
GstStructure* sink_stats(const ProducerStats& ps, const SinkCounts& counts);
// cudaipcsrc-stats: transfer full.
GstStructure* source_stats(const ConsumerCounters& c, bool connected, const SourceMetaCounts& m);

}  // namespace cudaipc::gst
