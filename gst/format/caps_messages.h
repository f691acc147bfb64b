// Text helpers of the caps mapping (caps_tensor.cpp, tensor_dimensions.cpp): caps text comes from
// another process, so what goes into a message is quoted, cut short and stripped of control
// characters.
#pragma once

#include <string>
#include <string_view>

namespace cudaipc::gst::caps_messages {

std::string quoted(std::string_view text);
// Sets *error (when given) and returns false, for `return fail(error, "...")`.
bool fail(std::string* error, std::string message);
std::string_view trimmed(std::string_view s);

}  // namespace cudaipc::gst::caps_messages
