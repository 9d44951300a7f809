#include "kernel_templates/dwconv_decode/dwconv_decode_reference.h"

#include <limits>

#include "kernel_templates/dwconv/dwconv_reference.h"

namespace kvtune::dwconv_decode {

void reference_decode(const Problem& p, std::int64_t batch, std::int64_t slots, const std::vector<double>& x,
                      const std::vector<double>& w, const std::vector<double>& bias,
                      const std::vector<std::int32_t>& cache_seqlens, const std::vector<std::int32_t>& state_indices,
                      std::vector<double>& state, std::vector<double>& y) {
  const std::int64_t c_count = p.c, seq = p.seqlen, len = p.state_len, history = p.k - 1;
  std::vector<double> u(std::size_t(history + seq));  // the history, then the new tokens
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t slot = p.indices ? state_indices[std::size_t(b)] : b;
    if (slot < 0) continue;  // padding
    const std::int64_t pos0 = p.circular ? cache_seqlens[std::size_t(b)] : 0;
    const bool broken = slot >= slots || pos0 < 0;
    for (std::int64_t c = 0; c < c_count; ++c) {
      double* out = &y[std::size_t((b * c_count + c) * seq)];
      if (broken) {
        for (std::int64_t t = 0; t < seq; ++t) out[t] = std::numeric_limits<double>::quiet_NaN();
        continue;
      }
      double* s = &state[std::size_t((slot * c_count + c) * len)];
      for (std::int64_t j = 0; j < history; ++j) {
        const std::int64_t q = pos0 - history + j;
        u[std::size_t(j)] = !p.circular ? s[j] : q >= 0 ? s[q % len] : 0.0;
      }
      for (std::int64_t t = 0; t < seq; ++t) u[std::size_t(history + t)] = x[std::size_t((b * c_count + c) * seq + t)];
      for (std::int64_t t = 0; t < seq; ++t) {
        double z = p.bias ? bias[std::size_t(c)] : 0.0;
        for (int k = 0; k < p.k; ++k) z += w[std::size_t(c * p.k + k)] * u[std::size_t(t + k)];
        out[t] = dwconv::activation_value(p.activation, z);
      }
      if (!p.circular)
        for (std::int64_t j = 0; j < history; ++j) s[j] = u[std::size_t(seq + j)];
      else
        for (std::int64_t t = 0; t < seq; ++t) s[(pos0 + t) % len] = u[std::size_t(history + t)];
    }
  }
}

}  // namespace kvtune::dwconv_decode
