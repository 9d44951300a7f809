#pragma once
// Stable 64-bit content hash (FNV-1a) used for template hashes, binary hashes and cache ids.
// Not cryptographic: it detects accidental corruption and version drift, not tampering.

#include <cstdint>
#include <initializer_list>
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

/// A kernel family's template hash (stored entries of another hash are stale): its sources in
/// order, then its description version, as 16 hex digits.
inline std::string sources_hash(std::initializer_list<std::string_view> sources, int description_version) {
  std::uint64_t h = kFnvOffset;
  for (std::string_view s : sources) h = hash64(s, h);
  return hex64(hash64(std::to_string(description_version), h));
}

inline std::string hash_hex(std::string_view bytes) { return hex64(hash64(bytes)); }

}  // namespace kvtune::detail
