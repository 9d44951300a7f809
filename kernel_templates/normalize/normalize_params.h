// Kernel arguments of the normalize family: one struct, passed by value, with the same layout in
// host code and in the NVRTC program (this file is compiled by both).
#pragma once

struct KvtNormalizeParams {
  const void* x;      // [rows x cols], leading dimension ld_x elements
  void* y;            // [rows x cols], leading dimension ld_y elements; may equal x
  const void* gamma;  // [cols] in x's dtype, or null
  const void* beta;   // [cols] in x's dtype, or null
  float* mean;        // [rows] f32, or null
  float* rstd;        // [rows] f32, or null
  long long rows;
  long long cols;
  long long ld_x;
  long long ld_y;
  float eps;
  int ddof;
  // Split rows (normalize_split.cuh; zero for the one-block kernel): each row is `splits` slices,
  // processed in phases, one kernel each.
  float* row_partials;  // phased: [rows][splits][warps][4] statistics of each warp's part of a slice;
                        // cooperative: [rows][splits][3] of each slice (both with the row's shift)
  float* row_final;     // [rows][3] the row's mean (relative to the shift), scale and shift (phase 1)
  long long splits;
  int row_loop;  // the phased output's rows per block (config `loop`; 1 otherwise)
};
// KvtNormalizeParams stays within 128 bytes (120 now): NVVM scalarizes a by-value kernel argument
// up to that size only, and a larger one changes the code of every variant (bench/NOTES.md, "fused
// residual").

// The forward kernels' second argument, the fused residual add (template argument RES): the rows
// normalized are s = x + residual (rounded to the dtype); residual_out (RES == 2) receives s in the
// output pass. Zero and unread when RES == 0.
struct KvtResidualParams {
  const void* residual;  // [rows x cols], ld_r
  void* residual_out;    // [rows x cols], ld_s
  long long ld_r;
  long long ld_s;
};

// Threads a block of the float64 reference kernels (normalize.cu: kvt_normalize_reference and the
// backward's), `tpr` threads a row.
constexpr int kKvtReferenceBlock = 256;

// Arguments of the backward kernel: dx from x, dy and the row statistics (saved by the forward or
// recomputed); dgamma/dbeta reduced over all rows through per-row-group partials in `workspace`
// and a two-level arrival tree, or (grid_sum) a grid-wide arrival and column sums shared by every
// block (deterministic either way: every sum runs in a fixed order).
struct KvtNormalizeBackwardParams {
  const void* x;      // [rows x cols], ld_x
  const void* dy;     // [rows x cols], ld_dy
  void* dx;           // [rows x cols], ld_dx; may equal dy
  const void* gamma;  // [cols] or null
  const float* mean;  // saved per-row mean, or null (recomputed; rmsnorm has none)
  const float* rstd;  // saved per-row scale, or null (recomputed)
  void* dgamma;       // [cols] in x's dtype, or null
  void* dbeta;        // [cols] in x's dtype, or null
  float* partials;    // [grads][blocks * rows per block][cols] f32
  float* level1;      // [grads][level1_rows][cols] f32
  unsigned* counters; // [level1_rows + 1], zero at launch (the arrival tree; grid_sum leaves them unused)
  long long rows;
  long long cols;
  long long ld_x;
  long long ld_dy;
  long long ld_dx;
  float eps;
  int ddof;
  int row_loop;       // rows per row group: block b, pass it, group g has row (b * row_loop + it) * RPB + g
  int group_blocks;   // blocks per first-level group of the arrival tree
  int level1_rows;    // ceil(blocks / group_blocks)
  long long chunks;   // chunks of row_loop * RPB rows; block b takes chunks b, b + gridDim.x, ...
  int grid_sum;       // 1: cooperative launch (gridDim.x <= chunks, all co-resident); dgamma/dbeta
                      // summed by every block after a grid-wide barrier (kvt_grid_sync)
  // Split rows (normalize_split.cuh): statistics and sums per slice, merged per row when direct
  // == 0; dgamma / dbeta partial rows of grad_groups groups of row_loop rows in `partials`.
  float* stat_partials;  // [rows][splits][2]
  float* stat_final;     // [rows][2]
  float* sum_partials;   // [rows][splits][3]
  float* sum_final;      // [rows][3]
  long long splits;
  int phase;
  int direct;
  int grad_groups;
  // Fused residual add (template argument DRES): the gradient flowing into s, added to dx.
  const void* dres;  // [rows x cols], ld_dres; may equal dx
  long long ld_dres;
};
