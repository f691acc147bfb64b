// Turns the core's errors into element error messages that say what to do.
#pragma once

#include <gst/gst.h>

#include "cudaipc/error.hpp"

namespace cudaipc::gst {

// Posts GST_ELEMENT_ERROR with the domain and code that fit e.code(); `path` is the socket path.
void post_core_error(GstElement* element, const Error& e, const char* path);

}  // namespace cudaipc::gst
