#include "kernel_templates/dwconv/dwconv_reference.h"

#include <cmath>

namespace kvtune::dwconv {
namespace {

// Visits every (output position, tap, input position) triple of the convolution with x-shaped
// input (h x w) and y-shaped output (out_h x out_w): the one definition all three directions use.
template <class F>
void for_each_tap(const Problem& p, std::int64_t n, F&& f) {
  const std::int64_t oh = p.out_h(), ow = p.out_w();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t c = 0; c < p.c; ++c)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j)
          for (int kh = 0; kh < p.kh; ++kh)
            for (int kw = 0; kw < p.kw; ++kw) {
              const std::int64_t r = i * p.sh - p.pad_top + std::int64_t(kh) * p.dh;
              const std::int64_t q = j * p.sw - p.pad_left + std::int64_t(kw) * p.dw;
              if (r < 0 || r >= p.h || q < 0 || q >= p.w) continue;
              const std::int64_t xi = p.channel_last() ? ((b * p.h + r) * p.w + q) * p.c + c
                                                       : ((b * p.c + c) * p.h + r) * p.w + q;
              const std::int64_t yi = p.channel_last() ? ((b * oh + i) * ow + j) * p.c + c
                                                       : ((b * p.c + c) * oh + i) * ow + j;
              f(xi, yi, c, c * p.kh * p.kw + kh * p.kw + kw);
            }
}

std::int64_t output_index(const Problem& p, std::int64_t b, std::int64_t c, std::int64_t i, std::int64_t j) {
  return p.channel_last() ? ((b * p.out_h() + i) * p.out_w() + j) * p.c + c
                          : ((b * p.c + c) * p.out_h() + i) * p.out_w() + j;
}

}  // namespace

double activation_value(Activation a, double z) {
  switch (a) {
    case Activation::none: return z;
    case Activation::silu: return z / (1 + std::exp(-z));
    case Activation::gelu_tanh: return 0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
    case Activation::gelu_erf: return 0.5 * z * (1 + std::erf(z * 0.7071067811865476));
    case Activation::relu: return z < 0 ? 0 : z;
  }
  return z;
}

double activation_derivative(Activation a, double z) {
  switch (a) {
    case Activation::none: return 1;
    case Activation::silu: {
      const double s = 1 / (1 + std::exp(-z));
      return s * (1 + z * (1 - s));
    }
    case Activation::gelu_tanh: {
      const double k = 0.7978845608028654, b = 0.044715;
      const double t = std::tanh(k * (z + b * z * z * z));
      return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * k * (1 + 3 * b * z * z);
    }
    case Activation::gelu_erf:
      return 0.5 * (1 + std::erf(z * 0.7071067811865476)) + z * std::exp(-0.5 * z * z) * 0.3989422804014327;
    case Activation::relu: return z <= 0 ? 0 : 1;
  }
  return 1;
}

std::vector<double> reference_forward(const Problem& p, std::int64_t n, const std::vector<double>& x,
                                      const std::vector<double>& w, const std::vector<double>& bias) {
  std::vector<double> y(std::size_t(n * p.c * p.out_h() * p.out_w()), 0.0);
  if (!bias.empty())
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t c = 0; c < p.c; ++c)
        for (std::int64_t i = 0; i < p.out_h(); ++i)
          for (std::int64_t j = 0; j < p.out_w(); ++j) y[std::size_t(output_index(p, b, c, i, j))] = bias[std::size_t(c)];
  for_each_tap(p, n, [&](std::int64_t xi, std::int64_t yi, std::int64_t, std::int64_t wi) {
    y[std::size_t(yi)] += x[std::size_t(xi)] * w[std::size_t(wi)];
  });
  if (p.activation != Activation::none && !p.gradient_prep)
    for (double& v : y) v = activation_value(p.activation, v);
  return y;
}

std::vector<double> reference_gradient_prep(const Problem& p, std::int64_t n, const std::vector<double>& x,
                                            const std::vector<double>& w, const std::vector<double>& bias,
                                            const std::vector<double>& dy) {
  Problem plain = p;
  plain.direction = DwDirection::forward;
  plain.activation = Activation::none;
  plain.gradient_prep = false;
  std::vector<double> g = reference_forward(plain, n, x, w, bias);  // z
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = dy[i] * activation_derivative(p.activation, g[i]);
  return g;
}

std::vector<double> reference_backward_data(const Problem& p, std::int64_t n, const std::vector<double>& dy,
                                            const std::vector<double>& w) {
  std::vector<double> dx(std::size_t(n * p.c * p.h * p.w), 0.0);
  for_each_tap(p, n, [&](std::int64_t xi, std::int64_t yi, std::int64_t, std::int64_t wi) {
    dx[std::size_t(xi)] += dy[std::size_t(yi)] * w[std::size_t(wi)];
  });
  return dx;
}

void reference_backward_weight(const Problem& p, std::int64_t n, const std::vector<double>& x,
                               const std::vector<double>& dy, std::vector<double>& dw, std::vector<double>& dbias) {
  dw.assign(std::size_t(p.c * p.kh * p.kw), 0.0);
  dbias.assign(std::size_t(p.c), 0.0);
  for_each_tap(p, n, [&](std::int64_t xi, std::int64_t yi, std::int64_t, std::int64_t wi) {
    dw[std::size_t(wi)] += dy[std::size_t(yi)] * x[std::size_t(xi)];
  });
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t c = 0; c < p.c; ++c)
      for (std::int64_t i = 0; i < p.out_h(); ++i)
        for (std::int64_t j = 0; j < p.out_w(); ++j) dbias[std::size_t(c)] += dy[std::size_t(output_index(p, b, c, i, j))];
}

}  // namespace kvtune::dwconv
