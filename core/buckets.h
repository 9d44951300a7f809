#pragma once
// Bucketing of the batch dimension (normalize rows, dwconv n): a stream of many batch sizes tunes
// a handful of buckets. The kernel always receives the exact size; only the cache key is bucketed.

#include <cstdint>
#include <string>
#include <vector>

namespace kvtune::detail {

class Buckets {
 public:
  /// Powers of two (the default): 1000 rows tune as "rows<=1024".
  Buckets() = default;
  /// "pow2", "exact" (every size its own key), or ascending upper bounds "1,8,64,512,4096"
  /// (sizes beyond the last bound fall back to powers of two). Throws kvtune::Error naming
  /// `field` on anything else.
  static Buckets parse(const std::string& spec, const char* field = "buckets");

  /// The upper bound of the bucket holding `size` (>= 1); `size` itself when exact().
  std::int64_t bucket(std::int64_t size) const;
  bool exact() const { return exact_; }
  /// The canonical spec text ("pow2", "exact" or the bounds).
  std::string spec() const;

 private:
  bool exact_ = false;
  std::vector<std::int64_t> bounds_;  // empty: powers of two
};

}  // namespace kvtune::detail
