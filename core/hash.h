#pragma once
// Stable 64-bit content hash (FNV-1a) used for template hashes, binary hashes and cache ids.
// Not cryptographic: it detects accidental corruption and version drift, not tampering.

#include <cstdint>
#include <string>
#include <string_view>

namespace kvtune::detail {

constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

constexpr std::uint64_t hash64(std::string_view bytes, std::uint64_t seed = kFnvOffset) {
  std::uint64_t h = seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

/// 16 lowercase hex digits.
inline std::string hex64(std::uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[i] = digits[v & 15];
  return s;
}

inline std::string hash_hex(std::string_view bytes) { return hex64(hash64(bytes)); }

}  // namespace kvtune::detail
