// What a channel is for (ChannelRole, stated in its control block): the names messages give each
// role, and the check a reader of one role makes at connect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cudaipc/error.hpp"
#include "cudaipc/options.hpp"

namespace cudaipc {

// "a cudaipcfilter's request channel", ...
const char* describe_role(ChannelRole role) noexcept;

// Throws Error(`code`) naming `what` when `raw` is no ChannelRole.
void check_role_value(std::uint32_t raw, Errc code, const char* what);

// The channel is sound but of another role than its reader wants: the reader was given the wrong
// path, which retrying does not mend.
class WrongRole : public Error {
 public:
  using Error::Error;
};

// A consumer's check of the role `raw` that the channel at `path` states: Errc::protocol when it
// is no role, WrongRole (Errc::invalid_argument, with what to do) when `wanted` is another.
void check_channel_role(std::uint32_t raw, const std::optional<ChannelRole>& wanted,
                        const std::string& path);

}  // namespace cudaipc
