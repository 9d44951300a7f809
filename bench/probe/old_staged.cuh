// The weight-gradient kernels of a previous commit, renamed, for A/B runs in dwconv_probe.cu
// (edit per experiment). Current: a51f42f's kernels (dy loads written out in each kernel), against
// dwconv.cu's shared kvt_load_or_zero.
#pragma once

template <class T, int LAYOUT, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int CT, int PY, int TG,
          int ATOMIC, int BIAS, int RW, int RH, int VC, int PIPE>
__global__ void __launch_bounds__(CT * PY) kvt_before_wgrad(const KvtDwConvParams p) {
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
              // Zeros on the other branch, not a select after the load: the select made the compiler
              // load every vector into the same registers, one at a time (H100, staged NCHW f32 7x7:
              // 61.5 against 52.3 us; bench/NOTES.md, 2026-11-26 morning).
              V v;
              if (in) v = *reinterpret_cast<const V*>(g_row + w0 + r);
              else
#pragma unroll
                for (int u = 0; u < VC; ++u) v.v[u] = kvt_from_float<T>(0.f);
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
        // bench/results/2026-11-26-wgrad-addresses).
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
#pragma unroll
            for (int rr = 0; rr < RH; ++rr)
#pragma unroll
              for (int kh = 0; kh < (kAllTaps ? KH : 1); ++kh) {
                if (kAllTaps && AH::offset(rr, kh) != i) continue;
                if (!decltype(whole)::value && rr >= rows) continue;
#pragma unroll
                for (int kw = 0; kw < KW; ++kw)
#pragma unroll
                  for (int r = 0; r < RW; ++r)
                    if (decltype(whole)::value || r < valid) acc[kh * KW + kw] += g[rr][r] * win[AW::offset(r, kw)];
              }
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
// stalls at 19 % occupancy). Splits take whole images. A buffer, as dwconv_family.cpp's wgrad_plane()
// mirrors it: x rows from -PH x columns from -(PW + kLead) (VC-aligned), zeros outside the image.
// (Staging dy too was no faster and costs 80 % more shared memory: bench/NOTES.md, 2026-11-26 morning.)
template <class T, int KH, int KW, int SH, int SW, int DH, int DW, int PH, int PW, int PY, int ATOMIC, int BIAS, int RW,
          int RH, int VC>
__global__ void __launch_bounds__(PY) kvt_old_staged(const KvtDwConvParams p) {
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
          // The host guarantees VC | dst_w: a vector is wholly inside the row or past it. Zeros on the
          // other branch (as kvt_dwconv_wgrad): each vector keeps its own registers, all in flight.
          const bool in = rr < rows && w0 + r < p.dst_w;
          V v;
          if (in) v = *reinterpret_cast<const V*>(g_row + w0 + r);
          else
#pragma unroll
            for (int u = 0; u < VC; ++u) v.v[u] = kvt_from_float<T>(0.f);
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
#pragma unroll
          for (int rr = 0; rr < RH; ++rr)
#pragma unroll
            for (int kh = 0; kh < KH; ++kh) {
              if (AH::offset(rr, kh) != i) continue;
              if (!decltype(whole)::value && rr >= rows) continue;
#pragma unroll
              for (int kw = 0; kw < KW; ++kw)
#pragma unroll
                for (int r = 0; r < RW; ++r)
                  if (decltype(whole)::value || r < valid) acc[kh * KW + kw] += g[rr][r] * win[AW::offset(r, kw)];
            }
        }
      };
      if (valid == RW && rows == RH) taps(kvt_bool<true>{});
      else taps(kvt_bool<false>{});
    }
    __syncthreads();  // every thread is done with buffer b before the next image's copies reuse it
  }
  kvt_wgrad_finish<T, kTaps, 1, PY, kTaps, ATOMIC, BIAS>(p, acc, c, 0, split);
}

