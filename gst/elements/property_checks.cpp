#include "elements/property_checks.h"

#include <string>

#include "metas/meta_filter.h"

namespace cudaipc::gst {

bool property_settable(GstElement* element, const GParamSpec* pspec) {
  if (pspec->flags & GST_PARAM_MUTABLE_PLAYING) return true;
  const GstState most = (pspec->flags & GST_PARAM_MUTABLE_PAUSED)  ? GST_STATE_PAUSED
                        : (pspec->flags & GST_PARAM_MUTABLE_READY) ? GST_STATE_READY
                                                                   : GST_STATE_PLAYING;
  GST_OBJECT_LOCK(element);
  // A state change under way counts by where it goes as well as where it is.
  const GstState now = GST_STATE(element), next = GST_STATE_PENDING(element);
  GST_OBJECT_UNLOCK(element);
  if (now <= most && (next == GST_STATE_VOID_PENDING || next <= most)) return true;
  g_warning(
      "%s: property '%s' can be changed only in the NULL%s state; it is %s now, so the "
      "value is unchanged",
      GST_ELEMENT_NAME(element), pspec->name,
      most == GST_STATE_READY    ? " or READY"
      : most == GST_STATE_PAUSED ? ", READY or PAUSED"
                                 : "",
      gst_element_state_get_name(now));
  return false;
}

bool meta_list_acceptable(GstElement* element, const GParamSpec* pspec, const GValue* value) {
  const gchar* spec = g_value_get_string(value);
  const std::string why = MetaFilter::invalid(spec ? spec : "");
  if (why.empty()) return true;
  g_warning(
      "%s: '%s' is not a list for property '%s' (%s); the value is unchanged. Give "
      "comma-separated meta API names (GstAnalyticsRelationMetaAPI, a custom meta's name), "
      "'*' for all, or an empty string for none.",
      GST_ELEMENT_NAME(element), spec, pspec->name, why.c_str());
  return false;
}

bool property_write_allowed(GstElement* element, const GParamSpec* pspec, const GValue* value) {
  if (!property_settable(element, pspec)) return false;
  const bool meta_list =
      G_IS_PARAM_SPEC_STRING(pspec) &&
      (g_str_equal(pspec->name, "forward-metas") || g_str_equal(pspec->name, "reply-metas"));
  return !meta_list || meta_list_acceptable(element, pspec, value);
}

}  // namespace cudaipc::gst
