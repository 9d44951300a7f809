// kvtune depthwise convolution family (groups = channels), 1D and 2D, compiled by NVRTC.
// 1D problems are 2D problems with H = 1 (KH = SH = DH = 1, PH = 0). Kernel size, stride,
// dilation and the leading (top/left) padding are template arguments, so every tap loop unrolls.
//
//   kvt_dwconv_tiled     forward (DIR 0) and backward_data (DIR 1), gather form (dwconv_tiled.cuh,
//                        composed of parts with one job each):
//     forward        y[t]  = sum_k x[t*S - P + k*D] w[k]
//     backward_data  dx[t] = sum_k dy[(t + P - k*D) / S] w[k]   where S divides t + P - k*D
//     LAYOUT 0 channel-first (NCHW / NCL): a block is a TY x (TX*RW) tile of one (n, c) plane
//              (FLAT 1: TX threads take consecutive items of (plane, RH rows, run) over the grid);
//              each thread computes RW consecutive outputs along W from a register window, read
//              as aligned vectors of VC elements along W where VC > 1.
//              STAGE 0 reads windows through L1 from global, STAGE 1 stages the block's source tile
//              in shared memory first. RT > 1 (one kernel row): a block covers RT tiles and a
//              thread computes one run in each, all RT windows' loads issued before the first FMA.
//     LAYOUT 1 channel-last (NHWC / NLC): a thread computes VC consecutive channels (one vector
//              access) x RW outputs along W; a block's TX threads take TX consecutive (W run,
//              channel vector) pairs of an output row, channel vector fastest; TY rows per block.
//              STAGE 1: a tile is TX channel vectors x TY runs x RH rows; its source, all the tile's
//              channels, is copied to shared memory (cp.async) and the windows read there; a block
//              takes RT tiles in turn, the next one's copies in flight during the FMAs.
//     FILTER 0 keeps the taps in registers, 1 in shared memory.
//   kvt_dwconv_direct    one thread per output: ORDER 0 "naive" (channel index fastest: strided
//                        for channel-first), ORDER 1 "coalesced" (contiguous axis fastest).
//   kvt_dwconv_wgrad     backward_weight: a block owns CT channels, a group of TG taps and one of
//                        `splits` slices of the N x Ho x Wo reduction; threads reduce through
//                        shared memory in a fixed order; splits > 1 combine per-split partials in
//                        the last-arriving block (deterministic) or through f32 atomics (ATOMIC 1).
//                        RW > 1 (register tiling, TG = every tap, or TG = KW: one kernel row per
//                        block column): a thread takes runs of RW consecutive dy elements along W
//                        and loads each x row's window once for all KW taps, instead of one x load
//                        per tap and dy element. RH > 1 (every tap): a thread's tile is RH dy rows x
//                        RW outputs and each x row it touches is loaded once for every (dy row,
//                        kernel row) pair. VC > 1 (channel-first): dy runs and x windows are read
//                        as aligned vectors of VC elements along W.
//                        Lanes of one channel reduce by warp shuffles before shared memory.
//   kvt_dwconv_wgrad_staged  backward_weight, channel-first, every tap: kvt_dwconv_wgrad's register
//                        tiles, their x windows from whole planes staged in shared memory (two in turn).
//   kvt_dwconv_mma       forward and backward_data (stride 1) of 16-bit channel-last problems on the
//                        tensor cores: each kernel row's taps as a banded (Toeplitz) matrix, 16 runs
//                        of one channel a matrix multiply (dwconv_mma.cuh, included at the end).
//   kvt_dwconv_reference float64, one thread per output element, any direction.
// Forward kernels take EPI last (dwconv_activation.cuh): the fused activation, or the gradient prep
// dy * act'(z) that backward_data and backward_weight with an activation run first; 0 (the default,
// which keeps older variants' names) stores z. Only the shape constants C .. DST_W of the 2D
// tiled, tensor-core and weight-gradient variants follow (kvt_shape_fits; 0, the default: at run
// time).
#include "common.cuh"
#include "dwconv_params.h"
#include "dwconv_activation.cuh"

template <bool B> struct kvt_bool {
  static constexpr bool value = B;
};

// The problem's shape as constants (2D problems: the tiled and weight-gradient kernels of both
// layouts, the tensor-core kernel; the host's Problem::fixed_shape): C > 0 compiles a variant for C
// channels and source / destination planes of SRC_H x SRC_W and DST_H x DST_W, so a window's loads
// sit at immediate offsets from one address instead of each computing its own from the run-time
// channel count (NHWC bf16 3x3: about three address and test instructions an FMA, bench/NOTES.md;
// channel-first: the plane's tile and row counts, plane % C and the staged weight gradient's buffer
// offsets, run-time divisions and products before). Such a binary is for that shape only: the shape
// is in its name, so in its compile hash and in the lowered name a stored binary is checked against.
// A kernel returns at once (writing nothing) where kvt_shape_fits is false, arguments of another
// shape, which the host never passes; then it runs on kvt_with_shape(p). (Testing the kernel's own
// arguments, not the copy: tested on the copy, ptxas kept the run-time addressing, 1,216
// instructions against 752.)
template <int C, int SRC_H, int SRC_W, int DST_H, int DST_W>
__device__ __forceinline__ bool kvt_shape_fits(const KvtDwConvParams& p) {
  return C == 0 || (p.channels == C && p.src_h == SRC_H && p.src_w == SRC_W && p.dst_h == DST_H && p.dst_w == DST_W);
}
template <int C, int SRC_H, int SRC_W, int DST_H, int DST_W>
__device__ __forceinline__ KvtDwConvParams kvt_with_shape(KvtDwConvParams p) {
  if constexpr (C != 0) {
    p.channels = C;
    p.src_h = SRC_H;
    p.src_w = SRC_W;
    p.dst_h = DST_H;
    p.dst_w = DST_W;
  }
  return p;
}

__host__ __device__ constexpr int kvt_floordiv(int a, int b) { return (a >= 0) ? a / b : -((-a + b - 1) / b); }

// Source coordinates of a run of R consecutive outputs along one axis, as a window of registers.
template <int DIR, int K, int S, int D, int P, int R>
struct Axis {
  static constexpr int kQmin = DIR == 0 ? 0 : kvt_floordiv(P - (K - 1) * D, S);
  static constexpr int kWindow = DIR == 0 ? (R - 1) * S + (K - 1) * D + 1 : kvt_floordiv(R - 1 + P, S) - kQmin + 1;
  // Window position of output r, tap k.
  __host__ __device__ static constexpr int offset(int r, int k) {
    return DIR == 0 ? r * S + k * D : kvt_floordiv(r + P - k * D, S) - kQmin;
  }
  __host__ __device__ static constexpr bool valid(int r, int k) {
    return DIR == 0 ? true : (r + P - k * D) - kvt_floordiv(r + P - k * D, S) * S == 0;
  }
  // Whether some output of the run reads window position i (dilation leaves gaps).
  __host__ __device__ static constexpr bool used(int i) {
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < K; ++k)
        if (valid(r, k) && offset(r, k) == i) return true;
    return false;
  }
  // The first window position at or after i that some output reads (kWindow if none).
  __host__ __device__ static constexpr int next_used(int i) {
    for (; i < kWindow; ++i)
      if (used(i)) return i;
    return kWindow;
  }
  // Source index of the window's first element for a run starting at output t0 (DIR 1: S | t0).
  __device__ static long long base(long long t0) { return DIR == 0 ? t0 * S - P : t0 / S + kQmin; }
};

// VC elements at src as one aligned vector where `in`, zeros otherwise. Zeros on the else branch, not
// a select after the load: with the select the compiler loaded every vector of a weight-gradient tile
// into the same registers, one after another (H100, staged NCHW f32 7x7: 61.5 against 52.3 us;
// bench/NOTES.md, 2026-11-26 03:20).
template <class T, int VC>
__device__ __forceinline__ Vec<T, VC> kvt_load_or_zero(const T* src, bool in) {
  Vec<T, VC> v;
  if (in) v = *reinterpret_cast<const Vec<T, VC>*>(src);
  else
#pragma unroll
    for (int u = 0; u < VC; ++u) v.v[u] = kvt_from_float<T>(0.f);
  return v;
}

// Source row of output row h for tap kh; false when the tap does not land on a source row.
template <int DIR, int KH, int SH, int DH, int PH>
__device__ __forceinline__ bool source_row(long long h, int kh, long long src_h, long long& row) {
  if (DIR == 0) {
    row = h * SH - PH + (long long)kh * DH;
  } else {
    const long long num = h + PH - (long long)kh * DH;
    if (num < 0 || num % SH != 0) return false;
    row = num / SH;
  }
  return row >= 0 && row < src_h;
}

__device__ __forceinline__ int kvt_int4_at(const int4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// seq_idx (1D, causal, stride 1): the sequence ids of N consecutive positions from q0 of a row of L
// (`row`, int32), positions outside the row as the nearest inside (the tensor read there is zero, so
// any id will do). With `vectors` (a 16-byte aligned row of a multiple of 4, and q0 = LEAD mod 4), as
// 16-byte vectors from the aligned position before q0: a warp's scalar loads of a window's ids each
// touched 8 lines (the fused weight gradient on Mamba's row, H100: +134 us over the unmasked kernel,
// bench/NOTES.md).
template <int N, int LEAD>
__device__ __forceinline__ void kvt_seq_window(const int* row, long long L, long long q0, bool vectors, int (&sq)[N]) {
  if (vectors) {
    constexpr int kVecs = (LEAD + N + 3) / 4;
    int4 ids[kVecs];
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const long long a = q0 - LEAD + 4 * v;  // a multiple of 4: wholly in the row or out
      if (a >= 0 && a < L) {
        ids[v] = *reinterpret_cast<const int4*>(row + a);
      } else {
        const int e = row[a < 0 ? 0 : L - 1];
        ids[v] = make_int4(e, e, e, e);
      }
    }
#pragma unroll
    for (int j = 0; j < N; ++j) sq[j] = kvt_int4_at(ids[(LEAD + j) / 4], (LEAD + j) % 4);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const long long q = q0 + j;
      sq[j] = row[q < 0 ? 0 : q < L ? q : L - 1];
    }
  }
}

#include "dwconv_tiled.cuh"

// One thread per output element; ORDER 0 "naive", 1 "coalesced" (see the file header).
template <class T, int LAYOUT, int DIR, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int ORDER,
          int HAS_BIAS, int EPI = 0>
__global__ void kvt_dwconv_direct(const KvtDwConvParams p) {
  static_assert(EPI == 0 || DIR == 0, "epilogues (activation, gradient prep): forward only");
  const long long total = p.batch * p.channels * p.dst_h * p.dst_w;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    long long n, c, h, w, rest = e;
    const bool channel_fastest = (LAYOUT == 1) == (ORDER == 1);
    if (channel_fastest) {
      c = rest % p.channels; rest /= p.channels;
      w = rest % p.dst_w; rest /= p.dst_w;
      h = rest % p.dst_h; n = rest / p.dst_h;
    } else {
      w = rest % p.dst_w; rest /= p.dst_w;
      h = rest % p.dst_h; rest /= p.dst_h;
      c = rest % p.channels; n = rest / p.channels;
    }
    float acc = HAS_BIAS ? kvt_to_float(static_cast<const T*>(p.bias)[c]) : 0.f;
    const T* src = static_cast<const T*>(p.src);
    const T* wt = static_cast<const T*>(p.weight) + c * KH * KW;
#pragma unroll(KH * KW > kKvtUnrolledTaps ? 1 : KH)
    for (int kh = 0; kh < KH; ++kh) {
      long long row;
      if (!source_row<DIR, KH, SH, DH, PH>(h, kh, p.src_h, row)) continue;
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        long long col;
        if (!source_row<DIR, KW, SW, DW, PW>(w, kw, p.src_w, col)) continue;
        const long long idx = LAYOUT == 0 ? ((n * p.channels + c) * p.src_h + row) * p.src_w + col
                                          : ((n * p.src_h + row) * p.src_w + col) * p.channels + c;
        acc += kvt_to_float(src[idx]) * kvt_to_float(wt[kh * KW + kw]);
      }
    }
    const long long out = LAYOUT == 0 ? ((n * p.channels + c) * p.dst_h + h) * p.dst_w + w
                                      : ((n * p.dst_h + h) * p.dst_w + w) * p.channels + c;
    static_cast<T*>(p.dst)[out] = kvt_from_float<T>(kvt_epilogue<EPI, T>(acc, p, out));
  }
}

// A register-tiled weight-gradient tile's products with one x row, position i of the rows' window:
// every (dy row, kernel row) pair that reads it (ALL_TAPS), or the block column's one kernel row
// (kh = 0). WHOLE: the tile lies inside the output; else dy rows from `rows` and outputs from `valid`
// add nothing (so an x column only they would read cannot bring in a 0 * inf NaN).
template <class AH, class AW, int KH, int KW, bool ALL_TAPS, bool WHOLE, int N, int RH, int RW, int WIN>
__device__ __forceinline__ void kvt_wgrad_row(float (&acc)[N], const float (&g)[RH][RW], const float (&win)[WIN], int i,
                                              int rows, int valid) {
#pragma unroll
  for (int rr = 0; rr < RH; ++rr)
#pragma unroll
    for (int kh = 0; kh < (ALL_TAPS ? KH : 1); ++kh) {
      if (ALL_TAPS && AH::offset(rr, kh) != i) continue;
      if (!WHOLE && rr >= rows) continue;
#pragma unroll
      for (int kw = 0; kw < KW; ++kw)
#pragma unroll
        for (int r = 0; r < RW; ++r)
          if (WHOLE || r < valid) acc[kh * KW + kw] += g[rr][r] * win[AW::offset(r, kw)];
    }
}

// out = g[rr] for a row index known only at run time, as selects over the unrolled rows (g stays in
// registers; an indexed read would move it to local memory).
template <int RH, int RW>
__device__ __forceinline__ void kvt_select_row(const float (&g)[RH][RW], int rr, float (&out)[RW]) {
#pragma unroll
  for (int r = 0; r < RW; ++r) out[r] = g[0][r];
#pragma unroll
  for (int k = 1; k < RH; ++k)
#pragma unroll
    for (int r = 0; r < RW; ++r) out[r] = rr == k ? g[k][r] : out[r];
}

// The fused 1D weight gradient's products with a run's window (EPI: the forward's activation, KH = 1):
// g[r] = dy[r] * act'(z[r]), z[r] = bias + sum_k w[k] x[window(r, k)] recomputed from the very window the
// products read, so no dy * act'(z) tensor is written or read. MASKED (seq_idx): a tap whose position
// is of another sequence than the output's (window position r + PW, stride 1) adds nothing to z nor
// to dw, as the definition's zero there.
template <class AW, int KW, int PW, int EPI, bool MASKED, bool WHOLE, int N, int RW, int WIN, int SQ>
__device__ __forceinline__ void kvt_wgrad_fused(float (&acc)[N], const float (&dy)[RW], const float (&win)[WIN],
                                                const float (&wt)[KW], float z_bias, const int (&sq)[SQ], int valid,
                                                bool bias_grad) {
  const auto in = [&](int r, int k) {
    if constexpr (MASKED) return sq[AW::offset(r, k)] == sq[r + PW];
    else return true;
  };
  float g[RW];
#pragma unroll
  for (int r = 0; r < RW; ++r) {
    float z = z_bias;
#pragma unroll
    for (int k = 0; k < KW; ++k)
      if (in(r, k)) z += win[AW::offset(r, k)] * wt[k];
    g[r] = WHOLE || r < valid ? dy[r] * kvt_act_derivative<kvt_act_of(EPI)>(z) : 0.f;
  }
  if (bias_grad)
#pragma unroll
    for (int r = 0; r < RW; ++r) acc[KW] += g[r];
#pragma unroll
  for (int k = 0; k < KW; ++k)
#pragma unroll
    for (int r = 0; r < RW; ++r)
      if ((WHOLE || r < valid) && in(r, k)) acc[k] += g[r] * win[AW::offset(r, k)];
}

// The end of a weight-gradient block: its threads' sums (acc[j], tap group * TG + j; acc[TG] dbias)
// reduced in a fixed order and written to dw / dbias (one split), to the split's partials (ATOMIC 0)
// or the f32 accumulator (ATOMIC 1); with splits, the last-arriving block of the column (arrival
// counter) sums them in order and writes dw and dbias.
template <class T, int kTaps, int CT, int PY, int TG, int ATOMIC, int BIAS>
__device__ __forceinline__ void kvt_wgrad_finish(const KvtDwConvParams& p, const float (&acc)[TG + 1], long long c_base,
                                                 int group, long long split) {
  constexpr int kCols = kTaps + 1;  // the last column is dbias
  // Lanes of one channel add their sums by warp shuffles first, so a block column sums one value
  // per warp instead of one per thread (the serial sum over PY values was a long tail).
  constexpr bool kLaneReduce = CT < 32 && 32 % CT == 0 && (CT * PY) % 32 == 0;
  constexpr int kRows = kLaneReduce ? CT * PY / 32 : PY;
  __shared__ float partial[kRows][CT][TG + 1];
  __shared__ bool last_block;
  const int cx = threadIdx.x % CT, py = threadIdx.x / CT;
  if constexpr (kLaneReduce) {
    // Lanes with the same channel (lane % CT) add up; lane cx < CT stores its warp's sum.
#pragma unroll
    for (int j = 0; j <= TG; ++j) {
      float v = acc[j];
#pragma unroll
      for (int off = 16; off >= CT; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      if ((threadIdx.x & 31) < CT) partial[threadIdx.x / 32][cx][j] = v;
    }
  } else {
#pragma unroll
    for (int j = 0; j <= TG; ++j) partial[py][cx][j] = acc[j];
  }
  __syncthreads();

  // Column (cx, j) of this block: tap group * TG + j, or dbias (j == TG, written by group 0 only).
  auto column = [&](int i, long long& cc, int& t) {
    const int ccx = i % CT, j = i / CT;
    cc = c_base + ccx;
    t = j < TG ? group * TG + j : kTaps;
    return cc < p.channels && (j < TG ? t < kTaps : (BIAS && group == 0));
  };
  auto write_final = [&](long long cc, int t, float v) {
    if (t < kTaps) static_cast<T*>(p.dst)[cc * kTaps + t] = kvt_from_float<T>(v);
    else static_cast<T*>(p.bias_grad)[cc] = kvt_from_float<T>(v);
  };
  for (int i = threadIdx.x; i < CT * (TG + 1); i += CT * PY) {
    long long cc;
    int t;
    if (!column(i, cc, t)) continue;
    float s = 0.f;
    for (int y = 0; y < kRows; ++y) s += partial[y][i % CT][i / CT];  // fixed order
    if (p.splits == 1 && !ATOMIC) write_final(cc, t, s);
    else if (ATOMIC) atomicAdd(p.workspace + cc * kCols + t, s);
    else p.workspace[split * p.channels * kCols + cc * kCols + t] = s;
  }
  if (p.splits == 1 && !ATOMIC) return;

  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last_block = atomicAdd(p.counters + blockIdx.x, 1u) == p.splits - 1;
  __syncthreads();
  if (!last_block) return;
  __threadfence();
  const volatile float* ws = p.workspace;
  for (int i = threadIdx.x; i < CT * (TG + 1); i += CT * PY) {
    long long cc;
    int t;
    if (!column(i, cc, t)) continue;
    float s = 0.f;
    if (ATOMIC) {
      s = ws[cc * kCols + t];
    } else {
      for (long long k = 0; k < p.splits; ++k) s += ws[k * p.channels * kCols + cc * kCols + t];
    }
    write_final(cc, t, s);
  }
}

// backward_weight: p.src = x, p.aux = dy (dst_h x dst_w is dy's spatial size). Each block reduces
// its slice through shared memory in a fixed order. With one split the block writes dw directly;
// otherwise it writes its partials (ATOMIC 0) or adds them to one f32 accumulator (ATOMIC 1), and the
// last block of its column (arrival counter) sums the splits in order and writes dw and dbias.
template <class T, int LAYOUT, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int CT, int PY, int TG,
          int ATOMIC, int BIAS, int RW = 1, int RH = 1, int VC = 1, int PIPE = -1, int EPI = 0, int SEQ = 0, int C = 0,
          int SRC_H = 0, int SRC_W = 0, int DST_H = 0, int DST_W = 0>
__global__ void __launch_bounds__(CT * PY) kvt_dwconv_wgrad(const KvtDwConvParams args) {
  // C .. DST_W: the problem's shape as constants (2D layouts; kvt_shape_fits).
  if (!kvt_shape_fits<C, SRC_H, SRC_W, DST_H, DST_W>(args)) return;
  const KvtDwConvParams p = kvt_with_shape<C, SRC_H, SRC_W, DST_H, DST_W>(args);
  static_assert(RW == 1 || TG == KH * KW || TG == KW, "register-tiled wgrad: every tap, or one kernel row's");
  // EPI (an activation, 1-4): the fused 1D weight gradient, dy * act'(z) formed in registers
  // (kvt_wgrad_fused); SEQ: its taps masked by seq_idx.
  constexpr bool kFused = EPI != 0;
  static_assert(!kFused || (KH == 1 && RW > 1 && RH == 1 && TG == KW && !kvt_grad_prep(EPI)),
                "fused weight gradient: 1D register-tiled runs with every tap");
  static_assert(!SEQ || (kFused && SW == 1 && PW <= (KW - 1) * DW), "seq_idx: the fused weight gradient, causal");
  static_assert(RH == 1 || (RW > 1 && TG == KH * KW), "rows per thread share x rows across every tap");
  static_assert(VC == 1 || (LAYOUT == 0 && RW > 1 && RW % VC == 0), "vectors along W: channel-first runs");
  constexpr int kTaps = KH * KW;
  constexpr bool kAllTaps = TG == KH * KW;
  const int cx = threadIdx.x % CT, py = threadIdx.x / CT;
  const long long c_tiles = (p.channels + CT - 1) / CT;
  const long long c_base = (blockIdx.x % c_tiles) * CT;
  const long long c = c_base + cx;
  const int group = static_cast<int>(blockIdx.x / c_tiles);
  const long long split = blockIdx.y;
  const long long positions = p.batch * p.dst_h * p.dst_w;
  const long long per_split = (positions + p.splits - 1) / p.splits;
  const long long begin = split * per_split;
  const long long end = begin + per_split < positions ? begin + per_split : positions;
  const T* x = static_cast<const T*>(p.src);
  const T* dy = static_cast<const T*>(p.aux);

  int row_off[TG], col_off[TG];
#pragma unroll
  for (int j = 0; j < TG; ++j) {
    const int t = group * TG + j;
    row_off[j] = (t / KW) * DH - PH;
    col_off[j] = (t % KW) * DW - PW;
  }
  float acc[TG + 1];
#pragma unroll
  for (int j = 0; j <= TG; ++j) acc[j] = 0.f;
  // seq_idx rows read as 16-byte vectors: runs of a multiple of 4 and 16-byte aligned rows.
  const bool seq_vectors = SEQ && RW % 4 == 0 && reinterpret_cast<unsigned long long>(p.seq_idx) % 16 == 0 &&
                           p.src_w % 4 == 0;
  // The fused form's forward taps and bias (the bias optional: p.bias may be null).
  float wt[kFused ? KW : 1], z_bias = 0.f;
  if constexpr (kFused) {
    if (c < p.channels) {
#pragma unroll
      for (int k = 0; k < KW; ++k) wt[k] = kvt_to_float(static_cast<const T*>(p.weight)[c * KW + k]);
      if (p.bias != nullptr) z_bias = kvt_to_float(static_cast<const T*>(p.bias)[c]);
    }
  }
  if constexpr (RW > 1) {
    // Tiles of RH rows x RW outputs along W within one image; this split's slice is a range of
    // tiles. x rows are loaded once per tile for every (dy row, kernel row) pair that reads them
    // (every tap), or once per dy row for the block column's kernel row (TG = KW, RH = 1).
    using AW = Axis<0, KW, SW, DW, PW, RW>;
    using AH = Axis<0, KH, SH, DH, PH, RH>;
    using AH1 = Axis<0, KH, SH, DH, PH, 1>;  // one dy row of the tile (the edge tiles' loop)
    constexpr int kWin = AW::kWindow;
    constexpr bool kLoopedEdges = RH > 1 && KH * KW >= kKvtLoopedEdgeTaps;
    constexpr int kXRows = kAllTaps ? AH::kWindow : 1;
    using V = Vec<T, VC>;
    constexpr int kLead = ((-PW % VC) + VC) % VC;  // VC | w0 * SW: the window starts kLead into a vector
    constexpr int kVecs = (kLead + kWin + VC - 1) / VC;
    const long long runs_per_row = (p.dst_w + RW - 1) / RW;
    const long long row_groups = (p.dst_h + RH - 1) / RH;
    const long long runs = p.batch * row_groups * runs_per_row;
    const long long per_split_runs = (runs + p.splits - 1) / p.splits;
    const long long run_begin = split * per_split_runs;
    const long long run_end = run_begin + per_split_runs < runs ? run_begin + per_split_runs : runs;
    if (c < p.channels && run_begin + py < run_end) {
      const long long step_r = PY % runs_per_row, step_hr = PY / runs_per_row;
      const long long step_h = step_hr % row_groups, step_n = step_hr / row_groups;
      long long wr = (run_begin + py) % runs_per_row, hg = (run_begin + py) / runs_per_row;
      long long n = hg / row_groups;
      hg %= row_groups;
      for (long long e = run_begin + py; e < run_end; e += PY) {
        const long long w0 = wr * RW, h = hg * RH;
        const int valid = p.dst_w - w0 < RW ? static_cast<int>(p.dst_w - w0) : RW;
        const int rows = p.dst_h - h < RH ? static_cast<int>(p.dst_h - h) : RH;
        float g[RH][RW];
#pragma unroll
        for (int rr = 0; rr < RH; ++rr) {
          const T* g_row = LAYOUT == 0 ? dy + ((n * p.channels + c) * p.dst_h + h + rr) * p.dst_w
                                       : dy + ((n * p.dst_h + h + rr) * p.dst_w) * p.channels + c;
#pragma unroll
          for (int r = 0; r < RW; r += VC) {
            // VC > 1: the host guarantees VC | dst_w, so a vector is wholly inside the row or past it.
            const bool in = rr < rows && w0 + r < p.dst_w;
            if constexpr (VC > 1) {
              const V v = kvt_load_or_zero<T, VC>(g_row + w0 + r, in);
#pragma unroll
              for (int u = 0; u < VC; ++u) g[rr][r + u] = kvt_to_float(v.v[u]);
            } else {
              g[rr][r] = in ? kvt_to_float(g_row[LAYOUT == 0 ? w0 + r : (w0 + r) * p.channels]) : 0.f;
            }
          }
          if (BIAS && !kFused)
#pragma unroll
            for (int r = 0; r < RW; ++r) acc[TG] += g[rr][r];
        }
        const long long q0 = w0 * SW - PW;
        // One x row's window as kVecs aligned accesses (VC = 1: kVecs = kWin scalars), predicated
        // rather than branched: padding rows and columns read as zeros, so no control flow
        // separates a row's loads from the previous row's FMAs.
        // The column tests and the image's base are the same for every x row of the tile: decided
        // once here, so a row costs one address and one row test (per vector and row, the 64-bit
        // address and tests were ~60 instructions a row; H100, exhaustive, NCHW f32 7x7 82.4 -> 75.5 us,
        // bench/NOTES.md, "weight-gradient x rows").
        const long long q_first = q0 - kLead;
        bool col_in[kVecs];
#pragma unroll
        for (int v = 0; v < kVecs; ++v) {
          // VC > 1: VC | src_w, so a vector is wholly inside the row or wholly padding.
          const long long qs = q_first + v * VC;
          col_in[v] = qs >= 0 && qs < p.src_w;
        }
        const T* x_image = LAYOUT == 0 ? x + (n * p.channels + c) * p.src_h * p.src_w + q_first
                                       : x + n * p.src_h * p.src_w * p.channels + q_first * p.channels + c;
        auto load_row = [&](int i, V (&vecs)[kVecs]) {
          const long long row = kAllTaps ? AH::base(h) + i : h * SH - PH + (long long)group * DH;
          const bool row_in = row >= 0 && row < p.src_h;
          const T* x_row = x_image + (row_in ? row : 0) * (LAYOUT == 0 ? p.src_w : p.src_w * p.channels);
#pragma unroll
          for (int v = 0; v < kVecs; ++v) {
            if (row_in && col_in[v]) vecs[v] = *reinterpret_cast<const V*>(x_row + (LAYOUT == 0 ? v * VC : v * VC * p.channels));
            else
#pragma unroll
              for (int u = 0; u < VC; ++u) vecs[v].v[u] = kvt_from_float<T>(0.f);
          }
        };
        // A tile that ends past the row (or the image) skips its missing outputs' products, so an x
        // column that only they would touch cannot bring in a NaN (0 * inf) the definition lacks.
        auto taps = [&](auto whole) {
          // Software pipeline: the next used row's loads are issued before this row's FMAs. Not for
          // over 32 taps: the second buffer's registers cost more occupancy than the overlap gains
          // (H200, 7x7: 89.7 -> 100.2 us).
          constexpr bool kPipeline = PIPE < 0 ? TG <= 32 : PIPE == 1;
          V cur[kVecs], next[kVecs];
          if (kPipeline) load_row(kAllTaps ? AH::next_used(0) : 0, cur);
#pragma unroll
          for (int i = 0; i < kXRows; ++i) {
            if (kAllTaps && !AH::used(i)) continue;
            // Padding rows add no products (as the definition: no 0 * inf NaN from them).
            const long long row = kAllTaps ? AH::base(h) + i : h * SH - PH + (long long)group * DH;
            const bool row_in = row >= 0 && row < p.src_h;
            if (!kPipeline) {
              if (!row_in) continue;
              load_row(i, cur);
            } else if (kAllTaps && AH::next_used(i + 1) < kXRows) {
              load_row(AH::next_used(i + 1), next);
            }
            if (!row_in) {
              if (kPipeline)
#pragma unroll
                for (int v = 0; v < kVecs; ++v) cur[v] = next[v];
              continue;
            }
            float win[kWin];
#pragma unroll
            for (int j = 0; j < kWin; ++j) win[j] = kvt_to_float(cur[(kLead + j) / VC].v[(kLead + j) % VC]);
            if constexpr (kFused) {
              // SEQ: the window's sequence ids (positions outside the row as the nearest inside: x is 0
              // there), every tap masked. Not a branch to an unmasked path for windows of one sequence:
              // with Mamba's packed sequences of 256 a warp's 32 runs nearly always hold a boundary, so
              // the warp ran both paths (H100: 235 us against 111 without seq_idx, bench/NOTES.md).
              int sq[SEQ ? kWin : 1];
              if constexpr (SEQ) kvt_seq_window<kWin, ((-PW % 4) + 4) % 4>(p.seq_idx + n * p.src_w, p.src_w, q0, seq_vectors, sq);
              kvt_wgrad_fused<AW, KW, PW, EPI, SEQ != 0, decltype(whole)::value>(acc, g[0], win, wt, z_bias, sq, valid,
                                                                                  BIAS);
            } else {
              kvt_wgrad_row<AH, AW, KH, KW, kAllTaps, decltype(whole)::value>(acc, g, win, i, rows, valid);
            }
            if (kPipeline)
#pragma unroll
              for (int v = 0; v < kVecs; ++v) cur[v] = next[v];
          }
        };
        bool whole = valid == RW && rows == RH;
        if constexpr (kLoopedEdges) {
          // A tile past the image's last row or the row's end without a second unrolled body (what
          // that cost in compile time: the 7x7 weight gradients' heaviest programs had two bodies of
          // 1,568 FMAs; kKvtLoopedEdgeTaps). Its missing outputs' dy are zeros, so the whole tile's
          // body (called once below: a second call would be a second copy) adds exact zeros for
          // them, unless a window value is an inf or a NaN (0 * inf: a NaN the definition lacks). A
          // sum over the window (a loop: little code) tells.
          if (!whole) {
            float sum = 0.f;
#pragma unroll 1
            for (int i = 0; i < AH::kWindow; ++i) {
              const long long row = AH::base(h) + i;
              if (!AH::used(i) || row < 0 || row >= p.src_h) continue;
              V cur[kVecs];
              load_row(i, cur);
#pragma unroll
              for (int j = 0; j < kWin; ++j) sum += kvt_to_float(cur[(kLead + j) / VC].v[(kLead + j) % VC]);
            }
            whole = kvt_finite(sum);
          }
        }
        if (whole) {
          taps(kvt_bool<true>{});
        } else if constexpr (kLoopedEdges) {
          // Not finite: one dy row at a time (a loop), dy row rr reading window rows rr * SH + i1.
          for (int rr = 0; rr < rows; ++rr) {
            float g1[1][RW];
            kvt_select_row(g, rr, g1[0]);
#pragma unroll
            for (int i1 = 0; i1 < AH1::kWindow; ++i1) {
              if (!AH1::used(i1)) continue;
              const int i = rr * SH + i1;
              const long long row = AH::base(h) + i;
              if (row < 0 || row >= p.src_h) continue;
              V cur[kVecs];
              load_row(i, cur);
              float win[kWin];
#pragma unroll
              for (int j = 0; j < kWin; ++j) win[j] = kvt_to_float(cur[(kLead + j) / VC].v[(kLead + j) % VC]);
              kvt_wgrad_row<AH1, AW, KH, KW, true, false>(acc, g1, win, i1, 1, valid);
            }
          }
        } else {
          taps(kvt_bool<false>{});
        }
        wr += step_r;
        hg += step_h;
        n += step_n;
        if (wr >= runs_per_row) {
          wr -= runs_per_row;
          ++hg;
        }
        if (hg >= row_groups) {
          hg -= row_groups;
          ++n;
        }
      }
    }
  } else if (c < p.channels && begin + py < end) {
    // (n, h, w) of position e, advanced by PY positions a step with carries instead of the three
    // 64-bit divisions per element a direct decomposition costs (they dominated the instruction count).
    const long long step_w = PY % p.dst_w, step_hw = PY / p.dst_w;
    const long long step_h = step_hw % p.dst_h, step_n = step_hw / p.dst_h;
    long long w = (begin + py) % p.dst_w, h = (begin + py) / p.dst_w;
    long long n = h / p.dst_h;
    h %= p.dst_h;
    for (long long e = begin + py; e < end; e += PY) {
      const long long g_idx = LAYOUT == 0 ? ((n * p.channels + c) * p.dst_h + h) * p.dst_w + w
                                          : ((n * p.dst_h + h) * p.dst_w + w) * p.channels + c;
      const float g = kvt_to_float(dy[g_idx]);
      if (BIAS) acc[TG] += g;
#pragma unroll
      for (int j = 0; j < TG; ++j) {
        if (group * TG + j >= kTaps) break;
        const long long r = h * SH + row_off[j], q = w * SW + col_off[j];
        if (r >= 0 && r < p.src_h && q >= 0 && q < p.src_w) {
          const long long x_idx = LAYOUT == 0 ? ((n * p.channels + c) * p.src_h + r) * p.src_w + q
                                              : ((n * p.src_h + r) * p.src_w + q) * p.channels + c;
          acc[j] += g * kvt_to_float(x[x_idx]);
        }
      }
      w += step_w;
      h += step_h;
      n += step_n;
      if (w >= p.dst_w) {
        w -= p.dst_w;
        ++h;
      }
      if (h >= p.dst_h) {
        h -= p.dst_h;
        ++n;
      }
    }
  }
  kvt_wgrad_finish<T, KH * KW, CT, PY, TG, ATOMIC, BIAS>(p, acc, c_base, group, split);
}

// backward_weight, channel-first, every tap, register-tiled: a block stages whole x planes of its
// channel in shared memory, two in turn (the next image's cp.async copies in flight during this image's
// FMAs), and its threads take the plane's tiles of RH dy rows x RW outputs, their dy runs from global
// memory and each x window row from shared memory. Every x element comes from DRAM once per block,
// instead of one L1/L2 load per tile that reads it (8 for 4 rows of runs of 8 of a 7x7), and the loads
// in flight are a whole plane's, not a tile's (kvt_dwconv_wgrad was latency-bound: long-scoreboard
// stalls at 19 % occupancy). Splits take whole images. A buffer, as dwconv_family.cpp's wgrad_plane_bytes()
// mirrors it: x rows from -PH x columns from -(PW + kLead) (VC-aligned), zeros outside the image.
// (Staging dy too was no faster and costs 80 % more shared memory: bench/NOTES.md, 2026-11-26 morning.)
template <class T, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int PY, int ATOMIC, int BIAS, int RW,
          int RH, int VC, int C = 0, int SRC_H = 0, int SRC_W = 0, int DST_H = 0, int DST_W = 0>
__global__ void __launch_bounds__(PY) kvt_dwconv_wgrad_staged(const KvtDwConvParams args) {
  // C .. DST_W: the problem's shape as constants (kvt_shape_fits): the plane's runs, tiles, buffer
  // pitch and every shared-memory offset become compile-time values.
  if (!kvt_shape_fits<C, SRC_H, SRC_W, DST_H, DST_W>(args)) return;
  const KvtDwConvParams p = kvt_with_shape<C, SRC_H, SRC_W, DST_H, DST_W>(args);
  static_assert(RW > 1 && RW % VC == 0, "staged wgrad: register-tiled runs, whole vectors");
  static_assert(sizeof(T) * VC >= 4, "staged wgrad: copies of 4, 8 or 16 bytes");
  constexpr int kTaps = KH * KW;
  using AW = Axis<0, KW, SW, DW, PW, RW>;
  using AH = Axis<0, KH, SH, DH, PH, RH>;
  using V = Vec<T, VC>;
  constexpr int kWin = AW::kWindow;
  constexpr bool kLoopedEdges = RH > 1 && KH * KW >= kKvtLoopedEdgeTaps;  // as kvt_dwconv_wgrad's
  constexpr int kLead = ((-PW % VC) + VC) % VC;
  constexpr int kA = PW + kLead;  // shared column s holds x column s - kA (VC | kA)
  constexpr int kVecs = (kLead + kWin + VC - 1) / VC;
  KVT_DYNAMIC_SMEM(kvt_smem);
  const long long c = blockIdx.x;
  const long long split = blockIdx.y;
  const int runs = static_cast<int>((p.dst_w + RW - 1) / RW);
  const int groups = static_cast<int>((p.dst_h + RH - 1) / RH);
  const int tiles = runs * groups;
  const int x_rows = (groups * RH - 1) * SH + (KH - 1) * DH + 1;
  const int x_pitch = (runs - 1) * RW * SW + kVecs * VC;  // elements; a multiple of VC
  constexpr int kPiece = 16 / static_cast<int>(sizeof(T));  // buffers start 16-byte aligned
  const int buffer = (x_rows * x_pitch + kPiece - 1) / kPiece * kPiece;
  T* const bufs = reinterpret_cast<T*>(kvt_smem);
  const long long per_split = (p.batch + p.splits - 1) / p.splits;
  const long long n_begin = split * per_split;
  const long long n_end = n_begin + per_split < p.batch ? n_begin + per_split : p.batch;
  const T* x = static_cast<const T*>(p.src);
  const T* dy = static_cast<const T*>(p.aux);

  // A thread's first copy of a plane, (row, vector), and its step of PY copies, as carries (no division
  // a copy). Planes that fit in shared memory have int-sized dimensions.
  const int src_h = static_cast<int>(p.src_h), src_w = static_cast<int>(p.src_w);
  const int xv = x_pitch / VC;
  const int x_r0 = threadIdx.x / xv, x_v0 = threadIdx.x % xv, x_dr = PY / xv, x_dv = PY % xv;
  // Copies of image n's x plane into buffer b (4-, 8- or 16-byte pieces; zero-filled outside).
  auto stage = [&](long long n, int b) {
    T* xs = bufs + b * buffer;
    const T* x_plane = x + (n * p.channels + c) * p.src_h * p.src_w;
    for (int r = x_r0, v = x_v0; r < x_rows;) {
      const int row = r - PH, col = v * VC - kA;
      const bool in = row >= 0 && row < src_h && col >= 0 && col < src_w;
      kvt_cp_async<sizeof(V)>(xs + r * x_pitch + v * VC, in ? x_plane + row * src_w + col : x_plane, in);
      r += x_dr, v += x_dv;
      if (v >= xv) v -= xv, ++r;
    }
    kvt_cp_async_commit();
  };

  float acc[kTaps + 1];
#pragma unroll
  for (int j = 0; j <= kTaps; ++j) acc[j] = 0.f;
  if (n_begin < n_end) stage(n_begin, 0);
  for (long long n = n_begin; n < n_end; ++n) {
    const int b = static_cast<int>((n - n_begin) & 1);
    if (n + 1 < n_end) {
      stage(n + 1, b ^ 1);
      kvt_cp_async_wait<1>();
    } else {
      kvt_cp_async_wait<0>();
    }
    __syncthreads();
    const T* xs = bufs + b * buffer;
    for (int t = threadIdx.x; t < tiles; t += PY) {
      const int hg = t / runs, wr = t - hg * runs;
      const int w0 = wr * RW, h = hg * RH;
      const int valid = p.dst_w - w0 < RW ? static_cast<int>(p.dst_w - w0) : RW;
      const int rows = p.dst_h - h < RH ? static_cast<int>(p.dst_h - h) : RH;
      float g[RH][RW];
#pragma unroll
      for (int rr = 0; rr < RH; ++rr) {
        const T* g_row = dy + ((n * p.channels + c) * p.dst_h + h + rr) * p.dst_w;
#pragma unroll
        for (int r = 0; r < RW; r += VC) {
          // The host guarantees VC | dst_w: a vector is wholly inside the row or past it.
          const V v = kvt_load_or_zero<T, VC>(g_row + w0 + r, rr < rows && w0 + r < p.dst_w);
#pragma unroll
          for (int u = 0; u < VC; ++u) g[rr][r + u] = kvt_to_float(v.v[u]);
        }
        if (BIAS)
#pragma unroll
          for (int r = 0; r < RW; ++r) acc[kTaps] += g[rr][r];  // zeros past the output
      }
      // As kvt_dwconv_wgrad: padding rows add no products, and a tile past the row or the image
      // skips its missing outputs' products.
      auto taps = [&](auto whole) {
#pragma unroll
        for (int i = 0; i < AH::kWindow; ++i) {
          if (!AH::used(i)) continue;
          const int row = h * SH - PH + i;
          if (row < 0 || row >= p.src_h) continue;
          const T* x_row = xs + (h * SH + i) * x_pitch + w0 * SW;
          V cur[kVecs];
#pragma unroll
          for (int v = 0; v < kVecs; ++v) cur[v] = *reinterpret_cast<const V*>(x_row + v * VC);
          float win[kWin];
#pragma unroll
          for (int j = 0; j < kWin; ++j) win[j] = kvt_to_float(cur[(kLead + j) / VC].v[(kLead + j) % VC]);
          kvt_wgrad_row<AH, AW, KH, KW, true, decltype(whole)::value>(acc, g, win, i, rows, valid);
        }
      };
      // As kvt_dwconv_wgrad's edge tiles: the whole tile's body where the window is finite, else one
      // dy row at a time, window rows rr * SH + i1.
      bool whole = valid == RW && rows == RH;
      if constexpr (kLoopedEdges) {
        if (!whole) {
          float sum = 0.f;
#pragma unroll 1
          for (int i = 0; i < AH::kWindow; ++i) {
            const int row = h * SH - PH + i;
            if (!AH::used(i) || row < 0 || row >= p.src_h) continue;
            const T* x_row = xs + (h * SH + i) * x_pitch + w0 * SW;
#pragma unroll
            for (int j = 0; j < kWin; ++j) sum += kvt_to_float(x_row[kLead + j]);
          }
          whole = kvt_finite(sum);
        }
      }
      if (whole) {
        taps(kvt_bool<true>{});
      } else if constexpr (kLoopedEdges) {
        using AH1 = Axis<0, KH, SH, DH, PH, 1>;
        for (int rr = 0; rr < rows; ++rr) {
          float g1[1][RW];
          kvt_select_row(g, rr, g1[0]);
#pragma unroll
          for (int i1 = 0; i1 < AH1::kWindow; ++i1) {
            if (!AH1::used(i1)) continue;
            const int i = rr * SH + i1;
            const int row = h * SH - PH + i;
            if (row < 0 || row >= p.src_h) continue;
            const T* x_row = xs + (h * SH + i) * x_pitch + w0 * SW;
            V cur[kVecs];
#pragma unroll
            for (int v = 0; v < kVecs; ++v) cur[v] = *reinterpret_cast<const V*>(x_row + v * VC);
            float win[kWin];
#pragma unroll
            for (int j = 0; j < kWin; ++j) win[j] = kvt_to_float(cur[(kLead + j) / VC].v[(kLead + j) % VC]);
            kvt_wgrad_row<AH1, AW, KH, KW, true, false>(acc, g1, win, i1, 1, valid);
          }
        }
      } else {
        taps(kvt_bool<false>{});
      }
    }
    __syncthreads();  // every thread is done with buffer b before the next image's copies reuse it
  }
  kvt_wgrad_finish<T, kTaps, 1, PY, kTaps, ATOMIC, BIAS>(p, acc, c, 0, split);
}

// float64 reference for every direction; one thread per output element (dx, y, or dw / dbias).
// EPI (forward): the epilogue in float64, on the float64 sum. EPI (backward_data, 1D, stride 1): the
// fused data gradient, each dy value times act'(z) at its position. SEQ (forward, the fused data
// gradient): source positions and z's taps of another sequence add nothing. EPI (backward_weight, 1D): the fused
// weight gradient, dy * act'(z) with z = bias + conv(x, w) in float64; SEQ: taps of another sequence
// than the output's position (seq_idx) add nothing.
template <class T, int LAYOUT, int DIR, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int BIAS, int EPI = 0,
          int SEQ = 0>
__global__ void kvt_dwconv_reference(const KvtDwConvParams p, float* out, float* bias_out) {
  const T* src = static_cast<const T*>(p.src);
  const T* wt = static_cast<const T*>(p.weight);
  if (DIR == 2) {
    // dw[c][t] = sum over dy positions of dy * x; here p.aux = dy (dst dims), p.src = x.
    const T* dy = static_cast<const T*>(p.aux);
    // Whether tap position q of row n counts for output w (seq_idx; 1D, stride 1).
    const auto same_sequence = [&](long long n, long long w, long long q) {
      return !SEQ || p.seq_idx[n * p.src_w + q] == p.seq_idx[n * p.src_w + w];
    };
    const long long total = p.channels * (KH * KW + 1);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
      const long long c = i / (KH * KW + 1), t = i % (KH * KW + 1);
      double s = 0.0;
      for (long long n = 0; n < p.batch; ++n)
        for (long long h = 0; h < p.dst_h; ++h)
          for (long long w = 0; w < p.dst_w; ++w) {
            const long long g_idx = LAYOUT == 0 ? ((n * p.channels + c) * p.dst_h + h) * p.dst_w + w
                                                : ((n * p.dst_h + h) * p.dst_w + w) * p.channels + c;
            double g = kvt_to_float(dy[g_idx]);
            if (EPI != 0) {  // KH = 1
              double z = p.bias != nullptr ? (double)kvt_to_float(static_cast<const T*>(p.bias)[c]) : 0.0;
              for (int k = 0; k < KW; ++k) {
                const long long q = w * SW - PW + k * DW;
                if (q < 0 || q >= p.src_w || !same_sequence(n, w, q)) continue;
                const long long x_idx = LAYOUT == 0 ? (n * p.channels + c) * p.src_w + q : (n * p.src_w + q) * p.channels + c;
                z += (double)kvt_to_float(src[x_idx]) * (double)kvt_to_float(wt[c * KW + k]);
              }
              g *= kvt_act_derivative<kvt_act_of(EPI)>(z);
            }
            if (t == KH * KW) { s += g; continue; }
            const long long r = h * SH - PH + (t / KW) * DH, q = w * SW - PW + (t % KW) * DW;
            if (r < 0 || r >= p.src_h || q < 0 || q >= p.src_w) continue;
            if (SEQ && !same_sequence(n, w, q)) continue;
            const long long x_idx = LAYOUT == 0 ? ((n * p.channels + c) * p.src_h + r) * p.src_w + q
                                                : ((n * p.src_h + r) * p.src_w + q) * p.channels + c;
            s += g * (double)kvt_to_float(src[x_idx]);
          }
      if (t < KH * KW) out[c * KH * KW + t] = (float)s;
      else if (BIAS) bias_out[c] = (float)s;
    }
    return;
  }
  const long long total = p.batch * p.channels * p.dst_h * p.dst_w;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    long long rest = e;
    const long long w = rest % p.dst_w; rest /= p.dst_w;
    const long long h = rest % p.dst_h; rest /= p.dst_h;
    const long long c = rest % p.channels, n = rest / p.channels;
    double acc = BIAS ? (double)kvt_to_float(static_cast<const T*>(p.bias)[c]) : 0.0;
    double magnitude = acc < 0 ? -acc : acc;  // sum of |terms|: how far f32 sums may stray from acc
    bool step = false;  // DIR 1 with EPI: some z near relu's step
    for (int kh = 0; kh < KH; ++kh) {
      long long row;
      if (!source_row<DIR, KH, SH, DH, PH>(h, kh, p.src_h, row)) continue;
      for (int kw = 0; kw < KW; ++kw) {
        long long col;
        if (!source_row<DIR, KW, SW, DW, PW>(w, kw, p.src_w, col)) continue;
        const long long idx = LAYOUT == 0 ? ((n * p.channels + c) * p.src_h + row) * p.src_w + col
                                          : ((n * p.src_h + row) * p.src_w + col) * p.channels + c;
        // SEQ (1D, causal, stride 1: every row of length src_w = dst_w): a source position of another
        // sequence than the output's adds nothing.
        if (SEQ && p.seq_idx[n * p.src_w + col] != p.seq_idx[n * p.src_w + w]) continue;
        double g = (double)kvt_to_float(src[idx]);
        if (DIR == 1 && EPI != 0) {
          // The fused data gradient (1D, stride 1): dy * act'(z) at dy column col, z = bias + conv(x, w)
          // with x = p.aux (dx-shaped, so dst dims).
          const T* x = static_cast<const T*>(p.aux);
          double z = p.bias != nullptr ? (double)kvt_to_float(static_cast<const T*>(p.bias)[c]) : 0.0;
          double z_magnitude = z < 0 ? -z : z;
          for (int k = 0; k < KW; ++k) {
            const long long q = col - PW + k * DW;
            if (q < 0 || q >= p.dst_w) continue;
            if (SEQ && p.seq_idx[n * p.dst_w + q] != p.seq_idx[n * p.dst_w + col]) continue;
            const long long x_idx = LAYOUT == 0 ? (n * p.channels + c) * p.dst_w + q : (n * p.dst_w + q) * p.channels + c;
            const double term = (double)kvt_to_float(x[x_idx]) * (double)kvt_to_float(wt[c * KW + k]);
            z += term;
            z_magnitude += term < 0 ? -term : term;
          }
          g *= kvt_act_derivative<kvt_act_of(EPI)>(z);
          step = step || (kvt_act_of(EPI) == 4 && (z < 0 ? -z : z) <= 1e-5 * z_magnitude);
        }
        const double term = g * (double)kvt_to_float(wt[c * KH * KW + kh * KW + kw]);
        acc += term;
        magnitude += term < 0 ? -term : term;
      }
    }
    const long long o = LAYOUT == 0 ? ((n * p.channels + c) * p.dst_h + h) * p.dst_w + w
                                    : ((n * p.dst_h + h) * p.dst_w + w) * p.channels + c;
    out[o] = DIR == 0 ? (float)kvt_epilogue<EPI, T>(acc, p, o) : (float)acc;
    // relu's gradient steps at z = 0: where an f32 sum could land on either side, either value is
    // right, and +Inf tells kvt_compare to skip the element.
    if ((kvt_grad_prep(EPI) && kvt_act_of(EPI) == 4 && (acc < 0 ? -acc : acc) <= 1e-5 * magnitude) || step)
      out[o] = __int_as_float(0x7f800000);
  }
}

#include "dwconv_mma.cuh"
