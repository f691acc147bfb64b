#include "json.hpp"

#include <cmath>
#include <cstdio>

namespace cudaipc::cli {

std::string Json::quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        q += "\\\"";
        break;
      case '\\':
        q += "\\\\";
        break;
      case '\n':
        q += "\\n";
        break;
      case '\t':
        q += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          q += buf;
        } else if (c >= 0x80) {
          // Paths may hold any bytes; JSON wants UTF-8, so anything else is escaped byte-wise.
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          q += buf;
        } else {
          q += static_cast<char>(c);
        }
    }
  }
  return q + "\"";
}

void Json::key(const char* k) {
  if (!first_.back()) out_ += ",";
  first_.back() = false;
  if (k) out_ += quote(k) + ":";
}

Json& Json::begin_object(const char* k) {
  key(k);
  out_ += "{";
  first_.push_back(true);
  return *this;
}
Json& Json::end_object() {
  first_.pop_back();
  out_ += "}";
  return *this;
}
Json& Json::begin_array(const char* k) {
  key(k);
  out_ += "[";
  first_.push_back(true);
  return *this;
}
Json& Json::end_array() {
  first_.pop_back();
  out_ += "]";
  return *this;
}
Json& Json::field(const char* k, const std::string& v) {
  key(k);
  out_ += quote(v);
  return *this;
}
Json& Json::field(const char* k, const char* v) {
  return field(k, std::string(v));
}
Json& Json::field(const char* k, std::uint64_t v) {
  key(k);
  out_ += std::to_string(v);
  return *this;
}
Json& Json::field(const char* k, std::int64_t v) {
  key(k);
  out_ += std::to_string(v);
  return *this;
}
Json& Json::field(const char* k, double v) {
  key(k);
  if (std::isnan(v) || std::isinf(v)) {
    out_ += "null";
  } else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    out_ += buf;
  }
  return *this;
}
Json& Json::field(const char* k, bool v) {
  key(k);
  out_ += v ? "true" : "false";
  return *this;
}
Json& Json::null_field(const char* k) {
  key(k);
  out_ += "null";
  return *this;
}
Json& Json::value(std::int64_t v) {
  key(nullptr);
  out_ += std::to_string(v);
  return *this;
}

}  // namespace cudaipc::cli
