#include "core/buckets.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "kvtune/error.h"

namespace kvtune::detail {
namespace {

std::int64_t next_pow2(std::int64_t v) {
  std::int64_t b = 1;
  while (b < v && b < (std::int64_t(1) << 62)) b <<= 1;
  return b;
}

}  // namespace

Buckets Buckets::parse(const std::string& spec, const char* field) {
  Buckets b;
  if (spec.empty() || spec == "pow2") return b;
  if (spec == "exact") {
    b.exact_ = true;
    return b;
  }
  const auto fail = [&](const std::string& why) {
    return Error(Error::Context{"context", "", "", "", field},
                 fmt::format("bucket spec '{}': {} (expected pow2, exact or ascending sizes like 1,8,64,512)", spec,
                             why));
  };
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 18)
      throw fail(fmt::format("'{}' is not a positive size", item));
    const std::int64_t v = std::strtoll(item.c_str(), nullptr, 10);
    if (v <= 0) throw fail("sizes must be positive");
    if (!b.bounds_.empty() && v <= b.bounds_.back()) throw fail("sizes must be strictly ascending");
    b.bounds_.push_back(v);
    pos = comma + 1;
  }
  return b;
}

std::int64_t Buckets::bucket(std::int64_t size) const {
  if (size < 1) size = 1;
  if (exact_) return size;
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), size);
  if (it != bounds_.end()) return *it;
  return next_pow2(size);
}

std::string Buckets::spec() const {
  if (exact_) return "exact";
  if (bounds_.empty()) return "pow2";
  return fmt::format("{}", fmt::join(bounds_, ","));
}

}  // namespace kvtune::detail
