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

// Register-tiled weight gradients of rows per thread and at least this many taps have no second
// unrolled tile body for their edge tiles (past the image's last row or a row's end): an edge tile
// runs the whole tile's body (its missing outputs' dy are zeros) when a sum over its window is finite,
// else a loop over one dy row at a time. A 7x7 kernel's 4 x 8 tiles compile in 1.1 s instead of 1.9
// (NVRTC, one core), and on an H200 the edge-heavy NCHW 14x14 winner ran 35.0 -> 26.2 us, the NHWC
// 56x56 one (no edge tiles) 114.7 -> 116.5. Not for 3x3: cheap to compile, and the loop alone made
// all-edge tiles up to 1.34x slower (bench/NOTES.md, 2026-12-03).
constexpr int kKvtLoopedEdgeTaps = 25;

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
