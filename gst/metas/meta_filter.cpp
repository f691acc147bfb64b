#include "metas/meta_filter.h"

#include <algorithm>

namespace cudaipc::gst {

MetaFilter::MetaFilter(const std::string& spec) : all_(false) {
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string name = spec.substr(pos, comma - pos);
    const auto first = name.find_first_not_of(" \t");
    const auto last = name.find_last_not_of(" \t");
    name = first == std::string::npos ? "" : name.substr(first, last - first + 1);
    if (name == kForwardAllMetas)
      all_ = true;
    else if (!name.empty())
      names_.push_back(std::move(name));
    pos = comma + 1;
  }
}

bool MetaFilter::allows(std::string_view name, std::string_view alt) const noexcept {
  if (all_) return true;
  return std::any_of(names_.begin(), names_.end(),
                     [&](const std::string& n) { return n == name || (!alt.empty() && n == alt); });
}

}  // namespace cudaipc::gst
