#pragma once
// Shared by the fuzz targets: how a broken contract is reported. A target returns normally for
// every input the code under test handles as documented (accepted, or refused with the documented
// exception); anything else is a finding: one line naming the contract, then abort(), which
// libFuzzer records as a crash together with the input.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kvtune::fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\nFUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void expect(bool condition, const std::string& what) {
  if (!condition) finding(what);
}

inline std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace kvtune::fuzz
