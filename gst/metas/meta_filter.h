// The `forward-metas` property of both elements: which metas cross, by API name (or a custom
// meta's registered name). "*" lets every meta through, "" none.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cudaipc::gst {

inline constexpr const char* kForwardAllMetas = "*";

class MetaFilter {
 public:
  MetaFilter() = default;
  // Comma-separated names, spaces around them ignored.
  explicit MetaFilter(const std::string& spec);
  // Why `spec` is not such a list (an entry that is no meta name, an empty one between commas), or
  // empty when it is one.
  static std::string invalid(const std::string& spec);
  bool none() const noexcept { return !all_ && names_.empty(); }
  // `alt` is a second name the meta answers to (a custom meta's registered name beside its API's).
  bool allows(std::string_view name, std::string_view alt = {}) const noexcept;

 private:
  bool all_ = true;
  std::vector<std::string> names_;
};

}  // namespace cudaipc::gst
