#include "channel_role.hpp"

namespace cudaipc {

const char* describe_role(ChannelRole role) noexcept {
  switch (role) {
    case ChannelRole::frames:
      return "a cudaipcsink's channel (or a Producer's)";
    case ChannelRole::requests:
      return "a cudaipcfilter's request channel";
    case ChannelRole::replies:
      return "a model server's reply channel";
  }
  return "a channel of an unknown role";
}

void check_role_value(std::uint32_t raw, Errc code, const char* what) {
  if (raw < static_cast<std::uint32_t>(ChannelRole::frames) ||
      raw > static_cast<std::uint32_t>(ChannelRole::replies))
    throw Error(code, std::string(what) + " " + std::to_string(raw) +
                          " is no channel role (1 frames, 2 requests, 3 replies)");
}

void check_channel_role(std::uint32_t raw, const std::optional<ChannelRole>& wanted,
                        const std::string& path) {
  check_role_value(raw, Errc::protocol, "control block states the role");
  const auto role = static_cast<ChannelRole>(raw);
  if (!wanted || role == *wanted) return;
  std::string why = "'" + path + "' is " + describe_role(role) + ", not " + describe_role(*wanted);
  // Only a model server reads request channels: say where its path comes from.
  if (*wanted == ChannelRole::requests)
    why = "'" + path + "' is " + describe_role(role) +
          ", not a cudaipcfilter's: point the server at the filter's socket-path";
  throw WrongRole(Errc::invalid_argument, why);
}

}  // namespace cudaipc
