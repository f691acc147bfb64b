#include "elements/element_errors.h"

#include <gst/base/gstbasesink.h>
#include <gst/base/gstbasesrc.h>

namespace cudaipc::gst {

void post_core_error(GstElement* element, const Error& e, const char* path) {
  const char* what = e.what();
  switch (e.code()) {
    case Errc::busy:
      if (GST_IS_BASE_SRC(element)) {
        GST_ELEMENT_ERROR(
            element, RESOURCE, BUSY,
            ("The producer on %s admits no more consumers (its max-consumers).", path),
            ("%s", what));
        break;
      }
      if (GST_IS_BASE_SINK(element)) {
        GST_ELEMENT_ERROR(element, RESOURCE, BUSY,
                          ("Another cudaipc producer is live on %s. Stop it or choose another "
                           "socket-path.",
                           path),
                          ("%s", what));
        break;
      }
      // A filter's reply channel: the model process's producer is full of readers.
      GST_ELEMENT_ERROR(element, RESOURCE, BUSY,
                        ("The model process on %s admits no more readers of its replies.", path),
                        ("%s", what));
      break;
    case Errc::no_cuda:
      GST_ELEMENT_ERROR(
          element, RESOURCE, NOT_FOUND,
          ("CUDA is not usable: %s. Use ipc-mode=host on the sink for host memory.", what),
          (nullptr));
      break;
    case Errc::cuda:
      GST_ELEMENT_ERROR(element, RESOURCE, FAILED, ("A CUDA call failed: %s", what), (nullptr));
      break;
    case Errc::permission_denied:
      GST_ELEMENT_ERROR(element, RESOURCE, OPEN_READ_WRITE,
                        ("Permission denied on %s: %s. The producer admits its own user and, with "
                         "allowed-group, that group.",
                         path, what),
                        (nullptr));
      break;
    case Errc::system:
      GST_ELEMENT_ERROR(element, RESOURCE, OPEN_READ_WRITE,
                        ("Cannot use socket path %s: %s. Check that its directory exists and is "
                         "writable, and that the path is shorter than 108 bytes.",
                         path, what),
                        (nullptr));
      break;
    case Errc::version_mismatch:
      GST_ELEMENT_ERROR(
          element, RESOURCE, OPEN_READ,
          ("The peer on %s speaks another cudaipc version: %s. Update both ends.", path, what),
          (nullptr));
      break;
    case Errc::protocol:
      GST_ELEMENT_ERROR(element, STREAM, DECODE,
                        ("The peer on %s does not speak the cudaipc protocol: %s", path, what),
                        (nullptr));
      break;
    case Errc::invalid_argument:
    case Errc::unsupported:
      GST_ELEMENT_ERROR(element, RESOURCE, SETTINGS, ("%s", what), (nullptr));
      break;
    case Errc::disconnected:
      GST_ELEMENT_ERROR(element, RESOURCE, READ, ("The producer on %s went away: %s", path, what),
                        (nullptr));
      break;
    default:
      GST_ELEMENT_ERROR(element, RESOURCE, FAILED, ("%s", what),
                        ("cudaipc error %s", errc_name(e.code())));
      break;
  }
}

}  // namespace cudaipc::gst
