// kvtune normalize family: per-row standardize / layernorm / rmsnorm, compiled by NVRTC.
// One kernel template; every variant is a set of template arguments (see normalize_family.h):
//   T          storage type: float, kvt_f16, kvt_bf16 (statistics always accumulate in f32)
//   TPR        threads cooperating on one row: sub-warp (4..16), one warp (32), several warps, a block
//   RPB        rows per block; the block has TPR * RPB threads
//   VW         elements per vector access (VW * sizeof(T) = 2..16 bytes)
//   ITEMS      vectors per thread held in registers (KEEP == 0 or 3), 0 otherwise
//   KEEP       where the row lives between passes: 0 registers, 1 shared memory, 2 re-read global;
//              the backward's 3: registers, copied to shared memory one row of the row loop ahead
//   STAT       0 two-pass (mean, then centred sum of squares), 1 Welford (single pass, Chan merge)
//   MODE       0 standardize (x - mean) / (std + eps), 1 layernorm, 2 rmsnorm
//   AFFINE     bit 0: gamma, bit 1: beta
//   STATS_OUT  bit 0: per-row mean, bit 1: per-row rstd
//   FULL       the row is exactly ITEMS * TPR * VW elements (KEEP == 0 or 3): no per-element masks, which
//              also frees registers (bf16 x 1024: 53 -> 42, so more rows in flight)
// The seed design (one 256-thread block per row, float4, warp-shuffle Welford) is
// TPR=256, RPB=1, VW=4 (f32), KEEP=2, STAT=1. kvt_normalize_reference is the naive float64
// variant the tuner verifies every candidate against. Rows too wide for one block (or too few to
// fill the GPU) are split across blocks by kvt_normalize_split / kvt_normalize_backward_split
// (normalize_split.cuh, included at the end: Config::splits > 1).
#include "common.cuh"
#include "normalize_params.h"

// regs[] is only read after pass 1 filled it; the front end cannot see that through the lambdas.
#pragma nv_diag_suppress 549

template <int TPR, int RPB>
struct RowGroup {
  static constexpr int kShuffleWidth = TPR < 32 ? TPR : 32;
  static constexpr int kWarps = TPR > 32 ? TPR / 32 : 1;
  static constexpr int kScratch = RPB * kWarps;

  // Sum of v over the TPR threads of this thread's row group; every thread gets the total.
  __device__ __forceinline__ static float sum(float v, float* scratch) {
#pragma unroll
    for (int o = kShuffleWidth / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if constexpr (kWarps > 1) {
      const int base = (threadIdx.x / TPR) * kWarps;
      if ((threadIdx.x & 31) == 0) scratch[base + (threadIdx.x % TPR) / 32] = v;
      __syncthreads();
      v = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v += scratch[base + w];
      __syncthreads();  // the scratch is reused by the next reduction
    }
    return v;
  }

  // Sums of N values over the row group at once (one barrier pair instead of N; N <= 3).
  template <int N>
  __device__ __forceinline__ static void sums(float (&v)[N], float* scratch) {
    static_assert(N <= 3, "the scratch holds three values per warp");
#pragma unroll
    for (int o = kShuffleWidth / 2; o > 0; o >>= 1)
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
    if constexpr (kWarps > 1) {
      const int base = (threadIdx.x / TPR) * kWarps;
      if ((threadIdx.x & 31) == 0)
#pragma unroll
        for (int i = 0; i < N; ++i) scratch[i * kScratch + base + (threadIdx.x % TPR) / 32] = v[i];
      __syncthreads();
#pragma unroll
      for (int i = 0; i < N; ++i) {
        v[i] = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) v[i] += scratch[i * kScratch + base + w];
      }
      __syncthreads();
    }
  }

  __device__ __forceinline__ static void merge(float& n, float& mean, float& m2, float nb, float meanb,
                                               float m2b) {
    const float total = n + nb;
    if (total > 0.f) {
      const float delta = meanb - mean;
      const float wb = nb / total;
      mean += delta * wb;
      m2 += m2b + delta * delta * n * wb;
      n = total;
    }
  }

  // Chan's parallel merge of per-thread Welford states (count, mean, M2).
  __device__ __forceinline__ static void welford(float& n, float& mean, float& m2, float* scratch) {
#pragma unroll
    for (int o = kShuffleWidth / 2; o > 0; o >>= 1) {
      const float nb = __shfl_xor_sync(0xffffffffu, n, o);
      const float meanb = __shfl_xor_sync(0xffffffffu, mean, o);
      const float m2b = __shfl_xor_sync(0xffffffffu, m2, o);
      merge(n, mean, m2, nb, meanb, m2b);
    }
    if constexpr (kWarps > 1) {
      const int base = (threadIdx.x / TPR) * kWarps;
      if ((threadIdx.x & 31) == 0) {
        const int w = base + (threadIdx.x % TPR) / 32;
        scratch[w] = n;
        scratch[kScratch + w] = mean;
        scratch[2 * kScratch + w] = m2;
      }
      __syncthreads();
      n = 0.f;
      mean = 0.f;
      m2 = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w)
        merge(n, mean, m2, scratch[base + w], scratch[kScratch + base + w], scratch[2 * kScratch + base + w]);
      __syncthreads();
    }
  }
};

// The backward's staged rows (KEEP 3): one vector copied global -> shared without passing through
// registers (cp.async on sm_80+, a plain copy elsewhere), the copies issued since the last commit
// as one group, and a wait for every group but the newest. Each thread reads back only what it
// copied, so no block barrier is needed.
template <int BYTES> struct alignas(BYTES) KvtStageBytes {
  unsigned w[BYTES / 4];
};
template <int BYTES> __device__ __forceinline__ void kvt_stage_copy(void* smem_dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  kvt_cp_async<BYTES>(smem_dst, src, true);
#else
  *static_cast<KvtStageBytes<BYTES>*>(smem_dst) = *static_cast<const KvtStageBytes<BYTES>*>(src);
#endif
}
__device__ __forceinline__ void kvt_stage_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  kvt_cp_async_commit();
#endif
}
__device__ __forceinline__ void kvt_stage_wait_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  kvt_cp_async_wait<1>();
#endif
}

// Whole vectors read or written once (STREAM: the split-row output phase's x and y) go with the
// evict-first hint (ld/st.global.cs), so that streaming a plane through L2 does not push out what
// every row re-reads there (gamma and beta: 16 MB for 2^22 bf16 columns).
template <class T, int VW>
__device__ __forceinline__ Vec<T, VW> kvt_load_cs(const T* p) {
  using V = Vec<T, VW>;
  V v;
  if constexpr (sizeof(V) == 16) *reinterpret_cast<int4*>(&v) = __ldcs(reinterpret_cast<const int4*>(p));
  else if constexpr (sizeof(V) == 8) *reinterpret_cast<int2*>(&v) = __ldcs(reinterpret_cast<const int2*>(p));
  else if constexpr (sizeof(V) == 4) *reinterpret_cast<int*>(&v) = __ldcs(reinterpret_cast<const int*>(p));
  else v = *reinterpret_cast<const V*>(p);
  return v;
}
template <class T, int VW>
__device__ __forceinline__ void kvt_store_cs(T* p, const Vec<T, VW>& v) {
  using V = Vec<T, VW>;
  if constexpr (sizeof(V) == 16) __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&v));
  else if constexpr (sizeof(V) == 8) __stcs(reinterpret_cast<int2*>(p), *reinterpret_cast<const int2*>(&v));
  else if constexpr (sizeof(V) == 4) __stcs(reinterpret_cast<int*>(p), *reinterpret_cast<const int*>(&v));
  else *reinterpret_cast<V*>(p) = v;
}

template <class T, int VW, bool STREAM = false>
__device__ __forceinline__ Vec<T, VW> load_masked(const T* row, long long j, long long cols) {
  Vec<T, VW> v;
  if (j + VW <= cols) {
    if constexpr (STREAM) v = kvt_load_cs<T, VW>(row + j);
    else v = *reinterpret_cast<const Vec<T, VW>*>(row + j);
  } else {
#pragma unroll
    for (int k = 0; k < VW; ++k) v.v[k] = (j + k < cols) ? row[j + k] : kvt_from_float<T>(0.f);
  }
  return v;
}

// s = x + r element by element, added in f32 and rounded to T (what a separate add writes).
template <class T, int VW>
__device__ __forceinline__ Vec<T, VW> kvt_add(const Vec<T, VW>& a, const Vec<T, VW>& b) {
  Vec<T, VW> s;
#pragma unroll
  for (int k = 0; k < VW; ++k) s.v[k] = kvt_from_float<T>(kvt_to_float(a.v[k]) + kvt_to_float(b.v[k]));
  return s;
}

template <class T, int VW, bool STREAM = false>
__device__ __forceinline__ void store_masked(T* row, long long j, long long cols, const Vec<T, VW>& v) {
  if (j + VW <= cols) {
    if constexpr (STREAM) kvt_store_cs<T, VW>(row + j, v);
    else *reinterpret_cast<Vec<T, VW>*>(row + j) = v;
  } else {
#pragma unroll
    for (int k = 0; k < VW; ++k)
      if (j + k < cols) row[j + k] = v.v[k];
  }
}

template <class T, int TPR, int RPB, int VW, int ITEMS, int KEEP, int STAT, int MODE, int AFFINE, int STATS_OUT,
          bool FULL = false, int RES = 0>
__global__ void __launch_bounds__(TPR * RPB) kvt_normalize(const KvtNormalizeParams p, const KvtResidualParams rp) {
  using V = Vec<T, VW>;
  using Group = RowGroup<TPR, RPB>;
  static_assert(KEEP != 0 || ITEMS > 0, "register keep needs ITEMS");
  static_assert(!FULL || KEEP == 0, "FULL needs the row in registers");
  constexpr long long kStride = (long long)TPR * VW;  // elements between a thread's vectors
  __shared__ float scratch[3 * Group::kScratch];
  KVT_DYNAMIC_SMEM(dynamic_smem);

  const int group = threadIdx.x / TPR;
  const int lane = threadIdx.x % TPR;
  const long long row = (long long)blockIdx.x * RPB + group;
  const bool active = row < p.rows;
  // Inactive groups (past the last row) see an empty row: every access is masked off, but they
  // still take part in the block's barriers.
  const long long cols = active ? p.cols : 0;
  const T* x = static_cast<const T*>(p.x) + (active ? row : 0) * p.ld_x;
  T* y = static_cast<T*>(p.y) + (active ? row : 0) * p.ld_y;
  T* srow = reinterpret_cast<T*>(dynamic_smem) + group * ((p.cols + VW - 1) / VW * VW);
  // RES: the row normalized is s = x + residual; residual_out gets s in pass 2 (after the row's
  // reductions: every thread of the row has read its first element by then, in place too).
  const T* res = RES != 0 ? static_cast<const T*>(rp.residual) + (active ? row : 0) * rp.ld_r : nullptr;
  T* res_out = RES == 2 ? static_cast<T*>(rp.residual_out) + (active ? row : 0) * rp.ld_s : nullptr;
  // The input row's vector at column j: x, or x + residual.
  auto load_in = [&](V& v, long long j) {
    if constexpr (FULL) {
      if (active) {
        v = *reinterpret_cast<const V*>(x + j);
        if constexpr (RES != 0) v = kvt_add(v, *reinterpret_cast<const V*>(res + j));
      }
#pragma unroll
      for (int k = 0; k < VW; ++k)
        if (!active) v.v[k] = kvt_from_float<T>(0.f);
    } else {
      v = load_masked<T, VW>(x, j, cols);
      if constexpr (RES != 0) v = kvt_add(v, load_masked<T, VW>(res, j, cols));
    }
  };

  V regs[KEEP == 0 ? ITEMS : 1];
  // Visits this thread's vectors of the row in order: i is the vector's ordinal, j its first column.
  auto for_each_vector = [&](auto&& visit) {
    if constexpr (KEEP == 0) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) visit(i, lane * (long long)VW + i * kStride);
    } else {
      int i = 0;
      for (long long j = lane * (long long)VW; j < cols; j += kStride, ++i) visit(i, j);
    }
  };
  // The row's vector i at column j, from wherever KEEP holds it.
  auto kept = [&](int i, long long j) -> V {
    if constexpr (KEEP == 0) return regs[i];
    else if constexpr (KEEP == 1) return *reinterpret_cast<const V*>(srow + j);
    else if constexpr (RES != 0) return kvt_add(load_masked<T, VW>(x, j, cols), load_masked<T, VW>(res, j, cols));
    else return load_masked<T, VW>(x, j, cols);
  };

  // Statistics are taken on x - shift with shift = the row's first element: the centred sums stay
  // small, so rows with |mean| >> std lose no precision (the shift cancels exactly in x - mean).
  const float shift =
      (MODE != 2 && cols > 0)
          ? (RES != 0 ? kvt_to_float(kvt_from_float<T>(kvt_to_float(x[0]) + kvt_to_float(res[0])))
                      : kvt_to_float(x[0]))
          : 0.f;

  // With FULL every element of an active row is real: masks reduce to the row's activity.
  auto in_row = [&](long long j) { return FULL ? active : j < cols; };

  // Pass 1: load (and keep) the row; accumulate sum (two-pass, rmsnorm: sum of squares) or Welford.
  float sum = 0.f, n = 0.f, mean = 0.f, m2 = 0.f;
  for_each_vector([&](int i, long long j) {
    V v;
    load_in(v, j);
    if constexpr (KEEP == 0) regs[i] = v;
    if constexpr (KEEP == 1) {
      if (j < cols) *reinterpret_cast<V*>(srow + j) = v;
    }
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      const float f = kvt_to_float(v.v[k]) - shift;
      if constexpr (MODE == 2) {
        sum += f * f;  // masked-off elements are zero
      } else if (in_row(j + k)) {
        if constexpr (STAT == 0) {
          sum += f;
        } else {
          n += 1.f;
          const float d = f - mean;
          mean += __fdividef(d, n);
          m2 += d * (f - mean);
        }
      }
    }
  });

  const float count = static_cast<float>(p.cols);
  float scale;
  if constexpr (MODE == 2) {
    mean = 0.f;
    scale = rsqrtf(Group::sum(sum, scratch) / count + p.eps);
  } else {
    if constexpr (STAT == 0) {
      mean = Group::sum(sum, scratch) / count;
      float centred = 0.f;
      for_each_vector([&](int i, long long j) {
        const V v = kept(i, j);
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          const float d = (kvt_to_float(v.v[k]) - shift) - mean;
          if (in_row(j + k)) centred += d * d;
        }
      });
      m2 = Group::sum(centred, scratch);
    } else {
      Group::welford(n, mean, m2, scratch);
    }
    if constexpr (MODE == 0) {
      float var = m2 / (count - static_cast<float>(p.ddof));  // 0/0 = NaN for one element, ddof 1
      var = var < 0.f ? 0.f : var;                             // keeps NaN, unlike fmaxf
      scale = 1.f / (sqrtf(var) + p.eps);
    } else {
      float var = m2 / count;
      var = var < 0.f ? 0.f : var;
      scale = rsqrtf(var + p.eps);
    }
  }

  // Pass 2: write y.
  const T* gamma = static_cast<const T*>(p.gamma);
  const T* beta = static_cast<const T*>(p.beta);
  for_each_vector([&](int i, long long j) {
    if (!in_row(j)) return;
    const V v = kept(i, j);
    if constexpr (RES == 2) {
      if constexpr (FULL) *reinterpret_cast<V*>(res_out + j) = v;
      else store_masked<T, VW>(res_out, j, cols, v);
    }
    V g, b;
    if constexpr ((AFFINE & 1) != 0) g = FULL ? *reinterpret_cast<const V*>(gamma + j) : load_masked<T, VW>(gamma, j, cols);
    if constexpr ((AFFINE & 2) != 0) b = FULL ? *reinterpret_cast<const V*>(beta + j) : load_masked<T, VW>(beta, j, cols);
    V out;
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      float r = ((kvt_to_float(v.v[k]) - shift) - mean) * scale;
      if constexpr ((AFFINE & 1) != 0) r *= kvt_to_float(g.v[k]);
      if constexpr ((AFFINE & 2) != 0) r += kvt_to_float(b.v[k]);
      out.v[k] = kvt_from_float<T>(r);
    }
    if constexpr (FULL) *reinterpret_cast<V*>(y + j) = out;
    else store_masked<T, VW>(y, j, cols, out);
  });

  if (active && lane == 0) {
    if constexpr ((STATS_OUT & 1) != 0) p.mean[row] = shift + mean;
    if constexpr ((STATS_OUT & 2) != 0) p.rstd[row] = scale;
  }
#ifdef KVT_INJECT_FAULT
  // Test-only broken variants (ContextOptions::test_fault); never compiled otherwise.
#if KVT_INJECT_FAULT == 1  // a wrong result: each row's first element off by one
  if (active && lane == 0 && cols > 0) y[0] = kvt_from_float<T>(kvt_to_float(y[0]) + 1.f);
#elif KVT_INJECT_FAULT == 2  // an out-of-bounds write far outside any allocation
  if (blockIdx.x == 0 && threadIdx.x == 0) reinterpret_cast<volatile float*>(p.y)[-(1ll << 40)] = 1.f;
#elif KVT_INJECT_FAULT == 3  // a hang: one thread spins for KVT_FAULT_SPIN_CYCLES
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const long long start = clock64();
    while (clock64() - start < (long long)KVT_FAULT_SPIN_CYCLES) {
    }
  }
#endif
#endif
}

// The naive variant: one thread per row, float64 throughout, y written as f32 into p.y. With a
// residual (non-null rp.residual) the row is s = x + residual rounded to T, written as f32 into
// rp.residual_out when that is non-null.
template <class T, int MODE, int AFFINE>
__global__ void kvt_normalize_reference(const KvtNormalizeParams p, const KvtResidualParams rp) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= p.rows) return;
  const T* xs = static_cast<const T*>(p.x) + row * p.ld_x;
  const T* rs = rp.residual == nullptr ? nullptr : static_cast<const T*>(rp.residual) + row * rp.ld_r;
  struct Row {
    const T* x;
    const T* r;
    __device__ T operator[](long long j) const {
      return r == nullptr ? x[j] : kvt_from_float<T>(kvt_to_float(x[j]) + kvt_to_float(r[j]));
    }
  } x{xs, rs};
  if (rp.residual_out != nullptr)
    for (long long j = 0; j < p.cols; ++j) static_cast<float*>(rp.residual_out)[row * rp.ld_s + j] = kvt_to_float(x[j]);
  float* y = static_cast<float*>(p.y) + row * p.ld_y;
  const T* gamma = static_cast<const T*>(p.gamma);
  const T* beta = static_cast<const T*>(p.beta);
  const double n = static_cast<double>(p.cols);
  double mean = 0.0, m2 = 0.0, scale;
  if (MODE == 2) {
    for (long long j = 0; j < p.cols; ++j) m2 += (double)kvt_to_float(x[j]) * (double)kvt_to_float(x[j]);
    scale = 1.0 / sqrt(m2 / n + (double)p.eps);
  } else {
    for (long long j = 0; j < p.cols; ++j) mean += (double)kvt_to_float(x[j]);
    mean /= n;
    for (long long j = 0; j < p.cols; ++j) {
      const double d = (double)kvt_to_float(x[j]) - mean;
      m2 += d * d;
    }
    if (MODE == 0) scale = 1.0 / (sqrt(m2 / (n - p.ddof)) + (double)p.eps);
    else scale = 1.0 / sqrt(m2 / n + (double)p.eps);
  }
  for (long long j = 0; j < p.cols; ++j) {
    double r = ((double)kvt_to_float(x[j]) - mean) * scale;
    if ((AFFINE & 1) != 0) r *= (double)kvt_to_float(gamma[j]);
    if ((AFFINE & 2) != 0) r += (double)kvt_to_float(beta[j]);
    y[j] = (float)r;
  }
  if (p.mean != nullptr) p.mean[row] = (float)mean;
  if (p.rstd != nullptr) p.rstd[row] = (float)scale;
}

// ---------------------------------------------------------------------------------------------
// Backward: dx (and dgamma/dbeta) from x, dy and the row statistics. Template arguments as the
// forward's, and
//   GAMMA      1: the forward had gamma (g = dy * gamma), 0: g = dy
//   GRADS      bit 0: dgamma, bit 1: dbeta
//   RECOMPUTE  1: statistics recomputed from x (two-pass, shifted), 0: read from p.mean / p.rstd
// With s the forward's row scale, xhat = (x - mean) * s (rmsnorm: x * s), A = sum(g),
// B = sum(g * xhat) and n = cols:
//   layernorm    dx = s * (g - A / n) - xhat * s * B / n
//   rmsnorm      dx = s * g - xhat * s * B / n
//   standardize  dx = s * (g - A / n) - xhat * B / (sigma * (n - ddof)),  s = 1 / (sigma + eps)
// dgamma = sum over rows of dy * xhat, dbeta = sum of dy. Block b handles p.row_loop rows per row
// group; each group sums its rows' contributions into its own partial row (registers, or in place
// in the workspace when the row is not kept in registers); the last block of each group of
// p.group_blocks blocks sums their partial rows into a level-1 row, and the last of those sums the
// level-1 rows into dgamma/dbeta. The cooperative form (p.grid_sum) launches at most the
// co-resident blocks, each looping over its chunks of rows, and replaces the tree by one grid-wide
// arrival after which every block sums a share of the columns. Every sum runs in a fixed order: the
// result does not depend on the order in which blocks finish.
// Sum of rows [0, n) of a column (row stride `stride`) in row order, eight loads in flight: the
// same result as one load at a time, without a dependent L2 round trip per row.
__device__ __forceinline__ float kvt_sum_rows(const float* src, long long stride, long long n) {
  float t = 0.f;
  long long r = 0;
  for (; r + 8 <= n; r += 8) {
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = __ldcg(src + (r + u) * stride);
#pragma unroll
    for (int u = 0; u < 8; ++u) t += v[u];
  }
  for (; r < n; ++r) t += __ldcg(src + r * stride);
  return t;
}

// The column sums of a level of the dgamma/dbeta reduction: for each of `grads` slabs (slab g at
// src + g * slab) and each column j < cols, the sum of rows [0, n) (row stride `stride`) in row order
// — the bits of kvt_sum_rows — handed to store(g, j, sum). The block's threads share the columns, W
// adjacent ones a thread (one 16-byte load when W = 4), R rows in flight: 32 (W = 4) or 16 floats a
// thread per L2 round trip instead of 8, in about as many registers as the kernel's main loop (an
// earlier form with several column groups in flight doubled the kernel's registers and lost more in
// occupancy than it gained). W = 4 needs cols % 4 == 0 and 16-byte aligned slabs and rows.
template <int W, int R, class Store>
__device__ __forceinline__ void kvt_sum_columns(const float* src, long long slab, long long stride, long long cols,
                                                int grads, long long n, Store store) {
  const long long per_grad = cols / W;
  const long long units = grads * per_grad;
  for (long long u = threadIdx.x; u < units; u += blockDim.x) {
    const int grad = static_cast<int>(u / per_grad);
    const long long col = (u - grad * per_grad) * W;
    const float* base = src + grad * slab + col;
    float t[W];
#pragma unroll
    for (int k = 0; k < W; ++k) t[k] = 0.f;
    long long r = 0;
    for (; r + R <= n; r += R) {
      float v[R][W];
#pragma unroll
      for (int q = 0; q < R; ++q) {
        if constexpr (W == 4) {
          const float4 f = __ldcg(reinterpret_cast<const float4*>(base + (r + q) * stride));
          v[q][0] = f.x, v[q][1] = f.y, v[q][2] = f.z, v[q][3] = f.w;
        } else {
          v[q][0] = __ldcg(base + (r + q) * stride);
        }
      }
#pragma unroll
      for (int q = 0; q < R; ++q)
#pragma unroll
        for (int k = 0; k < W; ++k) t[k] += v[q][k];
    }
    for (; r < n; ++r) {
#pragma unroll
      for (int k = 0; k < W; ++k) t[k] += __ldcg(base + r * stride + k);
    }
#pragma unroll
    for (int k = 0; k < W; ++k) store(grad, col + k, t[k]);
  }
}

// Both widths: W = 4 where the layout allows it.
template <class Store>
__device__ __forceinline__ void kvt_sum_columns_any(const float* src, long long slab, long long stride,
                                                    long long cols, int grads, long long n, Store store) {
  const bool wide = cols % 4 == 0 && reinterpret_cast<unsigned long long>(src) % 16 == 0;
  if (wide) kvt_sum_columns<4, 8>(src, slab, stride, cols, grads, n, store);
  else kvt_sum_columns<1, 16>(src, slab, stride, cols, grads, n, store);
}

// An acquire load at GPU scope (the arrival counters of cooperative launches).
__device__ __forceinline__ unsigned kvt_load_acquire(const unsigned* p) {
#if defined(__CUDA_ARCH__)
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else  // the host compiler's emulation of the kernels (tests/emulation)
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

// Thread 0 of a block: publishes what its block wrote (after a __syncthreads) and waits until
// `expected` arrivals have been counted at *counter. Only ever called in a cooperative launch whose
// blocks are all co-resident, so every block it waits for is running; the bound on the wait (2^26
// polls, at least 17 s) turns a broken guarantee into a fault instead of a hang. The backoff stops
// at 256 ns: the wait ends at most that late.
__device__ __forceinline__ void kvt_arrive_and_wait(unsigned* counter, unsigned expected) {
  __threadfence();  // release: what the block wrote before the arrival
  atomicAdd(counter, 1u);
  unsigned seen = 0, sleep = 32;
  for (long long polls = 0;; ++polls) {
    seen = kvt_load_acquire(counter);
    if (seen >= expected) break;
    if (polls > (1ll << 26)) __trap();
    __nanosleep(sleep);
    sleep = sleep < 256 ? 2 * sleep : 256;
  }
  __threadfence();  // acquire: the other blocks' writes after their arrival
}

// The cooperative backward's dgamma/dbeta (p.grid_sum): after every block's partial rows are
// written and all blocks have arrived, the grid shares the column sums. Tile t (32 columns of one
// gradient) goes to block t % gridDim.x; lane l of warp w sums column l of the tile over rows w,
// w + W, w + 2W, ... (W warps; eight loads in flight), and warp 0 adds the W sums in warp order. The
// order is fixed: the result does not depend on timing. `red` holds blockDim.x floats.
template <class Store>
__device__ __forceinline__ void kvt_sum_columns_grid(const float* src, long long slab, long long cols, int grads,
                                                     long long n, float* red, Store store) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const long long per_grad = (cols + 31) / 32;
  const long long mine = n > warp ? (n - warp + warps - 1) / warps : 0;
  for (long long t = blockIdx.x; t < grads * per_grad; t += gridDim.x) {
    const int grad = static_cast<int>(t / per_grad);
    const long long col = (t - grad * per_grad) * 32 + lane;
    red[threadIdx.x] = col < cols ? kvt_sum_rows(src + grad * slab + warp * cols + col, warps * cols, mine) : 0.f;
    __syncthreads();
    if (warp == 0 && col < cols) {
      float total = 0.f;
      for (int w = 0; w < warps; ++w) total += red[w * 32 + lane];
      store(grad, col, total);
    }
    __syncthreads();
  }
}

template <class T, int TPR, int RPB, int VW, int ITEMS, int KEEP, int MODE, int GAMMA, int GRADS, int RECOMPUTE,
          bool FULL = false, int DRES = 0>
__global__ void __launch_bounds__(TPR * RPB) kvt_normalize_backward(const KvtNormalizeBackwardParams p) {
  using V = Vec<T, VW>;
  using Group = RowGroup<TPR, RPB>;
  // KEEP 3 (staged): the row in registers during its passes as KEEP 0, loaded from shared memory
  // where cp.async copied it during the previous row (two stages a row group, one row ahead), and
  // the row's saved statistics (or recompute shift) read one row ahead into registers.
  constexpr bool kRegs = KEEP == 0 || KEEP == 3;
  constexpr bool kStaged = KEEP == 3;
  static_assert(!kRegs || ITEMS > 0, "register keep needs ITEMS");
  static_assert(!FULL || kRegs, "FULL needs the row in registers");
  static_assert(!kStaged || sizeof(V) >= 4, "cp.async copies 4, 8 or 16 bytes");
  constexpr long long kStride = (long long)TPR * VW;
  constexpr int kKept = kRegs ? ITEMS : 1;
  constexpr int kAcc = (kRegs && GRADS != 0) ? ITEMS : 1;
  constexpr int kGrads = (GRADS & 1) + ((GRADS >> 1) & 1);
  __shared__ float scratch[3 * Group::kScratch];
  __shared__ unsigned ticket;
  KVT_DYNAMIC_SMEM(dynamic_smem);
  // Row groups kept in registers fold their dgamma/dbeta accumulators into one partial row a block
  // (normalize::partial_rows_per_block): RPB times fewer partial rows to write and to sum.
  constexpr bool kFold = kRegs && RPB > 1 && GRADS != 0;
  constexpr int kPartialRows = kFold ? 1 : RPB;
  // fold also holds the cooperative form's warp sums (blockDim.x floats; kvt_sum_columns_grid).
  // Both gradients in one fold round where their two slabs take at most 16 KiB (half the rounds,
  // each two block barriers); normalize::fold_bytes on the host mirrors this.
  constexpr bool kFoldPair = kFold && kGrads == 2 && 2 * RPB * kStride * 4 <= 16384;
  constexpr long long kFoldFloats = kFold ? (kFoldPair ? 2 : 1) * RPB * kStride : 1;
  constexpr long long kRedFloats = GRADS != 0 ? TPR * RPB : 1;
  __shared__ float fold[kFoldFloats > kRedFloats ? kFoldFloats : kRedFloats];

  const int group = threadIdx.x / TPR;
  const int lane = threadIdx.x % TPR;
  const long long padded = (p.cols + VW - 1) / VW * VW;
  T* sx = reinterpret_cast<T*>(dynamic_smem) + group * 2 * padded;
  T* sdy = sx + padded;
  // Staged: stage k of this row group at dynamic_smem + ((k * RPB + group) * 2) * padded (x, then dy).
  const auto stage_of = [&](int it) {
    return reinterpret_cast<T*>(dynamic_smem) + ((long long)((it & 1) * RPB + group) * 2) * padded;
  };
  // The block's rows: p.chunks chunks of row_loop steps of RPB rows; block b takes chunks b,
  // b + gridDim.x, ... (one chunk unless the grid is a cooperative launch of fewer blocks), and its
  // step `it` is step it % row_loop of chunk b + (it / row_loop) * gridDim.x.
  const int steps = static_cast<int>((p.chunks - blockIdx.x + gridDim.x - 1) / gridDim.x * p.row_loop);
  const auto row_of = [&](int it) {
    const long long chunk = blockIdx.x + (long long)(it / p.row_loop) * gridDim.x;
    return (chunk * p.row_loop + it % p.row_loop) * RPB + group;
  };
  float next_s = 0.f, next_shift = 0.f;  // staged: the next row's saved rstd and mean (or recompute shift)
  // Staged: issue the copies of row group `group`'s row of loop step `it` (and read its statistics).
  const auto stage_row = [&](int it) {
    if constexpr (kStaged) {  // (discarded for other keeps, whose vectors may be 2 bytes)
      const long long r = row_of(it);
      if (r >= p.rows) return;
      const T* gx = static_cast<const T*>(p.x) + r * p.ld_x;
      const T* gdy = static_cast<const T*>(p.dy) + r * p.ld_dy;
      T* to = stage_of(it);
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const long long j = lane * (long long)VW + i * kStride;
        if (FULL || j + VW <= p.cols) {
          kvt_stage_copy<sizeof(V)>(to + j, gx + j);
          kvt_stage_copy<sizeof(V)>(to + padded + j, gdy + j);
        } else if (j < p.cols) {  // the row's last, partial vector: zero-filled past the row
          *reinterpret_cast<V*>(to + j) = load_masked<T, VW>(gx, j, p.cols);
          *reinterpret_cast<V*>(to + padded + j) = load_masked<T, VW>(gdy, j, p.cols);
        }
      }
      if constexpr (RECOMPUTE) {
        if constexpr (MODE != 2) next_shift = kvt_to_float(gx[0]);
      } else {
        next_s = p.rstd[r];
        if constexpr (MODE != 2) next_shift = p.mean[r];
      }
    }
  };

  const T* gamma = static_cast<const T*>(p.gamma);
  const float n_cols = static_cast<float>(p.cols);
  // This group's partial rows: dgamma in slab 0, dbeta in the next (or slab 0 without dgamma).
  const long long slab = (long long)gridDim.x * kPartialRows * p.cols;
  float* part_g = p.partials + ((long long)blockIdx.x * kPartialRows + (kFold ? 0 : group)) * p.cols;
  float* part_b = part_g + ((GRADS & 1) != 0 ? slab : 0);

  float acc_g[kAcc][VW], acc_b[kAcc][VW];
#pragma unroll
  for (int i = 0; i < kAcc; ++i)
#pragma unroll
    for (int k = 0; k < VW; ++k) acc_g[i][k] = acc_b[i][k] = 0.f;
  if constexpr (!kRegs && GRADS != 0) {  // partials accumulate in place: start from zero
    for (long long j = lane * (long long)VW; j < p.cols; j += kStride)
#pragma unroll
      for (int k = 0; k < VW; ++k)
        if (j + k < p.cols) {
          if constexpr ((GRADS & 1) != 0) part_g[j + k] = 0.f;
          if constexpr ((GRADS & 2) != 0) part_b[j + k] = 0.f;
        }
  }

  if constexpr (kStaged) {
    stage_row(0);
    kvt_stage_commit();
  }
  for (int it = 0; it < steps; ++it) {
    const long long row = row_of(it);
    // Staged: this row's statistics (read a step ago), then the next row's copies in flight while
    // this row waits for its own.
    const float staged_s = next_s, staged_shift = next_shift;
    const T* staged = kStaged ? stage_of(it) : nullptr;
    if constexpr (kStaged) {
      if (it + 1 < steps) stage_row(it + 1);
      kvt_stage_commit();
      kvt_stage_wait_previous();
    }
    const bool active = row < p.rows;
    const long long cols = active ? p.cols : 0;
    const T* x = static_cast<const T*>(p.x) + (active ? row : 0) * p.ld_x;
    const T* dy = static_cast<const T*>(p.dy) + (active ? row : 0) * p.ld_dy;
    T* dx = static_cast<T*>(p.dx) + (active ? row : 0) * p.ld_dx;
    // DRES: the gradient flowing into the forward's residual_out, added to dx (may be dx itself).
    const T* dres = DRES != 0 ? static_cast<const T*>(p.dres) + (active ? row : 0) * p.ld_dres : nullptr;
    V xr[kKept], dyr[kKept];
    auto for_each_vector = [&](auto&& visit) {
      if constexpr (kRegs) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) visit(i, lane * (long long)VW + i * kStride);
      } else {
        int i = 0;
        for (long long j = lane * (long long)VW; j < cols; j += kStride, ++i) visit(i, j);
      }
    };
    auto load = [&](const T* src, long long j) -> V {
      V v;
      if constexpr (FULL) {
        if (active) v = *reinterpret_cast<const V*>(src + j);
#pragma unroll
        for (int k = 0; k < VW; ++k)
          if (!active) v.v[k] = kvt_from_float<T>(0.f);
      } else {
        v = load_masked<T, VW>(src, j, cols);
      }
      return v;
    };
    auto kept_x = [&](int i, long long j) -> V {
      if constexpr (kRegs) return xr[i];
      else if constexpr (KEEP == 1) return *reinterpret_cast<const V*>(sx + j);
      else return load_masked<T, VW>(x, j, cols);
    };
    auto kept_dy = [&](int i, long long j) -> V {
      if constexpr (kRegs) return dyr[i];
      else if constexpr (KEEP == 1) return *reinterpret_cast<const V*>(sdy + j);
      else return load_masked<T, VW>(dy, j, cols);
    };
    auto in_row = [&](long long j) { return FULL ? active : j < cols; };

    // Pass 1: load (and keep) x and dy; the statistics' first sum when recomputing.
    // Statistics relative to shift: the row's first element when recomputing, the saved mean otherwise.
    float shift = (RECOMPUTE && MODE != 2 && cols > 0) ? (kStaged ? staged_shift : kvt_to_float(x[0])) : 0.f;
    float sum = 0.f;
    if constexpr (KEEP != 2 || RECOMPUTE) {
      for_each_vector([&](int i, long long j) {
        V vx;
        if constexpr (kStaged) {  // zeros outside the row, as the masked loads give
          if (in_row(j)) {
            vx = *reinterpret_cast<const V*>(staged + j);
            dyr[i] = *reinterpret_cast<const V*>(staged + padded + j);
          } else {
#pragma unroll
            for (int k = 0; k < VW; ++k) vx.v[k] = dyr[i].v[k] = kvt_from_float<T>(0.f);
          }
          xr[i] = vx;
        } else {
          vx = load(x, j);
        }
        if constexpr (KEEP == 0) {
          xr[i] = vx;
          dyr[i] = load(dy, j);
        }
        if constexpr (KEEP == 1) {
          if (j < cols) {
            *reinterpret_cast<V*>(sx + j) = vx;
            *reinterpret_cast<V*>(sdy + j) = load(dy, j);
          }
        }
        if constexpr (RECOMPUTE) {
#pragma unroll
          for (int k = 0; k < VW; ++k) {
            const float f = kvt_to_float(vx.v[k]) - shift;
            if constexpr (MODE == 2) sum += f * f;  // masked-off elements are zero
            else if (in_row(j + k)) sum += f;
          }
        }
      });
    }

    // The row's statistics: mean (relative to shift), scale s and, for standardize, sigma.
    float mean = 0.f, s = 0.f, sigma = 0.f;
    if constexpr (RECOMPUTE) {
      if constexpr (MODE == 2) {
        s = rsqrtf(Group::sum(sum, scratch) / n_cols + p.eps);
      } else {
        mean = Group::sum(sum, scratch) / n_cols;
        float centred = 0.f;
        for_each_vector([&](int i, long long j) {
          const V v = kept_x(i, j);
#pragma unroll
          for (int k = 0; k < VW; ++k) {
            const float d = (kvt_to_float(v.v[k]) - shift) - mean;
            if (in_row(j + k)) centred += d * d;
          }
        });
        const float m2 = Group::sum(centred, scratch);
        if constexpr (MODE == 0) {
          float var = m2 / (n_cols - static_cast<float>(p.ddof));
          var = var < 0.f ? 0.f : var;
          sigma = sqrtf(var);
          s = 1.f / (sigma + p.eps);
        } else {
          float var = m2 / n_cols;
          var = var < 0.f ? 0.f : var;
          s = rsqrtf(var + p.eps);
        }
      }
    } else if (active) {
      s = kStaged ? staged_s : p.rstd[row];
      if constexpr (MODE != 2) shift = kStaged ? staged_shift : p.mean[row];
      if constexpr (MODE == 0) sigma = 1.f / s - p.eps;
    }
    auto xhat_of = [&](float xv) { return MODE == 2 ? xv * s : ((xv - shift) - mean) * s; };

    // Pass 2: A = sum(g), B = sum(g * xhat) and, from a saved mean, C = sum(x - mean): the saved
    // mean is rounded to f32, which is coarse against the spread of rows with |mean| >> std; the
    // row's exact centre is mean + C / n (the forward's shifted statistics had it), so xhat and B
    // are corrected by it.
    constexpr bool kCentre = !RECOMPUTE && MODE != 2;
    float a = 0.f, b = 0.f, centre = 0.f;
    for_each_vector([&](int i, long long j) {
      const V vx = kept_x(i, j);
      const V vd = kept_dy(i, j);
      V vg;
      if constexpr (GAMMA) vg = FULL ? *reinterpret_cast<const V*>(gamma + j) : load_masked<T, VW>(gamma, j, cols);
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        if (!in_row(j + k)) continue;
        float g = kvt_to_float(vd.v[k]);
        if constexpr (GAMMA) g = __fmul_rn(g, kvt_to_float(vg.v[k]));  // rounded alike in both passes (no FMA)
        a += g;
        b += g * xhat_of(kvt_to_float(vx.v[k]));
        if constexpr (kCentre) centre += kvt_to_float(vx.v[k]) - shift;
      }
    });
    if constexpr (kCentre) {
      float v[3] = {a, b, centre};
      Group::sums(v, scratch);
      const float c = v[2] / n_cols;
      a = v[0];
      b = v[1] - c * s * a;  // sum(g * (x - shift - c) * s)
      mean = c;              // kept apart from shift: their f32 sum would round c away
    } else {
      float v[2] = {a, b};
      Group::sums(v, scratch);
      a = v[0];
      b = v[1];
    }
    const float ca = MODE == 2 ? 0.f : a / n_cols;
    // Standardize of a constant row (sigma = 0): the sigma term is taken as 0, as PyTorch's std
    // backward does (its gradient masks std == 0), so the gradient stays finite.
    const float cb = MODE == 0 ? (sigma > 0.f ? b / (sigma * (n_cols - static_cast<float>(p.ddof))) : 0.f)
                               : s * b / n_cols;

    // Pass 3: dx, and this row's share of dgamma/dbeta.
    for_each_vector([&](int i, long long j) {
      if (!in_row(j)) return;
      const V vx = kept_x(i, j);
      const V vd = kept_dy(i, j);
      V vg, vr;
      if constexpr (GAMMA) vg = FULL ? *reinterpret_cast<const V*>(gamma + j) : load_masked<T, VW>(gamma, j, cols);
      if constexpr (DRES != 0) vr = FULL ? *reinterpret_cast<const V*>(dres + j) : load_masked<T, VW>(dres, j, cols);
      V out;
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        const float d = kvt_to_float(vd.v[k]);
        float g = d;
        if constexpr (GAMMA) g = __fmul_rn(g, kvt_to_float(vg.v[k]));  // rounded alike in both passes (no FMA)
        const float xhat = xhat_of(kvt_to_float(vx.v[k]));
        float v = s * (g - ca) - xhat * cb;
        if constexpr (DRES != 0) v += kvt_to_float(vr.v[k]);
        out.v[k] = kvt_from_float<T>(v);
        if (FULL || j + k < cols) {
          if constexpr (kRegs) {
            acc_g[kRegs && GRADS != 0 ? i : 0][k] += d * xhat;
            acc_b[kRegs && GRADS != 0 ? i : 0][k] += d;
          } else {
            if constexpr ((GRADS & 1) != 0) part_g[j + k] += d * xhat;
            if constexpr ((GRADS & 2) != 0) part_b[j + k] += d;
          }
        }
      }
      if constexpr (FULL) *reinterpret_cast<V*>(dx + j) = out;
      else store_masked<T, VW>(dx, j, cols, out);
    });
  }

  if constexpr (GRADS != 0) {
    if constexpr (kFold) {
      // One item (kStride columns) and gradient (or both, kFoldPair) a round: each group's
      // accumulators into shared memory, then the block sums the RPB groups in group order
      // (deterministic) into its row.
      const auto fold_round = [&](int i, bool g, bool b) {
        float* const slab_g = fold;
        float* const slab_b = fold + (g ? RPB * kStride : 0);
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          if (g) slab_g[group * kStride + lane * VW + k] = acc_g[i][k];
          if (b) slab_b[group * kStride + lane * VW + k] = acc_b[i][k];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < (int(g) + int(b)) * kStride; e += blockDim.x) {
          const bool beta = !g || e >= kStride;
          const int col = e >= kStride ? e - int(kStride) : e;
          const float* src = beta ? slab_b : slab_g;
          float t = 0.f;
#pragma unroll
          for (int r = 0; r < RPB; ++r) t += src[r * kStride + col];
          if (i * kStride + col < p.cols) (beta ? part_b : part_g)[i * kStride + col] = t;
        }
        __syncthreads();
      };
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        if constexpr (kFoldPair) {
          fold_round(i, true, true);
        } else {
          if constexpr ((GRADS & 1) != 0) fold_round(i, true, false);
          if constexpr ((GRADS & 2) != 0) fold_round(i, false, true);
        }
      }
    } else if constexpr (kRegs) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const long long j = lane * (long long)VW + i * kStride;
#pragma unroll
        for (int k = 0; k < VW; ++k)
          if (j + k < p.cols) {
            if constexpr ((GRADS & 1) != 0) part_g[j + k] = acc_g[i][k];
            if constexpr ((GRADS & 2) != 0) part_b[j + k] = acc_b[i][k];
          }
      }
    }
    T* const outs[2] = {static_cast<T*>((GRADS & 1) != 0 ? p.dgamma : p.dbeta), static_cast<T*>(p.dbeta)};
    if (p.grid_sum) {  // cooperative launch: all blocks arrive, then share the column sums
      __syncthreads();
      if (threadIdx.x == 0) kvt_arrive_and_wait(p.counters, gridDim.x);
      __syncthreads();
      kvt_sum_columns_grid(p.partials, slab, p.cols, kGrads, (long long)gridDim.x * kPartialRows, fold,
                           [&](int grad, long long j, float sum) { outs[grad][j] = kvt_from_float<T>(sum); });
      return;
    }
    // Level 1: the last block to finish in this group of blocks sums their partial rows.
    __threadfence();
    __syncthreads();
    const int level1 = blockIdx.x / p.group_blocks;
    if (threadIdx.x == 0) ticket = atomicAdd(p.counters + level1, 1u);
    __syncthreads();
    const int first = level1 * p.group_blocks;
    const int members = min(p.group_blocks, static_cast<int>(gridDim.x) - first);
    if (ticket != static_cast<unsigned>(members - 1)) return;
    __threadfence();
    const long long slab1 = (long long)p.level1_rows * p.cols;
    float* level1_row = p.level1 + (long long)level1 * p.cols;
    kvt_sum_columns_any(p.partials + (long long)first * kPartialRows * p.cols, slab, p.cols, p.cols, kGrads,
                        (long long)members * kPartialRows,
                        [&](int grad, long long j, float sum) { level1_row[grad * slab1 + j] = sum; });
    // Level 2: the last level-1 block sums the level-1 rows into dgamma / dbeta.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) ticket = atomicAdd(p.counters + p.level1_rows, 1u);
    __syncthreads();
    if (ticket != static_cast<unsigned>(p.level1_rows - 1)) return;
    __threadfence();
    kvt_sum_columns_any(p.level1, slab1, p.cols, p.cols, kGrads, p.level1_rows,
                        [&](int grad, long long j, float sum) { outs[grad][j] = kvt_from_float<T>(sum); });
  }
}

// The backward's float64 reference, one thread per row: dx as f32 into p.dx (ld_dx), the row's
// mean and scale as doubles into stats[2 * row], and the forward's f32 mean / rstd into
// saved_mean / saved_rstd (what the forward kernel saves, for candidates that read them).
template <class T, int MODE, int GAMMA>
__global__ void kvt_normalize_backward_reference(const KvtNormalizeBackwardParams p, double* stats, float* saved_mean,
                                                 float* saved_rstd) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= p.rows) return;
  const T* x = static_cast<const T*>(p.x) + row * p.ld_x;
  const T* dy = static_cast<const T*>(p.dy) + row * p.ld_dy;
  float* dx = static_cast<float*>(p.dx) + row * p.ld_dx;
  const T* gamma = static_cast<const T*>(p.gamma);
  const double n = static_cast<double>(p.cols);
  double mean = 0.0, m2 = 0.0, s, sigma = 0.0;
  if (MODE == 2) {
    for (long long j = 0; j < p.cols; ++j) m2 += (double)kvt_to_float(x[j]) * (double)kvt_to_float(x[j]);
    s = 1.0 / sqrt(m2 / n + (double)p.eps);
  } else {
    for (long long j = 0; j < p.cols; ++j) mean += (double)kvt_to_float(x[j]);
    mean /= n;
    for (long long j = 0; j < p.cols; ++j) {
      const double d = (double)kvt_to_float(x[j]) - mean;
      m2 += d * d;
    }
    if (MODE == 0) {
      sigma = sqrt(m2 / (n - p.ddof));
      s = 1.0 / (sigma + (double)p.eps);
    } else {
      s = 1.0 / sqrt(m2 / n + (double)p.eps);
    }
  }
  double a = 0.0, b = 0.0;
  for (long long j = 0; j < p.cols; ++j) {
    const double g = (double)kvt_to_float(dy[j]) * (GAMMA ? (double)kvt_to_float(gamma[j]) : 1.0);
    a += g;
    b += g * ((double)kvt_to_float(x[j]) - mean) * s;
  }
  const double ca = MODE == 2 ? 0.0 : a / n;
  const double cb = MODE == 0 ? (sigma > 0.0 ? b / (sigma * (n - p.ddof)) : 0.0) : s * b / n;
  for (long long j = 0; j < p.cols; ++j) {
    const double g = (double)kvt_to_float(dy[j]) * (GAMMA ? (double)kvt_to_float(gamma[j]) : 1.0);
    const double ds = p.dres == nullptr ? 0.0 : (double)kvt_to_float(static_cast<const T*>(p.dres)[row * p.ld_dres + j]);
    dx[j] = (float)(s * (g - ca) - ((double)kvt_to_float(x[j]) - mean) * s * cb + ds);
  }
  stats[2 * row] = mean;
  stats[2 * row + 1] = s;
  if (saved_mean != nullptr) saved_mean[row] = (float)mean;
  if (saved_rstd != nullptr) saved_rstd[row] = (float)s;
}

// The column half of the backward's reference, one thread per column: dgamma / dbeta as f32 into
// p.dgamma / p.dbeta (either may be null), from the rows' float64 statistics.
template <class T>
__global__ void kvt_normalize_backward_reference_columns(const KvtNormalizeBackwardParams p, const double* stats) {
  const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= p.cols) return;
  double dg = 0.0, db = 0.0;
  for (long long row = 0; row < p.rows; ++row) {
    const double d = (double)kvt_to_float(static_cast<const T*>(p.dy)[row * p.ld_dy + j]);
    const double xv = (double)kvt_to_float(static_cast<const T*>(p.x)[row * p.ld_x + j]);
    dg += d * (xv - stats[2 * row]) * stats[2 * row + 1];
    db += d;
  }
  if (p.dgamma != nullptr) static_cast<float*>(p.dgamma)[j] = (float)dg;
  if (p.dbeta != nullptr) static_cast<float*>(p.dbeta)[j] = (float)db;
}

#include "normalize_split.cuh"
