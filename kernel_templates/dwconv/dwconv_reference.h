#pragma once
// Float64 CPU reference of the dwconv family (dense tensors in the problem's layout).

#include <vector>

#include "kernel_templates/dwconv/dwconv_family.h"

namespace kvtune::dwconv {

/// act(z) and act'(z) in float64 (dwconv_activation.cuh's definitions).
double activation_value(Activation a, double z);
double activation_derivative(Activation a, double z);

/// forward: y from x, w, bias (bias may be empty), then p.activation (not with gradient_prep: see
/// reference_gradient_prep).
std::vector<double> reference_forward(const Problem& p, std::int64_t n, const std::vector<double>& x,
                                      const std::vector<double>& w, const std::vector<double>& bias);
/// The gradient prep of p.activation: dy * act'(z), z = conv(x, w) + bias (dy and the result in y's shape).
std::vector<double> reference_gradient_prep(const Problem& p, std::int64_t n, const std::vector<double>& x,
                                            const std::vector<double>& w, const std::vector<double>& bias,
                                            const std::vector<double>& dy);
/// backward_data: dx from dy and w.
std::vector<double> reference_backward_data(const Problem& p, std::int64_t n, const std::vector<double>& dy,
                                            const std::vector<double>& w);
/// backward_weight: dw (c x kh x kw) and dbias (c) from x and dy.
void reference_backward_weight(const Problem& p, std::int64_t n, const std::vector<double>& x,
                               const std::vector<double>& dy, std::vector<double>& dw, std::vector<double>& dbias);

}  // namespace kvtune::dwconv
