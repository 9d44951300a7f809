// Kernel arguments of the dwconv family: one struct, passed by value, with the same layout in
// host code and in the NVRTC program (this file is compiled by both). Tensors are dense.
//   forward:          src = x,  dst = y,  weight, bias;  src dims = x, dst dims = y
//   backward_data:    src = dy, dst = dx, weight;        src dims = dy, dst dims = dx
//                     (the fused 1D form with an activation also reads aux = x, dx-shaped, and bias)
//   backward_weight:  src = x,  aux = dy, dst = dw, bias_grad = dbias; src dims = x, dst dims = dy
//                     (the fused 1D form with an activation also reads weight, bias and seq_idx)
#pragma once

// Kernels of more taps than this loop over their rows (2 at a time where the taps are in shared
// memory; each row's taps unrolled), and channel-first tiles of one output row a thread only: a
// 31x31 kernel's 961 taps fully unrolled made 110-180 KB cubins that took NVRTC 2.4-5.5 s each,
// the largest share of a cold tuning, and ran no faster (H200: 16x128x56x56 forward 366.7 us
// against 362.9 unrolled; several 14x14 variants 1.2-2x faster looped). Tiles of 2 output rows a
// thread ran 4.5x the best (bench/NOTES.md, "compiles in worker processes").
constexpr int kKvtUnrolledTaps = 256;

struct KvtDwConvParams {
  const void* src;
  void* dst;
  const void* weight;
  const void* bias;
  const void* aux;
  void* bias_grad;
  float* workspace;     // backward_weight: split partials, or the atomic accumulator
  unsigned* counters;   // backward_weight: one arrival counter per block column, zeroed per call
  long long batch;
  long long channels;
  long long src_h, src_w;
  long long dst_h, dst_w;
  long long splits;     // backward_weight: slices of the N x Ho x Wo reduction
  const int* seq_idx;   // fused backward_weight with SEQ: int32 [batch, src_w], the packed sequences
};
