#pragma once
// Sizes of the dwconv family's variants that the space's rules (dwconv_family.cpp) and the cost model
// (dwconv_cost.cpp) both compute: windows, items and tiles of each kernel kind, shared-memory bytes,
// the tensor-core tile's shape. Private to the family's sources.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/embedded.h"
#include "core/nvrtc.h"
#include "kernel_templates/dwconv/dwconv_family.h"

namespace kvtune::dwconv::sizes {

constexpr std::size_t kSmemPerSm = 228 * 1024;  // sm_90: shared memory an SM holds (cost model)
constexpr int kMaxWindowRegisters = 64;         // source values one thread holds per kernel row
// One source row's window a thread holds where nothing else competes for its registers, for kernels
// of one row: channel-last rows from global memory (one output row a thread, no fused x window, no
// seq ids) and register-tiled weight gradients. Long 1D kernels (K = 63) need it for runs of more
// than 2 outputs.
constexpr int kMaxLongWindowRegisters = 128;

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline int floordiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline std::int64_t next_pow2(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
inline int dir_index(DwDirection d) { return static_cast<int>(d); }

// Host mirror of dwconv.cu's Axis<DIR, K, S, D, P, R>::kWindow (and kQmin), for shared-memory sizes.
inline int window(int dir, int k, int s, int d, int p, int r) {
  if (dir == 0) return (r - 1) * s + (k - 1) * d + 1;
  const int qmin = floordiv(p - (k - 1) * d, s);
  return floordiv(r - 1 + p, s) - qmin + 1;
}

inline const char* kernel_type(DType d) {
  switch (d) {
    case DType::f32: return "float";
    case DType::f16: return "kvt_f16";
    case DType::bf16: return "kvt_bf16";
  }
  return "?";
}

inline std::vector<detail::HeaderSource> headers() {
  return {{"common.cuh", embedded::common_cuh},
          {"dwconv_params.h", embedded::dwconv_params_h},
          {"dwconv_mma.cuh", embedded::dwconv_mma_cuh},
          {"dwconv_tiled.cuh", embedded::dwconv_tiled_cuh},
          {"dwconv_tiled_first.cuh", embedded::dwconv_tiled_first_cuh},
          {"dwconv_tiled_last.cuh", embedded::dwconv_tiled_last_cuh},
          {"dwconv_activation.cuh", embedded::dwconv_activation_cuh}};
}

inline std::string problem_args(const Problem& p) {
  return fmt::format("{}, {}, {}, {}, {}, {}, {}, {}, {}, {}", kernel_type(p.dtype), p.channel_last() ? 1 : 0,
                     dir_index(p.direction), p.kh, p.kw, p.sh, p.sw, p.dh, p.dw, p.pad_top) +
         fmt::format(", {}", p.pad_left);
}

inline int taps(const Problem& p) { return p.kh * p.kw; }

// Items of a flat-item variant over `batch` images: planes x groups of RH output rows x runs of RW
// (dwconv.cu numbers them in 32 bits).
inline std::int64_t flat_items(const Problem& p, const TiledConfig& c, std::int64_t batch) {
  return batch * p.c * ceil_div(p.dst_h(), c.rows_per_thread) * ceil_div(p.dst_w(), c.outputs_per_thread);
}

// A weight gradient's positions of one channel, in its threads' tiles: images x groups of RH dy rows x
// runs of RW (untiled: single positions).
inline std::int64_t wgrad_tiles(const Problem& p, const WgradConfig& c) {
  return p.n * ceil_div(p.dst_h(), c.rows_per_thread) * ceil_div(p.dst_w(), c.outputs_per_thread);
}

// Shared memory of a staged weight gradient (smem_halo): two x planes, each as dwconv.cu's
// kvt_dwconv_wgrad_staged lays it out (rows of the tiles' windows x VC-aligned columns of their
// runs' windows, rounded up to 16 bytes).
inline std::size_t wgrad_plane_bytes(const Problem& p, const WgradConfig& c) {
  const std::int64_t rw = c.outputs_per_thread, rh = c.rows_per_thread, vc = c.vector_channels;
  const std::int64_t runs = ceil_div(p.dst_w(), rw), groups = ceil_div(p.dst_h(), rh);
  const std::int64_t lead = ((-p.pad_left % vc) + vc) % vc;
  const std::int64_t vecs = (lead + window(0, p.kw, p.sw, p.dw, p.pad_left, static_cast<int>(rw)) + vc - 1) / vc;
  const std::int64_t rows = (groups * rh - 1) * p.sh + std::int64_t(p.kh - 1) * p.dh + 1;
  const std::int64_t pitch = (runs - 1) * rw * p.sw + vecs * vc;
  const std::int64_t piece = 16 / p.element_bytes();
  return 2 * std::size_t((rows * pitch + piece - 1) / piece * piece) * std::size_t(p.element_bytes());
}

// A weight gradient's vector widths along W (0: scalars): the widest vector that divides the rows (14 x
// 14 planes: 2 elements), and 4 elements too for 16-bit types, the heuristic's width for every type.
// Channel-last: none.
inline std::vector<int> wgrad_widths(const Problem& p) {
  const int elem = p.element_bytes();
  int widest = 16 / elem;
  while (widest > 1 && (p.src_w() % widest != 0 || p.dst_w() % widest != 0 || widest * elem > p.align_bytes)) widest /= 2;
  if (p.channel_last() || widest < 2) return {0};
  if (widest > 4) return {0, widest, 4};
  return {0, widest};
}

// The splits of a staged weight gradient: whole images, as few as fill the GPU's blocks in whole waves
// (4 blocks of 128 threads an SM on 132 SMs), each wave paying one image's copies before its FMAs start:
// the fewest waves x (images a split + 1). H100, NCHW f32 7x7 on 96 channels: 5 splits 52.4 us, 4 54.8,
// 11 53.9, 16 56.3 (bench/NOTES.md, "from staged x planes").
inline int wgrad_staged_splits(const Problem& p) {
  constexpr std::int64_t kSlots = 4 * 132;
  int best = 1;
  std::int64_t best_cost = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t s = 1; s <= std::min<std::int64_t>(p.n, 64); ++s) {
    const std::int64_t per = ceil_div(p.n, s), used = ceil_div(p.n, per);
    if (used != s) continue;  // the same images a split as a smaller count
    const std::int64_t cost = ceil_div(p.c * s, kSlots) * (per + 1);
    if (cost < best_cost) best_cost = cost, best = static_cast<int>(s);
  }
  return best;
}

// Channel-last staged tiles (smem_halo): a tile's source, [rows][columns][TX * VC channels] of the
// element type, one buffer or two (tiles per block, RT > 1), then the taps in shared memory as f32
// ([tap][channel]) where the filter is not in registers.
inline std::int64_t staged_tiles(const Problem& p, const TiledConfig& c, std::int64_t batch) {
  return ceil_div(p.c, std::int64_t(c.threads_x) * c.vector_channels) * batch *
         ceil_div(p.dst_h(), c.rows_per_thread) * ceil_div(p.dst_w(), std::int64_t(c.threads_y) * c.outputs_per_thread);
}
inline std::size_t staged_tile_elements(const Problem& p, const TiledConfig& c) {
  const int dir = dir_index(p.direction);
  const std::size_t channels = std::size_t(c.threads_x) * std::size_t(c.vector_channels);
  const std::size_t rows = std::size_t(window(dir, p.kh, p.sh, p.dh, p.pad_top, c.rows_per_thread));
  const std::size_t cols = std::size_t(window(dir, p.kw, p.sw, p.dw, p.pad_left, c.threads_y * c.outputs_per_thread));
  return rows * cols * channels;
}
inline std::size_t staged_smem_bytes(const Problem& p, const TiledConfig& c) {
  const std::size_t channels = std::size_t(c.threads_x) * std::size_t(c.vector_channels);
  const std::size_t buffers = c.runs_per_thread > 1 ? 2 : 1;
  return buffers * staged_tile_elements(p, c) * std::size_t(p.element_bytes()) + (c.smem_filter ? std::size_t(taps(p)) * channels * 4 : 0);
}

// Tensor-core tiles (dwconv_mma.cuh): the shapes the kernel derives from its template arguments, and the
// plane pitch the host chooses for it. One channel's plane is [rows][pitch] 16-bit elements, where the
// ldmatrix reads of a tile's 16 segments cover `columns`; the pitch is 8 mod 16 elements, so the 8 rows of
// an ldmatrix phase and the 8 segments of an output write fall in distinct banks.
struct MmaTile {
  int runs = 0, run_w = 0, tile_w = 0;  // segments along W, outputs a segment, output columns a tile
  int steps = 0;                        // 16-column blocks of one n-tile's window
  int blocks = 0;                       // 8-column blocks a kernel row's ldmatrix reads (kBlocks)
  int rows = 0, columns = 0, pitch = 0;
  int group_step = 0, tap_row = 0;      // elements between groups of 8 planes; a kernel row's tap slots
};
inline MmaTile mma_tile(const Problem& p, const MmaConfig& c) {
  const int dir = dir_index(p.direction);
  MmaTile m;
  const int tr = std::max(1, c.tile_rows), nt = std::max(1, c.segment_tiles);
  m.runs = std::max(1, 16 / tr);
  m.run_w = 8 * nt;
  m.tile_w = m.runs * m.run_w;
  m.steps = (window(dir, p.kw, p.sw, p.dw, p.pad_left, 8) + 15) / 16;
  m.rows = window(dir, p.kh, p.sh, p.dh, p.pad_top, tr);
  m.columns = (m.runs - 1) * m.run_w * p.sw + (nt - 1) * 8 * p.sw + 16 * m.steps;
  m.pitch = (m.columns + 7) / 16 * 16 + 8;  // the smallest multiple of 8 at or above, that is 8 mod 16
  m.blocks = (nt - 1) * p.sw + 2 * (m.steps - 1) + 2;  // n-tile t, step s reads blocks t * SW + 2s and the next
  m.group_step = c.channels_per_block / 8 == 2 ? 32 : 16;
  m.tap_row = p.kw < 4 ? 4 : p.kw < 8 ? 8 : p.kw + 1;
  return m;
}
inline std::size_t mma_smem_bytes(const Problem& p, const MmaConfig& c, const MmaTile& m) {
  const std::size_t cb = std::size_t(c.channels_per_block);
  // The planes, each group of 8 planes group_step elements further than the last, and the taps.
  const std::size_t elements = cb * std::size_t(m.rows) * std::size_t(m.pitch) + (cb / 8 - 1) * std::size_t(m.group_step) +
                               cb * std::size_t(p.kh) * std::size_t(m.tap_row);
  return (elements * 2 + 15) / 16 * 16;
}
inline std::int64_t mma_tiles(const Problem& p, const MmaConfig& c, const MmaTile& m, std::int64_t batch) {
  return ceil_div(p.c, c.channels_per_block) * batch * ceil_div(p.dst_h(), std::max(1, c.tile_rows)) * ceil_div(p.dst_w(), m.tile_w);
}

}  // namespace kvtune::dwconv::sizes
