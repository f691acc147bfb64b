// A small JSON writer for --json output: objects and arrays in order, strings escaped, so scripts
// can parse what the tool prints whatever a peer put in a caps string or a path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cudaipc::cli {

class Json {
 public:
  Json& begin_object(const char* key = nullptr);
  Json& end_object();
  Json& begin_array(const char* key = nullptr);
  Json& end_array();
  Json& field(const char* key, const std::string& v);
  Json& field(const char* key, const char* v);
  Json& field(const char* key, std::uint64_t v);
  Json& field(const char* key, std::int64_t v);
  Json& field(const char* key, int v) { return field(key, static_cast<std::int64_t>(v)); }
  Json& field(const char* key, unsigned v) { return field(key, static_cast<std::uint64_t>(v)); }
  Json& field(const char* key, double v);  // NaN is written as null
  Json& field(const char* key, bool v);
  Json& null_field(const char* key);
  Json& value(std::int64_t v);  // an array element
  const std::string& text() const { return out_; }

  static std::string quote(const std::string& s);

 private:
  void key(const char* k);
  std::string out_;
  std::vector<bool> first_{true};
};

}  // namespace cudaipc::cli
