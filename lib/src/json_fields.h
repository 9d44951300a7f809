#pragma once
// Reading typed fields of a stored or imported config. nlohmann's get<int>() converts a float such
// as 1e72 to int, which is undefined behaviour; configs hold integers only, so anything else is
// refused with a message that names the field.

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

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

}  // namespace kvtune::detail
