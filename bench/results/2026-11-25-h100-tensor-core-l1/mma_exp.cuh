// Experimental copy of kvt_dwconv_mma (kernel_templates/dwconv/dwconv_mma.cuh) for bench/probe: the
// same kernel with switches for one experiment at a time (see dwconv_probe_variants.inc).
#pragma once
#include "dwconv_mma.cuh"
template <class T, int LAYOUT, int DIR, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int CB, int TR,
          int NT, int WARPS, int PITCH, int HAS_BIAS, int ORDER, int TAPS_EARLY, int MINB, int BATCH, int FRAG, int NF>
__global__ void __launch_bounds__(WARPS * 32, MINB) kvt_dwconv_mma_exp(const KvtDwConvParams p) {
  static_assert(LAYOUT == 1, "tensor-core dwconv: channel-last layouts");
  static_assert(DIR == 0 || (SH == 1 && SW == 1), "tensor-core dwconv: backward_data with stride 1");
  static_assert(16 % TR == 0 && CB % 8 == 0 && CB % WARPS == 0 && NT >= 1, "tile shape");
  constexpr int kRuns = 16 / TR;              // segments along W
  constexpr int kRunW = 8 * NT;               // outputs a segment
  constexpr int kTileW = kRuns * kRunW;       // output columns a tile
  using AH = Axis<DIR, KH, SH, DH, PH, TR>;   // the tile's output rows and their source rows
  using AT = Axis<DIR, KW, SW, DW, PW, kTileW>;
  using A8 = Axis<DIR, KW, SW, DW, PW, 8>;    // one n-tile of 8 outputs
  constexpr int kSteps = (A8::kWindow + 15) / 16;
  constexpr int kRows = AH::kWindow;
  constexpr int kCols = (kRuns - 1) * kRunW * SW + (NT - 1) * 8 * SW + 16 * kSteps;  // columns ldmatrix reads
  static_assert(kCols >= AT::kWindow && PITCH >= kCols && PITCH % 8 == 0, "plane pitch");
  constexpr int kPlane = kRows * PITCH;       // elements of one channel's plane (a multiple of 8)
  // Channel c's plane; each group of 8 planes 32 bytes (16 elements) further than the last, so that the
  // staging stores and output reads of a warp's 4 vectors (8 consecutive words each) fall in distinct
  // banks (groups 4 apart share banks, but no warp instruction spans them). Monotone in c: planes
  // never overlap (an offset taken modulo 4 groups made plane 32 overlap plane 31's last row).
  // FRAG 2: with 2 vectors a position (CB 16) a warp's lanes 16-31 take column pairs 8-15, 8 words on,
  // which a group step of 8 words meets: groups 16 words apart then.
  constexpr int kGroupStep = FRAG >= 2 && CB / 8 == 2 ? 32 : 16;
  auto plane_offset = [](int c) { return c * kPlane + (c / 8) * kGroupStep; };
  // A kernel row's taps and a zero; FRAG: rows of 4 or 8 (one 8- or 16-byte broadcast load a row).
  constexpr bool kTapVec = FRAG && KW < 8;
  constexpr int kTapRow = kTapVec ? (KW < 4 ? 4 : 8) : KW + 1;
  constexpr int kThreads = WARPS * 32;
  constexpr int kVecs = CB / 8;               // 16-byte vectors of a position
  static_assert(kTileW % 2 == 0 && kCols % 8 == 0, "column pairs");
  constexpr int kOffsets = (NT - 1) * SW + 2 * (kSteps - 1) + 1;  // distinct source blocks, 8 columns apart
  using U16 = unsigned short;

  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  U16* const planes = reinterpret_cast<U16*>(dynamic_smem);  // [CB][kRows][PITCH], see plane_offset
  U16* const taps = planes + CB * kPlane + (CB / 8 - 1) * kGroupStep;  // [CB][KH][KW + 1], after the last plane
  const U16* src = static_cast<const U16*>(p.src);
  U16* dst = static_cast<U16*>(p.dst);
  const U16* wt = static_cast<const U16*>(p.weight);

  // Tiles: W fastest, then rows, images, channel tiles; 32-bit (the host keeps the count under 2^31).
  struct At {
    long long n, ch0, h0, w0;  // image, first channel, first output row and column
  };
  const unsigned w_tiles = static_cast<unsigned>((p.dst_w + kTileW - 1) / kTileW);
  const unsigned h_tiles = static_cast<unsigned>((p.dst_h + TR - 1) / TR);
  const unsigned batch = static_cast<unsigned>(p.batch);
  const unsigned tiles = w_tiles * h_tiles * batch * static_cast<unsigned>((p.channels + CB - 1) / CB);
  auto locate = [&](unsigned t) {
    At a;
    if (ORDER == 1) {  // channel tiles fastest: the blocks of one spatial tile run together
      const unsigned c_tiles = static_cast<unsigned>((p.channels + CB - 1) / CB);
      a.ch0 = (long long)(t % c_tiles) * CB;
      t /= c_tiles;
      const unsigned w_idx = t % w_tiles;
      t /= w_tiles;
      const unsigned h_idx = t % h_tiles;
      t /= h_tiles;
      a.n = t;
      a.h0 = (long long)h_idx * TR;
      a.w0 = (long long)w_idx * kTileW;
      return a;
    }
    const unsigned w_idx = t % w_tiles;
    t /= w_tiles;
    const unsigned h_idx = t % h_tiles;
    t /= h_tiles;
    a.n = t % batch;
    a.ch0 = (long long)(t / batch) * CB;
    a.h0 = (long long)h_idx * TR;
    a.w0 = (long long)w_idx * kTileW;
    return a;
  };

  // 1. Staging. An item is two adjacent source columns of one row x one 16-byte vector of 8 channels:
  // two loads, then one 32-bit store a channel holding both columns. Lanes take 8 column pairs x the
  // tile's vectors, so a warp's loads cover whole 32-byte sectors of 8 positions and its stores 8
  // consecutive words of each plane (plane groups are 32 bytes apart: no bank conflicts). Loads in
  // batches of kBatch items a thread, all issued before their stores.
  constexpr int kPairs = kRows * (kCols / 2);  // kCols is a multiple of 8
  constexpr int kItems = (kPairs + 7) / 8 * 8 * kVecs;
  constexpr int kBatch = BATCH;
  using Batch = Vec<unsigned, 4>[kBatch][2];  // [item][column]
  auto load = [&](const At& a, int b0, Batch& v) {
    const long long row0 = AH::base(a.h0), col0 = AT::base(a.w0);
    const U16* src_img = src + a.n * p.src_h * p.src_w * p.channels;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = b0 + u * kThreads;
      const int vec = (i / 8) % kVecs, pair = i / (8 * kVecs) * 8 + i % 8;
      const int r = pair / (kCols / 2), q0 = 2 * (pair - r * (kCols / 2));
      const long long row = row0 + r, ch = a.ch0 + 8 * vec;
      const bool in = i < kItems && pair < kPairs && row >= 0 && row < p.src_h && ch < p.channels;
#pragma unroll
      for (int d = 0; d < 2; ++d) {
        const long long col = col0 + q0 + d;
        v[u][d] = Vec<unsigned, 4>{{0u, 0u, 0u, 0u}};
        if (in && q0 + d < AT::kWindow && col >= 0 && col < p.src_w)
          v[u][d] = *reinterpret_cast<const Vec<unsigned, 4>*>(src_img + (row * p.src_w + col) * p.channels + ch);
      }
    }
  };
  unsigned nf = 0;  // NF: a 16-bit pair of x * 0 sums, NaN iff some x was Inf or NaN
  auto scatter = [&](int b0, const Batch& v, bool& bad) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = b0 + u * kThreads;
      const int vec = (i / 8) % kVecs, pair = i / (8 * kVecs) * 8 + i % 8;
      if (i >= kItems || pair >= kPairs) continue;
      const int r = pair / (kCols / 2), q0 = 2 * (pair - r * (kCols / 2));
      unsigned* at = reinterpret_cast<unsigned*>(planes + plane_offset(8 * vec) + r * PITCH + q0);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned x = v[u][0].v[k], y = v[u][1].v[k];  // channels 8 vec + 2k, 8 vec + 2k + 1
        if (NF) {
          if constexpr (KvtMma<T>::kBf16) {
            asm("fma.rn.bf16x2 %0, %1, %2, %0;" : "+r"(nf) : "r"(x), "r"(0u));
            asm("fma.rn.bf16x2 %0, %1, %2, %0;" : "+r"(nf) : "r"(y), "r"(0u));
          } else {
            asm("fma.rn.f16x2 %0, %1, %2, %0;" : "+r"(nf) : "r"(x), "r"(0u));
            asm("fma.rn.f16x2 %0, %1, %2, %0;" : "+r"(nf) : "r"(y), "r"(0u));
          }
        } else {
          bad |= kvt_nonfinite_pair<T>(x) | kvt_nonfinite_pair<T>(y);
        }
        at[(2 * k) * (kPlane / 2)] = __byte_perm(x, y, 0x5410);
        at[(2 * k + 1) * (kPlane / 2)] = __byte_perm(x, y, 0x7632);
      }
    }
  };
  // Columns past kCols up to PITCH are never read. The taps, and a zero after each kernel row.
  auto stage_taps = [&](const At& a, int tid, bool& bad) {
    for (int i = tid; i < CB * KH * kTapRow; i += kThreads) {
      const int c = i / (KH * kTapRow), k = i - c * (KH * kTapRow);
      const int kh = k / kTapRow, kw = k - kh * kTapRow;
      U16 value = 0;
      if (kw < KW && a.ch0 + c < p.channels) {
        value = wt[(a.ch0 + c) * (KH * KW) + kh * KW + kw];
        bad |= kvt_nonfinite_pair<T>(value);
      }
      taps[i] = value;
    }
  };

  // Inf or NaN in the tile: plain FMAs (every output's own window only), stored directly.
  auto direct = [&](const At& a, int tid) {
    const long long out_base = a.n * p.dst_h * p.dst_w * p.channels;
    for (int i = tid; i < CB * TR * kTileW; i += kThreads) {
      const int c = i / (TR * kTileW), pix = i - c * (TR * kTileW);
      const int r = pix / kTileW, col = pix - r * kTileW;
      if (a.ch0 + c >= p.channels || a.h0 + r >= p.dst_h || a.w0 + col >= p.dst_w) continue;
      float acc = HAS_BIAS ? kvt_to_float(static_cast<const T*>(p.bias)[a.ch0 + c]) : 0.f;
      for (int kh = 0; kh < KH; ++kh)
        for (int kw = 0; kw < KW; ++kw) {
          T x, f;
          x.bits = planes[plane_offset(c) + AH::offset(r, kh) * PITCH + AT::offset(col, kw)];
          f.bits = taps[c * (KH * kTapRow) + kh * kTapRow + kw];
          acc = fmaf(kvt_to_float(x), kvt_to_float(f), acc);
        }
      T y = kvt_from_float<T>(acc);
      dst[out_base + ((a.h0 + r) * p.dst_w + a.w0 + col) * p.channels + a.ch0 + c] = y.bits;
    }
  };

  auto compute = [&](const At& a, int tid) {
    // 2. MMAs. Lane (g = lane / 4, t = lane % 4) holds Toeplitz entries B[k][g] for k = 2t, 2t + 1 (first
    // register) and 2t + 8, 2t + 9 (second) of each step; their tap indices (KW: the zero slot) are fixed.
    const int lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    int tap_of[kSteps][4];
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = 16 * s + 2 * t + (e & 1) + 8 * (e >> 1);
        int tap = KW;
        // DIR 0: position = g * SW + j * DW; DIR 1 (stride 1): position = g + (KW - 1 - j) * DW.
        const int d = k - g * SW;
        if (d >= 0 && d % DW == 0 && d / DW < KW) tap = DIR == 0 ? d / DW : KW - 1 - d / DW;
        tap_of[s][e] = tap;
      }
    // FRAG: byte selectors building a lane's Toeplitz pair from a row of taps in registers. Rows of 4:
    // one prmt of (r0, r1). Rows of 8: the same selector on (r0, r1) and (r2, r3), then sel_hi picks
    // each half from the first (tap < 4) or the second.
    unsigned sel[kSteps][2], sel_hi[kSteps][2];
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j0 = tap_of[s][2 * h], j1 = tap_of[s][2 * h + 1];
        const unsigned b0 = 2 * (j0 % 4), b1 = 2 * (j1 % 4);
        sel[s][h] = b0 | (b0 + 1) << 4 | b1 << 8 | (b1 + 1) << 12;
        sel_hi[s][h] = (j0 < 4 ? 0x10u : 0x54u) | (j1 < 4 ? 0x3200u : 0x7600u);
      }
    // ldmatrix.x4: lane l gives the address of segment l % 16's row, columns (l / 16) * 8 on.
    const int seg = lane % 16;
    const unsigned lane_base = kvt_smem_address(planes) +
                               2u * static_cast<unsigned>((seg % TR) * SH * PITCH + (seg / TR) * kRunW * SW + (lane / 16) * 8);
    for (int c = warp; c < CB; c += WARPS) {
      if (a.ch0 + c >= p.channels) break;  // warps take channels in order: the rest are past C too
      float acc[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
      const U16* ctaps = taps + c * (KH * kTapRow);
      const unsigned plane_base = lane_base + 2u * static_cast<unsigned>(plane_offset(c));
      auto kernel_row = [&](int kh) {
        unsigned b[kSteps][2];
        const U16* row_taps = ctaps + kh * kTapRow;
        if constexpr (kTapVec && kTapRow == 4) {
          const Vec<unsigned, 2> r = *reinterpret_cast<const Vec<unsigned, 2>*>(row_taps);
#pragma unroll
          for (int s = 0; s < kSteps; ++s)
#pragma unroll
            for (int h = 0; h < 2; ++h) b[s][h] = __byte_perm(r.v[0], r.v[1], sel[s][h]);
        } else if constexpr (kTapVec) {
          const Vec<unsigned, 4> r = *reinterpret_cast<const Vec<unsigned, 4>*>(row_taps);
#pragma unroll
          for (int s = 0; s < kSteps; ++s)
#pragma unroll
            for (int h = 0; h < 2; ++h)
              b[s][h] = __byte_perm(__byte_perm(r.v[0], r.v[1], sel[s][h]), __byte_perm(r.v[2], r.v[3], sel[s][h]), sel_hi[s][h]);
        } else {
#pragma unroll
          for (int s = 0; s < kSteps; ++s) {
            b[s][0] = unsigned(row_taps[tap_of[s][0]]) | (unsigned(row_taps[tap_of[s][1]]) << 16);
            b[s][1] = unsigned(row_taps[tap_of[s][2]]) | (unsigned(row_taps[tap_of[s][3]]) << 16);
          }
        }
        const unsigned row_address = plane_base + 2u * static_cast<unsigned>(AH::offset(0, kh) * PITCH);
        if constexpr (FRAG) {
          // 8-column blocks: n-tile t, step s reads blocks t * SW + 2s and the next. Each block's two 8x8
          // matrices (segments 0-7, 8-15) loaded once: ldmatrix.x4 for blocks j, j + 1 (j even), x2 last.
          constexpr int kBlocks = kOffsets + 1;
          unsigned x[kBlocks + 1][2];
#pragma unroll
          for (int j = 0; j < kBlocks; j += 2) {
            if (j + 1 < kBlocks) {
              unsigned q[4];
              kvt_ldmatrix_x4(q, row_address + 16u * j);
              x[j][0] = q[0], x[j][1] = q[1], x[j + 1][0] = q[2], x[j + 1][1] = q[3];
            } else {
              asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                           : "=r"(x[j][0]), "=r"(x[j][1])
                           : "r"(row_address + 16u * j));
            }
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int s = 0; s < kSteps; ++s) {
              const int j = nt * SW + 2 * s;
              const unsigned a4[4] = {x[j][0], x[j][1], x[j + 1][0], x[j + 1][1]};
              KvtMma<T>::run(acc[nt], a4, b[s]);
            }
          return;
        }
#pragma unroll
        for (int o = 0; o < kOffsets; ++o) {
          bool used = false;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int s = 0; s < kSteps; ++s) used |= nt * SW + 2 * s == o;
          if (!used) continue;
          unsigned x[4];
          kvt_ldmatrix_x4(x, row_address + 16u * o);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int s = 0; s < kSteps; ++s)
              if (nt * SW + 2 * s == o) KvtMma<T>::run(acc[nt], x, b[s]);
        }
      };
      if constexpr (KH <= 8) {
#pragma unroll
        for (int kh = 0; kh < KH; ++kh) kernel_row(kh);
      } else {
        // Two kernel rows an iteration: the second row's tap loads issue before the first row's MMAs.
#pragma unroll 2
        for (int kh = 0; kh < KH; ++kh) kernel_row(kh);
      }
      // The channel's outputs over its own plane (only this warp reads it): accumulator e of n-tile nt
      // is segment g + 8 * (e / 2), output 8 * nt + 2 * t + e % 2.
      const float bias = HAS_BIAS ? kvt_to_float(static_cast<const T*>(p.bias)[a.ch0 + c]) : 0.f;
      __syncwarp();
      U16* const out_plane = planes + plane_offset(c);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int sg = g + 8 * half;
        U16* const row = out_plane + (sg % TR) * PITCH + (sg / TR) * kRunW + 2 * t;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          *reinterpret_cast<unsigned*>(row + 8 * nt) = KvtMma<T>::pack(acc[nt][2 * half] + bias, acc[nt][2 * half + 1] + bias);
      }
    }
  };

  // 3. Store. An item is two adjacent output columns of one row x one vector of 8 channels, lanes as in
  // staging: one 32-bit read a channel (both columns), then two 16-byte stores.
  auto store = [&](const At& a, int tid) {
    const long long out_base = a.n * p.dst_h * p.dst_w * p.channels;
    constexpr int kOutPairs = TR * (kTileW / 2);
    for (int i = tid; i < (kOutPairs + 7) / 8 * 8 * kVecs; i += kThreads) {
      const int vec = (i / 8) % kVecs, pair = i / (8 * kVecs) * 8 + i % 8;
      if (pair >= kOutPairs) continue;
      const int r = pair / (kTileW / 2), c0 = 2 * (pair - r * (kTileW / 2));
      const long long h = a.h0 + r, w = a.w0 + c0;
      if (h >= p.dst_h || w >= p.dst_w || a.ch0 + 8 * vec >= p.channels) continue;
      const unsigned* from = reinterpret_cast<const unsigned*>(planes + plane_offset(8 * vec) + r * PITCH + c0);
      Vec<unsigned, 4> first, second;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned x = from[(2 * k) * (kPlane / 2)], y = from[(2 * k + 1) * (kPlane / 2)];
        first.v[k] = __byte_perm(x, y, 0x5410);
        second.v[k] = __byte_perm(x, y, 0x7632);
      }
      U16* const out = dst + out_base + (h * p.dst_w + w) * p.channels + a.ch0 + 8 * vec;
      kvt_store_global16(out, first);
      if (w + 1 < p.dst_w) kvt_store_global16(out + p.channels, second);
    }
  };

  // One tile a block. (Taking several in turn, with the next tile's loads issued before this tile's
  // stores, was tried: the addresses that depend only on the thread index were hoisted out of the
  // tile loop, 186-255 registers a thread against 119, and it was not built further.)
  const unsigned tile = blockIdx.x;
  if (tile >= tiles) return;
  const int tid = threadIdx.x;
  const At a = locate(tile);
  bool bad = false;
  Batch v;
  if (TAPS_EARLY) {
    // The taps' loads issued before the tile's, stored after it.
    constexpr int kTapItems = (CB * KH * kTapRow + kThreads - 1) / kThreads;
    U16 tv[kTapItems];
#pragma unroll
    for (int u = 0; u < kTapItems; ++u) {
      const int i = tid + u * kThreads;
      const int c = i / (KH * kTapRow), k = i - c * (KH * kTapRow);
      const int kh = k / kTapRow, kw = k - kh * kTapRow;
      tv[u] = 0;
      if (i < CB * KH * kTapRow && kw < KW && a.ch0 + c < p.channels) tv[u] = wt[(a.ch0 + c) * (KH * KW) + kh * KW + kw];
    }
    for (int b0 = tid; b0 < kItems; b0 += kBatch * kThreads) {
      load(a, b0, v);
      scatter(b0, v, bad);
    }
#pragma unroll
    for (int u = 0; u < kTapItems; ++u) {
      const int i = tid + u * kThreads;
      if (i < CB * KH * kTapRow) {
        bad |= kvt_nonfinite_pair<T>(tv[u]);
        taps[i] = tv[u];
      }
    }
  } else {
    for (int b0 = tid; b0 < kItems; b0 += kBatch * kThreads) {
      load(a, b0, v);
      scatter(b0, v, bad);
    }
    stage_taps(a, tid, bad);
  }
  if (NF) bad |= (nf & 0x7fff7fffu) != 0;
  if (__syncthreads_or(bad)) {
    direct(a, tid);
    return;
  }
  compute(a, tid);
  __syncthreads();
  store(a, tid);
}
