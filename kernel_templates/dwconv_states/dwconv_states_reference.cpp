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

// Output t of row b, channel c: z = conv + bias, then act(z) (or dy * act'(z)).
double forward_value(const Problem& p, std::int64_t b, std::int64_t c, std::int64_t t, const std::vector<double>& x,
                     const std::vector<double>& w, const std::vector<double>& bias, const std::vector<double>& init,
                     const std::vector<std::int32_t>& seq, const std::vector<double>& dy) {
  double z = bias.empty() ? 0.0 : bias[std::size_t(c)];
  for (int k = 0; k < p.k; ++k) z += w[std::size_t(c * p.k + k)] * input(p, b, c, t - lag(p, k), t, x, init, seq);
  return p.gradient_prep ? dy[index(p, b, c, t)] * dwconv::activation_derivative(p.activation, z)
                         : dwconv::activation_value(p.activation, z);
}

// d input q of row b, channel c (q < 0: of the initial state): the outputs t = q + lag that read it,
// latest first (the order in which a scatter over ascending t adds them), unless t is outside the row
// or, for q >= 0, of another sequence (then the forward read zero).
double backward_data_value(const Problem& p, std::int64_t b, std::int64_t c, std::int64_t q, const std::vector<double>& g,
                           const std::vector<double>& w, const std::vector<std::int32_t>& seq) {
  double sum = 0.0;
  for (int k = p.k - 1; k >= 0; --k) {
    const std::int64_t t = q + lag(p, k);
    if (t < 0 || t >= p.w) continue;
    if (q >= 0 && !seq.empty() && seq[std::size_t(b * p.w + q)] != seq[std::size_t(b * p.w + t)]) continue;
    sum += w[std::size_t(c * p.k + k)] * g[index(p, b, c, t)];
  }
  return sum;
}

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
      for (std::int64_t t = 0; t < p.w; ++t) y[index(p, b, c, t)] = forward_value(p, b, c, t, x, w, bias, init, seq, dy);
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
  std::vector<double> dx(std::size_t(n * p.c * p.w));
  const std::int64_t s = p.state_len();
  if (dinit != nullptr) dinit->resize(std::size_t(n * p.c * s));
  detail::parallel_for(n * p.c, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t b = row / p.c, c = row % p.c;
      for (std::int64_t q = 0; q < p.w; ++q) dx[index(p, b, c, q)] = backward_data_value(p, b, c, q, g, w, seq);
      if (dinit != nullptr)
        for (std::int64_t j = 0; j < s; ++j)
          (*dinit)[std::size_t((b * p.c + c) * s + j)] = backward_data_value(p, b, c, j - s, g, w, seq);
    }
  });
  return dx;
}

void plain_from_full(const Problem& p, std::int64_t n, std::vector<double>& values, const std::vector<double>& src,
                     const std::vector<double>& w, const std::vector<double>& bias, const std::vector<std::int32_t>& seq,
                     const std::vector<double>& dy) {
  // The positions of each row whose window reads the state or crosses a sequence change: the same for
  // every channel. Elsewhere both sums read the same inputs in the same order.
  const bool forward = p.direction == DwDirection::forward;
  const auto crosses = [&](std::int64_t b, std::int64_t a, std::int64_t t) {
    return !seq.empty() && seq[std::size_t(b * p.w + a)] != seq[std::size_t(b * p.w + t)];
  };
  std::vector<std::vector<std::int64_t>> masked(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t t = 0; t < p.w; ++t)
      for (int k = 0; k < p.k; ++k) {
        // forward: output t reads input t - lag; backward_data: input t is read by output t + lag.
        const std::int64_t other = forward ? t - lag(p, k) : t + lag(p, k);
        const bool changed = forward ? other < 0 || crosses(b, other, t) : other < p.w && crosses(b, t, other);
        if (changed) {
          masked[std::size_t(b)].push_back(t);
          break;
        }
      }
  detail::parallel_for(n * p.c, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t b = row / p.c, c = row % p.c;
      for (const std::int64_t t : masked[std::size_t(b)])
        values[index(p, b, c, t)] = forward ? forward_value(p, b, c, t, src, w, bias, {}, {}, dy)
                                            : backward_data_value(p, b, c, t, src, w, {});
    }
  });
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
