#pragma once
// Reading the canonical problem keys back ("normalize,f32,layernorm,cols=1024,rows<=4096,...").
// Each family's problem_from_key() is the inverse of its Problem::key(); these are its pieces.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvtune::detail {

/// The comma-separated fields of a key.
inline std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t comma; (comma = key.find(',', start)) != std::string::npos; start = comma + 1)
    parts.push_back(key.substr(start, comma - start));
  parts.push_back(key.substr(start));
  return parts;
}

/// The text after `prefix` ("cols=") when `part` starts with it.
inline std::optional<std::string> key_value(const std::string& part, const std::string& prefix) {
  if (part.rfind(prefix, 0) != 0) return std::nullopt;
  return part.substr(prefix.size());
}

/// A non-negative decimal of at most 18 digits.
inline std::optional<std::int64_t> key_number(const std::optional<std::string>& text) {
  if (!text || text->empty() || text->size() > 18) return std::nullopt;
  std::int64_t v = 0;
  for (char ch : *text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

/// The enum value whose to_string() is `text`, among `values`.
template <class E, std::size_t N>
std::optional<E> key_enum(const std::string& text, const E (&values)[N]) {
  for (E v : values)
    if (text == to_string(v)) return v;
  return std::nullopt;
}

}  // namespace kvtune::detail
