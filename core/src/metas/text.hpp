// Text read from a peer's meta area, for messages and for readers that hand names on as text:
// whether bytes are UTF-8 (as strictly as Python's decoder reads it), and a short, printable
// quotation of bytes that may be anything.
#pragma once

#include <string>
#include <string_view>

namespace cudaipc::metas::text {

// Well-formed UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. NUL bytes are
// allowed here; callers that refuse them say so themselves.
bool valid_utf8(std::string_view s) noexcept;

// 'bytes', with anything but printable ASCII as \xNN and at most 64 bytes shown, into `out` of
// `capacity` bytes (NUL-terminated; 300 hold any quotation).
void quote(std::string_view s, char* out, std::size_t capacity) noexcept;
std::string quoted(std::string_view s);

}  // namespace cudaipc::metas::text
