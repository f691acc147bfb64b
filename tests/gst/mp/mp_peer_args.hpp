// "--key value" and "--flag" arguments of cudaipc-gst-mp-peer, and what both roles share.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../../peers/peer_args.hpp"

namespace gstmp_peer {

// The core test peer's argument reader: the same "--key value" / "--flag" convention.
using Args = peer::Args;

// Prints the first ERROR on the bus, if there is one, as "error: MESSAGE (DEBUG)".
inline bool report_bus_error(GstElement* pipeline) {
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* msg = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  gst_object_unref(bus);
  if (!msg) return false;
  GError* err = nullptr;
  gchar* debug = nullptr;
  gst_message_parse_error(msg, &err, &debug);
  std::printf("error: %s (%s)\n", err ? err->message : "?", debug ? debug : "");
  if (err) g_error_free(err);
  g_free(debug);
  gst_message_unref(msg);
  return true;
}

int produce(const Args& a);
int consume(const Args& a);
int filter(const Args& a);

}  // namespace gstmp_peer
