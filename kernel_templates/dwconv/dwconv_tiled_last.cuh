// kvtune depthwise convolution, the tiled kernel's channel-last (NHWC / NLC) bodies, included by
// dwconv_tiled.cuh after the channel-first one: staged tiles (STAGE 1) and windows from global
// memory, the fused data gradient's form, and the two bodies that compose them.
#pragma once

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
  // FILTER 0: the thread's channels' taps (load_taps), a local array of the caller: as a member of
  // this struct, written through `this` before inlining, rt=4 variants compiled to 80-100 more
  // instructions and ran 5-7 % slower (bench/NOTES.md, "the tiled split's slower variants, found").
  using Filter = float[S::FILTER == 0 ? S::kTaps * VC : 1];

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
  // tx: the caller's, computed once at its top (tx() here placed it, and the branch around the
  // taps, elsewhere: rh=2 rt=4 variants 6-10 % slower; bench/NOTES.md, "the tiled split's slower
  // variants, found").
  __device__ __forceinline__ void load_taps(long long ch0, Filter& filter, int tx) {
    const T* wt = static_cast<const T*>(p.weight);
    if constexpr (S::FILTER == 0) {
      if (ch0 + tx * VC < p.channels) kvt_channel_taps<T, VC, S::kTaps>(wt, ch0 + tx * VC, filter);
    } else {
      for (int i = threadIdx.x; i < S::kTaps * kCT; i += kThreads) {
        const int k = i / kCT, e = i - k * kCT;
        filter_smem[i] = ch0 + e < p.channels ? kvt_to_float(wt[(ch0 + e) * S::kTaps + k]) : 0.f;
      }
    }
  }
  // The thread's outputs of tile a from its staged source.
  __device__ __forceinline__ void compute(const At& a, const T* tile, const Filter& filter) const {
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
  const int tx = threadIdx.x % S::TX;
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
  typename Tiles::Filter filter;
  tiles_of.load_taps(cur.ch0, filter, tx);
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
    tiles_of.compute(cur, buffers + (k & 1) * Tiles::kTileElems, filter);
    if (!more) break;
    __syncthreads();  // every thread is done with this buffer (and the taps) before they change
    if (next.ch0 != cur.ch0) tiles_of.load_taps(next.ch0, filter, tx);
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
// tx and ty from threadIdx here, not passed in: as int arguments their range was lost before inlining
// and ty * RH became 64-bit arithmetic, another schedule (bench/NOTES.md, "the tiled split's slower
// variants, found").
template <class S> __device__ __forceinline__ KvtLastPlace kvt_last_place(const KvtDwConvParams& p) {
  const int tx = threadIdx.x % S::TX, ty = threadIdx.x / S::TX;
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
    load_part<0, kWin>(row, win, row_may_be_outside);
  }
  // Window positions LO .. LO + N - 1 (a segment of a long window, kvt_last_segments).
  template <int LO, int N>
  __device__ __forceinline__ void load_part(long long row, V (&win)[N], bool row_may_be_outside) const {
    using T = typename S::T;
    const long long height = X ? p.dst_h : p.src_h, width = X ? p.dst_w : p.src_w;
    const bool row_in = !row_may_be_outside || (row >= 0 && row < height);
    const T* srow = static_cast<const T*>(X ? p.aux : p.src) + ((at.n * height + (row_in ? row : 0)) * width + win0) * p.channels + at.c0;
    if (inside && row_in) {
#pragma unroll
      for (int j = 0; j < N; ++j) win[j] = *reinterpret_cast<const V*>(srow + (LO + j) * p.channels);
      return;
    }
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const long long q = win0 + LO + j;
      if (row_in && q >= 0 && q < width) win[j] = *reinterpret_cast<const V*>(srow + (LO + j) * p.channels);
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

// A long window (over 64 registers: 1D kernels like K = 63) in segments of S::kSeg vectors: each
// segment's products with every (output, tap) pair that reads it, so a thread holds one segment at
// a time beside its accumulators and taps.
template <class S, int LO>
__device__ __forceinline__ void kvt_last_segments(const KvtLastWindow<S>& window, long long row, int kh,
                                                  const KvtLastTaps<S>& taps, float (&acc)[S::RH][S::RW][S::VC]) {
  constexpr int N = S::kWin - LO < S::kSeg ? S::kWin - LO : S::kSeg;
  typename S::V part[N];
  window.template load_part<LO, N>(row, part, false);
#pragma unroll
  for (int kw = 0; kw < S::KW; ++kw) {
    float t[S::VC];
    taps.of(kh * S::KW + kw, t);
#pragma unroll
    for (int r = 0; r < S::RW; ++r) {
      constexpr int kLo = LO;
      const int j = S::AW::offset(r, kw) - kLo;
      if (S::AW::valid(r, kw) && j >= 0 && j < N)
#pragma unroll
        for (int v = 0; v < S::VC; ++v) acc[0][r][v] += kvt_to_float(part[j].v[v]) * t[v];
    }
  }
  if constexpr (LO + S::kSeg < S::kWin) kvt_last_segments<S, LO + S::kSeg>(window, row, kh, taps, acc);
}

// One output row a thread (RH = 1): each kernel row's source row, skipped where none.
template <class S>
__device__ __forceinline__ void kvt_last_rows(const KvtDwConvParams& p, const KvtLastWindow<S>& window,
                                              const KvtLastTaps<S>& taps, float (&acc)[S::RH][S::RW][S::VC]) {
#pragma unroll
  for (int kh = 0; kh < S::KH; ++kh) {
    long long row;
    if (!source_row<S::DIR, S::KH, S::SH, S::DH, S::PH>(window.at.h, kh, p.src_h, row)) continue;
    if constexpr (S::kSeg < S::kWin && !S::SEQ) {
      kvt_last_segments<S, 0>(window, row, kh, taps, acc);
      continue;
    }
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
    kvt_land_row<S>(i, row_base + i, p.src_h,
                    [&](int rh, int kh) { kvt_last_accumulate<S>(acc, win, rh, kh, taps); });
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
// p by value: a local copy of the kernel's parameters, which no store can alias. By reference, the
// parts were optimized before inlining as if a store to dst could change p, and ptxas scheduled
// seven variants 6-33 % slower than the one-function kernel (MIO stalls, L1 hit rate 64 -> 56 %);
// by value they compile to its machine code byte for byte (bench/NOTES.md, "the tiled split's
// slower variants, found").
template <class S> __device__ __forceinline__ void kvt_tiled_channel_last(const KvtDwConvParams p, float* smem) {
  using T = typename S::T;
  const int tx = threadIdx.x % S::TX;
  const KvtLastPlace at = kvt_last_place<S>(p);
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
