// kvtune normalize family, the backward kernels (one-block rows; split rows: normalize_split.cuh):
// kvt_normalize_backward and its float64 references. Included by normalize.cu after the forward,
// whose helpers (RowGroup, the staged-row copies, load_masked / store_masked) it uses.

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
// barrier (kvt_grid_sync) after which every block sums a share of the columns. Every sum runs in a fixed order: the
// result does not depend on the order in which blocks finish.
// Sum of rows [0, n) of a column (row stride `stride`) in row order, R loads in flight: the
// same result as one load at a time, without a dependent L2 round trip per row.
template <int R = 8>
__device__ __forceinline__ float kvt_sum_rows(const float* src, long long stride, long long n) {
  float t = 0.f;
  long long r = 0;
  for (; r + R <= n; r += R) {
    float v[R];
#pragma unroll
    for (int u = 0; u < R; ++u) v[u] = __ldcg(src + (r + u) * stride);
#pragma unroll
    for (int u = 0; u < R; ++u) t += v[u];
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

// An acquire load at GPU scope (the grid barrier's word).
__device__ __forceinline__ unsigned kvt_load_acquire(const unsigned* p) {
#if defined(__CUDA_ARCH__)
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else  // the host compiler's emulation of the kernels (tests/emulation)
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

// The grid-wide barrier of a cooperative launch, on the barrier word of the grid workspace the
// driver gives every cooperative launch (the one cooperative groups' grid.sync() uses: the address of
// a {size, barrier} pair of u32 in %envreg1:%envreg2). Nothing in kvtune's workspace, so nothing to
// zero before the launch: a memset node before the kernel cost 1.9 us a call under graph replay on
// an H200 (bench/NOTES.md, 2026-12-02). Block 0 adds 2^31 - (blocks - 1), every other block 1; all
// arrivals together add 2^31, which flips the word's top bit and leaves its other bits as they were,
// so the word needs no reset between barriers or launches. A block has arrived when its top bit
// differs from the one its own addition saw. Called by every thread of every block, the same number
// of times. Only ever called in a cooperative launch, whose blocks are all co-resident, so every
// block it waits for is running; the bound on the wait (2^26 polls, at least 4 s) turns a broken
// guarantee into a fault instead of a hang.
__device__ __forceinline__ void kvt_grid_sync() {
  __syncthreads();
  if (threadIdx.x == 0) {
#if defined(__CUDA_ARCH__)
    unsigned hi, lo;
    asm volatile("mov.u32 %0, %%envreg1;" : "=r"(hi));
    asm volatile("mov.u32 %0, %%envreg2;" : "=r"(lo));
    unsigned* const word = reinterpret_cast<unsigned*>((static_cast<unsigned long long>(hi) << 32) | lo);
    if (word == nullptr) __trap();  // not a cooperative launch
    unsigned* const barrier = word + 1;
    const unsigned add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
    unsigned before;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], %2;" : "=r"(before) : "l"(barrier), "r"(add) : "memory");
    for (long long polls = 0;; ++polls) {
      if (((kvt_load_acquire(barrier) ^ before) & 0x80000000u) != 0) break;
      if (polls > (1ll << 26)) __trap();
      if (polls > 64) __nanosleep(64);
    }
#else  // the host emulation runs blocks one after another and never takes this path
    __trap();
#endif
  }
  __syncthreads();
}

// The cooperative backward's dgamma/dbeta (p.grid_sum): after every block's partial rows are
// written and all blocks have arrived, the grid shares the column sums. Tile t (32 columns of one
// gradient) goes to block t % gridDim.x; lane l of warp w sums column l of the tile over rows w,
// w + W, w + 2W, ... (W warps; kGridRows loads in flight), and warp 0 adds the W sums in warp order.
// The order is fixed: the result does not depend on timing. `red` holds blockDim.x floats.
// kGridRows: with 8 loads in flight, a 128-thread block of a 264-block grid waited for 9 L2 round
// trips a tile (layernorm bf16 8192 x 4096, H200); 32 take 3. The kernel's main loop holds more
// registers than these loads, so they cost it no occupancy.
constexpr int kGridRows = 32;
template <class Store>
__device__ __forceinline__ void kvt_sum_columns_grid(const float* src, long long slab, long long cols, int grads,
                                                     long long n, float* red, Store store) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const long long per_grad = (cols + 31) / 32;
  const long long mine = n > warp ? (n - warp + warps - 1) / warps : 0;
  for (long long t = blockIdx.x; t < grads * per_grad; t += gridDim.x) {
    const int grad = static_cast<int>(t / per_grad);
    const long long col = (t - grad * per_grad) * 32 + lane;
    red[threadIdx.x] = col < cols ? kvt_sum_rows<kGridRows>(src + grad * slab + warp * cols + col, warps * cols, mine) : 0.f;
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
  // step `it` is step it % row_loop of chunk b + (it / row_loop) * gridDim.x. A step's place is
  // carried from step to step (Step, next_step): dividing by the run-time row_loop twice a row cost
  // about 40 instructions a row a thread.
  const int steps = static_cast<int>((p.chunks - blockIdx.x + gridDim.x - 1) / gridDim.x * p.row_loop);
  struct Step {
    long long chunk;
    int in_chunk;
  };
  const auto next_step = [&](Step at) {
    if (++at.in_chunk == p.row_loop) at.in_chunk = 0, at.chunk += gridDim.x;
    return at;
  };
  const auto row_of = [&](Step at) { return (at.chunk * p.row_loop + at.in_chunk) * RPB + group; };
  float next_s = 0.f, next_shift = 0.f;  // staged: the next row's saved rstd and mean (or recompute shift)
  // Staged: issue the copies of row group `group`'s row of loop step `it` at `at` (and read its statistics).
  const auto stage_row = [&](int it, Step at) {
    if constexpr (kStaged) {  // (discarded for other keeps, whose vectors may be 2 bytes)
      const long long r = row_of(at);
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
  const float inv_n = 1.f / n_cols;  // the output pass's per-row divisions by n as products
  // A row kept in registers has the same columns in every row: its gamma is read once and kept
  // as the input's vectors (16-bit types: half the registers floats would take). It had been loaded
  // and converted in pass 2 and again in pass 3 of every row (H200, layernorm bf16 8192 x 4096,
  // exhaustive best 93.4 -> 69.6 us with the FULL passes below; bench/NOTES.md, 2026-12-02).
  constexpr bool kGammaRegs = GAMMA && kRegs;
  V gam[kGammaRegs ? ITEMS : 1];
  if constexpr (kGammaRegs) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const long long j = lane * (long long)VW + i * kStride;
      gam[i] = FULL ? *reinterpret_cast<const V*>(gamma + j) : load_masked<T, VW>(gamma, j, p.cols);
    }
  }
  // gamma's vector i (column j) as floats, VW of them.
  const auto gamma_at = [&](int i, long long j, long long cols, float (&out)[VW]) {
    if constexpr (kGammaRegs) {
#pragma unroll
      for (int k = 0; k < VW; ++k) out[k] = kvt_to_float(gam[i].v[k]);
    } else if constexpr (GAMMA) {
      const V v = FULL ? *reinterpret_cast<const V*>(gamma + j) : load_masked<T, VW>(gamma, j, cols);
#pragma unroll
      for (int k = 0; k < VW; ++k) out[k] = kvt_to_float(v.v[k]);
    }
  };
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

  Step at{blockIdx.x, 0};
  if constexpr (kStaged) {
    stage_row(0, at);
    kvt_stage_commit();
  }
  for (int it = 0; it < steps; ++it, at = next_step(at)) {
    const long long row = row_of(at);
    // Staged: this row's statistics (read a step ago), then the next row's copies in flight while
    // this row waits for its own.
    const float staged_s = next_s, staged_shift = next_shift;
    const T* staged = kStaged ? stage_of(it) : nullptr;
    if constexpr (kStaged) {
      if (it + 1 < steps) stage_row(it + 1, next_step(at));
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
    // FULL: an inactive row (past the last, in the last chunk) reads row 0 (staged: whatever its
    // stage holds) and computes nothing from it that is used: its sums only feed its own dx, and the
    // output pass skips it.
    auto load = [&](const T* src, long long j) -> V {
      V v;
      if constexpr (FULL) {
        v = *reinterpret_cast<const V*>(src + j);
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
        if constexpr (kStaged) {  // zeros outside the row, as the masked loads give (FULL: see load)
          if (FULL || in_row(j)) {
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
    // x relative to the row's centre; xhat = centred * s. Pass 2 sums g * centred and scales the sum
    // by s once, not each element.
    auto centred_of = [&](float xv) { return MODE == 2 ? xv : (xv - shift) - mean; };

    // Pass 2: A = sum(g), B = sum(g * xhat) and, from a saved mean, C = sum(x - mean): the saved
    // mean is rounded to f32, which is coarse against the spread of rows with |mean| >> std; the
    // row's exact centre is mean + C / n (the forward's shifted statistics had it), so xhat and B
    // are corrected by it.
    constexpr bool kCentre = !RECOMPUTE && MODE != 2;
    // FULL: no per-element test; an inactive row's sums are never used (see load).
    float a = 0.f, b = 0.f, centre = 0.f;
    for_each_vector([&](int i, long long j) {
      const V vx = kept_x(i, j);
      const V vd = kept_dy(i, j);
      float vg[VW];
      gamma_at(i, j, cols, vg);
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        if (!FULL && !in_row(j + k)) continue;
        float g = kvt_to_float(vd.v[k]);
        if constexpr (GAMMA) g = __fmul_rn(g, vg[k]);  // rounded alike in both passes (no FMA)
        a += g;
        b += g * centred_of(kvt_to_float(vx.v[k]));
        if constexpr (kCentre) centre += kvt_to_float(vx.v[k]) - shift;
      }
    });
    if constexpr (kCentre) {
      float v[3] = {a, b, centre};
      Group::sums(v, scratch);
      const float c = v[2] * inv_n;
      a = v[0];
      b = s * (v[1] - c * a);  // sum(g * (x - shift - c) * s)
      mean = c;                // kept apart from shift: their f32 sum would round c away
    } else {
      float v[2] = {a, b};
      Group::sums(v, scratch);
      a = v[0];
      b = s * v[1];
    }
    const float ca = MODE == 2 ? 0.f : a * inv_n;
    // Standardize of a constant row (sigma = 0): the sigma term is taken as 0, as PyTorch's std
    // backward does (its gradient masks std == 0), so the gradient stays finite.
    const float cb = MODE == 0 ? (sigma > 0.f ? b / (sigma * (n_cols - static_cast<float>(p.ddof))) : 0.f)
                               : s * b * inv_n;
    // Pass 3 per element: xhat = centred * s = (x - shift) * s - mean * s in one FMA, and
    // dx = s * (g - A / n) - xhat * cb, whose first term stays a difference then a product: exactly
    // zero where g = A / n (one-column rows), which s * g - s * A / n in an FMA is not.
    const float mean_s = mean * s;
    auto xhat_of = [&](float xv) { return MODE == 2 ? xv * s : __fmaf_rn(xv - shift, s, -mean_s); };

    // Pass 3: dx, and this row's share of dgamma/dbeta (FULL: one test of the row's activity).
    if (FULL && !active) continue;
    for_each_vector([&](int i, long long j) {
      if (!FULL && !in_row(j)) return;
      const V vx = kept_x(i, j);
      const V vd = kept_dy(i, j);
      float vg[VW];
      gamma_at(i, j, cols, vg);
      V vr;
      if constexpr (DRES != 0) vr = FULL ? *reinterpret_cast<const V*>(dres + j) : load_masked<T, VW>(dres, j, cols);
      V out;
#pragma unroll
      for (int k = 0; k < VW; ++k) {
        const float d = kvt_to_float(vd.v[k]);
        float g = d;
        if constexpr (GAMMA) g = __fmul_rn(g, vg[k]);  // rounded alike in both passes (no FMA)
        const float xhat = xhat_of(kvt_to_float(vx.v[k]));
        float v = __fmaf_rn(-xhat, cb, s * (g - ca));
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
      kvt_grid_sync();
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

// The backward's float64 reference, `tpr` threads a row (as kvt_normalize_reference): dx as f32
// into p.dx (ld_dx), the row's mean and scale as doubles into stats[2 * row], and the forward's f32
// mean / rstd into saved_mean / saved_rstd (what the forward kernel saves, for candidates that read
// them).
template <class T, int MODE, int GAMMA>
__global__ void kvt_normalize_backward_reference(const KvtNormalizeBackwardParams p, double* stats, float* saved_mean,
                                                 float* saved_rstd, int tpr) {
  __shared__ double part[kKvtReferenceBlock];
  const long long row = (long long)blockIdx.x * (blockDim.x / tpr) + threadIdx.x / tpr;
  const bool active = row < p.rows;
  const long long r0 = active ? row : 0;  // no pointer past the tensor, even unread
  const T* x = static_cast<const T*>(p.x) + r0 * p.ld_x;
  const T* dy = static_cast<const T*>(p.dy) + r0 * p.ld_dy;
  float* dx = static_cast<float*>(p.dx) + r0 * p.ld_dx;
  const T* gamma = static_cast<const T*>(p.gamma);
  const double n = static_cast<double>(p.cols);
  const long long first = (long long)(threadIdx.x % tpr), end = active ? p.cols : 0;
  const KvtReferenceStats stats_row = kvt_reference_stats<MODE>(x, p.cols, active, p.ddof, p.eps, part, tpr);
  const double mean = stats_row.mean, s = stats_row.scale, sigma = stats_row.sigma;
  double a = 0.0, b = 0.0;
  for (long long j = first; j < end; j += tpr) {
    const double g = (double)kvt_to_float(dy[j]) * (GAMMA ? (double)kvt_to_float(gamma[j]) : 1.0);
    a += g;
    b += g * ((double)kvt_to_float(x[j]) - mean) * s;
  }
  a = kvt_reference_row_sum(a, part, tpr);
  b = kvt_reference_row_sum(b, part, tpr);
  if (!active) return;  // the row sums are done: no barrier follows
  const double ca = MODE == 2 ? 0.0 : a / n;
  const double cb = MODE == 0 ? (sigma > 0.0 ? b / (sigma * (n - p.ddof)) : 0.0) : s * b / n;
  for (long long j = first; j < p.cols; j += tpr) {
    const double g = (double)kvt_to_float(dy[j]) * (GAMMA ? (double)kvt_to_float(gamma[j]) : 1.0);
    const double ds = p.dres == nullptr ? 0.0 : (double)kvt_to_float(static_cast<const T*>(p.dres)[row * p.ld_dres + j]);
    dx[j] = (float)(s * (g - ca) - ((double)kvt_to_float(x[j]) - mean) * s * cb + ds);
  }
  if (first != 0) return;
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
