#pragma once
// The tensors of each public call kvtune-bench times (tools/kvtune_bench.cpp): which it passes, their
// sizes, how each is filled and which argument field each binds. The allocation and the binding walk
// the same list. No CUDA here, so the CPU tests check every suite row's bound call against the
// library's own argument rules.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kvtune/kvtune.h"
#include "tools/bench_suite.h"

namespace kvtune::bench {

inline int element_bytes(DType d) { return d == DType::f32 ? 4 : 2; }

/// The output width cuDNN gives (causal 1D: padded K - 1 on both sides, K - 1 extra outputs a row,
/// as PyTorch runs it); y and dy are sized for the larger of this and kvtune's.
inline std::int64_t cudnn_out_w(const DwConvArgs& a) {
  const std::int64_t pad = a.causal ? std::int64_t(a.kernel_w - 1) * a.dilation_w : a.pad_left;
  return (a.w + 2 * pad - std::int64_t(a.dilation_w) * (a.kernel_w - 1) - 1) / a.stride_w + 1;
}

// How one tensor of a call is filled.
enum class Fill {
  values,     // offset + scale * U[-1, 1) in the call's dtype
  floats,     // offset + scale * U[-1, 1) in f32 whatever the call's dtype (saved statistics)
  slots,      // int32 0, 1, ..., count - 1 (state indices: row i uses slot i)
  positions,  // int32 positions of a circular state, spread over 0..4095
  sequences,  // int32 [n, w], `sequences` runs of equal length a row (seq_idx)
};

struct TensorSpec {
  std::size_t elements = 0;
  int element_bytes = 4;
  bool rotated = true;  // every rotated set has its own (inputs and outputs), else one shared copy
  Fill fill = Fill::values;
  float offset = 0.0f, scale = 1.0f;
};

// Pointer fields of the public argument structs, whatever their constness.
template <class Field>
inline void bind(Field& field, void* pointer) {
  field = static_cast<Field>(pointer);
}

// Calls v(field, spec) for every tensor the call passes, in a fixed order: the binding and the
// allocation walk the same list. Inputs get values around 0.5 with spread 1 (normalize rows are not
// constant; convolutions see both signs), weights and parameters smaller ones.
template <class V>
inline void each_tensor(NormalizeArgs& a, V&& v) {
  const int e = element_bytes(a.dtype);
  const std::size_t n = std::size_t(a.rows * a.cols), cols = std::size_t(a.cols);
  v(a.x, TensorSpec{n, e, true, Fill::values, 0.5f, 1.0f});
  v(a.y, TensorSpec{n, e, true, Fill::values, 0.0f, 1.0f});
  if (a.gamma != nullptr) v(a.gamma, TensorSpec{cols, e, false, Fill::values, 1.0f, 0.25f});
  if (a.beta != nullptr) v(a.beta, TensorSpec{cols, e, false, Fill::values, 0.0f, 0.25f});
  if (a.residual != nullptr) v(a.residual, TensorSpec{n, e, true, Fill::values, 0.0f, 2.0f});
  if (a.residual_out != nullptr) v(a.residual_out, TensorSpec{n, e, true, Fill::values, 0.0f, 1.0f});
}

// The backward: x as the forward saw it, dy, and the forward's statistics where the call reads them
// (mean around 0.5, rstd around 1: the statistics of x's values, so dx stays of order dy).
template <class V>
inline void each_tensor(NormalizeBackwardArgs& a, V&& v) {
  const int e = element_bytes(a.dtype);
  const std::size_t n = std::size_t(a.rows * a.cols), cols = std::size_t(a.cols), rows = std::size_t(a.rows);
  v(a.x, TensorSpec{n, e, true, Fill::values, 0.5f, 1.0f});
  v(a.dy, TensorSpec{n, e, true, Fill::values, 0.0f, 1.0f});
  v(a.dx, TensorSpec{n, e, true, Fill::values, 0.0f, 1.0f});
  if (a.gamma != nullptr) v(a.gamma, TensorSpec{cols, e, false, Fill::values, 1.0f, 0.25f});
  if (a.mean != nullptr) v(a.mean, TensorSpec{rows, 4, true, Fill::floats, 0.5f, 0.05f});
  if (a.rstd != nullptr) v(a.rstd, TensorSpec{rows, 4, true, Fill::floats, 1.7f, 0.1f});
  if (a.dgamma != nullptr) v(a.dgamma, TensorSpec{cols, e, true, Fill::values, 0.0f, 1.0f});
  if (a.dbeta != nullptr) v(a.dbeta, TensorSpec{cols, e, true, Fill::values, 0.0f, 1.0f});
  if (a.dresidual_out != nullptr) v(a.dresidual_out, TensorSpec{n, e, true, Fill::values, 0.0f, 1.0f});
}

template <class V>
inline void each_tensor(DwConvArgs& a, V&& v) {
  const int e = element_bytes(a.dtype);
  const auto problem = dwconv::make_problem(with_stand_in_tensors(a));
  // cuDNN's causal output is wider (both sides padded); size y/dy for the larger of the two.
  const std::int64_t out_w = std::max<std::int64_t>(problem.out_w(), cudnn_out_w(a));
  const std::size_t x = std::size_t(a.n * a.c * a.h * a.w), y = std::size_t(a.n * a.c * problem.out_h() * out_w),
                    w = std::size_t(a.c * a.kernel_h * a.kernel_w), c = std::size_t(a.c),
                    state = std::size_t(a.n * a.c * (a.kernel_w - 1) * a.dilation_w);
  const bool act = a.activation != Activation::none;
  const TensorSpec input{x, e, true, Fill::values, 0.5f, 1.0f}, gradient{y, e, true, Fill::values, 0.0f, 1.0f},
      weight{w, e, true, Fill::values, 0.0f, 0.5f}, parameter{c, e, false, Fill::values, 0.0f, 0.25f};
  switch (a.direction) {
    case DwDirection::forward:
      v(a.x, input), v(a.weight, weight), v(a.y, TensorSpec{y, e, true, Fill::values, 0.0f, 1.0f});
      break;
    case DwDirection::backward_data:
      v(a.dy, gradient), v(a.weight, weight), v(a.dx, TensorSpec{x, e, true, Fill::values, 0.0f, 1.0f});
      if (act) v(a.x, input);
      break;
    case DwDirection::backward_weight:
      v(a.x, input), v(a.dy, gradient), v(a.dweight, TensorSpec{w, e, true, Fill::values, 0.0f, 1.0f});
      if (act) v(a.weight, weight);
      if (a.dbias != nullptr) v(a.dbias, TensorSpec{c, e, true, Fill::values, 0.0f, 1.0f});
      break;
  }
  if (a.bias != nullptr) v(a.bias, parameter);
  if (a.initial_state != nullptr) v(a.initial_state, TensorSpec{state, e, true, Fill::values, 0.5f, 1.0f});
  if (a.final_state != nullptr) v(a.final_state, TensorSpec{state, e, true, Fill::values, 0.0f, 1.0f});
  if (a.dinitial_state != nullptr) v(a.dinitial_state, TensorSpec{state, e, true, Fill::values, 0.0f, 1.0f});
  if (a.seq_idx != nullptr) v(a.seq_idx, TensorSpec{std::size_t(a.n * a.w), 4, false, Fill::sequences});
}

template <class V>
inline void each_tensor(DwConvDecodeArgs& a, V&& v) {
  const int e = element_bytes(a.dtype);
  const std::int64_t state_len = a.state_len == 0 ? a.kernel_w - 1 : a.state_len;
  const std::size_t tokens = std::size_t(a.batch * a.channels * a.seqlen), c = std::size_t(a.channels),
                    rows = std::size_t(a.batch);
  v(a.x, TensorSpec{tokens, e, true, Fill::values, 0.5f, 1.0f});
  v(a.y, TensorSpec{tokens, e, true, Fill::values, 0.0f, 1.0f});
  // Updated in place: each set's state evolves, its values stay copies of x's (bounded).
  v(a.state, TensorSpec{std::size_t(a.batch * a.channels * state_len), e, true, Fill::values, 0.5f, 1.0f});
  v(a.weight, TensorSpec{c * std::size_t(a.kernel_w), e, false, Fill::values, 0.0f, 0.5f});
  if (a.bias != nullptr) v(a.bias, TensorSpec{c, e, false, Fill::values, 0.0f, 0.25f});
  if (a.cache_seqlens != nullptr) v(a.cache_seqlens, TensorSpec{rows, 4, false, Fill::positions});
  if (a.state_indices != nullptr) v(a.state_indices, TensorSpec{rows, 4, false, Fill::slots});
}

// The int32 contents of the index tensors.
inline std::vector<std::int32_t> index_values(Fill fill, std::size_t elements, const BenchProblem& p) {
  std::vector<std::int32_t> out(elements);
  for (std::size_t i = 0; i < elements; ++i) {
    if (fill == Fill::slots) {
      out[i] = std::int32_t(i);
    } else if (fill == Fill::positions) {
      out[i] = std::int32_t((i * 2654435761u) % 4096);
    } else {  // sequences: position t of a row of w belongs to sequence t * sequences / w
      const std::int64_t w = std::get<DwConvArgs>(p.call).w;
      out[i] = std::int32_t(std::int64_t(i % std::size_t(w)) * std::max(p.sequences, 1) / w);
    }
  }
  return out;
}

}  // namespace kvtune::bench
