#pragma once
// The depthwise convolution rows shared by the dwconv and dwconv_states bench sides
// (tools/bench_dwconv.cpp, tools/bench_dwconv_states.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "tools/bench_suite.h"

namespace kvtune::bench {

struct DwShape {
  DwLayout layout;
  std::int64_t n, c, h, w;
  int kernel;  // kernel_w (and kernel_h in 2D)
  int stride = 1;
  bool causal = false;  // 1D only
};

/// One convolution of `s` in `direction` (family "dwconv", group "dwconv <direction>"), no bias:
/// cuDNN's convolution calls have none and the weight gradient is timed alone.
BenchProblem dw(const std::string& suite, DwDirection direction, DType dtype, const DwShape& s,
                const std::string& source);

/// `p` with bias and a fused activation: y = act(conv(x) + bias) forward; the backward directions
/// apply act'(z) to dy, recomputing z (backward_weight also gives dbias). Against the same
/// composition in PyTorch (the convolution with bias, then the activation as its own op).
BenchProblem with_activation(BenchProblem p, Activation activation);

/// The three directions of one shape in one dtype and layout.
void all_directions(std::vector<BenchProblem>& out, const std::string& suite, DType dtype, const DwShape& s,
                    const std::string& source);

}  // namespace kvtune::bench
