#pragma once
// The decode steps of the mamba-inference suite, shared by kvtune-tune (tools/op_dwconv_decode.cpp)
// and kvtune-bench (tools/bench_dwconv_decode.cpp): Mamba's conv1d decode step (bf16, K = 4, SiLU,
// bias, continuous batching through state indices) on 1-1024 sequences of 2048-8192 channels
// (d_inner of 130M-2.8B models), one token; two speculative tokens; a circular state of 256.

#include <cstdint>
#include <vector>

namespace kvtune::tools {

struct DecodeShape {
  std::int64_t batch, channels;
  int seqlen;
  bool circular;  // a circular state of 256 positions
};

inline const std::vector<DecodeShape>& mamba_inference_shapes() {
  static const std::vector<DecodeShape> shapes = {
      {1, 2048, 1, false},    {8, 4096, 1, false},  {64, 4096, 1, false}, {64, 8192, 1, false},
      {256, 8192, 1, false},  {1024, 8192, 1, false}, {64, 5120, 2, false}, {64, 5120, 1, true}};
  return shapes;
}

}  // namespace kvtune::tools
