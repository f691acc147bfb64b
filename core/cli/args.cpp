#include "args.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace cudaipc::cli {

Args::Args(int argc, char** argv, int first, const std::set<std::string>& valued,
           const std::set<std::string>& flags) {
  bool options_done = false;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (options_done || a.size() < 3 || a.compare(0, 2, "--") != 0) {
      if (a == "--") {
        options_done = true;
        continue;
      }
      if (!options_done && a.size() > 1 && a[0] == '-' && a != "-")
        throw UsageError("unknown option '" + a + "'");
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name == "help" || flags.count(name)) {
      if (inline_value) throw UsageError("option --" + name + " takes no value");
      flags_.insert(name);
    } else if (valued.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argc) throw UsageError("option --" + name + " needs a value");
        value = argv[++i];
      }
      values_[name] = value;
    } else {
      throw UsageError("unknown option --" + name);
    }
  }
}

std::string Args::str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

double Args::number(const std::string& name, double fallback, double min, double max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < min || v > max)
    throw UsageError("--" + name + " " + it->second + ": expected a number from " +
                     std::to_string(min) + " to " + std::to_string(max));
  return v;
}

std::uint64_t Args::count(const std::string& name, std::uint64_t fallback, std::uint64_t min,
                          std::uint64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(it->second.c_str(), &end, 10);
  if (it->second.empty() || it->second[0] == '-' || *end != '\0' || errno != 0 || v < min ||
      v > max)
    throw UsageError("--" + name + " " + it->second + ": expected a whole number from " +
                     std::to_string(min) + " to " + std::to_string(max));
  return v;
}

}  // namespace cudaipc::cli
