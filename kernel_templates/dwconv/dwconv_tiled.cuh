// kvtune depthwise convolution, the tiled kernel (forward and backward_data, gather form), included by
// dwconv.cu after Axis and source_row. dwconv.cu's header describes what each template argument
// does; this file and the two it includes are that kernel in parts, each with one job:
//
//   KvtTiled<...>                the kernel's template arguments and what follows from them
//   channel-first (NCHW / NCL)   dwconv_tiled_first.cuh: kvt_first_place (the thread's plane, rows and run), KvtFirstTaps,
//                                kvt_first_stage (the block's source tile in shared memory),
//                                KvtFirstWindow (a source row's window: plain loads, vector loads,
//                                the halo exchange between lanes), kvt_first_accumulate,
//                                kvt_first_store, and the three row loops: kvt_first_runs (RT > 1),
//                                kvt_first_rows (RH = 1), kvt_first_pipelined (RH > 1: the register
//                                sliding window over source rows); kvt_tiled_channel_first composes them
//   channel-last staged          dwconv_tiled_last.cuh: KvtLastTiles (locating, copying and computing a tile),
//                                kvt_tiled_channel_last_staged (the double-buffered tile loop)
//   channel-last (NHWC / NLC)    dwconv_tiled_last.cuh: kvt_last_place, KvtLastTaps, KvtLastWindow, kvt_last_rows,
//                                kvt_last_pipelined; kvt_tiled_channel_last composes them
//   kvt_dwconv_tiled             the kernel: the constraints, then one of the three bodies
//
// Every part is __forceinline__. Against the one-function form it replaced, a variant's PTX has the
// same instructions in another order or differs by a few setup instructions, within 1.1 % of its
// count (bench/ptx_digest.cpp; bench/NOTES.md, "The tiled kernel in parts"); channel-last variants
// compile to its sm_90 machine code byte for byte, but for a few that differ in placement only
// (`kvtune_variant_time --machine-code`; bench/NOTES.md, "the tiled split's slower variants, found").
#pragma once

template <class T_, int LAYOUT_, int DIR_, int KH_, int KW_, int SH_, int SW_, int DH_, int DW_, int PH_, int PW_,
          int RW_, int TX_, int TY_, int VC_, int STAGE_, int FILTER_, int HAS_BIAS_, int RH_, int RT_, int FLAT_, int EPI_,
          int SEQ_>
struct KvtTiled {
  using T = T_;
  static constexpr int LAYOUT = LAYOUT_, DIR = DIR_, KH = KH_, KW = KW_, SH = SH_, SW = SW_, DH = DH_, DW = DW_;
  static constexpr int PH = PH_, PW = PW_, RW = RW_, TX = TX_, TY = TY_, VC = VC_, STAGE = STAGE_, FILTER = FILTER_;
  static constexpr int HAS_BIAS = HAS_BIAS_, RH = RH_, RT = RT_, FLAT = FLAT_, EPI = EPI_, SEQ = SEQ_;
  // backward_data with an activation (EPI 1-4, the fused data gradient): the source is g = dy * act'(z),
  // z = bias + conv(x, w) formed per window position from an x window (kvt_first_fused, kvt_last_fused).
  static constexpr bool kFusedGrad = DIR == 1 && EPI != 0;
  static constexpr int kStoreEpi = DIR == 0 ? EPI : 0;  // what the stores apply
  static_assert(EPI == 0 || DIR == 0 || (DIR == 1 && EPI >= 1 && EPI <= 4 && KH == 1 && SW == 1 && STAGE == 0 && RH == 1 && FLAT == 0),
                "epilogues: forward; backward_data takes an activation 1D, stride 1, windows from global memory, one row");
  // SEQ (seq_idx, packed sequences): a tap whose position is of another sequence than the output's
  // adds nothing (and for the fused data gradient, nothing to z). 1D causal stride 1, forward or the
  // fused data gradient, windows from global memory, one row a thread (kvt_seq_window's ids).
  static_assert(SEQ == 0 || (KH == 1 && SW == 1 && PW == (KW - 1) * DW && STAGE == 0 && RH == 1 && FLAT == 0 &&
                             (DIR == 0 || kFusedGrad)),
                "seq_idx: 1D causal stride 1, forward or the fused data gradient, windows from global memory");
  // The x window's sequence ids (forward: the window itself; the fused data gradient: its x window)
  // start LEAD after a multiple of 4 (runs of a multiple of 4 outputs from a multiple of 4).
  static constexpr int kSeqLead = ((-(KW - 1) * DW) % 4 + 4) % 4;
  static_assert(RH == 1 || STAGE == 0 || LAYOUT == 1, "channel-first rows per thread read their rows from global memory");
  static_assert(RT == 1 || (LAYOUT == 0 && STAGE == 0 && RH == 1 && KH == 1) || (LAYOUT == 1 && STAGE == 1),
                "runs per thread: channel-first, one kernel row (channel-last staged: tiles per block)");
  static_assert(FLAT == 0 || (LAYOUT == 0 && STAGE == 0 && FILTER == 0 && RT == 1 && TY == 1 && TX % 32 == 0),
                "flat items: channel-first, global-memory halo, taps in registers, one run, whole warps");
  using AW = Axis<DIR, KW, SW, DW, PW, RW>;
  using AH = Axis<DIR, KH, SH, DH, PH, RH>;  // the thread's RH output rows and the source rows they read
  using V = Vec<T, VC>;
  static constexpr int kWin = AW::kWindow;
  static constexpr int kTaps = KH * KW;
  // Windows over 64 registers (channel-last rows from global memory only) are loaded in segments of
  // 32 registers (kvt_last_segments) where each thread has one channel and a run of 32 outputs or
  // more: every segment re-reads the taps, which costs little against a run of 32 and everything
  // against a run of a few. Measured on an H200 (bench/NOTES.md, 2026-11-29 evening): NLC f32
  // K = 63, runs of 32 7-19 % faster, runs of 1-8 with taps in shared memory up to 3.3x slower;
  // NLC bf16 K = 31 with 2-channel vectors, runs of 32 10-14 % slower, so not there.
  static constexpr int kSegRegisters = 32;
  static constexpr int kSeg = kWin * VC <= 64 || RW < 32 || VC != 1 ? kWin : kSegRegisters;
};

// Channel-last: the taps of VC consecutive channels from c0, as filter[tap * VC + channel]. They are
// one contiguous chunk of VC x kTaps weights: kTaps vector loads where aligned (one per tap and
// channel otherwise), element e = channel e / kTaps, tap e % kTaps.
template <class T, int VC, int kTaps>
__device__ __forceinline__ void kvt_channel_taps(const T* wt, long long c0, float (&filter)[kTaps * VC]) {
  using V = Vec<T, VC>;
  const T* chunk = wt + c0 * kTaps;
  if (reinterpret_cast<unsigned long long>(chunk) % sizeof(V) == 0) {
#pragma unroll
    for (int i = 0; i < kTaps; ++i) {
      const V f = reinterpret_cast<const V*>(chunk)[i];
#pragma unroll
      for (int u = 0; u < VC; ++u) filter[((i * VC + u) % kTaps) * VC + (i * VC + u) / kTaps] = kvt_to_float(f.v[u]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < VC * kTaps; ++e) filter[(e % kTaps) * VC + e / kTaps] = kvt_to_float(chunk[e]);
  }
}

// Channel-last: a thread's RH x RW x VC accumulators, each starting at its channel's bias (or 0).
template <class T, int RH, int RW, int VC, int HAS_BIAS>
__device__ __forceinline__ void kvt_bias_channel_last(const KvtDwConvParams& p, long long c0, float (&acc)[RH][RW][VC]) {
#pragma unroll
  for (int v = 0; v < VC; ++v) {
    const float b = HAS_BIAS ? kvt_to_float(static_cast<const T*>(p.bias)[c0 + v]) : 0.f;
#pragma unroll
    for (int rh = 0; rh < RH; ++rh)
#pragma unroll
      for (int r = 0; r < RW; ++r) acc[rh][r][v] = b;
  }
}

// Channel-last: a thread's RH x RW outputs of VC channels from c0 (rows from h, columns from t0), as
// VC-element vectors; rows and columns past the output are skipped.
template <class T, int RH, int RW, int VC, int EPI = 0>
__device__ __forceinline__ void kvt_store_channel_last(T* dst, const KvtDwConvParams& p, long long n, long long h,
                                                       long long t0, long long c0, const float (&acc)[RH][RW][VC]) {
  using V = Vec<T, VC>;
#pragma unroll
  for (int rh = 0; rh < RH; ++rh) {
    if (h + rh >= p.dst_h) break;
    const long long row = ((n * p.dst_h + h + rh) * p.dst_w) * p.channels + c0;  // element index
    T* drow = dst + row;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      if (t0 + r >= p.dst_w) break;
      float z[VC];
#pragma unroll
      for (int v = 0; v < VC; ++v) z[v] = acc[rh][r][v];
      kvt_epilogue_vec<EPI, T, VC>(z, p, row + (t0 + r) * p.channels);
      V out;
#pragma unroll
      for (int v = 0; v < VC; ++v) out.v[v] = kvt_from_float<T>(z[v]);
      *reinterpret_cast<V*>(drow + (t0 + r) * p.channels) = out;
    }
  }
}

template <class T, int N> __device__ __forceinline__ void kvt_zero_vec(Vec<T, N>& v) {
#pragma unroll
  for (int u = 0; u < N; ++u) v.v[u] = kvt_from_float<T>(0.f);
}

// Rows per thread (RH > 1): window row i of the register sliding window (input row `row`) lands on
// every output row rh and tap kh that read it, skipping rows outside the input. The channel-first
// and channel-last windows (kvt_first_pipelined, kvt_last_pipelined) share it.
template <class S, class Accumulate>
__device__ __forceinline__ void kvt_land_row(int i, long long row, long long src_h, const Accumulate& accumulate) {
  using AH = typename S::AH;
  if (row >= 0 && row < src_h)
#pragma unroll
    for (int rh = 0; rh < S::RH; ++rh)
#pragma unroll
      for (int kh = 0; kh < S::KH; ++kh)
        if (AH::valid(rh, kh) && AH::offset(rh, kh) == i) accumulate(rh, kh);
}

#include "dwconv_tiled_first.cuh"
#include "dwconv_tiled_last.cuh"

// ---- the kernel -------------------------------------------------------------------------------

// C .. DST_W: the problem's shape as constants (2D layouts; kvt_shape_fits).
template <class T, int LAYOUT, int DIR, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int RW, int TX,
          int TY, int VC, int STAGE, int FILTER, int HAS_BIAS, int RH = 1, int RT = 1, int FLAT = 0, int EPI = 0, int SEQ = 0,
          int C = 0, int SRC_H = 0, int SRC_W = 0, int DST_H = 0, int DST_W = 0>
__global__ void __launch_bounds__(TX * TY) kvt_dwconv_tiled(const KvtDwConvParams p) {
  using S = KvtTiled<T, LAYOUT, DIR, KH, KW, SH, SW, DH, DW, PH, PW, RW, TX, TY, VC, STAGE, FILTER, HAS_BIAS, RH, RT, FLAT, EPI,
                     SEQ>;
  KVT_DYNAMIC_SMEM(dynamic_smem);
  float* smem = reinterpret_cast<float*>(dynamic_smem);
  if (!kvt_shape_fits<C, SRC_H, SRC_W, DST_H, DST_W>(p)) return;
  const KvtDwConvParams q = kvt_with_shape<C, SRC_H, SRC_W, DST_H, DST_W>(p);
  if constexpr (LAYOUT == 0) kvt_tiled_channel_first<S>(q, smem);
  else if constexpr (STAGE == 1) kvt_tiled_channel_last_staged<S>(q, smem);
  else kvt_tiled_channel_last<S>(q, smem);
}
