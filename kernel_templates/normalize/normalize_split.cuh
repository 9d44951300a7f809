// kvtune normalize family, split rows: a row too wide for one block (or too few rows to fill the
// GPU) is cut into p.splits slices of ITEMS * TPR * VW elements, one block each, and processed in
// phases launched one after another, so no block ever waits for another and every sum runs in a
// fixed order (deterministic, no atomics).
//   kvt_normalize_split<PHASE>     one kernel per phase (the first template argument), each with
//                                  its own registers: compiled as one kernel, every phase had the
//                                  heaviest one's (bf16 x 256 threads x 4 vectors: 90; now 86 for
//                                  phase 0, 59 for phase 2; bench/NOTES.md, 2026-11-29)
//                                  0: each warp's part of a slice: statistics relative to the row's
//                                     first element (two-pass over the warp's vectors in registers,
//                                     reduced by shuffles alone: mean, centred M2; rmsnorm: sum of
//                                     squares), that element (the shift: in place, phase 2 must not
//                                     read it from y) and the warp's column count, into
//                                     p.row_partials[row][split][warp]. No block barrier: a warp
//                                     that has reduced starts its next loads while others reduce.
//                                  1: one block per row merges the partials (Chan, float64, fixed
//                                     order) and writes the row's mean (relative to the shift),
//                                     scale and shift as floats into p.row_final[row]
//                                  2: each slice reads its row's three floats (every slice bitwise
//                                     the same mean and scale), re-reads its slice of x and writes
//                                     y (and mean / rstd); x and y with the evict-first hint, so
//                                     that gamma / beta stay in L2. With a row loop (LOOP), a block
//                                     takes one slice of p.row_loop rows, gamma / beta loaded once.
//   kvt_normalize_backward_split   0, 1: the statistics as above (recompute only)
//                                  2, 3: each slice's sums of g, g * xhat and (saved mean) x - mean,
//                                     then (p.direct == 0) merged per row
//                                  4: dx, each block a group of p.row_loop rows of one slice;
//                                     dgamma / dbeta summed over the group in registers
//                                  5: (more than one group) dgamma / dbeta: the groups' partial rows
//                                     summed in group order per column
//   kvt_normalize_split_coop       one pass, one cooperative launch of co-resident blocks (config
//                                     `coop`): each block keeps its slice in registers, writes the
//                                     slice's statistics as phase 0 does, waits at a grid-wide
//                                     barrier for the row's other slices, merges all of them in a
//                                     fixed order and writes y as phase 2 does, so x is read once.
//   kvt_normalize_split_cluster    one pass, a thread-block cluster a row (sm_90; config `cluster`,
//                                     at most 8 slices): as the cooperative kernel, but the wait is
//                                     the cluster's hardware barrier, among the row's own blocks,
//                                     and clusters run rows independently (no grid-wide rounds).
// Template arguments as normalize.cu's (the block is TPR threads, one slice; ITEMS vectors each).
// The phased kernel reads x twice (phases 0 and 2): from L2 when the rows in flight fit there, else
// from DRAM.

// Float64 merge state: Chan's (count, mean, M2) for statistics, plain sums otherwise.
struct KvtMerge {
  double n, a, b, c;
};

template <bool CHAN>
__device__ __forceinline__ void kvt_merge(KvtMerge& l, const KvtMerge& r) {
  if constexpr (CHAN) {
    const double total = l.n + r.n;
    if (r.n > 0.0) {
      const double delta = r.a - l.a;
      const double wr = r.n / total;
      l.a += delta * wr;
      l.b += r.b + delta * delta * l.n * wr;
      l.n = total;
    }
  } else {
    l.n += r.n;
    l.a += r.a;
    l.b += r.b;
    l.c += r.c;
  }
}

// Partial i of a row (K floats each; slices of `slice` elements, the last one shorter). Loaded past
// L1 (ld.cg): the cooperative kernel reads partials that other blocks wrote during the same launch.
// K == 4 (the phased forward's per-warp partials) carries its own element count as its fourth float.
// Loaded as floats (kvt_partial_load) and widened when merged (kvt_partial_value), so that a batch of
// loads in flight holds half the registers.
struct KvtPartialRaw {
  float a, b, c, n;
};

template <int K>
__device__ __forceinline__ KvtPartialRaw kvt_partial_load(const float* src, long long i) {
  return {__ldcg(src + i * K), K > 1 ? __ldcg(src + i * K + 1) : 0.f, K > 2 ? __ldcg(src + i * K + 2) : 0.f,
          K == 4 ? __ldcg(src + i * K + 3) : 0.f};
}

template <int K>
__device__ __forceinline__ KvtMerge kvt_partial_value(const KvtPartialRaw& r, long long i, long long slice,
                                                      long long cols) {
  const long long left = cols - i * slice;
  return {K == 4 ? (double)r.n : (double)(left < slice ? left : slice), (double)r.a, (double)r.b, (double)r.c};
}

template <int K>
__device__ __forceinline__ KvtMerge kvt_partial(const float* src, long long i, long long slice, long long cols) {
  return kvt_partial_value<K>(kvt_partial_load<K>(src, i), i, slice, cols);
}

__device__ __forceinline__ KvtMerge kvt_shfl_down(const KvtMerge& m, int o) {
  return {__shfl_down_sync(0xffffffffu, m.n, o), __shfl_down_sync(0xffffffffu, m.a, o),
          __shfl_down_sync(0xffffffffu, m.b, o), __shfl_down_sync(0xffffffffu, m.c, o)};
}

// The merge of `count` (<= 32) partials by one warp, lane 0's tree order, broadcast to every lane:
// every warp of every slice of the row computes bitwise the same result.
template <bool CHAN, int K>
__device__ __forceinline__ KvtMerge kvt_merge_warp(const float* src, long long count, long long slice, long long cols) {
  const int lane = threadIdx.x & 31;
  KvtMerge m = {0.0, 0.0, 0.0, 0.0};
  if (lane < count) m = kvt_partial<K>(src, lane, slice, cols);
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const KvtMerge r = kvt_shfl_down(m, o);
    if ((lane & (2 * o - 1)) == 0) kvt_merge<CHAN>(m, r);
  }
  return {__shfl_sync(0xffffffffu, m.n, 0), __shfl_sync(0xffffffffu, m.a, 0), __shfl_sync(0xffffffffu, m.b, 0),
          __shfl_sync(0xffffffffu, m.c, 0)};
}

// The merge of `count` partials by the whole block (thread t takes t, t + blockDim, ... in turn,
// then a fixed tree, then the warps' results in warp order), returned to every thread: bitwise the
// same in every block of the same size.
template <bool CHAN, int K>
__device__ __forceinline__ KvtMerge kvt_merge_block_all(const float* src, long long count, long long slice,
                                                        long long cols, KvtMerge* scratch) {
  // Partials are loaded kBatch at a time, as floats, before any is merged: one at a time, each merge
  // waited for its own L2 round trip (a row of 4,096 warp partials: 16 in turn a thread, most of
  // phase 1's time). Four keep 1024-thread blocks within their 64 registers. The merge order is
  // unchanged.
  constexpr int kBatch = 4;
  KvtMerge m = {0.0, 0.0, 0.0, 0.0};
  for (long long first = threadIdx.x; first < count; first += (long long)kBatch * blockDim.x) {
    KvtPartialRaw r[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const long long i = first + (long long)b * blockDim.x;
      if (i < count) r[b] = kvt_partial_load<K>(src, i);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const long long i = first + (long long)b * blockDim.x;
      if (i < count) kvt_merge<CHAN>(m, kvt_partial_value<K>(r[b], i, slice, cols));
    }
  }
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const KvtMerge r = kvt_shfl_down(m, o);
    if ((lane & (2 * o - 1)) == 0) kvt_merge<CHAN>(m, r);
  }
  if (lane == 0) scratch[threadIdx.x / 32] = m;
  __syncthreads();
  KvtMerge total = scratch[0];
  for (int w = 1; w < int(blockDim.x / 32); ++w) kvt_merge<CHAN>(total, scratch[w]);
  __syncthreads();  // the scratch is reused by the block's next row
  return total;
}

// The merge of `count` partials by the whole block (as kvt_merge_block_all); the result is written
// by thread 0 as one partial of K floats at dst.
template <bool CHAN, int K>
__device__ __forceinline__ void kvt_merge_block(const float* src, long long count, long long slice, long long cols,
                                                float* dst, KvtMerge* scratch) {
  const KvtMerge total = kvt_merge_block_all<CHAN, K>(src, count, slice, cols, scratch);
  if (threadIdx.x == 0) {
    dst[0] = (float)total.a;
    if (K > 1) dst[1] = (float)total.b;
    if (K > 2) dst[2] = CHAN ? src[2] : (float)total.c;  // statistics: the row's shift, as every partial has it
  }
}

// A row's merged statistics: from its p.splits partials (direct) or the merged row (count 1);
// K floats a partial (the forward's third is the shift, which merging leaves out).
template <int MODE, int K>
__device__ __forceinline__ KvtMerge kvt_row_stats(const float* partials, const float* merged, long long row,
                                                  long long splits, long long slice, long long cols, int direct) {
  if (direct) return kvt_merge_warp<MODE != 2, K>(partials + row * splits * K, splits, slice, cols);
  return kvt_merge_warp<MODE != 2, K>(merged + row * K, 1, cols, cols);
}

// The forward's row scale from merged statistics (as normalize.cu's, in float64).
template <int MODE>
__device__ __forceinline__ float kvt_split_scale(const KvtMerge& m, double cols, int ddof, float eps) {
  if constexpr (MODE == 2) return (float)(1.0 / sqrt(m.a / cols + (double)eps));
  double var = m.b / (cols - (double)(MODE == 0 ? ddof : 0));  // 0/0 = NaN for one element, ddof 1
  var = var < 0.0 ? 0.0 : var;
  if constexpr (MODE == 0) return (float)(1.0 / (sqrt(var) + (double)eps));
  return (float)(1.0 / sqrt(var + (double)eps));
}

// Forward phase 1: the row's merged statistics as the output phase uses them, written by thread 0:
// [mean relative to the shift, scale, shift] (floats; rmsnorm's mean is 0), from the row's
// `count` partials of 4 floats (kvt_warp_stats).
template <int MODE>
__device__ __forceinline__ void kvt_merge_row_scale(const KvtNormalizeParams& p, long long row, long long count,
                                                    KvtMerge* scratch) {
  const float* src = p.row_partials + row * count * 4;
  const KvtMerge total = kvt_merge_block_all<MODE != 2, 4>(src, count, 0, p.cols, scratch);
  if (threadIdx.x == 0) {
    float* dst = p.row_final + row * 3;
    dst[0] = MODE == 2 ? 0.f : (float)total.a;
    dst[1] = kvt_split_scale<MODE>(total, (double)p.cols, p.ddof, p.eps);
    dst[2] = src[2];  // the row's shift, as every partial has it
  }
}

// This thread's sum over its kept vectors of x - shift (rmsnorm: its square) or, CENTRED, of
// ((x - shift) - mean)^2; columns at or past `cols` left out. FULL: the caller knows every column is
// in the row, so no element is tested (the same sums; the tests were most of phase 0's instructions:
// Nsight Compute, H200, 2026-11-29, 77 % of issue on 64 x 2^22 layernorm bf16).
template <class T, int TPR, int VW, int ITEMS, int MODE, bool CENTRED, bool FULL = false>
__device__ __forceinline__ float kvt_thread_sum(const Vec<T, VW> (&v)[ITEMS], long long begin, long long cols,
                                                float shift, float mean) {
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      const float f = kvt_to_float(v[i].v[k]) - shift;
      const float term = CENTRED ? (f - mean) * (f - mean) : MODE == 2 ? f * f : f;
      if constexpr (FULL) {
        sum += term;
      } else {
        const long long j = begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW + k;
        if (j < cols) sum += term;
      }
    }
  return sum;
}

// kvt_thread_sum for a group whose columns may all be in the row (`full`, the same in every thread
// of the group): the untested form then, else the tested one.
template <class T, int TPR, int VW, int ITEMS, int MODE, bool CENTRED>
__device__ __forceinline__ float kvt_thread_sum_of(const Vec<T, VW> (&v)[ITEMS], bool full, long long begin,
                                                   long long cols, float shift, float mean) {
  return full ? kvt_thread_sum<T, TPR, VW, ITEMS, MODE, CENTRED, true>(v, begin, cols, shift, mean)
              : kvt_thread_sum<T, TPR, VW, ITEMS, MODE, CENTRED, false>(v, begin, cols, shift, mean);
}

// The statistics of one slice of a row (phase 0): two-pass over the kept vectors, relative to shift;
// K == 3 also stores the shift.
template <class T, int TPR, int VW, int ITEMS, int MODE, int K>
__device__ __forceinline__ void kvt_slice_stats(const Vec<T, VW> (&v)[ITEMS], long long begin, long long cols,
                                                float shift, float* dst, float* scratch) {
  using Group = RowGroup<TPR, 1>;
  constexpr long long kSlice = (long long)ITEMS * TPR * VW;
  const bool full = begin + kSlice <= cols;
  const float sum =
      Group::sum(kvt_thread_sum_of<T, TPR, VW, ITEMS, MODE, false>(v, full, begin, cols, shift, 0.f), scratch);
  if (K == 3 && threadIdx.x == 0) dst[2] = shift;
  if constexpr (MODE == 2) {
    if (threadIdx.x == 0) dst[0] = sum, dst[1] = 0.f;
    return;
  }
  const long long left = cols - begin;
  const float mean = sum / (float)(left < kSlice ? left : kSlice);
  const float centred =
      Group::sum(kvt_thread_sum_of<T, TPR, VW, ITEMS, MODE, true>(v, full, begin, cols, shift, mean), scratch);
  if (threadIdx.x == 0) dst[0] = mean, dst[1] = centred;
}

// The statistics of one warp's part of a slice (phase 0 of the phased forward): the same two-pass
// as kvt_slice_stats over the warp's ITEMS vectors a lane, reduced by shuffles only, so no warp
// waits for another. Lane 0 writes [mean or sum of squares, centred M2, shift, count] at dst (4
// floats; a warp with no column in the row writes count 0, which the merge skips).
template <class T, int TPR, int VW, int ITEMS, int MODE>
__device__ __forceinline__ void kvt_warp_stats(const Vec<T, VW> (&v)[ITEMS], long long begin, long long cols,
                                               float shift, float* dst) {
  using Warp = RowGroup<32, 1>;
  const long long lane0 = begin + (long long)(threadIdx.x & ~31) * VW;  // the warp's first column, item 0
  long long count = 0;  // the warp's columns in the row: the same in every lane
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long left = cols - (lane0 + (long long)i * TPR * VW);
    count += left <= 0 ? 0 : left < 32 * VW ? left : 32 * VW;
  }
  const bool full = count == (long long)ITEMS * 32 * VW;  // every column of the warp in the row
  float sum = Warp::sum(kvt_thread_sum_of<T, TPR, VW, ITEMS, MODE, false>(v, full, begin, cols, shift, 0.f), nullptr);
  float centred = 0.f;
  if constexpr (MODE != 2) {
    const float mean = count > 0 ? sum / (float)count : 0.f;
    centred = Warp::sum(kvt_thread_sum_of<T, TPR, VW, ITEMS, MODE, true>(v, full, begin, cols, shift, mean), nullptr);
    sum = mean;
  }
  if ((threadIdx.x & 31) == 0) {
    float* out = dst + (threadIdx.x / 32) * 4;
    out[0] = sum, out[1] = centred, out[2] = shift, out[3] = (float)count;
  }
}

// The row's first input element (the statistics' shift): x[0], or x[0] + residual[0] rounded to T.
template <class T, int RES>
__device__ __forceinline__ float kvt_first_input(const KvtNormalizeParams& p, const KvtResidualParams& rp, long long row) {
  const float x0 = kvt_to_float(static_cast<const T*>(p.x)[row * p.ld_x]);
  if constexpr (RES != 0)
    return kvt_to_float(kvt_from_float<T>(x0 + kvt_to_float(static_cast<const T*>(rp.residual)[row * rp.ld_r])));
  return x0;
}

// One slice of a row's input into registers: x (`x` is the row's start), plus the residual's slice
// when RES != 0; STREAM: their last read (load_masked).
template <class T, int TPR, int VW, int ITEMS, int RES, bool STREAM = false>
__device__ __forceinline__ void kvt_load_slice(const KvtNormalizeParams& p, const KvtResidualParams& rp, const T* x,
                                               long long row, long long begin, Vec<T, VW> (&v)[ITEMS]) {
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    v[i] = load_masked<T, VW, STREAM>(x, begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW, p.cols);
  if constexpr (RES != 0) {
    const T* r = static_cast<const T*>(rp.residual) + row * rp.ld_r;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      v[i] = kvt_add(v[i], load_masked<T, VW, STREAM>(r, begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW, p.cols));
  }
}

// The output of one slice from its row's merged statistics (phase 2 and the cooperative kernel):
// y (and, RES == 2, residual_out) from the kept vectors, and the row's mean / rstd from its first slice.
// HELD: gamma / beta of the slice come from g / b, loaded once for a block's rows (kvt_load_affine);
// else each output loads them.
template <class T, int TPR, int VW, int ITEMS, int MODE, int AFFINE, int STATS_OUT, int RES = 0, bool HELD = false>
__device__ __forceinline__ void kvt_split_output(const KvtNormalizeParams& p, const KvtResidualParams& rp,
                                                 const Vec<T, VW> (&v)[ITEMS], long long row, long long begin,
                                                 float shift, float mean, float scale,
                                                 const Vec<T, VW>* held_g = nullptr, const Vec<T, VW>* held_b = nullptr) {
  using V = Vec<T, VW>;
  T* y = static_cast<T*>(p.y) + row * p.ld_y;
  const T* gamma = static_cast<const T*>(p.gamma);
  const T* beta = static_cast<const T*>(p.beta);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long j = begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW;
    if (j >= p.cols) continue;
    if constexpr (RES == 2) store_masked<T, VW, true>(static_cast<T*>(rp.residual_out) + row * rp.ld_s, j, p.cols, v[i]);
    V g, b, out;
    if constexpr ((AFFINE & 1) != 0) g = HELD ? held_g[i] : load_masked<T, VW>(gamma, j, p.cols);
    if constexpr ((AFFINE & 2) != 0) b = HELD ? held_b[i] : load_masked<T, VW>(beta, j, p.cols);
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      float r = ((kvt_to_float(v[i].v[k]) - shift) - mean) * scale;
      if constexpr ((AFFINE & 1) != 0) r *= kvt_to_float(g.v[k]);
      if constexpr ((AFFINE & 2) != 0) r += kvt_to_float(b.v[k]);
      out.v[k] = kvt_from_float<T>(r);
    }
    store_masked<T, VW, true>(y, j, p.cols, out);
  }
  if (begin == 0 && threadIdx.x == 0) {
    if constexpr ((STATS_OUT & 1) != 0) p.mean[row] = shift + mean;
    if constexpr ((STATS_OUT & 2) != 0) p.rstd[row] = scale;
  }
}

// LOOP (the output phase of config `loop=N`): each block takes one slice of p.row_loop rows in turn,
// gamma and beta loaded once for them: every row re-reads the whole of gamma / beta otherwise (16 MB
// a row for 2^22 bf16 columns, as many bytes as x's row).
template <int PHASE, class T, int TPR, int VW, int ITEMS, int MODE, int AFFINE, int STATS_OUT, int RES = 0,
          int LOOP = 0>
__global__ void __launch_bounds__(TPR) kvt_normalize_split(const KvtNormalizeParams p, const KvtResidualParams rp) {
  using V = Vec<T, VW>;
  constexpr long long kSlice = (long long)ITEMS * TPR * VW;
  constexpr int kWarps = TPR / 32;
  if constexpr (PHASE == 1) {
    __shared__ KvtMerge merge_scratch[kWarps];
    for (long long row = blockIdx.x; row < p.rows; row += gridDim.x)
      kvt_merge_row_scale<MODE>(p, row, p.splits * kWarps, merge_scratch);
  } else if constexpr (PHASE == 2 && LOOP != 0) {
    const long long groups = (p.rows + p.row_loop - 1) / p.row_loop;
    for (long long item = blockIdx.x; item < groups * p.splits; item += gridDim.x) {
      const long long first = (item / p.splits) * p.row_loop;
      const long long last = first + p.row_loop < p.rows ? first + p.row_loop : p.rows;
      const long long begin = (item % p.splits) * kSlice;
      V g[ITEMS], b[ITEMS];
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const long long j = begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW;
        if constexpr ((AFFINE & 1) != 0) g[i] = load_masked<T, VW>(static_cast<const T*>(p.gamma), j, p.cols);
        if constexpr ((AFFINE & 2) != 0) b[i] = load_masked<T, VW>(static_cast<const T*>(p.beta), j, p.cols);
      }
      for (long long row = first; row < last; ++row) {
        V v[ITEMS];
        kvt_load_slice<T, TPR, VW, ITEMS, RES, true>(p, rp, static_cast<const T*>(p.x) + row * p.ld_x, row, begin, v);
        const float* final_row = p.row_final + row * 3;
        kvt_split_output<T, TPR, VW, ITEMS, MODE, AFFINE, STATS_OUT, RES, true>(p, rp, v, row, begin, final_row[2],
                                                                                 final_row[0], final_row[1], g, b);
      }
    }
  } else {
    for (long long item = blockIdx.x; item < p.rows * p.splits; item += gridDim.x) {
      const long long row = item / p.splits;
      const long long begin = (item % p.splits) * kSlice;
      const T* x = static_cast<const T*>(p.x) + row * p.ld_x;
      V v[ITEMS];
      kvt_load_slice<T, TPR, VW, ITEMS, RES, PHASE == 2>(p, rp, x, row, begin, v);
      if constexpr (PHASE == 0) {
        const float shift = MODE != 2 ? (RES != 0 ? kvt_first_input<T, RES>(p, rp, row) : kvt_to_float(x[0])) : 0.f;
        kvt_warp_stats<T, TPR, VW, ITEMS, MODE>(v, begin, p.cols, shift, p.row_partials + item * kWarps * 4);
      } else {
        // In place, x[0] may already hold y[0] (or residual_out's s[0]): the shift comes from phase 1.
        const float* final_row = p.row_final + row * 3;
        kvt_split_output<T, TPR, VW, ITEMS, MODE, AFFINE, STATS_OUT, RES>(p, rp, v, row, begin, final_row[2],
                                                                           final_row[0], final_row[1]);
      }
    }
  }
}

// One pass, cooperative: gridDim.x = (co-resident row slots) * splits, all blocks co-resident (the
// host refuses the launch otherwise). Block b always takes slice b % splits of rows b / splits,
// b / splits + slots, ...: one row a slot a round, every block through every round (a slot past the
// last row idles in its last round), and one grid-wide barrier a round (kvt_grid_sync) between
// the slices' partial statistics and their merge. The barrier needs no counters in the workspace,
// so the launch has no memset before it (1.9 us a call under graph replay on an H200; the per-row
// counters this replaced had one). p.row_partials as phase 0's.
template <class T, int TPR, int VW, int ITEMS, int MODE, int AFFINE, int STATS_OUT, int RES = 0>
__global__ void __launch_bounds__(TPR) kvt_normalize_split_coop(const KvtNormalizeParams p, const KvtResidualParams rp) {
  using V = Vec<T, VW>;
  constexpr long long kSlice = (long long)ITEMS * TPR * VW;
  __shared__ float scratch[3 * RowGroup<TPR, 1>::kScratch];
  __shared__ KvtMerge merge_scratch[TPR / 32];
  const long long slots = gridDim.x / p.splits;
  const long long slot = blockIdx.x / p.splits;
  const long long split = blockIdx.x % p.splits;
  const long long begin = split * kSlice;
  const long long rounds = (p.rows + slots - 1) / slots;
  for (long long round = 0; round < rounds; ++round) {
    const long long row = slot + round * slots;
    const bool active = row < p.rows;  // the same for the whole block
    float* partials = p.row_partials + (active ? row : 0) * p.splits * 3;
    const T* x = static_cast<const T*>(p.x) + (active ? row : 0) * p.ld_x;
    V v[ITEMS];
    float shift = 0.f;
    if (active) {
      kvt_load_slice<T, TPR, VW, ITEMS, RES, true>(p, rp, x, row, begin, v);  // x read once
      // Every slice reads x[0] before the barrier and slice 0 writes y[0] only after it: in place too.
      shift = MODE != 2 ? (RES != 0 ? kvt_first_input<T, RES>(p, rp, row) : kvt_to_float(x[0])) : 0.f;
      kvt_slice_stats<T, TPR, VW, ITEMS, MODE, 3>(v, begin, p.cols, shift, partials + split * 3, scratch);
    }
    kvt_grid_sync();
    if (!active) continue;
    // Every slice merges all of the row's partials the same way: bitwise the same statistics.
    const KvtMerge m = p.splits <= 32 ? kvt_merge_warp<MODE != 2, 3>(partials, p.splits, kSlice, p.cols)
                                      : kvt_merge_block_all<MODE != 2, 3>(partials, p.splits, kSlice, p.cols,
                                                                          merge_scratch);
    kvt_split_output<T, TPR, VW, ITEMS, MODE, AFFINE, STATS_OUT, RES>(
        p, rp, v, row, begin, shift, MODE == 2 ? 0.f : (float)m.a, kvt_split_scale<MODE>(m, (double)p.cols, p.ddof, p.eps));
  }
}

// The cluster barrier (sm_90): every thread of the cluster's blocks arrives with release and waits
// with acquire semantics at cluster scope, so what a block of the cluster wrote before it (global
// memory included) is visible to the others after it; a block barrier as well. Uniform control flow
// (.aligned). Other architectures never launch a cluster variant (the host refuses it).
__device__ __forceinline__ void kvt_cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __trap();
#endif
}

// One pass, a cluster a row: gridDim.x = clusters * splits (the host launches as many clusters as the
// device holds at once, at most one a row), the cluster dimension p.splits (at most 8), so cluster k
// is blocks k * splits .. k * splits + splits - 1 and block b takes slice b % splits of rows
// b / splits, b / splits + clusters, ... Each row as the cooperative kernel's round: its slice in
// registers (x read once), the slice's partials into p.row_partials[row], the cluster barrier, the
// row's partials merged in a fixed order (bitwise the same statistics in every slice), y written.
// A cluster's blocks are co-scheduled by the hardware, and each cluster waits only for its own
// blocks: other clusters on the same SMs keep loads in flight meanwhile. A block's slice is the same
// for all its rows: HOLD 1 (config `loop=4`) keeps its gamma / beta in registers for all of them
// (fewer L2 reads, more registers), HOLD 0 loads them with each row. STAGE 1 (config `keep=stage`):
// the block's next row is copied into shared memory (cp.async, two stages of the slice) while this
// row reduces, waits and writes; each thread reads back only what it copied (no block barrier), a
// vector cut by the row's end from global memory. Clusters stay resident for all their rows (a
// cluster a row, each exiting after it, was 2-7 % slower on an H200; bench/NOTES.md, 2026-12-03).
template <class T, int TPR, int VW, int ITEMS, int MODE, int AFFINE, int STATS_OUT, int RES = 0, int HOLD = 0,
          int STAGE = 0>
__global__ void __launch_bounds__(TPR) kvt_normalize_split_cluster(const KvtNormalizeParams p, const KvtResidualParams rp) {
  using V = Vec<T, VW>;
  static_assert(STAGE == 0 || (RES == 0 && sizeof(V) >= 4), "staged cluster rows: no residual, vectors of 4+ bytes");
  constexpr long long kSlice = (long long)ITEMS * TPR * VW;
  KVT_DYNAMIC_SMEM(kvt_cluster_stage);
  V* const stage = reinterpret_cast<V*>(kvt_cluster_stage);  // STAGE: [2][ITEMS][TPR]
  __shared__ float scratch[3 * RowGroup<TPR, 1>::kScratch];
  const long long clusters = gridDim.x / p.splits;
  const long long split = blockIdx.x % p.splits;
  const long long begin = split * kSlice;
  V held_g[ITEMS], held_b[ITEMS];
  if constexpr (HOLD != 0) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const long long j = begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW;
      if constexpr ((AFFINE & 1) != 0) held_g[i] = load_masked<T, VW>(static_cast<const T*>(p.gamma), j, p.cols);
      if constexpr ((AFFINE & 2) != 0) held_b[i] = load_masked<T, VW>(static_cast<const T*>(p.beta), j, p.cols);
    }
  }
  // STAGE: the copies of row r's whole vectors into stage s, as one group.
  const auto issue = [&](long long r, int s) {
    if constexpr (STAGE != 0) {
      const T* xr = static_cast<const T*>(p.x) + r * p.ld_x;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const long long j = begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW;
        if (j + VW <= p.cols) kvt_stage_copy<sizeof(V)>(&stage[(s * ITEMS + i) * TPR + threadIdx.x], xr + j);
      }
      kvt_stage_commit();
    }
  };
  long long row = blockIdx.x / p.splits;
  if constexpr (STAGE != 0)
    if (row < p.rows) issue(row, 0);
  for (int s = 0; row < p.rows; row += clusters, s ^= 1) {  // the same rows for the cluster
    float* partials = p.row_partials + row * p.splits * 3;
    const T* x = static_cast<const T*>(p.x) + row * p.ld_x;
    V v[ITEMS];
    if constexpr (STAGE != 0) {
      if (row + clusters < p.rows) issue(row + clusters, s ^ 1);
      else kvt_stage_commit();  // an empty group: the wait still leaves this row's complete
      kvt_stage_wait_previous();
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const long long j = begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW;
        v[i] = j + VW <= p.cols ? stage[(s * ITEMS + i) * TPR + threadIdx.x] : load_masked<T, VW>(x, j, p.cols);
      }
    } else {
      kvt_load_slice<T, TPR, VW, ITEMS, RES, true>(p, rp, x, row, begin, v);  // x read once
    }
    // Every slice reads x[0] before the barrier and slice 0 writes y[0] only after it: in place too.
    const float shift = MODE != 2 ? (RES != 0 ? kvt_first_input<T, RES>(p, rp, row) : kvt_to_float(x[0])) : 0.f;
    kvt_slice_stats<T, TPR, VW, ITEMS, MODE, 3>(v, begin, p.cols, shift, partials + split * 3, scratch);
    kvt_cluster_sync();
    const KvtMerge m = kvt_merge_warp<MODE != 2, 3>(partials, p.splits, kSlice, p.cols);
    kvt_split_output<T, TPR, VW, ITEMS, MODE, AFFINE, STATS_OUT, RES, HOLD != 0>(
        p, rp, v, row, begin, shift, MODE == 2 ? 0.f : (float)m.a, kvt_split_scale<MODE>(m, (double)p.cols, p.ddof, p.eps),
        held_g, held_b);
  }
}

// A row's statistics for the backward: mean (relative to shift), scale s and, for standardize,
// sigma; from the merged partials (recompute) or the forward's saved mean / rstd.
template <int MODE, int RECOMPUTE>
struct KvtRowStats {
  float shift, mean, s, sigma;
};

template <class T, int MODE, int RECOMPUTE>
__device__ __forceinline__ KvtRowStats<MODE, RECOMPUTE> kvt_backward_stats(const KvtNormalizeBackwardParams& p,
                                                                          long long row, long long slice) {
  KvtRowStats<MODE, RECOMPUTE> r = {0.f, 0.f, 0.f, 0.f};
  if constexpr (RECOMPUTE) {
    const T* x = static_cast<const T*>(p.x) + row * p.ld_x;
    r.shift = MODE != 2 ? kvt_to_float(x[0]) : 0.f;
    const KvtMerge m = kvt_row_stats<MODE, 2>(p.stat_partials, p.stat_final, row, p.splits, slice, p.cols, p.direct);
    const double n = (double)p.cols;
    if constexpr (MODE == 2) {
      r.s = (float)(1.0 / sqrt(m.a / n + (double)p.eps));
    } else {
      r.mean = (float)m.a;
      double var = m.b / (n - (double)(MODE == 0 ? p.ddof : 0));
      var = var < 0.0 ? 0.0 : var;
      if constexpr (MODE == 0) {
        r.sigma = (float)sqrt(var);
        r.s = 1.f / (r.sigma + p.eps);
      } else {
        r.s = (float)(1.0 / sqrt(var + (double)p.eps));
      }
    }
  } else {
    r.s = p.rstd[row];
    if constexpr (MODE != 2) r.shift = p.mean[row];
    if constexpr (MODE == 0) r.sigma = 1.f / r.s - p.eps;
  }
  return r;
}

template <class T, int TPR, int VW, int ITEMS, int MODE, int GAMMA, int GRADS, int RECOMPUTE, int DRES = 0>
__global__ void __launch_bounds__(TPR) kvt_normalize_backward_split(const KvtNormalizeBackwardParams p) {
  using V = Vec<T, VW>;
  using Group = RowGroup<TPR, 1>;
  constexpr long long kSlice = (long long)ITEMS * TPR * VW;
  constexpr bool kCentre = !RECOMPUTE && MODE != 2;  // sums of x - mean correct a saved f32 mean
  __shared__ float scratch[3 * Group::kScratch];
  __shared__ KvtMerge merge_scratch[TPR / 32];
  const T* gamma = static_cast<const T*>(p.gamma);
  const long long n_rows = p.rows;
  const int phase = p.phase;

  if (phase == 5) {  // dgamma / dbeta from the groups' partial rows, in group order
    const long long slab = (long long)p.grad_groups * p.cols;
    for (long long j = (long long)blockIdx.x * TPR + threadIdx.x; j < p.cols; j += (long long)gridDim.x * TPR) {
      if constexpr ((GRADS & 1) != 0)
        static_cast<T*>(p.dgamma)[j] = kvt_from_float<T>(kvt_sum_rows(p.partials + j, p.cols, p.grad_groups));
      if constexpr ((GRADS & 2) != 0)
        static_cast<T*>(p.dbeta)[j] =
            kvt_from_float<T>(kvt_sum_rows(p.partials + ((GRADS & 1) != 0 ? slab : 0) + j, p.cols, p.grad_groups));
    }
    return;
  }
  if (phase == 1 || phase == 3) {  // one block per row merges its partials
    for (long long row = blockIdx.x; row < n_rows; row += gridDim.x) {
      if (phase == 1)
        kvt_merge_block<MODE != 2, 2>(p.stat_partials + row * p.splits * 2, p.splits, kSlice, p.cols,
                                      p.stat_final + row * 2, merge_scratch);
      else
        kvt_merge_block<false, 3>(p.sum_partials + row * p.splits * 3, p.splits, kSlice, p.cols, p.sum_final + row * 3,
                                  merge_scratch);
    }
    return;
  }

  // Phases 0 and 2: one (row, slice) per item; phase 4: one (group of row_loop rows, slice).
  const long long groups = phase == 4 ? (n_rows + p.row_loop - 1) / p.row_loop : n_rows;
  const long long items = groups * p.splits;
  for (long long item = blockIdx.x; item < items; item += gridDim.x) {
    const long long group = item / p.splits;
    const long long begin = (item % p.splits) * kSlice;
    const long long first = phase == 4 ? group * p.row_loop : group;
    const long long last = phase == 4 ? min(n_rows, first + p.row_loop) : first + 1;
    float acc_g[ITEMS][VW], acc_b[ITEMS][VW];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
      for (int k = 0; k < VW; ++k) acc_g[i][k] = acc_b[i][k] = 0.f;
    auto column = [&](int i) { return begin + (long long)threadIdx.x * VW + (long long)i * TPR * VW; };

    for (long long row = first; row < last; ++row) {
      const T* x = static_cast<const T*>(p.x) + row * p.ld_x;
      const T* dy = static_cast<const T*>(p.dy) + row * p.ld_dy;
      V xr[ITEMS], dyr[ITEMS], gr[ITEMS];
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) xr[i] = load_masked<T, VW>(x, column(i), p.cols);
      if (phase == 0) {
        const float shift = MODE != 2 ? kvt_to_float(x[0]) : 0.f;
        kvt_slice_stats<T, TPR, VW, ITEMS, MODE, 2>(xr, begin, p.cols, shift, p.stat_partials + item * 2, scratch);
        continue;
      }
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        dyr[i] = load_masked<T, VW>(dy, column(i), p.cols);
        if constexpr (GAMMA) gr[i] = load_masked<T, VW>(gamma, column(i), p.cols);
      }
      const KvtRowStats<MODE, RECOMPUTE> st = kvt_backward_stats<T, MODE, RECOMPUTE>(p, row, kSlice);
      float mean = st.mean;
      const float s = st.s;
      auto xhat_of = [&](float xv) { return MODE == 2 ? xv * s : ((xv - st.shift) - mean) * s; };
      auto g_of = [&](int i, int k) {
        float g = kvt_to_float(dyr[i].v[k]);
        if constexpr (GAMMA) g = __fmul_rn(g, kvt_to_float(gr[i].v[k]));  // rounded alike in both phases
        return g;
      };
      if (phase == 2) {  // this slice's sums: A = sum(g), B = sum(g * xhat), C = sum(x - shift)
        float v[3] = {0.f, 0.f, 0.f};
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
#pragma unroll
          for (int k = 0; k < VW; ++k) {
            if (column(i) + k >= p.cols) continue;
            const float g = g_of(i, k);
            v[0] += g;
            v[1] += g * xhat_of(kvt_to_float(xr[i].v[k]));
            v[2] += kvt_to_float(xr[i].v[k]) - st.shift;
          }
        Group::sums(v, scratch);
        if (threadIdx.x == 0) {
          float* dst = p.sum_partials + item * 3;
          dst[0] = v[0], dst[1] = v[1], dst[2] = kCentre ? v[2] : 0.f;
        }
        continue;
      }
      // Phase 4: the row's sums, merged, then dx of this slice.
      const KvtMerge sums = p.direct ? kvt_merge_warp<false, 3>(p.sum_partials + row * p.splits * 3, p.splits, kSlice, p.cols)
                                     : kvt_merge_warp<false, 3>(p.sum_final + row * 3, 1, p.cols, p.cols);
      const float n_cols = (float)p.cols;
      float a = (float)sums.a, b = (float)sums.b;
      if constexpr (kCentre) {
        const float c = (float)(sums.c / (double)p.cols);
        b = b - c * s * a;  // sum(g * (x - shift - c) * s)
        mean = c;
      }
      const float ca = MODE == 2 ? 0.f : a / n_cols;
      const float cb = MODE == 0 ? (st.sigma > 0.f ? b / (st.sigma * (n_cols - (float)p.ddof)) : 0.f) : s * b / n_cols;
      T* dx = static_cast<T*>(p.dx) + row * p.ld_dx;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        if (column(i) >= p.cols) continue;
        V out, vr;
        if constexpr (DRES != 0)  // the gradient flowing into the forward's residual_out (may be dx)
          vr = load_masked<T, VW>(static_cast<const T*>(p.dres) + row * p.ld_dres, column(i), p.cols);
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          const float d = kvt_to_float(dyr[i].v[k]);
          const float xhat = xhat_of(kvt_to_float(xr[i].v[k]));
          float o = s * (g_of(i, k) - ca) - xhat * cb;
          if constexpr (DRES != 0) o += kvt_to_float(vr.v[k]);
          out.v[k] = kvt_from_float<T>(o);
          acc_g[i][k] += d * xhat;  // masked-off columns are never stored
          acc_b[i][k] += d;
        }
        store_masked<T, VW>(dx, column(i), p.cols, out);
      }
    }
    if (phase != 4 || GRADS == 0) continue;
    // This group's dgamma / dbeta over its slice: the final values when there is one group.
    const long long slab = (long long)p.grad_groups * p.cols;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        const long long j = column(i) + k;
        if (j >= p.cols) continue;
        if (p.grad_groups == 1) {
          if constexpr ((GRADS & 1) != 0) static_cast<T*>(p.dgamma)[j] = kvt_from_float<T>(acc_g[i][k]);
          if constexpr ((GRADS & 2) != 0) static_cast<T*>(p.dbeta)[j] = kvt_from_float<T>(acc_b[i][k]);
        } else {
          float* part = p.partials + group * p.cols + j;
          if constexpr ((GRADS & 1) != 0) part[0] = acc_g[i][k];
          if constexpr ((GRADS & 2) != 0) part[(GRADS & 1) != 0 ? slab : 0] = acc_b[i][k];
        }
      }
  }
}
