// kvtune depthwise convolution, the tiled kernel's channel-first (NCHW / NCL) body, included by
// dwconv_tiled.cuh after KvtTiled and the shared helpers: the thread's place, taps and windows, the row
// loops, the fused data gradient's runs, and kvt_tiled_channel_first, which composes them.
#pragma once

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
// The taps go in the order that reads the window front to back: DIR 1 (the data gradient) from the
// last tap, whose window position is the lowest. In tap order the data gradient read its window
// back to front, and ptxas kept all of it live: 80 registers against the forward's 32 for the same
// 31x31 smem tile, 452 against 363 us (H100; bench/NOTES.md, 2026-12-05).
template <class S>
__device__ __forceinline__ void kvt_first_accumulate(float (&acc)[S::RH][S::RW], const float (&win)[S::kWin], int rh, int kh,
                                                     const KvtFirstTaps<S>& taps) {
#pragma unroll
  for (int r = 0; r < S::RW; ++r)
#pragma unroll
    for (int k = 0; k < S::KW; ++k) {
      const int kw = S::DIR == 0 ? k : S::KW - 1 - k;
      if (S::AW::valid(r, kw)) acc[rh][r] += win[S::AW::offset(r, kw)] * taps(kh * S::KW + kw);
    }
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
  // Taps in shared memory can be indexed by a run-time row: large kernels loop over their rows.
#pragma unroll(S::FILTER != 0 && S::KH * S::KW > kKvtUnrolledTaps ? 2 : S::KH)
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
    kvt_land_row<S>(i, row_base + i, p.src_h,
                    [&](int rh, int kh) { kvt_first_accumulate<S>(acc, win, rh, kh, taps); });
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
