// The command line of one subcommand: positional words, `--name value` options and `--flag`s, each
// checked against what the subcommand accepts, so a typo is an error that names it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace cudaipc::cli {

// A mistake in how the tool was called: printed with the subcommand's usage, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `valued`: options that take a value; `flags`: options that do not. --help is always a flag.
  Args(int argc, char** argv, int first, const std::set<std::string>& valued,
       const std::set<std::string>& flags);

  const std::vector<std::string>& positional() const { return positional_; }
  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string str(const std::string& name, const std::string& fallback = "") const;
  // A number in [min, max]; UsageError naming the option otherwise.
  double number(const std::string& name, double fallback, double min, double max) const;
  std::uint64_t count(const std::string& name, std::uint64_t fallback, std::uint64_t min,
                      std::uint64_t max) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
};

}  // namespace cudaipc::cli
