// kvtune depthwise convolution, the tiled kernel (forward and backward_data, gather form), included by
// dwconv.cu after Axis and source_row. dwconv.cu's header describes what each template argument
// does; this file is that kernel in parts, each with one job:
//
//   KvtTiled<...>                the kernel's template arguments and what follows from them
//   channel-first (NCHW / NCL)   kvt_first_place (the thread's plane, rows and run), KvtFirstTaps,
//                                kvt_first_stage (the block's source tile in shared memory),
//                                KvtFirstWindow (a source row's window: plain loads, vector loads,
//                                the halo exchange between lanes), kvt_first_accumulate,
//                                kvt_first_store, and the three row loops: kvt_first_runs (RT > 1),
//                                kvt_first_rows (RH = 1), kvt_first_pipelined (RH > 1: the register
//                                sliding window over source rows); kvt_tiled_channel_first composes them
//   channel-last staged          KvtLastTiles (locating, copying and computing a tile),
//                                kvt_tiled_channel_last_staged (the double-buffered tile loop)
//   channel-last (NHWC / NLC)    kvt_last_place, KvtLastTaps, KvtLastWindow, kvt_last_rows,
//                                kvt_last_pipelined; kvt_tiled_channel_last composes them
//   kvt_dwconv_tiled             the kernel: the constraints, then one of the three bodies
//
// Every part is __forceinline__. Against the one-function form it replaced, a variant's PTX has the
// same instructions in another order or differs by a few setup instructions, within 1.1 % of its
// count (bench/ptx_digest.cpp; bench/NOTES.md, "The tiled kernel in parts").
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

// ---- channel-first ---------------------------------------------------------------------------

// Where a thread works: its (n, c) plane, W tile, first output row h and first run t0.
struct KvtFirstPlace {
  long long plane, w_tile, c, h, h0, t0;
  unsigned run, runs;  // FLAT: the item's run and the runs of a row
  bool item_valid;     // FLAT: false for lanes past the last item
};

// Block -> (plane, W tile), grid.y -> H tile of TY * RH rows.
// 32-bit block decomposition: grid.x < 2^31 bounds every quotient, and a 64-bit division by a
// run-time value costs ~70 instructions per thread, more than a small tile's useful work.
// RT > 1: the block covers RT consecutive tiles of TX * RW outputs; a thread takes one run in each.
// FLAT 1: no tiles. Thread g of the grid takes item g of (plane, group of RH rows, run of RW),
// run fastest, so no lane idles where a plane's width or height is not a multiple of a tile
// (a 56 x 56 plane in 64 x 64 tiles kept 23 % of the lanes busy on nothing). The host keeps
// the item count under 2^32; lanes past it compute the last item again and store nothing.
template <class S>
__device__ __forceinline__ KvtFirstPlace kvt_first_place(const KvtDwConvParams& p, int tx, int ty) {
  constexpr int RW = S::RW, RH = S::RH, TX = S::TX, TY = S::TY, RT = S::RT;
  KvtFirstPlace at;
  unsigned plane32, w_tile32 = 0;
  at.run = 0, at.runs = 1;
  at.item_valid = true;
  if constexpr (S::FLAT) {
    at.runs = static_cast<unsigned>((p.dst_w + RW - 1) / RW);
    const unsigned groups = static_cast<unsigned>((p.dst_h + RH - 1) / RH);
    const unsigned items = static_cast<unsigned>(p.batch * p.channels) * groups * at.runs;
    unsigned g = blockIdx.x * TX + threadIdx.x;
    at.item_valid = g < items;
    if (!at.item_valid) g = items - 1;
    const unsigned rest = g / at.runs, group = rest % groups;
    at.run = g - rest * at.runs;
    plane32 = rest / groups;
    at.h = (long long)group * RH;
  } else {
    const unsigned w_tiles = static_cast<unsigned>((p.dst_w + TX * RW * RT - 1) / (TX * RW * RT));
    plane32 = blockIdx.x / w_tiles;
    w_tile32 = blockIdx.x - plane32 * w_tiles;
    at.h = (long long)blockIdx.y * (TY * RH) + (long long)ty * RH;  // the thread's first output row
  }
  at.plane = plane32;
  at.w_tile = w_tile32;
  at.c = plane32 % static_cast<unsigned>(p.channels);
  at.h0 = (long long)blockIdx.y * (TY * RH);
  at.t0 = S::FLAT ? (long long)at.run * RW : at.w_tile * (TX * RW * RT) + (long long)tx * RW;  // the first run
  return at;
}

// The plane's taps: in registers (FILTER 0) or in shared memory (FILTER 1, the caller syncs).
template <class S> struct KvtFirstTaps {
  float regs[S::FILTER == 0 ? S::kTaps : 1];
  float* smem;

  __device__ __forceinline__ void load(const typename S::T* wt, long long c) {
    if constexpr (S::FILTER == 0) {
#pragma unroll
      for (int k = 0; k < S::kTaps; ++k) regs[k] = kvt_to_float(wt[c * S::kTaps + k]);
    } else {
      for (int k = threadIdx.x; k < S::kTaps; k += S::TX * S::TY) smem[k] = kvt_to_float(wt[c * S::kTaps + k]);
    }
  }
  __device__ __forceinline__ float operator()(int k) const {
    if constexpr (S::FILTER == 0) return regs[k];
    else return smem[k];
  }
};

// STAGE 1: the block's source tile (all rows its TY output rows touch, all columns its TX * RW
// outputs touch) in shared memory, zero outside the plane.
template <class S> struct KvtFirstTile {
  using Cols = Axis<S::DIR, S::KW, S::SW, S::DW, S::PW, S::TX * S::RW>;
  using Rows = Axis<S::DIR, S::KH, S::SH, S::DH, S::PH, S::TY>;
  static constexpr int kCols = Cols::kWindow, kRows = Rows::kWindow;
};
template <class S>
__device__ __forceinline__ void kvt_first_stage(const KvtDwConvParams& p, const typename S::T* src_plane,
                                                const KvtFirstPlace& at, float* tile) {
  using Tile = KvtFirstTile<S>;
  const long long col0 = Tile::Cols::base(at.w_tile * (S::TX * S::RW));
  const long long row0 = Tile::Rows::base(at.h0);
  for (int i = threadIdx.x; i < Tile::kRows * Tile::kCols; i += S::TX * S::TY) {
    const long long r = row0 + i / Tile::kCols, q = col0 + i % Tile::kCols;
    tile[i] = (r >= 0 && r < p.src_h && q >= 0 && q < p.src_w) ? kvt_to_float(src_plane[r * p.src_w + q]) : 0.f;
  }
}

// A source row's window of kWin elements for the thread's run, from global memory. VC > 1: read as
// aligned vectors of VC elements along W (the host guarantees VC | RW, VC | src_w, VC | dst_w,
// aligned planes, and DIR 0 or stride_w 1, so win0 = kLead mod VC).
// Halo exchange (VC > 1, where every lane of a warp loads the same rows): a lane loads only its
// own kShift vectors; the window's vectors before them are the previous lane's own and those after
// them the next lane's, taken by warp shuffle (a warp's and a tile row's first and last lanes load
// theirs). Two or three 16-byte loads a row become one: neighbouring lanes' windows overlap, and
// without it a warp requested every byte from L2 twice (Nsight Compute, NCL bf16).
// X: the fused data gradient's x window (p.aux, dx-shaped) for the same run: the z of each of the dy
// window's kWin positions reads KW taps, (KW - 1) * DW more columns, starting PW before the dy window.
template <class S, bool X = false> struct KvtFirstWindow {
  using T = typename S::T;
  using V = typename S::V;
  static constexpr int VC = S::VC, kWin = S::kWin + (X ? (S::KW - 1) * S::DW : 0);
  static constexpr int kB = X ? S::AW::kQmin - S::PW : S::DIR == 0 ? -S::PW : S::AW::kQmin;
  static constexpr int kLead = ((kB % VC) + VC) % VC;  // window start within its first vector
  static constexpr int kVecs = (kLead + kWin + VC - 1) / VC;
  static constexpr int kShift = (S::DIR == 0 ? S::RW * S::SW : S::RW) / VC;  // vectors between neighbouring lanes' windows
  static constexpr int kOwn0 = kVecs - 2 * kShift > 0 ? kVecs - 2 * kShift : 0;  // a lane's own: [kOwn0, +kShift)
  // Only where a window's shuffles come well after its loads: in the pipelined row loop (RH > 1), a row
  // later, and with runs per thread (RT > 1), after every run's loads are issued. Right after its own
  // load the shuffle waits on it: 1D runs of 4 lost 5-8 % (H200, NCL f32 136.8 -> 143.2 us).
  static constexpr bool kShuffle = VC > 1 && S::STAGE == 0 && (S::RH > 1 || S::RT > 1) && kVecs > kShift && kOwn0 <= kShift;

  const KvtDwConvParams& p;
  const T* src_plane;
  long long win0;    // source column of the window's first element
  bool cols_inside;  // columns wholly inside the plane (every thread but the edge ones): loads without tests
  bool vec_inside;
  bool first_lane, last_lane;  // lanes whose neighbour's window is not the next run of the same rows

  __device__ __forceinline__ long long width() const { return X ? p.dst_w : p.src_w; }
  __device__ __forceinline__ long long height() const { return X ? p.dst_h : p.src_h; }

  // The loads of a window: which of its vectors a lane fetches (with the exchange: its own; edge lanes
  // also the halo) and which lie inside the row depend on its start column only, so they are decided
  // once per window start, not per row (NCHW f32 7x7 winner: 2,568 -> 2,512 instructions, 2 % faster;
  // H200 probe, bench/NOTES.md, "channel-first window loads"). Skipping the zero fill of vectors that are
  // never fetched was tried too and lost 2-7 %.
  struct Cols {
    long long q0;
    bool fetch[kVecs];
  };
  __device__ __forceinline__ bool mine(int v) const {
    return !kShuffle || (v >= kOwn0 && v < kOwn0 + kShift) || (v < kOwn0 ? first_lane : last_lane);
  }
  __device__ __forceinline__ Cols columns(long long w0) const {
    Cols cols;
    cols.q0 = w0 - kLead;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const long long qs = cols.q0 + v * VC;  // VC | src_w: a vector is wholly inside the row or outside
      cols.fetch[v] = mine(v) && qs >= 0 && qs < width();
    }
    return cols;
  }
  // Runs per thread (RT > 1) keep the per-row form: with the tests hoisted, the NCL bf16 K=4 runs of
  // 4 a thread lost 12 % (H100, benchmark heuristic column, 91.4 -> 102.2 us).
  __device__ __forceinline__ void issue_run(long long row, long long w0, V (&raw)[kVecs]) const {
    const bool row_in = row >= 0 && row < height();
    const long long q0 = w0 - kLead;
    const T* vrow = src_plane + (row_in ? row : 0) * width() + q0;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const long long qs = q0 + v * VC;  // VC | src_w: a vector is wholly inside the row or outside
      if (mine(v) && row_in && qs >= 0 && qs < width()) raw[v] = *reinterpret_cast<const V*>(vrow + v * VC);
      else kvt_zero_vec(raw[v]);
    }
  }
  __device__ __forceinline__ void issue(long long row, const Cols& cols, V (&raw)[kVecs]) const {
    const bool row_in = row >= 0 && row < height();
    const T* vrow = src_plane + (row_in ? row : 0) * width() + cols.q0;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      if (row_in && cols.fetch[v]) raw[v] = *reinterpret_cast<const V*>(vrow + v * VC);
      else kvt_zero_vec(raw[v]);
    }
  }
  // The shuffles, once the loads are needed; then the window as floats.
  __device__ __forceinline__ void finish(V (&raw)[kVecs], float (&win)[kWin]) const {
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
  }
  // Without the exchange. Rows outside the plane read as zeros (the row-window loop prefetches them
  // unconditionally).
  __device__ __forceinline__ void load(long long row, float (&win)[kWin]) const {
    const bool row_in = row >= 0 && row < height();
    const T* srow = src_plane + (row_in ? row : 0) * width() + win0;
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
      for (int j = 0; j < kWin; ++j) win[j] = (win0 + j >= 0 && win0 + j < width()) ? kvt_to_float(srow[j]) : 0.f;
    }
  }
};

// acc[rh] += the taps of kernel row kh over the window (a source row's), for the run's RW outputs.
template <class S>
__device__ __forceinline__ void kvt_first_accumulate(float (&acc)[S::RH][S::RW], const float (&win)[S::kWin], int rh, int kh,
                                                     const KvtFirstTaps<S>& taps) {
#pragma unroll
  for (int r = 0; r < S::RW; ++r)
#pragma unroll
    for (int kw = 0; kw < S::KW; ++kw)
      if (S::AW::valid(r, kw)) acc[rh][r] += win[S::AW::offset(r, kw)] * taps(kh * S::KW + kw);
}

// SEQ: kvt_first_accumulate with every tap masked: window position j counts for output r only where its
// id sq[j + SHIFT] is the output's own, at sq[OWN + r] (forward: the window is the x window, SHIFT 0,
// the output's position its last tap's, OWN = (KW - 1) * DW; the fused data gradient: the window is
// the dy window, PW into the x window, OWN = PW - kQmin).
template <class S, int SHIFT, int OWN, int N>
__device__ __forceinline__ void kvt_first_accumulate_seq(float (&acc)[S::RH][S::RW], const float (&win)[S::kWin],
                                                         const int (&sq)[N], const KvtFirstTaps<S>& taps) {
#pragma unroll
  for (int r = 0; r < S::RW; ++r) {
    const int own = sq[OWN + r];
#pragma unroll
    for (int kw = 0; kw < S::KW; ++kw)
      if (S::AW::valid(r, kw))
        acc[0][r] += (sq[S::AW::offset(r, kw) + SHIFT] == own ? win[S::AW::offset(r, kw)] : 0.f) * taps(kw);
  }
}

// SEQ: whether the ids are read as 16-byte vectors (kvt_seq_window): channel-first runs of a multiple
// of 4, an aligned seq_idx, rows of a multiple of 4.
template <class S> __device__ __forceinline__ bool kvt_seq_vectors(const KvtDwConvParams& p, long long row_length) {
  return S::LAYOUT == 0 && S::RW % 4 == 0 && reinterpret_cast<unsigned long long>(p.seq_idx) % 16 == 0 && row_length % 4 == 0;
}

template <class S> __device__ __forceinline__ void kvt_first_reset(float (&acc)[S::RH][S::RW], float bias) {
#pragma unroll
  for (int rh = 0; rh < S::RH; ++rh)
#pragma unroll
    for (int r = 0; r < S::RW; ++r) acc[rh][r] = bias;
}

// The run of RW outputs starting at t of the thread's RH rows, through the epilogue; vector stores
// where the whole run is inside the row.
template <class S>
__device__ __forceinline__ void kvt_first_store(const KvtDwConvParams& p, const KvtFirstPlace& at, long long t,
                                                const float (&acc)[S::RH][S::RW]) {
  using T = typename S::T;
  constexpr int RW = S::RW, VC = S::VC;
  if (!at.item_valid) return;
  T* dst = static_cast<T*>(p.dst);
#pragma unroll
  for (int rh = 0; rh < S::RH; ++rh) {
    if (at.h + rh >= p.dst_h) break;
    const long long row = (at.plane * p.dst_h + at.h + rh) * p.dst_w;  // element index
    T* drow = dst + row;
    if (VC > 1 && t + RW <= p.dst_w) {
#pragma unroll
      for (int r = 0; r < RW; r += VC) {
        float z[VC];
#pragma unroll
        for (int u = 0; u < VC; ++u) z[u] = acc[rh][(r + u) % RW];
        kvt_epilogue_vec<S::kStoreEpi, T, VC>(z, p, row + t + r);
        typename S::V out;
#pragma unroll
        for (int u = 0; u < VC; ++u) out.v[u] = kvt_from_float<T>(z[u]);
        *reinterpret_cast<typename S::V*>(drow + t + r) = out;
      }
      continue;
    }
#pragma unroll
    for (int r = 0; r < RW; ++r)
      if (t + r < p.dst_w) drow[t + r] = kvt_from_float<T>(kvt_epilogue<S::kStoreEpi, T>(acc[rh][r], p, row + t + r));
  }
}

// Runs per thread (RT > 1, one kernel row): the loads of all RT windows are issued first, then each
// run's shuffles, FMAs and store, so later runs' loads are in flight during the first runs' work,
// and the thread's setup (block decomposition, taps) serves RT runs instead of one.
template <class S>
__device__ __forceinline__ void kvt_first_runs(const KvtDwConvParams& p, const KvtFirstPlace& at, const KvtFirstWindow<S>& window,
                                               const KvtFirstTaps<S>& taps, float bias, float (&acc)[S::RH][S::RW]) {
  using W = KvtFirstWindow<S>;
  long long row;
  if (!source_row<S::DIR, S::KH, S::SH, S::DH, S::PH>(at.h, 0, p.src_h, row)) row = -1;  // no source row: bias only
  typename S::V raw[S::RT][W::kVecs];
#pragma unroll
  for (int j = 0; j < S::RT; ++j) window.issue_run(row, S::AW::base(at.t0 + j * (S::TX * S::RW)), raw[j]);
  int sq[S::SEQ ? S::RT : 1][S::SEQ ? S::kWin : 1];
  if constexpr (S::SEQ) {
    const bool vectors = kvt_seq_vectors<S>(p, p.src_w);
    const long long n = at.plane / p.channels;
#pragma unroll
    for (int j = 0; j < S::RT; ++j)
      kvt_seq_window<S::kWin, S::kSeqLead>(p.seq_idx + n * p.src_w, p.src_w, S::AW::base(at.t0 + j * (S::TX * S::RW)),
                                           vectors, sq[j]);
  }
#pragma unroll
  for (int j = 0; j < S::RT; ++j) {
    float win[S::kWin];
    window.finish(raw[j], win);
    if (j > 0) kvt_first_reset<S>(acc, bias);
    if constexpr (S::SEQ) kvt_first_accumulate_seq<S, 0, (S::KW - 1) * S::DW>(acc, win, sq[j], taps);
    else kvt_first_accumulate<S>(acc, win, 0, 0, taps);
    kvt_first_store<S>(p, at, at.t0 + j * (S::TX * S::RW), acc);
  }
}

// One output row a thread (RH = 1): for each kernel row, its source row's window, from the staged
// tile (STAGE 1: rows outside the plane are zero there) or from global memory.
template <class S>
__device__ __forceinline__ void kvt_first_rows(const KvtDwConvParams& p, const KvtFirstPlace& at, const KvtFirstWindow<S>& window,
                                               const KvtFirstTaps<S>& taps, const float* tile, int tx, int ty,
                                               float (&acc)[S::RH][S::RW]) {
  constexpr int DIR = S::DIR, SH = S::SH, DH = S::DH, PH = S::PH, RW = S::RW, SW = S::SW;
#pragma unroll
  for (int kh = 0; kh < S::KH; ++kh) {
    float win[S::kWin];
    if constexpr (S::STAGE == 1) {
      // Tile row of output row h, tap kh.
      int tr;
      if constexpr (DIR == 0) {
        tr = ty * SH + kh * DH;
      } else {
        const int num = ty + PH - kh * DH;  // h0 is a multiple of SH
        if (num - kvt_floordiv(num, SH) * SH != 0) continue;
        tr = kvt_floordiv(num, SH) - KvtFirstTile<S>::Rows::kQmin;
      }
      const float* trow = tile + tr * KvtFirstTile<S>::kCols + (DIR == 0 ? tx * RW * SW : tx * (RW / SW));
#pragma unroll
      for (int j = 0; j < S::kWin; ++j) win[j] = trow[j];
    } else {
      long long row;
      if (!source_row<DIR, S::KH, SH, DH, PH>(at.h, kh, p.src_h, row)) continue;
      window.load(row, win);
      if constexpr (S::SEQ) {
        int sq[S::kWin];
        kvt_seq_window<S::kWin, S::kSeqLead>(p.seq_idx + at.plane / p.channels * p.src_w, p.src_w, window.win0,
                                             kvt_seq_vectors<S>(p, p.src_w), sq);
        kvt_first_accumulate_seq<S, 0, (S::KW - 1) * S::DW>(acc, win, sq, taps);
        continue;
      }
    }
    kvt_first_accumulate<S>(acc, win, 0, kh, taps);
  }
}

// Rows per thread (RH > 1), the register sliding window: every source row the thread's RH output
// rows read is loaded once and used by every (row, tap) pair that lands on it (compile-time after
// unrolling; DIR 1: SH divides h). Software pipeline: the next used row's window is loaded before
// this row's FMAs (with the halo exchange, its loads are issued then and its shuffles done when it
// is used).
template <class S>
__device__ __forceinline__ void kvt_first_pipelined(const KvtDwConvParams& p, const KvtFirstPlace& at,
                                                    const KvtFirstWindow<S>& window, const KvtFirstTaps<S>& taps,
                                                    float (&acc)[S::RH][S::RW]) {
  using W = KvtFirstWindow<S>;
  using AH = typename S::AH;
  constexpr bool kShuffle = W::kShuffle;
  const long long row_base = AH::base(at.h);
  float win[S::kWin], next[S::kWin];
  typename S::V raw[kShuffle ? W::kVecs : 1], raw_next[kShuffle ? W::kVecs : 1];
  const typename W::Cols cols = window.columns(window.win0);
  if constexpr (kShuffle) window.issue(row_base + AH::next_used(0), cols, raw);
  else window.load(row_base + AH::next_used(0), win);
#pragma unroll
  for (int i = 0; i < AH::kWindow; ++i) {
    if (!AH::used(i)) continue;
    if (AH::next_used(i + 1) < AH::kWindow) {
      if constexpr (kShuffle) window.issue(row_base + AH::next_used(i + 1), cols, raw_next);
      else window.load(row_base + AH::next_used(i + 1), next);
    }
    if constexpr (kShuffle) window.finish(raw, win);
    const long long row = row_base + i;
    if (row >= 0 && row < p.src_h)
#pragma unroll
      for (int rh = 0; rh < S::RH; ++rh)
#pragma unroll
        for (int kh = 0; kh < S::KH; ++kh)
          if (AH::valid(rh, kh) && AH::offset(rh, kh) == i) kvt_first_accumulate<S>(acc, win, rh, kh, taps);
    if constexpr (kShuffle) {
#pragma unroll
      for (int v = 0; v < W::kVecs; ++v) raw[v] = raw_next[v];
    } else {
#pragma unroll
      for (int j = 0; j < S::kWin; ++j) win[j] = next[j];
    }
  }
}

// The fused data gradient (channel-first): the dy window becomes g = dy * act'(z) in place, z = zb +
// conv(x, w) at each window position j (x columns from j, a tap every DW). Positions no output reads
// (dilation gaps) are left as they are.
// SEQ: x's taps of another sequence than position j's (x window index j + PW) add nothing to z.
template <class S, int N>
__device__ __forceinline__ void kvt_first_grad(float (&win)[S::kWin], const float (&xw)[KvtFirstWindow<S, true>::kWin],
                                               const KvtFirstTaps<S>& taps, float zb, const int (&sq)[N]) {
#pragma unroll
  for (int j = 0; j < S::kWin; ++j) {
    if (!S::AW::used(j)) continue;
    float z = zb;
#pragma unroll
    for (int k = 0; k < S::KW; ++k)
      z += (!S::SEQ || sq[j + k * S::DW] == sq[j + S::PW] ? xw[j + k * S::DW] : 0.f) * taps(k);
    win[j] *= kvt_act_derivative<kvt_act_of(S::EPI)>(z);
  }
}

template <class S> __device__ constexpr bool kvt_first_x_shuffle() {
  if constexpr (S::kFusedGrad) return KvtFirstWindow<S, true>::kShuffle;
  else return false;
}

// The fused data gradient's runs (channel-first, one row): the RT runs' dy and x loads issued first,
// then per run the shuffles, g, the FMAs and the store (kvt_first_runs, with an x window beside each
// dy window). With RT = 1 the same loads without the exchange.
template <class S>
__device__ __forceinline__ void kvt_first_fused(const KvtDwConvParams& p, const KvtFirstPlace& at, const KvtFirstWindow<S>& window,
                                                const KvtFirstWindow<S, true>& xwindow, const KvtFirstTaps<S>& taps,
                                                float zb, float (&acc)[S::RH][S::RW]) {
  using W = KvtFirstWindow<S>;
  using XW = KvtFirstWindow<S, true>;
  long long row;  // dy's row and x's: 1D, one row, no padding along H
  if (!source_row<S::DIR, S::KH, S::SH, S::DH, S::PH>(at.h, 0, p.src_h, row)) row = -1;
  typename S::V raw[S::RT][W::kVecs], rawx[S::RT][XW::kVecs];
#pragma unroll
  for (int j = 0; j < S::RT; ++j) {
    const long long w0 = S::AW::base(at.t0 + j * (S::TX * S::RW));
    window.issue_run(row, w0, raw[j]);
    xwindow.issue_run(row, w0 - S::PW, rawx[j]);
  }
  // SEQ: the x windows' ids (the dy window lies PW into it, the outputs PW - kQmin).
  int sq[S::SEQ ? S::RT : 1][S::SEQ ? XW::kWin : 1];
  if constexpr (S::SEQ) {
    const bool vectors = kvt_seq_vectors<S>(p, p.dst_w);
    const long long n = at.plane / p.channels;
#pragma unroll
    for (int j = 0; j < S::RT; ++j)
      kvt_seq_window<XW::kWin, S::kSeqLead>(p.seq_idx + n * p.dst_w, p.dst_w,
                                            S::AW::base(at.t0 + j * (S::TX * S::RW)) - S::PW, vectors, sq[j]);
  }
#pragma unroll
  for (int j = 0; j < S::RT; ++j) {
    float win[S::kWin], xw[XW::kWin];
    window.finish(raw[j], win);
    xwindow.finish(rawx[j], xw);
    kvt_first_grad<S>(win, xw, taps, zb, sq[j]);
    if (j > 0) kvt_first_reset<S>(acc, 0.f);
    if constexpr (S::SEQ) kvt_first_accumulate_seq<S, S::PW, S::PW - S::AW::kQmin>(acc, win, sq[j], taps);
    else kvt_first_accumulate<S>(acc, win, 0, 0, taps);
    kvt_first_store<S>(p, at, at.t0 + j * (S::TX * S::RW), acc);
  }
}

// Channel-first (NCHW / NCL): a block is a TY x (TX * RW) tile of one (n, c) plane (FLAT: items over
// the grid); each thread computes RW consecutive outputs along W of RH rows from register windows.
template <class S> __device__ __forceinline__ void kvt_tiled_channel_first(const KvtDwConvParams& p, float* smem) {
  using T = typename S::T;
  using W = KvtFirstWindow<S>;
  constexpr int VC = S::VC, TX = S::TX, RH = S::RH;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const KvtFirstPlace at = kvt_first_place<S>(p, tx, ty);
  const T* src_plane = static_cast<const T*>(p.src) + at.plane * p.src_h * p.src_w;

  KvtFirstTaps<S> taps;
  taps.smem = smem;
  taps.load(static_cast<const T*>(p.weight), at.c);
  float* tile = smem + (S::FILTER == 1 ? ((S::kTaps + 3) / 4 * 4) : 0);
  if constexpr (S::STAGE == 1) kvt_first_stage<S>(p, src_plane, at, tile);
  if constexpr (S::STAGE == 1 || S::FILTER == 1) __syncthreads();
  // With the halo exchange every lane stays to the end (its loads and shuffles serve its neighbours;
  // the stores skip what is outside the output).
  if (!((VC > 1 && S::STAGE == 0 && RH > 1) || W::kShuffle || kvt_first_x_shuffle<S>()) &&
      (at.h >= p.dst_h || at.t0 >= p.dst_w || !at.item_valid))
    return;

  const float bias = S::HAS_BIAS ? kvt_to_float(static_cast<const T*>(p.bias)[at.c]) : 0.f;
  float acc[RH][S::RW];
  kvt_first_reset<S>(acc, bias);
  const long long win0 = S::AW::base(at.t0);
  const W window{p, src_plane, win0, win0 >= 0 && win0 + S::kWin <= p.src_w,
                 VC > 1 && win0 - W::kLead >= 0 && win0 - W::kLead + W::kVecs * VC <= p.src_w,
                 (S::FLAT ? at.run == 0 : tx == 0) || (threadIdx.x & 31) == 0,
                 (S::FLAT ? at.run == at.runs - 1 : tx == TX - 1) || (threadIdx.x & 31) == 31};
  if constexpr (S::kFusedGrad) {
    using XW = KvtFirstWindow<S, true>;
    const long long x0 = win0 - S::PW;
    const float zb = p.bias != nullptr ? kvt_to_float(static_cast<const T*>(p.bias)[at.c]) : 0.f;
    const XW xwindow{p, static_cast<const T*>(p.aux) + at.plane * p.dst_h * p.dst_w, x0,
                     x0 >= 0 && x0 + XW::kWin <= p.dst_w,
                     VC > 1 && x0 - XW::kLead >= 0 && x0 - XW::kLead + XW::kVecs * VC <= p.dst_w,
                     window.first_lane, window.last_lane};
    kvt_first_fused<S>(p, at, window, xwindow, taps, zb, acc);
    return;
  }
  if constexpr (S::RT > 1) {
    kvt_first_runs<S>(p, at, window, taps, bias, acc);
    return;
  }
  if constexpr (RH == 1) kvt_first_rows<S>(p, at, window, taps, tile, tx, ty, acc);
  else kvt_first_pipelined<S>(p, at, window, taps, acc);
  kvt_first_store<S>(p, at, at.t0, acc);
}

// ---- channel-last, staged (STAGE 1) ----------------------------------------------------------

// A tile is TX * VC channels x RH output rows x TY runs of RW outputs along W; thread (tx, ty)
// computes VC channels x RH rows x one run. The tile's source (every row and column those outputs
// read, the tile's channels) is copied once into shared memory by 16-byte asynchronous copies along
// the channels (cp.async; zero-filled outside the image and past the last channel), as
// [row][column][channel]; the threads read their windows there at compile-time offsets: no bounds
// tests or 64-bit addresses per element (the global-memory form spent 61 % of its issue on them,
// NHWC bf16 7x7, H100).
template <class S> struct KvtLastTiles {
  using T = typename S::T;
  using V = typename S::V;
  using AW = typename S::AW;
  using AH = typename S::AH;
  static constexpr int VC = S::VC, RW = S::RW, RH = S::RH, KH = S::KH, KW = S::KW, kWin = S::kWin;
  static constexpr int kCT = S::TX * VC;  // channels of a tile
  static constexpr int kThreads = S::TX * S::TY;
  static constexpr int SV = 16 / sizeof(T);  // elements a copy (the host requires SV | C and a 16-byte src)
  using Cols = Axis<S::DIR, KW, S::SW, S::DW, S::PW, S::TY * RW>;
  static constexpr int kCols = Cols::kWindow, kRows = AH::kWindow;
  static constexpr int kPerPos = kCT / SV, kItems = kRows * kCols * kPerPos;
  static constexpr int kLoads = (kItems + kThreads - 1) / kThreads;  // a thread's copies a tile
  static constexpr int kTileElems = kItems * SV;                      // a multiple of 16 bytes
  struct At {
    long long n, h, ch0, tw0;  // image, first output row, first channel, first output column
  };

  const KvtDwConvParams& p;
  unsigned w_tiles, image_tiles;
  float* filter_smem;                                // FILTER 1: [tap][kCT]
  float filter[S::FILTER == 0 ? S::kTaps * VC : 1];  // FILTER 0: the thread's channels (load_taps)

  __device__ __forceinline__ KvtLastTiles(const KvtDwConvParams& p_, unsigned w_tiles_, unsigned image_tiles_, float* filter_smem_)
      : p(p_), w_tiles(w_tiles_), image_tiles(image_tiles_), filter_smem(filter_smem_) {}
  // The thread's channel vector and run in a tile, from threadIdx where used: held in members, their
  // relation to threadIdx.x was lost, and the shared-memory window offsets (ty * kCT + tx * VC, i.e.
  // threadIdx.x * VC) no longer folded into immediates (bf16 3x3 staged: 257 -> 292 instructions).
  __device__ __forceinline__ static int tx() { return threadIdx.x % S::TX; }
  __device__ __forceinline__ static int ty() { return threadIdx.x / S::TX; }
  __device__ __forceinline__ At locate(unsigned t) const {
    At a;
    const unsigned batch = static_cast<unsigned>(p.batch);
    const unsigned rest = t / image_tiles, in_image = t - rest * image_tiles;
    const unsigned ctile = rest / batch, ht = in_image / w_tiles;
    a.n = rest - ctile * batch;
    a.ch0 = (long long)ctile * kCT;
    a.h = (long long)ht * RH;
    a.tw0 = (long long)(in_image - ht * w_tiles) * (S::TY * RW);
    return a;
  }
  // The copies of tile a into buffer `to` (DIR 1: SH | RH and SW | RW, so its rows and columns start
  // on source rows), as one group.
  __device__ __forceinline__ void issue(const At& a, T* to) const {
    const T* src = static_cast<const T*>(p.src);
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
  }
  __device__ __forceinline__ void load_taps(long long ch0) {
    const T* wt = static_cast<const T*>(p.weight);
    if constexpr (S::FILTER == 0) {
      if (ch0 + tx() * VC < p.channels) kvt_channel_taps<T, VC, S::kTaps>(wt, ch0 + tx() * VC, filter);
    } else {
      for (int i = threadIdx.x; i < S::kTaps * kCT; i += kThreads) {
        const int k = i / kCT, e = i - k * kCT;
        filter_smem[i] = ch0 + e < p.channels ? kvt_to_float(wt[(ch0 + e) * S::kTaps + k]) : 0.f;
      }
    }
  }
  // The thread's outputs of tile a from its staged source.
  __device__ __forceinline__ void compute(const At& a, const T* tile) const {
    const long long c0 = a.ch0 + (long long)tx() * VC;
    const long long t0 = a.tw0 + (long long)ty() * RW;
    if (c0 >= p.channels || t0 >= p.dst_w) return;  // VC | C: all VC channels, or none
    float acc[RH][RW][VC];
    kvt_bias_channel_last<T, RH, RW, VC, S::HAS_BIAS>(p, c0, acc);
    // The thread's window: columns from its run's first source column, its VC channels.
    const T* base = tile + (S::DIR == 0 ? ty() * RW * S::SW : ty() * (RW / S::SW)) * kCT + tx() * VC;
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
              if constexpr (S::FILTER == 0) t[v] = filter[(kh * KW + kw) * VC + v];
              else t[v] = filter_smem[(kh * KW + kw) * kCT + tx() * VC + v];
            }
#pragma unroll
            for (int r = 0; r < RW; ++r)
              if (AW::valid(r, kw))
#pragma unroll
                for (int v = 0; v < VC; ++v) acc[rh][r][v] += win[AW::offset(r, kw)][v] * t[v];
          }
        }
    }
    kvt_store_channel_last<T, RH, RW, VC, S::EPI>(static_cast<T*>(p.dst), p, a.n, a.h, t0, c0, acc);
  }
};

// A block takes RT consecutive tiles (W fastest, then rows, images, channel tiles) through two
// buffers: the next tile's copies land during this tile's FMAs.
template <class S> __device__ __forceinline__ void kvt_tiled_channel_last_staged(const KvtDwConvParams& p, float* smem) {
  using Tiles = KvtLastTiles<S>;
  using T = typename S::T;
  constexpr int RT = S::RT;
  const unsigned w_tiles = static_cast<unsigned>((p.dst_w + S::TY * S::RW - 1) / (S::TY * S::RW));
  const unsigned h_tiles = static_cast<unsigned>((p.dst_h + S::RH - 1) / S::RH);
  const unsigned image_tiles = w_tiles * h_tiles;  // the host keeps every tile count under 2^31
  const unsigned tiles = image_tiles * static_cast<unsigned>(p.batch) *
                         static_cast<unsigned>((p.channels + Tiles::kCT - 1) / Tiles::kCT);
  unsigned id = blockIdx.x * RT;
  const unsigned end = id + RT < tiles ? id + RT : tiles;
  if (id >= end) return;
  T* const buffers = reinterpret_cast<T*>(smem);  // [RT > 1 ? 2 : 1][kRows][kCols][kCT]
  Tiles tiles_of(p, w_tiles, image_tiles, reinterpret_cast<float*>(buffers + (RT > 1 ? 2 : 1) * Tiles::kTileElems));

  typename Tiles::At cur = tiles_of.locate(id);
  tiles_of.issue(cur, buffers);
  tiles_of.load_taps(cur.ch0);
  for (int k = 0;; ++k) {
    const bool more = RT > 1 && id + 1 < end;
    typename Tiles::At next = cur;
    if (more) {
      next = tiles_of.locate(id + 1);
      tiles_of.issue(next, buffers + ((k + 1) & 1) * Tiles::kTileElems);  // lands during this tile's FMAs
      kvt_cp_async_wait<1>();
    } else {
      kvt_cp_async_wait<0>();
    }
    __syncthreads();  // this tile's copies (every thread's) and the shared taps are in place
    tiles_of.compute(cur, buffers + (k & 1) * Tiles::kTileElems);
    if (!more) break;
    __syncthreads();  // every thread is done with this buffer (and the taps) before they change
    if (next.ch0 != cur.ch0) tiles_of.load_taps(next.ch0);
    cur = next;
    ++id;
  }
}

// ---- channel-last (NHWC / NLC), global memory -------------------------------------------------

// Threads -> (W run, channel vector) flattened, channel vector fastest: index flat = blockIdx.x * TX
// + tx is the pair (flat / cvs, flat % cvs) of an output row, cvs = channels / VC (the host
// guarantees VC | C).
// A warp reads 32 consecutive vectors of a row at any channel count (a C tile of TX * VC channels left
// lanes idle where it did not divide C: 144 channels in tiles of 128 ran 2 blocks for 1.125 blocks'
// work), and neighbouring runs' windows, which overlap, are read by one warp instead of two blocks.
// grid.y -> (n, H tile of TY * RH rows).
struct KvtLastPlace {
  unsigned cvs, cv;  // channel vectors per position; the thread's
  long long n, h, c0, t0;
};
template <class S> __device__ __forceinline__ KvtLastPlace kvt_last_place(const KvtDwConvParams& p, int tx, int ty) {
  KvtLastPlace at;
  at.cvs = static_cast<unsigned>(p.channels / S::VC);
  const unsigned flat = blockIdx.x * S::TX + tx;  // 32-bit: grid.x * TX < 2^32 (host)
  const unsigned w_run = flat / at.cvs;
  at.cv = flat - w_run * at.cvs;
  at.c0 = (long long)at.cv * S::VC;
  at.t0 = (long long)w_run * S::RW;
  const unsigned h_tiles = static_cast<unsigned>((p.dst_h + S::TY * S::RH - 1) / (S::TY * S::RH));
  const unsigned n32 = blockIdx.y / h_tiles;
  at.n = n32;
  at.h = (long long)(blockIdx.y - n32 * h_tiles) * (S::TY * S::RH) + (long long)ty * S::RH;
  return at;
}

// FILTER 1: the taps of the block's channel vectors in shared memory as [tap][TX slots][VC] floats,
// at compile-time strides and divisors (with a run-time slot count in both, NHWC bf16 31x31 went
// 1.62 -> 2.13 ms on an H200). A block's TX consecutive indices cover TX consecutive channel
// vectors (mod cvs): slot = tx, or, where TX >= cvs, every vector once (slot = cv).
template <class S> struct KvtLastTaps {
  static constexpr int VC = S::VC, TX = S::TX;
  float regs[S::FILTER == 0 ? S::kTaps * VC : 1];
  float* smem;
  unsigned slot;

  // FILTER 1: the caller syncs the block.
  __device__ __forceinline__ void load(const KvtDwConvParams& p, const KvtLastPlace& at, int tx) {
    const typename S::T* wt = static_cast<const typename S::T*>(p.weight);
    const bool all_vectors = TX >= at.cvs;
    const unsigned slots = all_vectors ? at.cvs : TX;  // slots filled
    slot = all_vectors ? at.cv : tx;
    if constexpr (S::FILTER == 0) {
      if (at.t0 < p.dst_w) kvt_channel_taps<typename S::T, VC, S::kTaps>(wt, at.c0, regs);
    } else {
      // Every divisor compile-time (TX * VC, VC): a run-time division per element cost more than the
      // 31x31 kernel's FMAs. Slot s holds channel vector first + s (mod cvs; first < cvs, s < cvs).
      const unsigned first = all_vectors ? 0u : (blockIdx.x * TX) % at.cvs;
      for (unsigned i = threadIdx.x; i < S::kTaps * TX * VC; i += TX * S::TY) {
        const unsigned k = i / (TX * VC), e = i - k * (TX * VC), s = e / VC;
        if (s >= slots) continue;
        const unsigned vec = first + s >= at.cvs ? first + s - at.cvs : first + s;
        smem[i] = kvt_to_float(wt[((long long)vec * VC + (e - s * VC)) * S::kTaps + k]);
      }
    }
  }
  // The VC taps of tap k for the thread's channels (16-byte shared loads where VC allows).
  __device__ __forceinline__ void of(int k, float (&t)[VC]) const {
    if constexpr (S::FILTER == 0) {
#pragma unroll
      for (int v = 0; v < VC; ++v) t[v] = regs[k * VC + v];
    } else {
      const float* f = smem + slot * VC + k * (TX * VC);
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
  }
};

// A source row's window for the thread's run and channel vector: kWin vectors. Rows outside the image
// read as zeros; callers that know the row is inside pass false (a constant once inlined: no row test;
// a 31x31 window's 34 loads lost 27% to it on an H200).
// X: the fused data gradient's x window (p.aux, dx-shaped), as KvtFirstWindow's.
template <class S, bool X = false> struct KvtLastWindow {
  using V = typename S::V;
  static constexpr int kWin = S::kWin + (X ? (S::KW - 1) * S::DW : 0);
  const KvtDwConvParams& p;
  const KvtLastPlace& at;
  long long win0;
  bool inside;  // columns inside the row (every thread but the edge ones): loads without tests

  __device__ __forceinline__ void load(long long row, V (&win)[kWin], bool row_may_be_outside) const {
    using T = typename S::T;
    const long long height = X ? p.dst_h : p.src_h, width = X ? p.dst_w : p.src_w;
    const bool row_in = !row_may_be_outside || (row >= 0 && row < height);
    const T* srow = static_cast<const T*>(X ? p.aux : p.src) + ((at.n * height + (row_in ? row : 0)) * width + win0) * p.channels + at.c0;
    if (inside && row_in) {
#pragma unroll
      for (int j = 0; j < kWin; ++j) win[j] = *reinterpret_cast<const V*>(srow + j * p.channels);
      return;
    }
#pragma unroll
    for (int j = 0; j < kWin; ++j) {
      const long long q = win0 + j;
      if (row_in && q >= 0 && q < width) win[j] = *reinterpret_cast<const V*>(srow + j * p.channels);
      else kvt_zero_vec(win[j]);
    }
  }
};

template <class S>
__device__ __forceinline__ void kvt_last_accumulate(float (&acc)[S::RH][S::RW][S::VC], const typename S::V (&win)[S::kWin],
                                                    int rh, int kh, const KvtLastTaps<S>& taps) {
#pragma unroll
  for (int kw = 0; kw < S::KW; ++kw) {
    float t[S::VC];
    taps.of(kh * S::KW + kw, t);
#pragma unroll
    for (int r = 0; r < S::RW; ++r)
      if (S::AW::valid(r, kw))
#pragma unroll
        for (int v = 0; v < S::VC; ++v) acc[rh][r][v] += kvt_to_float(win[S::AW::offset(r, kw)].v[v]) * t[v];
  }
}

// One output row a thread (RH = 1): each kernel row's source row, skipped where none.
template <class S>
__device__ __forceinline__ void kvt_last_rows(const KvtDwConvParams& p, const KvtLastWindow<S>& window,
                                              const KvtLastTaps<S>& taps, float (&acc)[S::RH][S::RW][S::VC]) {
#pragma unroll
  for (int kh = 0; kh < S::KH; ++kh) {
    long long row;
    if (!source_row<S::DIR, S::KH, S::SH, S::DH, S::PH>(window.at.h, kh, p.src_h, row)) continue;
    typename S::V win[S::kWin];
    window.load(row, win, false);
    if constexpr (S::SEQ) {
      // The window's ids (one run: the same for every channel vector, so scalar loads), every tap masked.
      int sq[S::kWin];
      kvt_seq_window<S::kWin, 0>(p.seq_idx + window.at.n * p.src_w, p.src_w, window.win0, false, sq);
#pragma unroll
      for (int kw = 0; kw < S::KW; ++kw) {
        float t[S::VC];
        taps.of(kw, t);
#pragma unroll
        for (int r = 0; r < S::RW; ++r) {
          const bool same = sq[S::AW::offset(r, kw)] == sq[S::AW::offset(r, S::KW - 1)];
#pragma unroll
          for (int v = 0; v < S::VC; ++v)
            acc[0][r][v] += (same ? kvt_to_float(win[S::AW::offset(r, kw)].v[v]) : 0.f) * t[v];
        }
      }
      continue;
    }
    kvt_last_accumulate<S>(acc, win, 0, kh, taps);
  }
}

// Rows per thread (RH > 1): the register sliding window of the channel-first form (kvt_first_pipelined).
template <class S>
__device__ __forceinline__ void kvt_last_pipelined(const KvtDwConvParams& p, const KvtLastWindow<S>& window,
                                                   const KvtLastTaps<S>& taps, float (&acc)[S::RH][S::RW][S::VC]) {
  using AH = typename S::AH;
  const long long row_base = AH::base(window.at.h);
  typename S::V win[S::kWin], next[S::kWin];
  window.load(row_base + AH::next_used(0), win, true);
#pragma unroll
  for (int i = 0; i < AH::kWindow; ++i) {
    if (!AH::used(i)) continue;
    if (AH::next_used(i + 1) < AH::kWindow) window.load(row_base + AH::next_used(i + 1), next, true);
    const long long row = row_base + i;
    if (row >= 0 && row < p.src_h)
#pragma unroll
      for (int rh = 0; rh < S::RH; ++rh)
#pragma unroll
        for (int kh = 0; kh < S::KH; ++kh)
          if (AH::valid(rh, kh) && AH::offset(rh, kh) == i) kvt_last_accumulate<S>(acc, win, rh, kh, taps);
#pragma unroll
    for (int j = 0; j < S::kWin; ++j) win[j] = next[j];
  }
}

// The fused data gradient (channel-last, one row): g = dy * act'(z) for the window's positions and
// the thread's VC channels, z = bias + conv(x, w) from the x window, then the taps over g.
template <class S>
__device__ __forceinline__ void kvt_last_fused(const KvtDwConvParams& p, const KvtLastWindow<S>& window,
                                               const KvtLastWindow<S, true>& xwindow, const KvtLastTaps<S>& taps,
                                               float (&acc)[S::RH][S::RW][S::VC]) {
  constexpr int VC = S::VC, KW = S::KW, DW = S::DW;
  long long row;
  if (!source_row<S::DIR, S::KH, S::SH, S::DH, S::PH>(window.at.h, 0, p.src_h, row)) return;
  typename S::V dy[S::kWin], xw[KvtLastWindow<S, true>::kWin];
  window.load(row, dy, false);
  xwindow.load(row, xw, false);
  float t[KW][VC], zb[VC];
#pragma unroll
  for (int k = 0; k < KW; ++k) taps.of(k, t[k]);
#pragma unroll
  for (int v = 0; v < VC; ++v)
    zb[v] = p.bias != nullptr ? kvt_to_float(static_cast<const typename S::T*>(p.bias)[window.at.c0 + v]) : 0.f;
  // SEQ: the x window's ids (the dy window lies PW into it, the outputs PW - kQmin); a tap of another
  // sequence adds nothing to z, a dy position of another sequence nothing to dx.
  constexpr int kX = KvtLastWindow<S, true>::kWin, kOwn = S::PW - S::AW::kQmin;
  int sq[S::SEQ ? kX : 1];
  if constexpr (S::SEQ) kvt_seq_window<kX, 0>(p.seq_idx + window.at.n * p.dst_w, p.dst_w, xwindow.win0, false, sq);
  const auto same = [&](int a, int b) { return !S::SEQ || sq[S::SEQ ? a : 0] == sq[S::SEQ ? b : 0]; };
  float g[S::kWin][VC];
#pragma unroll
  for (int j = 0; j < S::kWin; ++j)
#pragma unroll
    for (int v = 0; v < VC; ++v) {
      float z = zb[v];
#pragma unroll
      for (int k = 0; k < KW; ++k) z += (same(j + k * DW, j + S::PW) ? kvt_to_float(xw[j + k * DW].v[v]) : 0.f) * t[k][v];
      g[j][v] = S::AW::used(j) ? kvt_to_float(dy[j].v[v]) * kvt_act_derivative<kvt_act_of(S::EPI)>(z) : 0.f;
    }
#pragma unroll
  for (int r = 0; r < S::RW; ++r)
#pragma unroll
    for (int k = 0; k < KW; ++k)
      if (S::AW::valid(r, k)) {
        const bool in = same(S::AW::offset(r, k) + S::PW, kOwn + r);
#pragma unroll
        for (int v = 0; v < VC; ++v) acc[0][r][v] += (in ? g[S::AW::offset(r, k)][v] : 0.f) * t[k][v];
      }
}

// Channel-last (NHWC / NLC) from global memory: a thread computes VC consecutive channels (one vector
// access) x RW outputs along W x RH rows.
template <class S> __device__ __forceinline__ void kvt_tiled_channel_last(const KvtDwConvParams& p, float* smem) {
  using T = typename S::T;
  const int tx = threadIdx.x % S::TX, ty = threadIdx.x / S::TX;
  const KvtLastPlace at = kvt_last_place<S>(p, tx, ty);
  KvtLastTaps<S> taps;
  taps.smem = smem;
  taps.load(p, at, tx);
  if constexpr (S::FILTER == 1) __syncthreads();
  if (at.h >= p.dst_h || at.t0 >= p.dst_w || at.n >= p.batch) return;

  float acc[S::RH][S::RW][S::VC];
  kvt_bias_channel_last<T, S::RH, S::RW, S::VC, S::HAS_BIAS>(p, at.c0, acc);
  const long long win0 = S::AW::base(at.t0);
  const KvtLastWindow<S> window{p, at, win0, win0 >= 0 && win0 + S::kWin <= p.src_w};
  if constexpr (S::kFusedGrad) {
    const long long x0 = win0 - S::PW;
    const KvtLastWindow<S, true> xwindow{p, at, x0, x0 >= 0 && x0 + KvtLastWindow<S, true>::kWin <= p.dst_w};
    kvt_last_fused<S>(p, window, xwindow, taps, acc);
  } else if constexpr (S::RH == 1) kvt_last_rows<S>(p, window, taps, acc);
  else kvt_last_pipelined<S>(p, window, taps, acc);
  kvt_store_channel_last<T, S::RH, S::RW, S::VC, S::kStoreEpi>(static_cast<T*>(p.dst), p, at.n, at.h, at.t0, at.c0, acc);
}

// ---- the kernel -------------------------------------------------------------------------------

template <class T, int LAYOUT, int DIR, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int RW, int TX,
          int TY, int VC, int STAGE, int FILTER, int HAS_BIAS, int RH = 1, int RT = 1, int FLAT = 0, int EPI = 0, int SEQ = 0>
__global__ void __launch_bounds__(TX * TY) kvt_dwconv_tiled(const KvtDwConvParams p) {
  using S = KvtTiled<T, LAYOUT, DIR, KH, KW, SH, SW, DH, DW, PH, PW, RW, TX, TY, VC, STAGE, FILTER, HAS_BIAS, RH, RT, FLAT, EPI,
                     SEQ>;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  float* smem = reinterpret_cast<float*>(dynamic_smem);
  if constexpr (LAYOUT == 0) kvt_tiled_channel_first<S>(p, smem);
  else if constexpr (STAGE == 1) kvt_tiled_channel_last_staged<S>(p, smem);
  else kvt_tiled_channel_last<S>(p, smem);
}
