#include "metas/meta_filter.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

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

std::string MetaFilter::invalid(const std::string& spec) {
  if (spec.find_first_not_of(" \t") == std::string::npos) return {};  // none
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string entry = spec.substr(pos, comma - pos);
    const auto first = entry.find_first_not_of(" \t");
    if (first == std::string::npos) return "an empty entry between commas";
    const std::string name = entry.substr(first, entry.find_last_not_of(" \t") - first + 1);
    // GType names and registered custom meta names: a letter or '_' first, then letters, digits
    // and "-_+:."; '*' alone means every meta.
    const bool ok =
        name == kForwardAllMetas ||
        ((std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || (c && std::strchr("-_+:.", c));
         }));
    if (!ok) return "'" + name + "' is not a meta name";
    pos = comma + 1;
  }
  return {};
}

bool MetaFilter::allows(std::string_view name, std::string_view alt) const noexcept {
  if (all_) return true;
  return std::any_of(names_.begin(), names_.end(),
                     [&](const std::string& n) { return n == name || (!alt.empty() && n == alt); });
}

}  // namespace cudaipc::gst
