#pragma once
// Float64 CPU reference of the dwconv_decode family (kvtune::DwConvDecodeArgs's semantics).

#include <cstdint>
#include <vector>

#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"

namespace kvtune::dwconv_decode {

/// One decode step of `batch` rows: x [batch, c, seqlen], w [c, k], bias [c] or empty, state
/// [slots, c, state_len] (updated in place), cache_seqlens [batch] (p.circular) and state_indices
/// [batch] (p.indices), each empty when the problem has none. y [batch, c, seqlen] is written for
/// every row but padding ones (negative index: left as they were); rows with an index >= slots or a
/// negative cache_seqlens entry get NaN and leave the state alone. Rows must not share a slot.
void reference_decode(const Problem& p, std::int64_t batch, std::int64_t slots, const std::vector<double>& x,
                      const std::vector<double>& w, const std::vector<double>& bias,
                      const std::vector<std::int32_t>& cache_seqlens, const std::vector<std::int32_t>& state_indices,
                      std::vector<double>& state, std::vector<double>& y);

}  // namespace kvtune::dwconv_decode
