// A strict JSON parser for the tests of `--json` output: if the tool prints something a script's
// parser would reject, this throws, and the test fails naming the position.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace cudaipc::testing {

struct JsonValue {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  bool b = false;
  double n = 0;
  std::string s;
  std::vector<JsonValue> items;
  std::map<std::string, JsonValue> fields;

  const JsonValue& operator[](const std::string& k) const {
    auto it = fields.find(k);
    if (kind != object || it == fields.end()) throw std::runtime_error("no JSON field " + k);
    return it->second;
  }
  const JsonValue& operator[](std::size_t i) const {
    if (kind != array || i >= items.size()) throw std::runtime_error("no JSON element");
    return items[i];
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : t_(text) {}
  JsonValue parse() {
    JsonValue v = value();
    space();
    if (p_ != t_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::runtime_error("bad JSON at " + std::to_string(p_) + ": " + why);
  }
  void space() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\t' || t_[p_] == '\r'))
      ++p_;
  }
  bool take(const char* word) {
    const std::string w = word;
    if (t_.compare(p_, w.size(), w) != 0) return false;
    p_ += w.size();
    return true;
  }
  std::string str() {
    if (t_[p_] != '"') fail("expected a string");
    ++p_;
    std::string out;
    while (p_ < t_.size() && t_[p_] != '"') {
      char c = t_[p_++];
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c == '\\') {
        if (p_ >= t_.size()) fail("unfinished escape");
        char e = t_[p_++];
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'u': {
            if (p_ + 4 > t_.size()) fail("short \\u escape");
            out += static_cast<char>(std::strtol(t_.substr(p_, 4).c_str(), nullptr, 16));
            p_ += 4;
            break;
          }
          default:
            fail("bad escape");
        }
      } else {
        out += c;
      }
    }
    if (p_ >= t_.size()) fail("unterminated string");
    ++p_;
    return out;
  }
  JsonValue value() {
    space();
    if (p_ >= t_.size()) fail("unexpected end");
    JsonValue v;
    const char c = t_[p_];
    if (c == '{') {
      v.kind = JsonValue::object;
      ++p_;
      space();
      if (t_[p_] == '}') {
        ++p_;
        return v;
      }
      for (;;) {
        space();
        std::string k = str();
        space();
        if (t_[p_++] != ':') fail("expected ':'");
        v.fields[k] = value();
        space();
        if (t_[p_] == ',') {
          ++p_;
          continue;
        }
        if (t_[p_] == '}') {
          ++p_;
          return v;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = JsonValue::array;
      ++p_;
      space();
      if (t_[p_] == ']') {
        ++p_;
        return v;
      }
      for (;;) {
        v.items.push_back(value());
        space();
        if (t_[p_] == ',') {
          ++p_;
          continue;
        }
        if (t_[p_] == ']') {
          ++p_;
          return v;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = JsonValue::string;
      v.s = str();
      return v;
    }
    if (take("null")) return v;
    if (take("true") || take("false")) {
      v.kind = JsonValue::boolean;
      v.b = t_[p_ - 1] == 'e' && t_[p_ - 2] == 'u';
      return v;
    }
    char* end = nullptr;
    v.n = std::strtod(t_.c_str() + p_, &end);
    if (end == t_.c_str() + p_) fail("unexpected character");
    v.kind = JsonValue::number;
    p_ = static_cast<std::size_t>(end - t_.c_str());
    return v;
  }

  const std::string& t_;
  std::size_t p_ = 0;
};

inline JsonValue parse_json(const std::string& text) {
  return JsonParser(text).parse();
}

}  // namespace cudaipc::testing
