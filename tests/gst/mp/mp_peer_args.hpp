// "--key value" and "--flag" arguments of cudaipc-gst-mp-peer, and what both roles share.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace gstmp_peer {

class Args {
 public:
  Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string k = argv[i];
      if (k.rfind("--", 0) != 0) continue;
      k = k.substr(2);
      if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
        values_[k] = argv[++i];
      } else {
        values_[k] = "1";
      }
    }
  }
  std::string str(const std::string& k, const std::string& def = "") const {
    auto it = values_.find(k);
    return it == values_.end() ? def : it->second;
  }
  std::uint64_t num(const std::string& k, std::uint64_t def = 0) const {
    auto it = values_.find(k);
    return it == values_.end() ? def : std::strtoull(it->second.c_str(), nullptr, 10);
  }
  bool flag(const std::string& k) const { return values_.count(k) != 0; }

 private:
  std::map<std::string, std::string> values_;
};

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

}  // namespace gstmp_peer
