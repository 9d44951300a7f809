#include "kernel_templates/dwconv_states/dwconv_states_reference.h"

#include "core/parallel.h"
#include "kernel_templates/dwconv/dwconv_reference.h"

namespace kvtune::dwconv_states {
namespace {

std::size_t index(const Problem& p, std::int64_t b, std::int64_t c, std::int64_t t) {
  return std::size_t(p.layout == DwLayout::nlc ? (b * p.w + t) * p.c + c : (b * p.c + c) * p.w + t);
}

// Input q of channel c as output t of row b sees it (q < 0: the initial state's, or zero).
double input(const Problem& p, std::int64_t b, std::int64_t c, std::int64_t q, std::int64_t t,
             const std::vector<double>& x, const std::vector<double>& init, const std::vector<std::int32_t>& seq) {
  const std::int64_t s = p.state_len();
  if (q < 0) return init.empty() ? 0.0 : init[std::size_t((b * p.c + c) * s + s + q)];
  if (!seq.empty() && seq[std::size_t(b * p.w + q)] != seq[std::size_t(b * p.w + t)]) return 0.0;
  return x[index(p, b, c, q)];
}

std::int64_t lag(const Problem& p, int k) { return std::int64_t(p.k - 1 - k) * p.d; }

}  // namespace

// Each (row, channel) pair's outputs depend on that pair alone: the pairs are spread over the cores
// (detail::parallel_for), each summed in the same order as on one core.

std::vector<double> reference_forward(const Problem& p, std::int64_t n, const std::vector<double>& x,
                                      const std::vector<double>& w, const std::vector<double>& bias,
                                      const std::vector<double>& init, const std::vector<std::int32_t>& seq,
                                      const std::vector<double>& dy, std::vector<double>* final_state) {
  std::vector<double> y(std::size_t(n * p.c * p.w));
  const std::int64_t s = p.state_len();
  if (final_state != nullptr) final_state->resize(std::size_t(n * p.c * s));
  detail::parallel_for(n * p.c, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t b = row / p.c, c = row % p.c;
      for (std::int64_t t = 0; t < p.w; ++t) {
        double z = bias.empty() ? 0.0 : bias[std::size_t(c)];
        for (int k = 0; k < p.k; ++k) z += w[std::size_t(c * p.k + k)] * input(p, b, c, t - lag(p, k), t, x, init, seq);
        const std::size_t o = index(p, b, c, t);
        y[o] = p.gradient_prep ? dy[o] * dwconv::activation_derivative(p.activation, z)
                               : dwconv::activation_value(p.activation, z);
      }
      if (final_state != nullptr)
        for (std::int64_t j = 0; j < s; ++j)
          (*final_state)[std::size_t((b * p.c + c) * s + j)] = input(p, b, c, p.w - s + j, p.w - 1, x, init, seq);
    }
  });
  return y;
}

std::vector<double> reference_backward_data(const Problem& p, std::int64_t n, const std::vector<double>& g,
                                            const std::vector<double>& w, const std::vector<std::int32_t>& seq,
                                            std::vector<double>* dinit) {
  std::vector<double> dx(std::size_t(n * p.c * p.w), 0.0);
  const std::int64_t s = p.state_len();
  if (dinit != nullptr) dinit->assign(std::size_t(n * p.c * s), 0.0);
  // Output t reads input q = t - lag through tap k: its gradient goes to q (x or the state), unless
  // q is of another sequence (then the forward read zero).
  detail::parallel_for(n * p.c, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t b = row / p.c, c = row % p.c;
      for (std::int64_t t = 0; t < p.w; ++t)
        for (int k = 0; k < p.k; ++k) {
          const std::int64_t q = t - lag(p, k);
          const double v = w[std::size_t(c * p.k + k)] * g[index(p, b, c, t)];
          if (q < 0) {
            if (dinit != nullptr) (*dinit)[std::size_t((b * p.c + c) * s + s + q)] += v;
          } else if (seq.empty() || seq[std::size_t(b * p.w + q)] == seq[std::size_t(b * p.w + t)]) {
            dx[index(p, b, c, q)] += v;
          }
        }
    }
  });
  return dx;
}

void reference_backward_weight(const Problem& p, std::int64_t n, const std::vector<double>& x,
                               const std::vector<double>& g, const std::vector<double>& init,
                               const std::vector<std::int32_t>& seq, std::vector<double>& dw,
                               std::vector<double>& dbias) {
  dw.assign(std::size_t(p.c * p.k), 0.0);
  dbias.assign(std::size_t(p.c), 0.0);
  // A channel's sums run over the rows, then the positions: spread over channels.
  detail::parallel_for(p.c, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t c = begin; c < end; ++c)
        for (std::int64_t t = 0; t < p.w; ++t) {
          const double gt = g[index(p, b, c, t)];
          dbias[std::size_t(c)] += gt;
          for (int k = 0; k < p.k; ++k)
            dw[std::size_t(c * p.k + k)] += gt * input(p, b, c, t - lag(p, k), t, x, init, seq);
        }
  });
}

}  // namespace kvtune::dwconv_states
