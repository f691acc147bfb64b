// Connect-only role: tries to join a channel K times and reports how each attempt ended, for the
// access-control tests where the peer runs under another uid.
#include <cstdio>
#include <map>
#include <string>

#include "cudaipc/consumer.hpp"
#include "cudaipc/error.hpp"
#include "peer_args.hpp"

namespace peer {

int try_connect(const Args& a) {
  cudaipc::ConsumerOptions opts;
  opts.path = a.str("path");
  opts.reconnect = false;
  const std::uint64_t repeat = a.num("repeat", 1);
  std::map<int, std::uint64_t> outcomes;
  std::string first_error;
  for (std::uint64_t i = 0; i < repeat; ++i) {
    try {
      cudaipc::Consumer c(opts);
      ++outcomes[0];
    } catch (const cudaipc::Error& e) {
      ++outcomes[static_cast<int>(e.code())];
      if (first_error.empty()) first_error = e.what();
    }
  }
  for (const auto& [code, n] : outcomes)
    std::printf("outcome %d %llu\n", code, static_cast<unsigned long long>(n));
  if (!first_error.empty()) std::printf("first_error %s\n", first_error.c_str());
  std::printf("done\n");
  return 0;
}

}  // namespace peer
