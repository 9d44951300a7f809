#pragma once
// The bytes a tensor argument spans, for the argument checks that outputs overlap no input and no
// other output (an overlap is a race inside one kernel: the result depends on the schedule).

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>

namespace kvtune::detail {

struct ByteRange {
  const char* field = "";    // the argument's name, for the error
  std::uintptr_t begin = 0;  // [begin, end); empty for a null pointer
  std::uintptr_t end = 0;

  bool empty() const { return begin == end; }
  bool overlaps(const ByteRange& o) const { return !empty() && !o.empty() && begin < o.end && o.begin < end; }
};

/// `bytes` from `p` (empty when p is null). Sizes are validated to stay far below 2^63 first.
inline ByteRange byte_range(const char* field, const void* p, std::int64_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  return ByteRange{field, begin, p == nullptr ? begin : begin + static_cast<std::uintptr_t>(bytes)};
}

/// The first (output, other) pair that overlaps: each output against every input and every other
/// output; nullopt when none does.
inline std::optional<std::pair<ByteRange, ByteRange>> first_overlap(std::initializer_list<ByteRange> outputs,
                                                                    std::initializer_list<ByteRange> inputs) {
  for (const ByteRange* o = outputs.begin(); o != outputs.end(); ++o) {
    for (const ByteRange& i : inputs)
      if (o->overlaps(i)) return std::pair{*o, i};
    for (const ByteRange* p = outputs.begin(); p != o; ++p)
      if (o->overlaps(*p)) return std::pair{*o, *p};
  }
  return std::nullopt;
}

}  // namespace kvtune::detail
