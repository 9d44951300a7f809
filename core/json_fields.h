#pragma once
// Reading typed fields of a stored or imported config. nlohmann's get<int>() converts a float such
// as 1e72 to int, which is undefined behaviour; configs hold integers only, so anything else is
// refused with a message that names the field.

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvtune::detail {

/// The integer `field` of the object `j`; std::out_of_range when it is missing, std::invalid_argument
/// when it is not an integer that fits an int.
inline int json_int(const nlohmann::json& j, const char* field) {
  const nlohmann::json& v = j.at(field);
  constexpr std::int64_t lo = std::numeric_limits<int>::min(), hi = std::numeric_limits<int>::max();
  if (v.is_number_unsigned() && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi))
    return static_cast<int>(v.get<std::uint64_t>());
  if (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi)
    return static_cast<int>(v.get<std::int64_t>());
  throw std::invalid_argument(std::string("field '") + field + "' must be an integer within int range, got " +
                              (v.is_number() ? "a fractional or out-of-range number" : v.type_name()));
}

/// The deepest nesting of arrays and objects kvtune parses anywhere: user files, imports and every
/// JSON text read back from a cache (kvtune's own documents use 5 levels, a config 1).
inline constexpr int kMaxJsonDepth = 64;

/// Parses `text`, refusing documents nested deeper than `max_depth` or longer than `max_bytes`
/// while parsing: the parser itself is iterative, but destroying or dumping a value recurses and
/// would overflow the stack on deeper ones. Throws nlohmann::json::parse_error on malformed text,
/// std::length_error on a text or nesting over the limits.
inline nlohmann::json parse_json_limited(std::string_view text, int max_depth = kMaxJsonDepth,
                                         std::size_t max_bytes = std::size_t(1) << 30) {
  if (text.size() > max_bytes)
    throw std::length_error("JSON text of " + std::to_string(text.size()) + " bytes (at most " +
                            std::to_string(max_bytes) + ")");
  const nlohmann::json::parser_callback_t limit_depth = [max_depth](int depth, nlohmann::json::parse_event_t event,
                                                                    nlohmann::json&) {
    if (depth > max_depth && (event == nlohmann::json::parse_event_t::object_start ||
                              event == nlohmann::json::parse_event_t::array_start))
      throw std::length_error("nested deeper than " + std::to_string(max_depth) + " levels");
    return true;
  };
  return nlohmann::json::parse(text.begin(), text.end(), limit_depth);
}

/// parse_json_limited, or a discarded value (is_discarded()) when the text is malformed or over the
/// limits: for JSON read back from a cache row, shown by the tools as it is.
inline nlohmann::json parse_json_or_discarded(std::string_view text, int max_depth = kMaxJsonDepth,
                                              std::size_t max_bytes = std::size_t(1) << 20) {
  try {
    return parse_json_limited(text, max_depth, max_bytes);
  } catch (const std::exception&) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

/// A config as stored in a cache row: a flat JSON object of at most 4 KiB.
inline nlohmann::json parse_stored_config(std::string_view text) {
  auto j = parse_json_limited(text, 2, 4096);
  if (!j.is_object()) throw std::invalid_argument("a stored config must be a JSON object");
  return j;
}

}  // namespace kvtune::detail
