// Checks an element's property writes share: the state a property may change in, and the meta
// lists (forward-metas, reply-metas) that must parse.
#pragma once

#include <gst/gst.h>

namespace cudaipc::gst {

// Whether a set_property of `pspec` to `value` goes ahead: both checks below, the second for the
// meta lists. Each element's set_property asks first and keeps the old value on false.
bool property_write_allowed(GstElement* element, const GParamSpec* pspec, const GValue* value);

// Whether `pspec` may be set in `element`'s state now, by its GST_PARAM_MUTABLE_* flag. When not,
// the application is told (a GLib warning, as GLib tells of a value out of range) and the caller
// keeps the old value: a socket-path changed while PLAYING used to read back new and serve old.
bool property_settable(GstElement* element, const GParamSpec* pspec);

// Whether a meta list property takes `value`; when not, the application is told why (a GLib
// warning) and the caller keeps the old value.
bool meta_list_acceptable(GstElement* element, const GParamSpec* pspec, const GValue* value);

}  // namespace cudaipc::gst
