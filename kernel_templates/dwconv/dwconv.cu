// kvtune depthwise convolution family (groups = channels), 1D and 2D, compiled by NVRTC.
// 1D problems are 2D problems with H = 1 (KH = SH = DH = 1, PH = 0). Kernel size, stride,
// dilation and the leading (top/left) padding are template arguments, so every tap loop unrolls.
//
//   kvt_dwconv_tiled     forward (DIR 0) and backward_data (DIR 1), gather form:
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
// which keeps older variants' names) stores z.
#include "common.cuh"
#include "dwconv_params.h"
#include "dwconv_activation.cuh"

template <bool B> struct kvt_bool {
  static constexpr bool value = B;
};

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

template <class T, int LAYOUT, int DIR, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int RW, int TX,
          int TY, int VC, int STAGE, int FILTER, int HAS_BIAS, int RH = 1, int RT = 1, int FLAT = 0, int EPI = 0>
__global__ void __launch_bounds__(TX * TY) kvt_dwconv_tiled(const KvtDwConvParams p) {
  static_assert(EPI == 0 || DIR == 0, "epilogues (activation, gradient prep): forward only");
  static_assert(RH == 1 || STAGE == 0 || LAYOUT == 1, "channel-first rows per thread read their rows from global memory");
  static_assert(RT == 1 || (LAYOUT == 0 && STAGE == 0 && RH == 1 && KH == 1) || (LAYOUT == 1 && STAGE == 1),
                "runs per thread: channel-first, one kernel row (channel-last staged: tiles per block)");
  static_assert(FLAT == 0 || (LAYOUT == 0 && STAGE == 0 && FILTER == 0 && RT == 1 && TY == 1 && TX % 32 == 0),
                "flat items: channel-first, global-memory halo, taps in registers, one run, whole warps");
  using AW = Axis<DIR, KW, SW, DW, PW, RW>;
  using AH = Axis<DIR, KH, SH, DH, PH, RH>;  // the thread's RH output rows and the source rows they read
  constexpr int kWin = AW::kWindow;
  constexpr int kTaps = KH * KW;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const T* src = static_cast<const T*>(p.src);
  T* dst = static_cast<T*>(p.dst);
  const T* wt = static_cast<const T*>(p.weight);
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  float* smem = reinterpret_cast<float*>(dynamic_smem);

  if constexpr (LAYOUT == 0) {
    // Block -> (plane, W tile), grid.y -> H tile of TY * RH rows.
    // 32-bit block decomposition: grid.x < 2^31 bounds every quotient, and a 64-bit division by a
    // run-time value costs ~70 instructions per thread, more than a small tile's useful work.
    // RT > 1: the block covers RT consecutive tiles of TX * RW outputs; a thread takes one run in each.
    // FLAT 1: no tiles. Thread g of the grid takes item g of (plane, group of RH rows, run of RW),
    // run fastest, so no lane idles where a plane's width or height is not a multiple of a tile
    // (a 56 x 56 plane in 64 x 64 tiles kept 23 % of the lanes busy on nothing). The host keeps
    // the item count under 2^32; lanes past it compute the last item again and store nothing.
    unsigned plane32, w_tile32 = 0, run = 0, runs = 1;
    long long h;
    bool item_valid = true;
    if constexpr (FLAT) {
      runs = static_cast<unsigned>((p.dst_w + RW - 1) / RW);
      const unsigned groups = static_cast<unsigned>((p.dst_h + RH - 1) / RH);
      const unsigned items = static_cast<unsigned>(p.batch * p.channels) * groups * runs;
      unsigned g = blockIdx.x * TX + threadIdx.x;
      item_valid = g < items;
      if (!item_valid) g = items - 1;
      const unsigned rest = g / runs, group = rest % groups;
      run = g - rest * runs;
      plane32 = rest / groups;
      h = (long long)group * RH;
    } else {
      const unsigned w_tiles = static_cast<unsigned>((p.dst_w + TX * RW * RT - 1) / (TX * RW * RT));
      plane32 = blockIdx.x / w_tiles;
      w_tile32 = blockIdx.x - plane32 * w_tiles;
      h = (long long)blockIdx.y * (TY * RH) + (long long)ty * RH;  // the thread's first output row
    }
    const long long plane = plane32;
    const long long w_tile = w_tile32;
    const long long c = plane32 % static_cast<unsigned>(p.channels);
    const long long h0 = (long long)blockIdx.y * (TY * RH);
    // The thread's first run.
    const long long t0 = FLAT ? (long long)run * RW : w_tile * (TX * RW * RT) + (long long)tx * RW;
    const T* src_plane = src + plane * p.src_h * p.src_w;

    float* filter_smem = smem;
    float filter[FILTER == 0 ? kTaps : 1];
    if constexpr (FILTER == 0) {
#pragma unroll
      for (int k = 0; k < kTaps; ++k) filter[k] = kvt_to_float(wt[c * kTaps + k]);
    } else {
      for (int k = threadIdx.x; k < kTaps; k += TX * TY) filter_smem[k] = kvt_to_float(wt[c * kTaps + k]);
    }
    auto tap = [&](int k) -> float {
      if constexpr (FILTER == 0) return filter[k];
      else return filter_smem[k];
    };

    // STAGE 1: the block's source tile (all rows its TY output rows touch, all columns its
    // TX * RW outputs touch) in shared memory, zero outside the plane.
    using Tile = Axis<DIR, KW, SW, DW, PW, TX * RW>;
    using TileRows = Axis<DIR, KH, SH, DH, PH, TY>;
    constexpr int kTileCols = Tile::kWindow;
    constexpr int kTileRows = TileRows::kWindow;
    float* tile = smem + (FILTER == 1 ? ((kTaps + 3) / 4 * 4) : 0);
    if constexpr (STAGE == 1) {
      const long long col0 = Tile::base(w_tile * (TX * RW));
      const long long row0 = TileRows::base(h0);
      for (int i = threadIdx.x; i < kTileRows * kTileCols; i += TX * TY) {
        const long long r = row0 + i / kTileCols, q = col0 + i % kTileCols;
        tile[i] = (r >= 0 && r < p.src_h && q >= 0 && q < p.src_w) ? kvt_to_float(src_plane[r * p.src_w + q]) : 0.f;
      }
    }
    if constexpr (STAGE == 1 || FILTER == 1) __syncthreads();
    // VC > 1: the window read as aligned vectors of VC elements along W (the host guarantees VC | RW,
    // VC | src_w, VC | dst_w, aligned planes, and DIR 0 or stride_w 1, so win0 = kLead mod VC).
    using V = Vec<T, VC>;
    constexpr int kB = DIR == 0 ? -PW : AW::kQmin;
    constexpr int kLead = ((kB % VC) + VC) % VC;  // window start within its first vector
    constexpr int kVecs = (kLead + kWin + VC - 1) / VC;
    // Halo exchange (VC > 1, where every lane of a warp loads the same rows): a lane loads only its
    // own kShift vectors; the window's vectors before them are the previous lane's own and those after
    // them the next lane's, taken by warp shuffle (a warp's and a tile row's first and last lanes load
    // theirs). Two or three 16-byte loads a row become one: neighbouring lanes' windows overlap, and
    // without it a warp requested every byte from L2 twice (Nsight Compute, NCL bf16).
    constexpr int kShift = (DIR == 0 ? RW * SW : RW) / VC;  // vectors between neighbouring lanes' windows
    constexpr int kOwn0 = kVecs - 2 * kShift > 0 ? kVecs - 2 * kShift : 0;  // a lane's own: [kOwn0, +kShift)
    // Only where a window's shuffles come well after its loads: in the pipelined row loop (RH > 1), a row
    // later, and with runs per thread (RT > 1), after every run's loads are issued. Right after its own
    // load the shuffle waits on it: 1D runs of 4 lost 5-8 % (H200, NCL f32 136.8 -> 143.2 us).
    constexpr bool kShuffle = VC > 1 && STAGE == 0 && (RH > 1 || RT > 1) && kVecs > kShift && kOwn0 <= kShift;
    // With the halo exchange every lane stays to the end (its loads and shuffles serve its neighbours;
    // the stores below skip what is outside the output).
    if (!((VC > 1 && STAGE == 0 && RH > 1) || kShuffle) && (h >= p.dst_h || t0 >= p.dst_w || !item_valid)) return;

    const float bias = HAS_BIAS ? kvt_to_float(static_cast<const T*>(p.bias)[c]) : 0.f;
    float acc[RH][RW];
    auto reset = [&] {
#pragma unroll
      for (int rh = 0; rh < RH; ++rh)
#pragma unroll
        for (int r = 0; r < RW; ++r) acc[rh][r] = bias;
    };
    reset();
    const long long win0 = AW::base(t0);
    // Columns wholly inside the plane (every thread but the edge ones): loads without tests.
    const bool cols_inside = win0 >= 0 && win0 + kWin <= p.src_w;
    const bool vec_inside = VC > 1 && win0 - kLead >= 0 && win0 - kLead + kVecs * VC <= p.src_w;
    // Lanes whose neighbour's window is not the next run of the same rows load their own halo.
    const bool first_lane = (FLAT ? run == 0 : tx == 0) || (threadIdx.x & 31) == 0;
    const bool last_lane = (FLAT ? run == runs - 1 : tx == TX - 1) || (threadIdx.x & 31) == 31;
    // The loads of a window: which of its vectors a lane fetches (with the exchange: its own; edge lanes
    // also the halo) and which lie inside the row depend on its start column only, so they are decided
    // once per window start, not per row (NCHW f32 7x7 winner: 2,568 -> 2,512 instructions, 2 % faster;
    // H200 probe, bench/NOTES.md, "channel-first window loads"). Skipping the zero fill of vectors that are
    // never fetched was tried too and lost 2-7 %.
    struct Cols {
      long long q0;
      bool fetch[kVecs];
    };
    auto columns = [&](long long w0) {
      Cols cols;
      cols.q0 = w0 - kLead;
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const bool mine = !kShuffle || (v >= kOwn0 && v < kOwn0 + kShift) || (v < kOwn0 ? first_lane : last_lane);
        const long long qs = cols.q0 + v * VC;  // VC | src_w: a vector is wholly inside the row or outside
        cols.fetch[v] = mine && qs >= 0 && qs < p.src_w;
      }
      return cols;
    };
    // Runs per thread (RT > 1) keep the per-row form: with the tests hoisted, the NCL bf16 K=4 runs of
    // 4 a thread lost 12 % (H100, benchmark heuristic column, 91.4 -> 102.2 us).
    auto issue_run = [&](long long row, long long w0, V (&raw)[kVecs]) {
      const bool row_in = row >= 0 && row < p.src_h;
      const long long q0 = w0 - kLead;
      const T* vrow = src_plane + (row_in ? row : 0) * p.src_w + q0;
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const bool fetch = !kShuffle || (v >= kOwn0 && v < kOwn0 + kShift) || (v < kOwn0 ? first_lane : last_lane);
        const long long qs = q0 + v * VC;  // VC | src_w: a vector is wholly inside the row or outside
        if (fetch && row_in && qs >= 0 && qs < p.src_w) raw[v] = *reinterpret_cast<const V*>(vrow + v * VC);
        else
#pragma unroll
          for (int u = 0; u < VC; ++u) raw[v].v[u] = kvt_from_float<T>(0.f);
      }
    };
    auto issue = [&](long long row, const Cols& cols, V (&raw)[kVecs]) {
      const bool row_in = row >= 0 && row < p.src_h;
      const T* vrow = src_plane + (row_in ? row : 0) * p.src_w + cols.q0;
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        if (row_in && cols.fetch[v]) raw[v] = *reinterpret_cast<const V*>(vrow + v * VC);
        else
#pragma unroll
          for (int u = 0; u < VC; ++u) raw[v].v[u] = kvt_from_float<T>(0.f);
      }
    };
    auto finish = [&](V (&raw)[kVecs], float (&win)[kWin]) {  // the shuffles, once the loads are needed
      if constexpr (kShuffle) {
#pragma unroll
        for (int v = 0; v < kOwn0; ++v) {
          const V got = kvt_shfl_vec<true>(raw[v + kShift], 1);
          if (!first_lane) raw[v] = got;
        }
#pragma unroll
        for (int v = kOwn0 + kShift; v < kVecs; ++v) {
          const V got = kvt_shfl_vec<false>(raw[v - kShift], 1);
          if (!last_lane) raw[v] = got;
        }
      }
#pragma unroll
      for (int j = 0; j < kWin; ++j) win[j] = kvt_to_float(raw[(kLead + j) / VC].v[(kLead + j) % VC]);
    };
    // Rows outside the plane read as zeros (the row-window loop prefetches them unconditionally).
    auto load = [&](long long row, float (&win)[kWin]) {
      const bool row_in = row >= 0 && row < p.src_h;
      const T* srow = src_plane + (row_in ? row : 0) * p.src_w + win0;
      if (!row_in) {
#pragma unroll
        for (int j = 0; j < kWin; ++j) win[j] = 0.f;
      } else if (VC > 1 && vec_inside) {
        const V* vrow = reinterpret_cast<const V*>(srow - kLead);
        V vecs[kVecs];
#pragma unroll
        for (int i = 0; i < kVecs; ++i) vecs[i] = vrow[i];
#pragma unroll
        for (int j = 0; j < kWin; ++j) win[j] = kvt_to_float(vecs[(kLead + j) / VC].v[(kLead + j) % VC]);
      } else if (cols_inside) {
#pragma unroll
        for (int j = 0; j < kWin; ++j) win[j] = kvt_to_float(srow[j]);
      } else {
#pragma unroll
        for (int j = 0; j < kWin; ++j) win[j] = (win0 + j >= 0 && win0 + j < p.src_w) ? kvt_to_float(srow[j]) : 0.f;
      }
    };
    auto accumulate = [&](const float (&win)[kWin], int rh, int kh) {
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int kw = 0; kw < KW; ++kw)
          if (AW::valid(r, kw)) acc[rh][r] += win[AW::offset(r, kw)] * tap(kh * KW + kw);
    };
    // The run of RW outputs starting at t of the thread's RH rows.
    auto store = [&](long long t) {
      if (!item_valid) return;
#pragma unroll
      for (int rh = 0; rh < RH; ++rh) {
        if (h + rh >= p.dst_h) break;
        const long long row = (plane * p.dst_h + h + rh) * p.dst_w;  // element index
        T* drow = dst + row;
        if (VC > 1 && t + RW <= p.dst_w) {
#pragma unroll
          for (int r = 0; r < RW; r += VC) {
            float z[VC];
#pragma unroll
            for (int u = 0; u < VC; ++u) z[u] = acc[rh][(r + u) % RW];
            kvt_epilogue_vec<EPI, T, VC>(z, p, row + t + r);
            V out;
#pragma unroll
            for (int u = 0; u < VC; ++u) out.v[u] = kvt_from_float<T>(z[u]);
            *reinterpret_cast<V*>(drow + t + r) = out;
          }
          continue;
        }
#pragma unroll
        for (int r = 0; r < RW; ++r)
          if (t + r < p.dst_w) drow[t + r] = kvt_from_float<T>(kvt_epilogue<EPI, T>(acc[rh][r], p, row + t + r));
      }
    };
    if constexpr (RT > 1) {
      // Runs per thread (one kernel row): the loads of all RT windows are issued first, then each
      // run's shuffles, FMAs and store, so later runs' loads are in flight during the first runs'
      // work, and the thread's setup (block decomposition, taps) serves RT runs instead of one.
      long long row;
      if (!source_row<DIR, KH, SH, DH, PH>(h, 0, p.src_h, row)) row = -1;  // no source row: bias only
      V raw[RT][kVecs];
#pragma unroll
      for (int j = 0; j < RT; ++j) issue_run(row, AW::base(t0 + j * (TX * RW)), raw[j]);
#pragma unroll
      for (int j = 0; j < RT; ++j) {
        float win[kWin];
        finish(raw[j], win);
        if (j > 0) reset();
        accumulate(win, 0, 0);
        store(t0 + j * (TX * RW));
      }
      return;
    }
    if constexpr (RH == 1) {
#pragma unroll
      for (int kh = 0; kh < KH; ++kh) {
        float win[kWin];
        if constexpr (STAGE == 1) {
          // Tile row of output row h, tap kh (rows outside the plane are zero in the tile).
          int tr;
          if constexpr (DIR == 0) {
            tr = ty * SH + kh * DH;
          } else {
            const int num = ty + PH - kh * DH;  // h0 is a multiple of SH
            if (num - kvt_floordiv(num, SH) * SH != 0) continue;
            tr = kvt_floordiv(num, SH) - TileRows::kQmin;
          }
          const float* trow = tile + tr * kTileCols + (DIR == 0 ? tx * RW * SW : tx * (RW / SW));
#pragma unroll
          for (int j = 0; j < kWin; ++j) win[j] = trow[j];
        } else {
          long long row;
          if (!source_row<DIR, KH, SH, DH, PH>(h, kh, p.src_h, row)) continue;
          load(row, win);
        }
        accumulate(win, 0, kh);
      }
    } else {
      // Every source row the thread's RH output rows read, loaded once and used by every
      // (row, tap) pair that lands on it (compile-time after unrolling; DIR 1: SH divides h).
      // Software pipeline: the next used row's window is loaded before this row's FMAs (with the
      // halo exchange, its loads are issued then and its shuffles done when it is used).
      const long long row_base = AH::base(h);
      float win[kWin], next[kWin];
      V raw[kShuffle ? kVecs : 1], raw_next[kShuffle ? kVecs : 1];
      const Cols cols = columns(win0);
      if constexpr (kShuffle) issue(row_base + AH::next_used(0), cols, raw);
      else load(row_base + AH::next_used(0), win);
#pragma unroll
      for (int i = 0; i < AH::kWindow; ++i) {
        if (!AH::used(i)) continue;
        if (AH::next_used(i + 1) < AH::kWindow) {
          if constexpr (kShuffle) issue(row_base + AH::next_used(i + 1), cols, raw_next);
          else load(row_base + AH::next_used(i + 1), next);
        }
        if constexpr (kShuffle) finish(raw, win);
        const long long row = row_base + i;
        if (row >= 0 && row < p.src_h)
#pragma unroll
          for (int rh = 0; rh < RH; ++rh)
#pragma unroll
            for (int kh = 0; kh < KH; ++kh)
              if (AH::valid(rh, kh) && AH::offset(rh, kh) == i) accumulate(win, rh, kh);
        if constexpr (kShuffle) {
#pragma unroll
          for (int v = 0; v < kVecs; ++v) raw[v] = raw_next[v];
        } else {
#pragma unroll
          for (int j = 0; j < kWin; ++j) win[j] = next[j];
        }
      }
    }
    store(t0);
  } else if constexpr (STAGE == 1) {
    // Channel-last, staged: a tile is TX * VC channels x RH output rows x TY runs of RW outputs along
    // W; thread (tx, ty) computes VC channels x RH rows x one run. The tile's source (every row and
    // column those outputs read, the tile's channels) is copied once into shared memory by 16-byte
    // asynchronous copies along the channels (cp.async; zero-filled outside the image and past the
    // last channel), as [row][column][channel]; the threads read their windows there at compile-time
    // offsets: no bounds tests or 64-bit addresses per element (the global-memory form spent 61 % of
    // its issue on them, NHWC bf16 7x7, H100). A block takes RT consecutive tiles (W fastest, then
    // rows, images, channel tiles) through two buffers: the next tile's copies land during this
    // tile's FMAs.
    constexpr int kCT = TX * VC;  // channels of a tile
    constexpr int kThreads = TX * TY;
    constexpr int SV = 16 / sizeof(T);  // elements a copy (the host requires SV | C and a 16-byte src)
    using Cols = Axis<DIR, KW, SW, DW, PW, TY * RW>;
    constexpr int kCols = Cols::kWindow, kRows = AH::kWindow;
    constexpr int kPerPos = kCT / SV, kItems = kRows * kCols * kPerPos;
    constexpr int kLoads = (kItems + kThreads - 1) / kThreads;  // a thread's copies a tile
    constexpr int kTileElems = kItems * SV;                      // a multiple of 16 bytes
    const unsigned w_tiles = static_cast<unsigned>((p.dst_w + TY * RW - 1) / (TY * RW));
    const unsigned h_tiles = static_cast<unsigned>((p.dst_h + RH - 1) / RH);
    const unsigned image_tiles = w_tiles * h_tiles;  // the host keeps every tile count under 2^31
    const unsigned tiles = image_tiles * static_cast<unsigned>(p.batch) *
                           static_cast<unsigned>((p.channels + kCT - 1) / kCT);
    unsigned id = blockIdx.x * RT;
    const unsigned end = id + RT < tiles ? id + RT : tiles;
    if (id >= end) return;
    struct At {
      long long n, h, ch0, tw0;  // image, first output row, first channel, first output column
    };
    auto locate = [&](unsigned t) {
      At a;
      const unsigned batch = static_cast<unsigned>(p.batch);
      const unsigned rest = t / image_tiles, in_image = t - rest * image_tiles;
      const unsigned ctile = rest / batch, ht = in_image / w_tiles;
      a.n = rest - ctile * batch;
      a.ch0 = (long long)ctile * kCT;
      a.h = (long long)ht * RH;
      a.tw0 = (long long)(in_image - ht * w_tiles) * (TY * RW);
      return a;
    };
    T* const buffers = reinterpret_cast<T*>(smem);  // [RT > 1 ? 2 : 1][kRows][kCols][kCT]
    float* const filter_smem = reinterpret_cast<float*>(buffers + (RT > 1 ? 2 : 1) * kTileElems);  // FILTER 1: [tap][kCT]
    // The copies of tile a into buffer `to` (DIR 1: SH | RH and SW | RW, so its rows and columns start
    // on source rows), as one group.
    auto issue = [&](const At& a, T* to) {
      const long long row0 = AH::base(a.h), col0 = Cols::base(a.tw0);
      const T* src_img = src + a.n * p.src_h * p.src_w * p.channels;
#pragma unroll
      for (int b = 0; b < kLoads; ++b) {
        const int i = b * kThreads + static_cast<int>(threadIdx.x);
        if (kItems % kThreads != 0 && i >= kItems) break;
        const int pos = i / kPerPos, e = (i - pos * kPerPos) * SV;
        const int r = pos / kCols, q = pos - r * kCols;
        const long long row = row0 + r, col = col0 + q, ch = a.ch0 + e;
        const bool in = row >= 0 && row < p.src_h && col >= 0 && col < p.src_w && ch < p.channels;
        kvt_cp_async16(to + i * SV, in ? src_img + (row * p.src_w + col) * p.channels + ch : src, in);
      }
      kvt_cp_async_commit();
    };
    float filter[FILTER == 0 ? kTaps * VC : 1];
    auto load_taps = [&](long long ch0) {  // FILTER 0: the thread's channels; 1: the tile's, [tap][channel]
      if constexpr (FILTER == 0) {
        if (ch0 + tx * VC < p.channels) kvt_channel_taps<T, VC, kTaps>(wt, ch0 + tx * VC, filter);
      } else {
        for (int i = threadIdx.x; i < kTaps * kCT; i += kThreads) {
          const int k = i / kCT, e = i - k * kCT;
          filter_smem[i] = ch0 + e < p.channels ? kvt_to_float(wt[(ch0 + e) * kTaps + k]) : 0.f;
        }
      }
    };
    using V = Vec<T, VC>;
    auto compute = [&](const At& a, const T* tile) {
      const long long c0 = a.ch0 + (long long)tx * VC;
      const long long t0 = a.tw0 + (long long)ty * RW;
      if (c0 >= p.channels || t0 >= p.dst_w) return;  // VC | C: all VC channels, or none
      float acc[RH][RW][VC];
      kvt_bias_channel_last<T, RH, RW, VC, HAS_BIAS>(p, c0, acc);
      // The thread's window: columns from its run's first source column, its VC channels.
      const T* base = tile + (DIR == 0 ? ty * RW * SW : ty * (RW / SW)) * kCT + tx * VC;
      // Every source row of the tile, read once and used by every (output row, kernel row) pair that
      // lands on it (rows outside the image are zeros in the tile).
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (!AH::used(i)) continue;
        float win[kWin][VC];
#pragma unroll
        for (int j = 0; j < kWin; ++j) {
          const V q = *reinterpret_cast<const V*>(base + (i * kCols + j) * kCT);
#pragma unroll
          for (int v = 0; v < VC; ++v) win[j][v] = kvt_to_float(q.v[v]);
        }
#pragma unroll
        for (int rh = 0; rh < RH; ++rh)
#pragma unroll
          for (int kh = 0; kh < KH; ++kh) {
            if (!(AH::valid(rh, kh) && AH::offset(rh, kh) == i)) continue;
#pragma unroll
            for (int kw = 0; kw < KW; ++kw) {
              float t[VC];
#pragma unroll
              for (int v = 0; v < VC; ++v) {
                if constexpr (FILTER == 0) t[v] = filter[(kh * KW + kw) * VC + v];
                else t[v] = filter_smem[(kh * KW + kw) * kCT + tx * VC + v];
              }
#pragma unroll
              for (int r = 0; r < RW; ++r)
                if (AW::valid(r, kw))
#pragma unroll
                  for (int v = 0; v < VC; ++v) acc[rh][r][v] += win[AW::offset(r, kw)][v] * t[v];
            }
          }
      }
      kvt_store_channel_last<T, RH, RW, VC, EPI>(dst, p, a.n, a.h, t0, c0, acc);
    };

    At cur = locate(id);
    issue(cur, buffers);
    load_taps(cur.ch0);
    for (int k = 0;; ++k) {
      const bool more = RT > 1 && id + 1 < end;
      At next = cur;
      if (more) {
        next = locate(id + 1);
        issue(next, buffers + ((k + 1) & 1) * kTileElems);  // lands during this tile's FMAs
        kvt_cp_async_wait<1>();
      } else {
        kvt_cp_async_wait<0>();
      }
      __syncthreads();  // this tile's copies (every thread's) and the shared taps are in place
      compute(cur, buffers + (k & 1) * kTileElems);
      if (!more) break;
      __syncthreads();  // every thread is done with this buffer (and the taps) before they change
      if (next.ch0 != cur.ch0) load_taps(next.ch0);
      cur = next;
      ++id;
    }
  } else {
    // Threads -> (W run, channel vector) flattened, channel vector fastest: index flat = blockIdx.x * TX
    // + tx is the pair (flat / cvs, flat % cvs) of an output row, cvs = channels / VC (the host
    // guarantees VC | C).
    // A warp reads 32 consecutive vectors of a row at any channel count (a C tile of TX * VC channels left
    // lanes idle where it did not divide C: 144 channels in tiles of 128 ran 2 blocks for 1.125 blocks'
    // work), and neighbouring runs' windows, which overlap, are read by one warp instead of two blocks.
    // grid.y -> (n, H tile of TY * RH rows).
    using V = Vec<T, VC>;
    const unsigned cvs = static_cast<unsigned>(p.channels / VC);  // channel vectors per position
    const unsigned flat = blockIdx.x * TX + tx;                   // 32-bit: grid.x * TX < 2^32 (host)
    const unsigned w_run = flat / cvs, cv = flat - w_run * cvs;
    const long long c0 = (long long)cv * VC;
    const long long t0 = (long long)w_run * RW;
    const unsigned h_tiles = static_cast<unsigned>((p.dst_h + TY * RH - 1) / (TY * RH));
    const unsigned n32 = blockIdx.y / h_tiles;
    const long long n = n32;
    const long long h = (long long)(blockIdx.y - n32 * h_tiles) * (TY * RH) + (long long)ty * RH;

    // FILTER 1: the taps of the block's channel vectors in shared memory as [tap][TX slots][VC] floats,
    // at compile-time strides and divisors (with a run-time slot count in both, NHWC bf16 31x31 went
    // 1.62 -> 2.13 ms on an H200). A block's TX consecutive indices cover TX consecutive channel
    // vectors (mod cvs): slot = tx, or, where TX >= cvs, every vector once (slot = cv).
    const bool all_vectors = TX >= cvs;
    const unsigned slots = all_vectors ? cvs : TX;  // slots filled
    const unsigned slot = all_vectors ? cv : tx;
    float* filter_smem = smem;
    float filter[FILTER == 0 ? kTaps * VC : 1];
    if constexpr (FILTER == 0) {
      if (t0 < p.dst_w) kvt_channel_taps<T, VC, kTaps>(wt, c0, filter);
    } else {
      // Every divisor compile-time (TX * VC, VC): a run-time division per element cost more than the
      // 31x31 kernel's FMAs. Slot s holds channel vector first + s (mod cvs; first < cvs, s < cvs).
      const unsigned first = all_vectors ? 0u : (blockIdx.x * TX) % cvs;
      for (unsigned i = threadIdx.x; i < kTaps * TX * VC; i += TX * TY) {
        const unsigned k = i / (TX * VC), e = i - k * (TX * VC), s = e / VC;
        if (s >= slots) continue;
        const unsigned vec = first + s >= cvs ? first + s - cvs : first + s;
        filter_smem[i] = kvt_to_float(wt[((long long)vec * VC + (e - s * VC)) * kTaps + k]);
      }
      __syncthreads();
    }
    // The VC taps of tap k for the thread's channels (16-byte shared loads where VC allows).
    auto taps_of = [&](int k, float (&t)[VC]) {
      if constexpr (FILTER == 0) {
#pragma unroll
        for (int v = 0; v < VC; ++v) t[v] = filter[k * VC + v];
      } else {
        const float* f = filter_smem + slot * VC + k * (TX * VC);
        if constexpr (VC % 4 == 0) {
#pragma unroll
          for (int v = 0; v < VC; v += 4) {
            const float4 q = *reinterpret_cast<const float4*>(f + v);
            t[v] = q.x, t[v + 1] = q.y, t[v + 2] = q.z, t[v + 3] = q.w;
          }
        } else if constexpr (VC == 2) {
          const float2 q = *reinterpret_cast<const float2*>(f);
          t[0] = q.x, t[1] = q.y;
        } else {
          t[0] = f[0];
        }
      }
    };
    if (h >= p.dst_h || t0 >= p.dst_w || n >= p.batch) return;

    float acc[RH][RW][VC];
    kvt_bias_channel_last<T, RH, RW, VC, HAS_BIAS>(p, c0, acc);
    const long long win0 = AW::base(t0);
    // Columns inside the row (every thread but the edge ones): loads without tests.
    const bool inside = win0 >= 0 && win0 + kWin <= p.src_w;
    // Rows outside the image read as zeros; callers that know the row is inside pass false (a
    // constant once inlined: no row test; a 31x31 window's 34 loads lost 27% to it on an H200).
    auto load = [&](long long row, V (&win)[kWin], bool row_may_be_outside) {
      const bool row_in = !row_may_be_outside || (row >= 0 && row < p.src_h);
      const T* srow = src + ((n * p.src_h + (row_in ? row : 0)) * p.src_w + win0) * p.channels + c0;
      if (inside && row_in) {
#pragma unroll
        for (int j = 0; j < kWin; ++j) win[j] = *reinterpret_cast<const V*>(srow + j * p.channels);
        return;
      }
#pragma unroll
      for (int j = 0; j < kWin; ++j) {
        const long long q = win0 + j;
        if (row_in && q >= 0 && q < p.src_w) {
          win[j] = *reinterpret_cast<const V*>(srow + j * p.channels);
        } else {
#pragma unroll
          for (int v = 0; v < VC; ++v) win[j].v[v] = kvt_from_float<T>(0.f);
        }
      }
    };
    auto accumulate = [&](const V (&win)[kWin], int rh, int kh) {
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        float t[VC];
        taps_of(kh * KW + kw, t);
#pragma unroll
        for (int r = 0; r < RW; ++r)
          if (AW::valid(r, kw))
#pragma unroll
            for (int v = 0; v < VC; ++v) acc[rh][r][v] += kvt_to_float(win[AW::offset(r, kw)].v[v]) * t[v];
      }
    };
    if constexpr (RH == 1) {
#pragma unroll
      for (int kh = 0; kh < KH; ++kh) {
        long long row;
        if (!source_row<DIR, KH, SH, DH, PH>(h, kh, p.src_h, row)) continue;
        V win[kWin];
        load(row, win, false);
        accumulate(win, 0, kh);
      }
    } else {
      const long long row_base = AH::base(h);  // see the channel-first branch (pipelined rows)
      V win[kWin], next[kWin];
      load(row_base + AH::next_used(0), win, true);
#pragma unroll
      for (int i = 0; i < AH::kWindow; ++i) {
        if (!AH::used(i)) continue;
        if (AH::next_used(i + 1) < AH::kWindow) load(row_base + AH::next_used(i + 1), next, true);
        const long long row = row_base + i;
        if (row >= 0 && row < p.src_h)
#pragma unroll
          for (int rh = 0; rh < RH; ++rh)
#pragma unroll
            for (int kh = 0; kh < KH; ++kh)
              if (AH::valid(rh, kh) && AH::offset(rh, kh) == i) accumulate(win, rh, kh);
#pragma unroll
        for (int j = 0; j < kWin; ++j) win[j] = next[j];
      }
    }
    kvt_store_channel_last<T, RH, RW, VC, EPI>(dst, p, n, h, t0, c0, acc);
  }
}

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
#pragma unroll
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
          int ATOMIC, int BIAS, int RW = 1, int RH = 1, int VC = 1, int PIPE = -1>
__global__ void __launch_bounds__(CT * PY) kvt_dwconv_wgrad(const KvtDwConvParams p) {
  static_assert(RW == 1 || TG == KH * KW || TG == KW, "register-tiled wgrad: every tap, or one kernel row's");
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
  if constexpr (RW > 1) {
    // Tiles of RH rows x RW outputs along W within one image; this split's slice is a range of
    // tiles. x rows are loaded once per tile for every (dy row, kernel row) pair that reads them
    // (every tap), or once per dy row for the block column's kernel row (TG = KW, RH = 1).
    using AW = Axis<0, KW, SW, DW, PW, RW>;
    using AH = Axis<0, KH, SH, DH, PH, RH>;
    constexpr int kWin = AW::kWindow;
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
          if (BIAS)
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
            kvt_wgrad_row<AH, AW, KH, KW, kAllTaps, decltype(whole)::value>(acc, g, win, i, rows, valid);
            if (kPipeline)
#pragma unroll
              for (int v = 0; v < kVecs; ++v) cur[v] = next[v];
          }
        };
        if (valid == RW && rows == RH) taps(kvt_bool<true>{});
        else taps(kvt_bool<false>{});
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
          int RH, int VC>
__global__ void __launch_bounds__(PY) kvt_dwconv_wgrad_staged(const KvtDwConvParams p) {
  static_assert(RW > 1 && RW % VC == 0, "staged wgrad: register-tiled runs, whole vectors");
  static_assert(sizeof(T) * VC >= 4, "staged wgrad: copies of 4, 8 or 16 bytes");
  constexpr int kTaps = KH * KW;
  using AW = Axis<0, KW, SW, DW, PW, RW>;
  using AH = Axis<0, KH, SH, DH, PH, RH>;
  using V = Vec<T, VC>;
  constexpr int kWin = AW::kWindow;
  constexpr int kLead = ((-PW % VC) + VC) % VC;
  constexpr int kA = PW + kLead;  // shared column s holds x column s - kA (VC | kA)
  constexpr int kVecs = (kLead + kWin + VC - 1) / VC;
  extern __shared__ __align__(16) unsigned char kvt_smem[];
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
      if (valid == RW && rows == RH) taps(kvt_bool<true>{});
      else taps(kvt_bool<false>{});
    }
    __syncthreads();  // every thread is done with buffer b before the next image's copies reuse it
  }
  kvt_wgrad_finish<T, kTaps, 1, PY, kTaps, ATOMIC, BIAS>(p, acc, c, 0, split);
}

// float64 reference for every direction; one thread per output element (dx, y, or dw / dbias).
// EPI (forward): the epilogue in float64, on the float64 sum.
template <class T, int LAYOUT, int DIR, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int BIAS, int EPI = 0>
__global__ void kvt_dwconv_reference(const KvtDwConvParams p, float* out, float* bias_out) {
  const T* src = static_cast<const T*>(p.src);
  const T* wt = static_cast<const T*>(p.weight);
  if (DIR == 2) {
    // dw[c][t] = sum over dy positions of dy * x; here p.aux = dy (dst dims), p.src = x.
    const T* dy = static_cast<const T*>(p.aux);
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
            const double g = kvt_to_float(dy[g_idx]);
            if (t == KH * KW) { s += g; continue; }
            const long long r = h * SH - PH + (t / KW) * DH, q = w * SW - PW + (t % KW) * DW;
            if (r < 0 || r >= p.src_h || q < 0 || q >= p.src_w) continue;
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
    for (int kh = 0; kh < KH; ++kh) {
      long long row;
      if (!source_row<DIR, KH, SH, DH, PH>(h, kh, p.src_h, row)) continue;
      for (int kw = 0; kw < KW; ++kw) {
        long long col;
        if (!source_row<DIR, KW, SW, DW, PW>(w, kw, p.src_w, col)) continue;
        const long long idx = LAYOUT == 0 ? ((n * p.channels + c) * p.src_h + row) * p.src_w + col
                                          : ((n * p.src_h + row) * p.src_w + col) * p.channels + c;
        const double term = (double)kvt_to_float(src[idx]) * (double)kvt_to_float(wt[c * KH * KW + kh * KW + kw]);
        acc += term;
        magnitude += term < 0 ? -term : term;
      }
    }
    const long long o = LAYOUT == 0 ? ((n * p.channels + c) * p.dst_h + h) * p.dst_w + w
                                    : ((n * p.dst_h + h) * p.dst_w + w) * p.channels + c;
    out[o] = (float)kvt_epilogue<EPI, T>(acc, p, o);
    // relu's gradient steps at z = 0: where an f32 sum could land on either side, either value is
    // right, and +Inf tells kvt_compare to skip the element.
    if (kvt_grad_prep(EPI) && kvt_act_of(EPI) == 4 && (acc < 0 ? -acc : acc) <= 1e-5 * magnitude) out[o] = __int_as_float(0x7f800000);
  }
}

#include "dwconv_mma.cuh"
