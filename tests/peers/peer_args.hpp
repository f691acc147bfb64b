// "--key value" and "--flag" arguments of the test peer.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

namespace peer {

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

int consume(const Args& a);
int produce(const Args& a);
int try_connect(const Args& a);

}  // namespace peer
