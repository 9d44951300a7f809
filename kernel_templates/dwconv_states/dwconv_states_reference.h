#pragma once
// Float64 CPU reference of the causal depthwise conv1d with states and packed sequences (the whole
// operation, not only what the fix-up kernel rewrites): DwConvArgs' initial_state, final_state,
// dinitial_state and seq_idx semantics. Tensors dense in p.layout; states [n, c, S]; seq_idx [n, w].
// An empty vector is an absent tensor.

#include <cstdint>
#include <vector>

#include "kernel_templates/dwconv_states/dwconv_states_family.h"

namespace kvtune::dwconv_states {

/// z = conv(x, w) + bias of every output, the window reading the initial state before 0 and zeros
/// across seq_idx changes; then act(z), or with p.gradient_prep dy * act'(z). final_state (when not
/// null) gets the last S inputs of [initial_state, x], zero where of an earlier sequence than the last.
std::vector<double> reference_forward(const Problem& p, std::int64_t n, const std::vector<double>& x,
                                      const std::vector<double>& w, const std::vector<double>& bias,
                                      const std::vector<double>& initial_state, const std::vector<std::int32_t>& seq_idx,
                                      const std::vector<double>& dy, std::vector<double>* final_state);
/// dx from g (dy, or the gradient prep's output) and w; dinitial_state (when not null) too.
std::vector<double> reference_backward_data(const Problem& p, std::int64_t n, const std::vector<double>& g,
                                            const std::vector<double>& w, const std::vector<std::int32_t>& seq_idx,
                                            std::vector<double>* dinitial_state);
/// The plain convolution's result (initial state and seq_idx absent: what the tuned convolution
/// leaves before the fix-up) from the whole operation's, in place: forward (src = x) or
/// backward_data (src = g). Only the outputs whose window reads the initial state or crosses a
/// seq_idx change are recomputed, the others being the same sum; the result equals
/// reference_forward / reference_backward_data with both absent, bit for bit.
void plain_from_full(const Problem& p, std::int64_t n, std::vector<double>& values, const std::vector<double>& src,
                     const std::vector<double>& w, const std::vector<double>& bias, const std::vector<std::int32_t>& seq_idx,
                     const std::vector<double>& dy);
/// dw [c, k] (the taps that read the initial state included) and dbias [c] from x and g.
void reference_backward_weight(const Problem& p, std::int64_t n, const std::vector<double>& x,
                               const std::vector<double>& g, const std::vector<double>& initial_state,
                               const std::vector<std::int32_t>& seq_idx, std::vector<double>& dw,
                               std::vector<double>& dbias);

}  // namespace kvtune::dwconv_states
