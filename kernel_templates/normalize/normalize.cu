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
// (normalize_split.cuh, included at the end: Config::splits > 1). The backward kernels are in
// normalize_backward.cuh, included after the forward.
#include "common.cuh"
#include "normalize_params.h"

// kf[] is only read after pass 1 filled it; the front end cannot see that through the lambdas.
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
  // RES: the row normalized is s = x + residual, written to residual_out when RES == 2 (kEarlyS).
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

  // Register keep holds the row as floats already shifted (f = x - shift): the later passes take
  // no conversion and no subtraction an element.
  float kf[KEEP == 0 ? ITEMS * VW : 1];
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
  // The row's vector at column j, from shared memory or read again (register keep: see kf).
  auto kept = [&](long long j) -> V {
    if constexpr (KEEP == 1) return *reinterpret_cast<const V*>(srow + j);
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
  // s (RES == 2) is written in pass 1, as each vector arrives, when the row is kept (registers,
  // shared memory): its stores overlap the row's reductions, and the vectors need not stay. s may
  // be written over x or the residual, so every thread of the row reads the shift's element first.
  // Re-read keep loads x and the residual again in the later passes: s waits for pass 2 there.
  constexpr bool kEarlyS = RES == 2 && KEEP != 2;
  if constexpr (kEarlyS && MODE != 2) {
    if constexpr (TPR <= 32) __syncwarp();  // a row's lanes lie in one warp
    else __syncthreads();
  }
  auto store_s = [&](long long j, const V& v) {
    if constexpr (FULL) *reinterpret_cast<V*>(res_out + j) = v;
    else store_masked<T, VW>(res_out, j, cols, v);
  };
  // The row's vector i less the shift, into f: kept as such, or converted from v (the vector kept).
  auto shifted = [&](int i, const V& v, float (&f)[VW]) {
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      if constexpr (KEEP == 0) f[k] = kf[i * VW + k];
      else f[k] = kvt_to_float(v.v[k]) - shift;
    }
  };

  // Pass 1: load (and keep) the row; accumulate sum (two-pass, rmsnorm: sum of squares) or Welford.
  float sum = 0.f, n = 0.f, mean = 0.f, m2 = 0.f;
  for_each_vector([&](int i, long long j) {
    V v;
    load_in(v, j);
    if constexpr (kEarlyS) {
      if (in_row(j)) store_s(j, v);
    }
    if constexpr (KEEP == 1) {
      if (j < cols) *reinterpret_cast<V*>(srow + j) = v;
    }
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      const float f = kvt_to_float(v.v[k]) - shift;
      if constexpr (KEEP == 0) kf[i * VW + k] = f;
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
        float f[VW];
        shifted(i, KEEP == 0 ? V{} : kept(j), f);
#pragma unroll
        for (int k = 0; k < VW; ++k) {
          const float d = f[k] - mean;
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
  // (f - mean) * scale as one fused multiply-add: f and mean are both relative to the shift, so
  // the product mean * scale carries no large magnitude into the difference.
  const float offset = -mean * scale;
  for_each_vector([&](int i, long long j) {
    if (!in_row(j)) return;
    const V v = KEEP == 0 ? V{} : kept(j);
    if constexpr (RES == 2 && !kEarlyS) store_s(j, v);
    float f[VW];
    shifted(i, v, f);
    V g, b;
    if constexpr ((AFFINE & 1) != 0) g = FULL ? *reinterpret_cast<const V*>(gamma + j) : load_masked<T, VW>(gamma, j, cols);
    if constexpr ((AFFINE & 2) != 0) b = FULL ? *reinterpret_cast<const V*>(beta + j) : load_masked<T, VW>(beta, j, cols);
    V out;
#pragma unroll
    for (int k = 0; k < VW; ++k) {
      float r = fmaf(f[k], scale, offset);
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

// The float64 reference kernels (forward and backward) take `tpr` threads a row, a power of two
// dividing the block (at most kKvtReferenceBlock): thread t of a row sums columns t, t + tpr, ...,
// and a row's sums are added up in thread order, so the result depends on tpr alone (the host picks
// it from the row length: reference_threads_per_row). One thread a row summed 4 M columns serially:
// about a second of a 64 x 2^22 tuning's harness.

// The sum of v over the tpr threads of this thread's row, in thread order, to each of them. Every
// thread of the block calls it (it meets the block at barriers); `part` holds a double a thread.
__device__ double kvt_reference_row_sum(double v, double* part, int tpr) {
  const int first = (int)threadIdx.x - (int)threadIdx.x % tpr;
  part[threadIdx.x] = v;
  __syncthreads();
  double total = 0.0;
  for (int i = 0; i < tpr; ++i) total += part[first + i];
  __syncthreads();  // part is written again by the next sum
  return total;
}

// A row's float64 statistics, as the reference kernels (forward and backward) compute them: the
// mean (0 for rmsnorm), the scale (rstd) and, for standardize, sigma. `x` is anything indexed by
// column that yields T (the forward's reads x + residual through it); a thread past the last row
// (`active` false) reads nothing but takes part in the row sums.
struct KvtReferenceStats {
  double mean, scale, sigma;
};

template <int MODE, class X>
__device__ KvtReferenceStats kvt_reference_stats(const X& x, long long cols, bool active, int ddof, float eps,
                                                 double* part, int tpr) {
  const double n = static_cast<double>(cols);
  const long long first = (long long)(threadIdx.x % tpr), end = active ? cols : 0;
  KvtReferenceStats r = {0.0, 0.0, 0.0};
  double m2 = 0.0;
  if constexpr (MODE == 2) {
    for (long long j = first; j < end; j += tpr) m2 += (double)kvt_to_float(x[j]) * (double)kvt_to_float(x[j]);
    m2 = kvt_reference_row_sum(m2, part, tpr);
    r.scale = 1.0 / sqrt(m2 / n + (double)eps);
  } else {
    for (long long j = first; j < end; j += tpr) r.mean += (double)kvt_to_float(x[j]);
    r.mean = kvt_reference_row_sum(r.mean, part, tpr) / n;
    for (long long j = first; j < end; j += tpr) {
      const double d = (double)kvt_to_float(x[j]) - r.mean;
      m2 += d * d;
    }
    m2 = kvt_reference_row_sum(m2, part, tpr);
    if constexpr (MODE == 0) {
      r.sigma = sqrt(m2 / (n - ddof));
      r.scale = 1.0 / (r.sigma + (double)eps);
    } else {
      r.scale = 1.0 / sqrt(m2 / n + (double)eps);
    }
  }
  return r;
}

// The naive variant: float64 throughout, `tpr` threads a row (blocks of kKvtReferenceBlock threads,
// kKvtReferenceBlock / tpr rows each), y written as f32 into p.y. With a residual (non-null
// rp.residual) the row is s = x + residual rounded to T, written as f32 into rp.residual_out when
// that is non-null.
template <class T, int MODE, int AFFINE>
__global__ void kvt_normalize_reference(const KvtNormalizeParams p, const KvtResidualParams rp, int tpr) {
  __shared__ double part[kKvtReferenceBlock];
  const long long row = (long long)blockIdx.x * (blockDim.x / tpr) + threadIdx.x / tpr;
  const bool active = row < p.rows;
  const long long r0 = active ? row : 0;  // no pointer past the tensor, even unread
  const T* xs = static_cast<const T*>(p.x) + r0 * p.ld_x;
  const T* rs = rp.residual == nullptr ? nullptr : static_cast<const T*>(rp.residual) + r0 * rp.ld_r;
  struct Row {
    const T* x;
    const T* r;
    __device__ T operator[](long long j) const {
      return r == nullptr ? x[j] : kvt_from_float<T>(kvt_to_float(x[j]) + kvt_to_float(r[j]));
    }
  } x{xs, rs};
  const KvtReferenceStats stats = kvt_reference_stats<MODE>(x, p.cols, active, p.ddof, p.eps, part, tpr);
  if (!active) return;  // the row sums are done: no barrier follows
  const long long first = (long long)(threadIdx.x % tpr);
  if (rp.residual_out != nullptr)
    for (long long j = first; j < p.cols; j += tpr) static_cast<float*>(rp.residual_out)[row * rp.ld_s + j] = kvt_to_float(x[j]);
  float* y = static_cast<float*>(p.y) + row * p.ld_y;
  const T* gamma = static_cast<const T*>(p.gamma);
  const T* beta = static_cast<const T*>(p.beta);
  const double mean = stats.mean, scale = stats.scale;
  for (long long j = first; j < p.cols; j += tpr) {
    double r = ((double)kvt_to_float(x[j]) - mean) * scale;
    if ((AFFINE & 1) != 0) r *= (double)kvt_to_float(gamma[j]);
    if ((AFFINE & 2) != 0) r += (double)kvt_to_float(beta[j]);
    y[j] = (float)r;
  }
  if (first == 0 && p.mean != nullptr) p.mean[row] = (float)mean;
  if (first == 0 && p.rstd != nullptr) p.rstd[row] = (float)scale;
}

// ---------------------------------------------------------------------------------------------
#include "normalize_backward.cuh"

#include "normalize_split.cuh"
