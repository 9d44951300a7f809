// kvtune depthwise convolution on tensor cores (16-bit types), included by dwconv.cu after Axis.
//
//   kvt_dwconv_mma   forward (any stride and dilation) and backward_data (stride 1), channel-last
//                    (NHWC / NLC), f16 / bf16 with f32 accumulation.
//
// A depthwise convolution has no operand shared between channels, so it is no GEMM; but along one row
// of one channel it is a product with a banded (Toeplitz) matrix. For 8 consecutive outputs of a row
// and one kernel row kh:
//     y[n] += sum_k a[k] * B_kh[k][n],   B_kh[k][n] = w[kh][j] where window position k = offset(n, j)
// with a[] 16 consecutive source values (KSTEPS blocks of 16 when the 8 outputs' window is wider).
// One mma.m16n8k16 computes that for 16 "segments" at once (the M rows): 16 runs of outputs of the
// same channel, each with its own source row in shared memory. So the taps' FMAs run on the tensor
// cores; of each MMA's 2048 products 8 x KW x 16 / (16 x KSTEPS) are useful (7 taps: 44 %; 31 taps in
// 3 steps: 65 %). bf16 x bf16 and f16 x f16 products are exact in f32, and accumulation is in f32.
//
// A block takes a tile of CB channels x TR output rows x (16 / TR) x 8 * NT output columns of one image:
// its 16 segments are TR rows x 16 / TR runs of 8 * NT outputs (1D: TR = 1, 16 runs of one row).
//   1. Staging: every source element the tile reads, 16-byte loads along the channels, two columns
//      of 8 channels a thread, transposed into one plane per channel, [CB][rows][PITCH] (PITCH = 8 mod
//      16 elements, from the host, so that ldmatrix rows and the output writes meet no bank
//      conflicts), a 32-bit store per channel and column pair; zeros outside the image, past the last
//      channel and past the window. The taps as [CB][KH][kTapRow] (slots KW on zero); for kernels
//      of up to 7 taps a row their loads are issued before the tile's.
//   2. Each warp takes channels warp, warp + WARPS, ...: for each kernel row, the Toeplitz fragments
//      of its taps (a lane's four entries per step are fixed: up to 7 taps a row, one broadcast load
//      of the row and byte permutes; else a load per entry), then each 8-column source block the row's
//      MMAs read, once (ldmatrix.x4 for two blocks: n-tile t step s reads blocks t * SW + 2s and the
//      next, so adjacent n-tiles share one), and the MMAs of every n-tile and step.
//      The results, plus bias, overwrite the channel's own plane as 16-bit values.
//   3. The block stores the tile: two columns of 8 channels a thread, 32-bit reads from the planes
//      transposed back to 16-byte stores along the channels.
// Blocks take tiles channel tiles fastest, so that the blocks reading one position's channels (and the
// halo rows two tiles share) run at the same time and meet in L2.
// Non-finite values: in an MMA every source value of the 16 meets every output of the 8 (most of them
// times a zero entry), so an Inf or NaN would spread to outputs whose window does not hold it. A tile
// whose source or taps hold one is computed instead by plain FMAs from the same shared planes, so
// results are those of the direct convolution for every input. Staging finds them with one packed FMA
// a word: the sum of x * 0 over the tile is NaN exactly when some x is Inf or NaN.
#pragma once

// The 16-bit element types' MMA (f32 accumulation), f32 -> 16-bit pair conversion, and exponent mask.
template <class T> struct KvtIsBf16 {
  static constexpr bool value = false;
};
template <> struct KvtIsBf16<kvt_bf16> {
  static constexpr bool value = true;
};
template <class T> struct KvtMma {
  static constexpr bool kBf16 = KvtIsBf16<T>::value;
  static constexpr unsigned kExponent = kBf16 ? 0x7f80u : 0x7c00u;  // an all-ones exponent: Inf or NaN
  __device__ __forceinline__ static void run(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    if constexpr (kBf16)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  // Two values as one 16-bit pair, `lo` in the low half.
  __device__ __forceinline__ static unsigned pack(float lo, float hi) {
    unsigned r;
    if constexpr (kBf16) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
};

__device__ __forceinline__ void kvt_ldmatrix_x4(unsigned (&a)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(address));
}
__device__ __forceinline__ void kvt_ldmatrix_x2(unsigned (&a)[2], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(a[0]), "=r"(a[1]) : "r"(address));
}

// 16 bytes to global memory as one access (a Vec filled field by field was stored as four 32-bit
// stores, each writing a quarter of a sector: 56 % of the sectors excess, Nsight Compute, H100).
__device__ __forceinline__ void kvt_store_global16(void* at, const Vec<unsigned, 4>& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(v.v[0]), "r"(v.v[1]), "r"(v.v[2]), "r"(v.v[3])
               : "memory");
}

// Whether either 16-bit half of `w` is Inf or NaN.
template <class T> __device__ __forceinline__ bool kvt_nonfinite_pair(unsigned w) {
  constexpr unsigned e = KvtMma<T>::kExponent;
  return (w & e) == e || ((w >> 16) & e) == e;
}

// acc += w * 0 on a 16-bit pair: acc stays +-0 while every w is finite and is NaN from the first Inf
// or NaN on (one instruction against five for kvt_nonfinite_pair).
template <class T> __device__ __forceinline__ void kvt_accumulate_nonfinite(unsigned& acc, unsigned w) {
  if constexpr (KvtMma<T>::kBf16) asm("fma.rn.bf16x2 %0, %1, %2, %0;" : "+r"(acc) : "r"(w), "r"(0u));
  else asm("fma.rn.f16x2 %0, %1, %2, %0;" : "+r"(acc) : "r"(w), "r"(0u));
}

// 8-warp tiles: registers for 3 blocks an SM (24 warps, 85 registers a thread at most) and load batches
// of 4 to fit them (H100 probe, bench/NOTES.md: NHWC bf16 7x7 37.9 -> 35.7 us, 3x3 40.3 -> 35.9, 31x31
// 111.0 -> 107.5; under the same cap with batches of 8, 7x7 lost 11 %; 4-warp tiles with batches of 4:
// 7x7 1-7 % slower, 3x3 11 % faster, which the FMA tiles beat on that problem either way).
template <class T, int LAYOUT, int DIR, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int CB, int TR,
          int NT, int WARPS, int PITCH, int HAS_BIAS, int EPI = 0, int C = 0, int SRC_H = 0, int SRC_W = 0, int DST_H = 0,
          int DST_W = 0>
__global__ void __launch_bounds__(WARPS * 32, WARPS == 8 ? 3 : 1) kvt_dwconv_mma(const KvtDwConvParams args) {
  // C .. DST_W: the problem's shape as constants (kvt_shape_fits)
  if (!kvt_shape_fits<C, SRC_H, SRC_W, DST_H, DST_W>(args)) return;
  const KvtDwConvParams p = kvt_with_shape<C, SRC_H, SRC_W, DST_H, DST_W>(args);
  // The activation is applied to the f32 results before they are rounded into the planes. Gradient prep
  // is not built here: it reads dy at each accumulator's position, which the fragment layout scatters
  // over 64 positions a warp (one 2-byte load each); the FMA kernels read dy as vectors.
  static_assert(EPI == 0 || (DIR == 0 && !kvt_grad_prep(EPI)), "tensor-core tiles: forward activations only");
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
  constexpr int kThreads = WARPS * 32;
  constexpr int kVecs = CB / 8;               // 16-byte vectors of a position
  // Channel c's plane; each group of 8 planes kGroupStep elements further than the last, so that the
  // 4 runs of 8 consecutive words a warp's staging stores and output reads touch fall in distinct banks:
  // vectors 0-3 of column pairs 0-7 (groups 8 words apart), or with 2 vectors, vectors 0-1 of pairs
  // 0-7 and 8-15 (pairs 8-15 are 8 words on, so groups 16 words apart). Groups 4 apart share banks,
  // but no warp instruction spans them. Monotone in c: planes never overlap.
  constexpr int kGroupStep = kVecs == 2 ? 32 : 16;
  auto plane_offset = [](int c) { return c * kPlane + (c / 8) * kGroupStep; };
  // A kernel row's taps and zeros after them: rows of 4 or 8 (8 or 16 bytes, one broadcast load) up
  // to 7 taps, else KW + 1.
  constexpr bool kTapVector = KW < 8;
  constexpr int kTapRow = KW < 4 ? 4 : KW < 8 ? 8 : KW + 1;
  static_assert(kTileW % 2 == 0 && kCols % 8 == 0, "column pairs");
  constexpr int kBlocks = (NT - 1) * SW + 2 * (kSteps - 1) + 2;  // 8-column source blocks a kernel row reads
  using U16 = unsigned short;

  KVT_DYNAMIC_SMEM(dynamic_smem);
  U16* const planes = reinterpret_cast<U16*>(dynamic_smem);  // [CB][kRows][PITCH], see plane_offset
  U16* const taps = planes + CB * kPlane + (CB / 8 - 1) * kGroupStep;  // [CB][KH][kTapRow], after the planes
  const U16* src = static_cast<const U16*>(p.src);
  U16* dst = static_cast<U16*>(p.dst);
  const U16* wt = static_cast<const U16*>(p.weight);

  // Tiles: channel tiles fastest, then W, rows, images; 32-bit (the host keeps the count under 2^31).
  struct At {
    long long n, ch0, h0, w0;  // image, first channel, first output row and column
  };
  const unsigned w_tiles = static_cast<unsigned>((p.dst_w + kTileW - 1) / kTileW);
  const unsigned h_tiles = static_cast<unsigned>((p.dst_h + TR - 1) / TR);
  const unsigned batch = static_cast<unsigned>(p.batch);
  const unsigned c_tiles = static_cast<unsigned>((p.channels + CB - 1) / CB);
  const unsigned tiles = w_tiles * h_tiles * batch * c_tiles;
  auto locate = [&](unsigned t) {
    At a;
    a.ch0 = (long long)(t % c_tiles) * CB;
    t /= c_tiles;
    const unsigned w_idx = t % w_tiles;
    t /= w_tiles;
    a.h0 = (long long)(t % h_tiles) * TR;
    a.n = t / h_tiles;
    a.w0 = (long long)w_idx * kTileW;
    return a;
  };

  // 1. Staging. An item is two adjacent source columns of one row x one 16-byte vector of 8 channels:
  // two loads, then one 32-bit store a channel holding both columns. Lanes take 8 column pairs x the
  // tile's vectors, so a warp's loads cover whole 32-byte sectors of 8 positions and its stores 8
  // consecutive words of each plane (plane groups are 32 bytes apart: no bank conflicts). Loads in
  // batches of kBatch items a thread, all issued before their stores. Rows and columns in 32 bits (the
  // host keeps them under 2^30), one 64-bit offset a load.
  constexpr int kPairs = kRows * (kCols / 2);  // kCols is a multiple of 8
  constexpr int kItems = (kPairs + 7) / 8 * 8 * kVecs;
  constexpr int kBatch = WARPS == 8 ? 4 : 8;
  using Batch = Vec<unsigned, 4>[kBatch][2];  // [item][column]
  auto load = [&](const At& a, unsigned b0, Batch& v) {
    const int row0 = static_cast<int>(AH::base(a.h0)), col0 = static_cast<int>(AT::base(a.w0));
    const unsigned src_h = static_cast<unsigned>(p.src_h), src_w = static_cast<unsigned>(p.src_w);
    const U16* src_tile = src + a.n * p.src_h * p.src_w * p.channels + a.ch0;
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const unsigned i = b0 + u * kThreads;
      const unsigned vec = (i / 8) % kVecs, pair = i / (8 * kVecs) * 8 + i % 8;
      const unsigned r = pair / (kCols / 2), q0 = 2 * (pair - r * (kCols / 2));
      const int row = row0 + static_cast<int>(r);
      const bool in = i < kItems && pair < kPairs && static_cast<unsigned>(row) < src_h && a.ch0 + 8 * vec < p.channels;
#pragma unroll
      for (int d = 0; d < 2; ++d) {
        const int col = col0 + static_cast<int>(q0) + d;
        v[u][d] = Vec<unsigned, 4>{{0u, 0u, 0u, 0u}};
        if (in && q0 + d < AT::kWindow && static_cast<unsigned>(col) < src_w)
          v[u][d] = *reinterpret_cast<const Vec<unsigned, 4>*>(src_tile + (static_cast<long long>(row) * p.src_w + col) * p.channels + 8 * vec);
      }
    }
  };
  unsigned nonfinite = 0;  // see kvt_accumulate_nonfinite
  auto scatter = [&](unsigned b0, const Batch& v) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const unsigned i = b0 + u * kThreads;
      const unsigned vec = (i / 8) % kVecs, pair = i / (8 * kVecs) * 8 + i % 8;
      if (i >= kItems || pair >= kPairs) continue;
      const unsigned r = pair / (kCols / 2), q0 = 2 * (pair - r * (kCols / 2));
      unsigned* at = reinterpret_cast<unsigned*>(planes + plane_offset(8 * vec) + r * PITCH + q0);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned x = v[u][0].v[k], y = v[u][1].v[k];  // channels 8 vec + 2k, 8 vec + 2k + 1
        kvt_accumulate_nonfinite<T>(nonfinite, x);
        kvt_accumulate_nonfinite<T>(nonfinite, y);
        at[(2 * k) * (kPlane / 2)] = __byte_perm(x, y, 0x5410);
        at[(2 * k + 1) * (kPlane / 2)] = __byte_perm(x, y, 0x7632);
      }
    }
  };
  // Columns past kCols up to PITCH are never read. The taps, zeros after each kernel row's: up to 8 a
  // thread are loaded into registers before the tile's loads (their latency overlaps) and stored after;
  // more (kernels over 7 taps a row), after the tile, 8 loads a thread in flight at a time.
  constexpr int kTapCount = CB * KH * kTapRow;
  constexpr int kTapItems = (kTapCount + kThreads - 1) / kThreads;
  constexpr bool kTapsEarly = kTapItems <= 8;
  auto tap_value = [&](const At& a, int i) -> U16 {
    const int c = i / (KH * kTapRow), k = i - c * (KH * kTapRow);
    const int kh = k / kTapRow, kw = k - kh * kTapRow;
    return kw < KW && a.ch0 + c < p.channels ? wt[(a.ch0 + c) * (KH * KW) + kh * KW + kw] : U16(0);
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
      T y = kvt_from_float<T>(kvt_act_value<EPI>(acc));
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
    // Rows of up to 7 taps: the byte permutes that build a lane's pairs from the row in registers. Rows
    // of 4: one of (r0, r1). Rows of 8: `sel` on (r0, r1) and on (r2, r3), then `pick` takes each half
    // from the first (tap < 4) or the second.
    unsigned sel[kSteps][2], pick[kSteps][2];
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j0 = tap_of[s][2 * h], j1 = tap_of[s][2 * h + 1];
        const unsigned b0 = 2 * (j0 % 4), b1 = 2 * (j1 % 4);
        sel[s][h] = b0 | (b0 + 1) << 4 | b1 << 8 | (b1 + 1) << 12;
        pick[s][h] = (j0 < 4 ? 0x10u : 0x54u) | (j1 < 4 ? 0x3200u : 0x7600u);
      }
    // ldmatrix: lane l gives the address of segment l % 16's row, columns (l / 16) * 8 on (x4: two
    // 8-column blocks; x2: lanes 0-15, one).
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
        if constexpr (kTapVector && kTapRow == 4) {
          const Vec<unsigned, 2> r = *reinterpret_cast<const Vec<unsigned, 2>*>(row_taps);
#pragma unroll
          for (int s = 0; s < kSteps; ++s)
#pragma unroll
            for (int h = 0; h < 2; ++h) b[s][h] = __byte_perm(r.v[0], r.v[1], sel[s][h]);
        } else if constexpr (kTapVector) {
          const Vec<unsigned, 4> r = *reinterpret_cast<const Vec<unsigned, 4>*>(row_taps);
#pragma unroll
          for (int s = 0; s < kSteps; ++s)
#pragma unroll
            for (int h = 0; h < 2; ++h)
              b[s][h] = __byte_perm(__byte_perm(r.v[0], r.v[1], sel[s][h]), __byte_perm(r.v[2], r.v[3], sel[s][h]), pick[s][h]);
        } else {
#pragma unroll
          for (int s = 0; s < kSteps; ++s) {
            b[s][0] = unsigned(row_taps[tap_of[s][0]]) | (unsigned(row_taps[tap_of[s][1]]) << 16);
            b[s][1] = unsigned(row_taps[tap_of[s][2]]) | (unsigned(row_taps[tap_of[s][3]]) << 16);
          }
        }
        // 8-column blocks j, j + 1 (j even) by ldmatrix.x4, a last odd one by x2; each block's two 8x8
        // matrices are segments 0-7 and 8-15. (With a stride of 3 or more, some blocks go unused.)
        const unsigned row_address = plane_base + 2u * static_cast<unsigned>(AH::offset(0, kh) * PITCH);
        unsigned x[kBlocks][2];
#pragma unroll
        for (int j = 0; j < kBlocks; j += 2) {
          if (j + 1 < kBlocks) {
            unsigned q[4];
            kvt_ldmatrix_x4(q, row_address + 16u * j);
            x[j][0] = q[0], x[j][1] = q[1], x[j + 1][0] = q[2], x[j + 1][1] = q[3];
          } else {
            kvt_ldmatrix_x2(x[j], row_address + 16u * j);
          }
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int s = 0; s < kSteps; ++s) {
            const int j = nt * SW + 2 * s;
            const unsigned fragment[4] = {x[j][0], x[j][1], x[j + 1][0], x[j + 1][1]};
            KvtMma<T>::run(acc[nt], fragment, b[s]);
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
          *reinterpret_cast<unsigned*>(row + 8 * nt) =
              KvtMma<T>::pack(kvt_act_value<EPI>(acc[nt][2 * half] + bias), kvt_act_value<EPI>(acc[nt][2 * half + 1] + bias));
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
  U16 early[kTapsEarly ? kTapItems : 1];
  if constexpr (kTapsEarly) {
#pragma unroll
    for (int u = 0; u < kTapItems; ++u) early[u] = tid + u * kThreads < kTapCount ? tap_value(a, tid + u * kThreads) : U16(0);
  }
  Batch v;
  for (unsigned b0 = tid; b0 < kItems; b0 += kBatch * kThreads) {
    load(a, b0, v);
    scatter(b0, v);
  }
  bool bad = (nonfinite & 0x7fff7fffu) != 0;
  if constexpr (kTapsEarly) {
#pragma unroll
    for (int u = 0; u < kTapItems; ++u)
      if (tid + u * kThreads < kTapCount) {
        bad |= kvt_nonfinite_pair<T>(early[u]);
        taps[tid + u * kThreads] = early[u];
      }
  } else {
    for (int i0 = tid; i0 < kTapCount; i0 += 8 * kThreads) {
      U16 values[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) values[u] = i0 + u * kThreads < kTapCount ? tap_value(a, i0 + u * kThreads) : U16(0);
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (i0 + u * kThreads < kTapCount) {
          bad |= kvt_nonfinite_pair<T>(values[u]);
          taps[i0 + u * kThreads] = values[u];
        }
    }
  }
  if (__syncthreads_or(bad)) {
    direct(a, tid);
    return;
  }
  compute(a, tid);
  __syncthreads();
  store(a, tid);
}
