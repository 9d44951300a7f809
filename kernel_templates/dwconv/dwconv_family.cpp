// The dwconv family's space and rules (constraints with reasons, enumeration, seeds, heuristic),
// geometry, byte and FLOP models, compile requests, template hash and cost model. Problems, configs,
// keys and argument rules as values: dwconv_problem.cpp.
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_params.h"
#include "kernel_templates/dwconv/dwconv_sizes.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/embedded.h"
#include "core/hash.h"

namespace kvtune::dwconv {
namespace {

using namespace sizes;

constexpr int kDescriptionVersion = 2;  // 2: epilogues (activation, gradient prep)
constexpr int kMaxFilterRegisters = 64;
constexpr int kMaxAccumulators = 64;      // rows x outputs x channels one tiled thread accumulates
constexpr int kMaxUnrolledFmas = 4096;    // rows per thread unroll rows x taps x outputs x channels  // a register-tiled wgrad thread keeps one accumulator per tap
constexpr std::size_t kMaxSmem = 48 * 1024;  // per block without opt-in: every variant but those below
// Channel-last shared filters of kernels over 64 taps, and channel-last staged tiles, may use the
// opt-in shared memory of sm_90 / sm_100 (227 KiB a block; sm_80 163, sm_86 / sm_89 99): with 48 KiB a
// 31x31 filter leaves 8 channels a block, so a warp reads 16-byte pieces of 32-byte sectors (bf16). The
// tuner drops a variant above its device's limit as resources_exceeded; the heuristic stays within
// kMaxSmem, staged tiles within 96 KiB (every sm_80+ device gives a block 99 KiB or more).
constexpr std::size_t kMaxSmemOptIn = 227 * 1024;


// Sets *why (when asked) to the reason a constraint failed; returns false.
bool fail(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return false;
}

bool check_wgrad(const Problem& p, const WgradConfig& c, std::string* why, bool prune) {
  const int elem = p.element_bytes();
  const int block = c.channels_per_block * c.position_threads;
  if (c.channels_per_block < 1 || c.position_threads < 1 || block > 1024) return fail(why, "block size outside 1..1024");
  if (!p.channel_last() && c.channels_per_block != 1) return fail(why, "channel-first wgrad takes one channel per block");
  const int rw = c.outputs_per_thread, rh = c.rows_per_thread;
  const int vc = c.vector_channels;
  if (rw < 1 || rw > 16) return fail(why, "outputs per thread: 1..16");
  if (rh < 1 || rh > 8) return fail(why, "rows per thread: 1..8");
  if (vc < 1) return fail(why, "vector width: 1 or more");
  // Accumulators: up to 32 taps per block column, 64 for a register-tiled thread with every tap.
  const int max_taps = rw > 1 && c.taps_per_block == taps(p) ? kMaxAccumulators : 32;
  if (c.taps_per_block < 1 || c.taps_per_block > max_taps) return fail(why, fmt::format("taps per block: 1..{}", max_taps));
  if (c.taps_per_block > taps(p)) return fail(why, "more taps per block than the kernel has");
  if (c.splits < 1 || c.splits > 65535) return fail(why, "splits: 1..65535");
  if (c.atomic && p.deterministic) return fail(why, "atomics need deterministic = false");
  if (p.activation != Activation::none &&
      (c.staged || rw == 1 || rh != 1 || c.taps_per_block != taps(p)))
    return fail(why, "the fused weight gradient: register-tiled runs of one row with every tap, not staged");
  // Mirror of the kernel's partial[kRows][CT][TG + 1] (one row per warp where lanes reduce first) and
  // its last_block flag, padded to 4 bytes: ptxas refused 32 x 8 x 48 floats + the flag (0xc001 bytes).
  const int ct = c.channels_per_block;
  const bool lane_reduce = ct < 32 && 32 % ct == 0 && block % 32 == 0;
  const std::size_t partial_rows = lane_reduce ? std::size_t(block / 32) : std::size_t(c.position_threads);
  if (partial_rows * ct * std::size_t(c.taps_per_block + 1) * 4 + 4 > kMaxSmem) return fail(why, "shared memory");
  // Register tiling (rw > 1): runs of rw dy elements along W, every tap in the thread's registers.
  if (rw > 1 && c.taps_per_block != taps(p) && !(c.taps_per_block == p.kw && p.kh > 1))
    return fail(why, "register-tiled wgrad keeps every tap (tg = taps) or one kernel row's (tg = kw)");
  if (rh > 1 && (rw == 1 || c.taps_per_block != taps(p)))
    return fail(why, "rows per thread: register-tiled runs with every tap");
  if (rh * rw > kMaxAccumulators || rh * taps(p) * rw > kMaxUnrolledFmas) return fail(why, "tile too large for registers");
  if (vc > 1) {
    // vc > 1: dy runs and x windows as aligned vectors of vc elements along W.
    if (p.channel_last() || rw == 1) return fail(why, "vectors along W: channel-first register-tiled runs only");
    if ((vc & (vc - 1)) != 0 || vc * elem > 16 || vc * elem > p.align_bytes) return fail(why, "vector width exceeds alignment");
    if (rw % vc != 0) return fail(why, "vectors along W: outputs per thread a multiple of the width");
    if (p.src_w() % vc != 0 || p.dst_w() % vc != 0) return fail(why, "vectors along W: rows a multiple of the width");
  }
  // 1D tiles (one x row a tile) may hold a long window (K = 63).
  if (rw > 1 && window(0, p.kw, p.sw, p.dw, p.pad_left, rw) + vc >
                    (p.kh == 1 && rh == 1 ? kMaxLongWindowRegisters : kMaxWindowRegisters))
    return fail(why, "register window too large");
  if (prune && rw > 1 && p.dst_w() < rw) return fail(why, "runs longer than the rows");
  if (prune && rh > next_pow2(p.dst_h())) return fail(why, "more rows per thread than the output has");
  if (prune && c.channels_per_block > 1 && c.channels_per_block / 2 >= p.c) return fail(why, "idle channel threads");
  if (c.staged) {
    // Staged x planes (kvt_dwconv_wgrad_staged): one channel a block, register tiles with every tap,
    // copies of 4, 8 or 16 bytes, two planes in shared memory.
    if (p.channel_last() || rw == 1 || c.taps_per_block != taps(p))
      return fail(why, "staged wgrad: channel-first register-tiled runs with every tap");
    if (vc * elem < 4) return fail(why, "staged wgrad: copies of 4 bytes or more (vectors along W)");
    if (c.splits > 64) return fail(why, "staged wgrad: splits 1..64 (whole images)");
    // The planes plus the block's static partials (kvt_wgrad_finish).
    const std::size_t planes = wgrad_plane_bytes(p, c);
    if (planes + partial_rows * std::size_t(c.taps_per_block + 1) * 4 + 4 > kMaxSmemOptIn) return fail(why, "shared memory");
    if (prune && planes > 2 * kMaxSmem) return fail(why, "staged planes over 96 KiB");
    if (prune && c.splits > p.n) return fail(why, "more splits than images");
    if (prune && p.dst_h() == 1) return fail(why, "staged wgrad: planes of one row");
  } else if (prune && c.splits > 1 && wgrad_tiles(p, c) / c.splits < 4 * c.position_threads) {
    return fail(why, "too little work per split");
  }
  return true;
}

bool check_mma(const Problem& p, const MmaConfig& c, std::string* why, bool prune) {
  const int dir = dir_index(p.direction);
  const int cb = c.channels_per_block, tr = c.tile_rows, nt = c.segment_tiles;
  if (p.dtype == DType::f32) return fail(why, "tensor-core tiles: 16-bit types (f32 would need TF32, which rounds)");
  // dwconv_mma.cuh applies activations; the gradient prep would read dy at each accumulator's position,
  // which the MMA fragment layout scatters over 64 positions a warp (a 2-byte load each).
  if (p.gradient_prep) return fail(why, "tensor-core tiles: no gradient prep (dy per accumulator is a scattered load)");
  if (!p.channel_last()) return fail(why, "tensor-core tiles: channel-last layouts");
  if (p.align_bytes < 16) return fail(why, "tensor-core tiles: 16-byte loads (channels a multiple of 8, aligned tensors)");
  if (dir == 1 && (p.sh != 1 || p.sw != 1)) return fail(why, "tensor-core tiles: backward_data with stride 1 only");
  if (cb < 8 || cb > 64 || cb % 8 != 0) return fail(why, "tensor-core tiles: 8-64 channels a block, a multiple of 8");
  if (c.warps < 1 || c.warps > 16 || cb % c.warps != 0) return fail(why, "tensor-core tiles: warps must divide the channels");
  if (tr < 1 || tr > 16 || 16 % tr != 0) return fail(why, "tensor-core tiles: rows 1, 2, 4, 8 or 16");
  if (nt < 1 || nt > 16) return fail(why, "tensor-core tiles: 1-16 n-tiles a segment");
  const MmaTile m = mma_tile(p, c);  // sizes only once the fields are in range
  if (m.steps > 8) return fail(why, "tensor-core tiles: an n-tile's window over 128 columns");
  if (mma_smem_bytes(p, c, m) > kMaxSmemOptIn) return fail(why, "shared memory");
  if (mma_tiles(p, c, m, p.n) >= (std::int64_t(1) << 31)) return fail(why, "grid.x limit (tiles)");
  if (std::max({p.h, p.w, p.dst_h(), p.dst_w()}) >= (std::int64_t(1) << 30))
    return fail(why, "tensor-core tiles: rows and columns under 2^30 (32-bit positions)");
  if (prune) {
    if (p.dst_h() == 1 && tr != 1) return fail(why, "tensor-core tiles: 1D rows take 16 runs of one row");
    if (tr > next_pow2(p.dst_h())) return fail(why, "more rows per block than the output has");
    if (m.tile_w > 2 * next_pow2(p.dst_w())) return fail(why, "tile much wider than the output");
    // Outputs a tile computes and nobody stores: at most 28 %.
    const double used = double(p.dst_w()) / double(ceil_div(p.dst_w(), m.tile_w) * m.tile_w) *
                        double(p.dst_h()) / double(ceil_div(p.dst_h(), tr) * tr);
    if (used < 0.72) return fail(why, "tensor-core tiles: over 28 % of the tiles past the output");
    if (cb / 2 >= p.c) return fail(why, "idle channels (more than twice the channels)");
  }
  return true;
}

bool check_tiled(const Problem& p, const TiledConfig& c, std::string* why, bool prune) {
  const int dir = dir_index(p.direction);
  const int elem = p.element_bytes();
  const int rw = c.outputs_per_thread, tx = c.threads_x, ty = c.threads_y, vc = c.vector_channels;
  const int rh = c.rows_per_thread, rt = c.runs_per_thread;
  if (rw < 1 || rw > (p.channel_last() ? 32 : 16) || tx < 1 || ty < 1 || tx * ty > 1024) return fail(why, "tile shape");
  if (rh < 1 || rh > 8) return fail(why, "rows per thread: 1..8");
  if (rt < 1 || rt > 8) return fail(why, "runs per thread: 1..8");
  if (!p.channel_last() && rh > 1 && taps(p) > kKvtUnrolledTaps)
    return fail(why, "rows per thread: one for channel-first kernels of more than 256 taps (dwconv_params.h)");
  // The fused data gradient (dwconv_tiled.cuh, kvt_first_fused / kvt_last_fused): windows from global
  // memory, one row a thread, and an x window of span more values beside each dy window.
  const int span = p.fused_data() ? (p.kw - 1) * p.dw : 0;
  if ((p.fused_data() || p.seq_idx) && (c.smem_halo || rh != 1 || c.flat))
    return fail(why, "the fused data gradient and seq_idx: windows from global memory, one row a thread, tiles");
  if (rt > 1 && !(p.channel_last() && c.smem_halo) && (p.channel_last() || c.smem_halo || rh > 1 || p.kh != 1))
    return fail(why, "runs per thread: channel-first, global-memory halo, one kernel row and one row per thread");
  if (c.flat) {
    if (p.channel_last() || c.smem_halo || c.smem_filter || rt > 1 || ty != 1 || tx % 32 != 0)
      return fail(why, "flat items: channel-first, global-memory halo, taps in registers, one run, whole warps in one row of threads");
    // The kernel numbers items (planes x row groups x runs) in 32 bits.
    if (flat_items(p, c, p.n) + tx >= (std::int64_t(1) << 32)) return fail(why, "grid.x limit (32-bit item index)");
  }
  if (rh > 1) {
    if (c.smem_halo && !p.channel_last())
      return fail(why, "channel-first rows per thread read their rows from global memory (no halo staging)");
    if (dir == 1 && rh % p.sh != 0) return fail(why, "backward_data: rows per thread must be a multiple of stride_h");
    const int lanes = p.channel_last() ? vc : 1;  // channel-first vectors run along W, inside the run
    if (rh * rw * lanes > kMaxAccumulators) return fail(why, "too many accumulators");
    if (rh * taps(p) * rw * lanes > kMaxUnrolledFmas) return fail(why, "unrolled code too large");
    if (prune && rh > next_pow2(p.dst_h())) return fail(why, "more rows per thread than the output has");
  }
  // Channel-last threads take (W run, channel vector) pairs of an output row, channel vector fastest.
  const std::int64_t row_items = p.channel_last() && vc >= 1 ? p.c / vc * ceil_div(p.dst_w(), rw) : 0;
  if (prune && tx * ty < 32 && !(p.channel_last() && tx >= row_items)) return fail(why, "blocks under a warp");
  if (dir == 1 && rw % p.sw != 0) return fail(why, "backward_data: outputs per thread must be a multiple of stride_w");
  const int win = window(dir, p.kw, p.sw, p.dw, p.pad_left, rw);
  if (!p.channel_last()) {
    if (vc != 1) {
      // vc > 1: the window loaded, and the run stored, as aligned vectors of vc elements along W.
      if (vc < 1 || (vc & (vc - 1)) != 0 || vc * elem > 16 || vc * elem > p.align_bytes) return fail(why, "vector width exceeds alignment");
      if (c.smem_halo) return fail(why, "channel-first vectors along W: global-memory halo only");
      if (rw % vc != 0) return fail(why, "channel-first vectors along W: outputs per thread a multiple of the width");
      if (p.src_w() % vc != 0 || p.dst_w() % vc != 0) return fail(why, "channel-first vectors along W: rows a multiple of the width");
      if (dir == 1 && p.sw != 1) return fail(why, "channel-first vectors along W: backward_data with stride_w 1 only");
    }
    if (win + span > kMaxWindowRegisters) return fail(why, "register window too large");
    if (!c.smem_filter && taps(p) > kMaxFilterRegisters) return fail(why, "filter too large for registers");
    std::size_t floats = c.smem_filter ? std::size_t((taps(p) + 3) / 4 * 4) : 0;
    if (!c.flat && ceil_div(p.dst_h(), ty * rh) > 65535) return fail(why, "grid.y limit");
    // The kernel splits blockIdx.x into (plane, W tile) in 32 bits.
    if (!c.flat && double(p.n) * double(p.c) * double(ceil_div(p.dst_w(), std::int64_t(tx) * rw * rt)) > 2147483647.0)
      return fail(why, "grid.x limit (planes x W tiles)");
    if (c.smem_halo) {
      if (dir == 1 && ty % p.sh != 0) return fail(why, "backward_data halo tile: rows per block a multiple of stride_h");
      floats += std::size_t(window(dir, p.kh, p.sh, p.dh, p.pad_top, ty)) *
                std::size_t(window(dir, p.kw, p.sw, p.dw, p.pad_left, tx * rw));
    }
    if (floats * 4 > kMaxSmem) return fail(why, "shared memory");
    if (prune && !c.flat && tx * rw > 2 * next_pow2(p.dst_w())) return fail(why, "tile much wider than the output");
    if (prune && c.flat && p.dst_h() == 1) return fail(why, "flat items: 2D planes only (1D rows are whole tiles)");
    if (prune && rt > 1 && tx * rw * rt > next_pow2(p.dst_w())) return fail(why, "runs per thread: tiles wider than the output");
    if (prune && !c.flat && ty * rh > next_pow2(p.dst_h())) return fail(why, "more rows per block than the output has");
  } else {
    if (vc < 1 || (vc & (vc - 1)) != 0 || vc * elem > 16 || vc * elem > p.align_bytes)
      return fail(why, "vector width exceeds alignment");
    // Rows of one-row kernels from global memory, one a thread (kvt_last_rows), may hold a long window.
    const bool long_window = p.kh == 1 && !c.smem_halo && rh == 1 && span == 0 && !p.seq_idx;
    if ((win + span) * vc > (long_window ? kMaxLongWindowRegisters : kMaxWindowRegisters))
      return fail(why, "register window too large");
    if (long_window && win * vc > kMaxWindowRegisters && rw * vc > kMaxAccumulators) return fail(why, "too many accumulators");
    if (!c.smem_filter && taps(p) * vc > kMaxFilterRegisters) return fail(why, "filter too large for registers");
    if (p.c % vc != 0) return fail(why, "channel-last vectors: channels a multiple of the width");
    if (c.smem_halo) {
      // Staged tiles: TX channel vectors x TY runs x RH rows, the source tile copied to shared memory
      // in 16-byte pieces along the channels; RT tiles a block, one after another.
      const int piece = 16 / elem;
      if (p.c % piece != 0 || p.align_bytes < 16 || (tx * vc) % piece != 0)
        return fail(why, "staged tile: 16-byte copies (channels a multiple of 16 bytes, aligned tensors)");
      if (dir == 1 && rh % p.sh != 0) return fail(why, "backward_data staged tile: rows per block a multiple of stride_h");
      if (staged_smem_bytes(p, c) > kMaxSmemOptIn) return fail(why, "shared memory");
      if (staged_tiles(p, c, p.n) + rt >= (std::int64_t(1) << 31)) return fail(why, "grid.x limit (tiles)");
      if (staged_tile_elements(p, c) / piece > std::size_t(16) * tx * ty) return fail(why, "staged tile: over 16 copies a thread");
      // Lanes along channels: a warp's window reads cover 32 consecutive channels at least (16-bit
      // elements with 2 channels a thread still meet 2-way bank conflicts between its two rows of threads).
      if (prune && tx * vc < 32) return fail(why, "staged tile: fewer than 32 channels a block");
      if (prune && tx * ty < 32) return fail(why, "blocks under a warp");
      if (prune && std::int64_t(tx) * vc / 2 >= p.c) return fail(why, "idle threads (more than twice the channels)");
      if (prune && taps(p) > kMaxFilterRegisters) return fail(why, "staged tile: kernels of up to 64 taps (larger tiles outgrow shared memory)");
      if (prune && ty * rw > 2 * next_pow2(p.dst_w())) return fail(why, "tile much wider than the output");
      if (prune && rh > next_pow2(p.dst_h())) return fail(why, "more rows per block than the output has");
      if (prune && staged_smem_bytes(p, c) > 2 * kMaxSmem) return fail(why, "staged tile over 96 KiB (2 blocks an SM at most)");
      return true;
    }
    // Opt-in shared memory only for kernels whose taps cannot be in registers (smaller ones: 48 KiB
    // already holds 128 threads' 8-channel filters, and wider ones lost where measured).
    const std::size_t smem_limit = taps(p) > kMaxFilterRegisters ? kMaxSmemOptIn : kMaxSmem;
    if (c.smem_filter && std::size_t(taps(p)) * tx * vc * 4 > smem_limit) return fail(why, "shared memory");
    if (p.n * ceil_div(p.dst_h(), ty * rh) > 65535) return fail(why, "grid.y limit");
    if (row_items + tx >= (std::int64_t(1) << 32)) return fail(why, "grid.x limit (32-bit thread index along a row)");
    if (prune && tx / 2 >= row_items) return fail(why, "idle threads (more than twice a row's work)");
    if (prune && ty * rh > next_pow2(p.dst_h())) return fail(why, "more rows per block than the output has");
    if (prune && rw > next_pow2(p.dst_w())) return fail(why, "run longer than the output");
  }
  return true;
}

bool check(const Problem& p, const Config& c, std::string* why, bool prune) {
  const bool fused_wgrad = p.fused_weight(), fused_data = p.fused_data();
  if (p.gradient_prep && p.direction != DwDirection::forward) return fail(why, "the gradient prep is a forward problem");
  if (fused_data && (p.h != 1 || p.kh != 1 || p.sw != 1)) return fail(why, "the fused data gradient: 1D, stride 1");
  if (fused_wgrad && (p.h != 1 || p.kh != 1)) return fail(why, "the fused weight gradient is 1D");
  if (p.seq_idx && !(fused_wgrad || fused_data || (p.direction == DwDirection::forward && !p.gradient_prep)))
    return fail(why, "seq_idx: forward and the fused 1D gradients only (else dwconv_states)");
  if (p.seq_idx && (p.h != 1 || p.kh != 1 || p.sw != 1 || p.pad_left != (p.kw - 1) * p.dw || p.pad_right != 0))
    return fail(why, "seq_idx: 1D causal, stride 1");
  if (p.seq_idx && p.direction != DwDirection::backward_weight && c.kernel() != Kernel::tiled)
    return fail(why, "seq_idx: tiled kernels only");
  if (p.gradient_prep && p.activation == Activation::none) return fail(why, "gradient prep without an activation");
  if (p.direction == DwDirection::backward_weight)
    return c.kernel() == Kernel::wgrad ? check_wgrad(p, c.wgrad(), why, prune)
                                       : fail(why, "backward_weight uses the wgrad kernel");
  if (fused_data && c.kernel() != Kernel::tiled) return fail(why, "the fused data gradient: tiled kernels only");
  switch (c.kernel()) {
    case Kernel::wgrad: return fail(why, "the wgrad kernel is for backward_weight");
    case Kernel::mma: return check_mma(p, c.mma(), why, prune);
    case Kernel::direct: return true;
    case Kernel::tiled: break;
  }
  return check_tiled(p, c.tiled(), why, prune);
}

}  // namespace

bool is_valid(const Problem& p, const Config& c, std::string* why) { return check(p, c, why, true); }

bool is_runnable(const Problem& p, const Config& c, std::string* why) { return check(p, c, why, false); }

TiledConfig tiled_config(int rw, int tx, int ty, int vc, int halo, int filter, int rh, int rt) {
  TiledConfig c;
  c.outputs_per_thread = rw;
  c.threads_x = tx;
  c.threads_y = ty;
  c.vector_channels = vc;
  c.smem_halo = halo != 0;
  c.smem_filter = filter != 0;
  c.rows_per_thread = std::max(1, rh);
  c.runs_per_thread = std::max(1, rt);
  return c;
}

TiledConfig flat_config(int rw, int block, int vc, int rh) {
  TiledConfig c = tiled_config(rw, block, 1, vc, 0, 0, rh);
  c.flat = true;
  return c;
}

MmaConfig mma_config(int cb, int tr, int nt, int warps) { return MmaConfig{cb, tr, nt, warps}; }

WgradConfig wgrad_config(int ct, int py, int tg, int splits, int atomic, int rw, int vc, int rh) {
  WgradConfig c;
  c.channels_per_block = ct;
  c.position_threads = py;
  c.taps_per_block = tg;
  c.splits = splits;
  c.atomic = atomic != 0;
  c.outputs_per_thread = std::max(1, rw);
  c.vector_channels = std::max(1, vc);
  c.rows_per_thread = std::max(1, rh);
  return c;
}

std::vector<std::pair<std::string, Config>> seed_configs(const Problem& p) {
  std::vector<std::pair<std::string, Config>> seeds;
  const bool last = p.channel_last();
  if (p.direction == DwDirection::backward_weight) {
    const int ct = last ? 32 : 1, tg = std::min(taps(p), 32);
    seeds.emplace_back("naive", wgrad_config(1, 1, 1, 1, 0, 0, 0, 0));
    seeds.emplace_back("coalesced", wgrad_config(ct, 256 / ct, 1, 1, 0, 0, 0, 0));
    seeds.emplace_back("smem-blocked", wgrad_config(ct, 256 / ct, tg, 1, 0, 0, 0, 0));
    seeds.emplace_back("warp-tiled", wgrad_config(ct, 32 / ct, tg, 1, 0, 0, 0, 0));
  } else {
    seeds.emplace_back("naive", DirectConfig{false});
    seeds.emplace_back("coalesced", DirectConfig{true});
    const int rw = p.direction == DwDirection::backward_data ? p.sw : 1;
    seeds.emplace_back("smem-blocked", tiled_config(rw, 32, 8, 1, last ? 0 : 1, 1, 1));
    const int warp_rw = p.direction == DwDirection::backward_data ? std::max(4, p.sw) : 4;
    seeds.emplace_back("warp-tiled", tiled_config(warp_rw, 32, 4, 1, 0, taps(p) > kMaxFilterRegisters ? 1 : 0, 1));
  }
  std::vector<std::pair<std::string, Config>> runnable;
  for (auto& s : seeds)
    if (is_runnable(p, s.second)) runnable.push_back(s);
  return runnable;
}

std::vector<Config> enumerate(const Problem& p) {
  std::vector<Config> out;
  for (const auto& s : seed_configs(p)) out.push_back(s.second);
  auto add = [&](const Config& c) {
    if (is_valid(p, c) && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (p.direction == DwDirection::backward_weight) {
    // Vectors along W (channel-first) and rows per thread (every tap; runs of 4 or 8) for register
    // tiles. Runs of 8 in rows won both 2D benchmark problems (H200, exhaustive: NCHW f32 7x7 91.8 ->
    // 82.3 us, 3x3 52.1 -> 47.7; bench/NOTES.md, "three hypotheses, one kept").
    const std::vector<int> widths = wgrad_widths(p);
    const std::vector<int> row_counts = p.dst_h() > 1 ? std::vector<int>{0, 2, 4} : std::vector<int>{0};
    std::vector<int> channel_tiles = p.channel_last() ? std::vector<int>{8, 32} : std::vector<int>{1};
    // The fused weight gradient has no seed designs (runs of one output): channel-last rows of under 8
    // channels need a tile that leaves no idle channel threads.
    if (p.channel_last() && p.activation != Activation::none && p.c < 8)
      channel_tiles.push_back(static_cast<int>(next_pow2(p.c)));
    for (int ct : channel_tiles)
      for (int block : {128, 256})
        for (int tg : {std::min(taps(p), 8), std::min(taps(p), 32), p.kh > 1 && p.kw <= 32 ? p.kw : 0,
                       taps(p) <= kMaxAccumulators ? taps(p) : 0})
          for (int splits : {1, 8, 32, 128})
            for (int atomic : {0, 1})
              for (int rw : {0, 4, 8, 16})
                for (int vw : widths)
                  for (int rh : row_counts) {
                    if (rw == 0 && (vw > 0 || rh > 0)) continue;
                    // Runs of 16: 1D rows (twice the bytes in flight a thread, no rows to share).
                    if (rw == 16 && p.dst_h() > 1) continue;
                    add(wgrad_config(ct, block / ct, tg, splits, atomic, rw, std::min(vw, rw), rh));
                  }
    // Staged x planes (channel-first, every tap): runs of 4 or 8, 2-8 rows, 128 or 256 threads, the
    // wave-filling split count and its neighbours in whole images.
    if (!p.channel_last() && taps(p) <= kMaxAccumulators) {
      const int fill = wgrad_staged_splits(p);
      for (int block : {128, 256})
        for (int splits : {fill, 1, std::max(1, fill / 2), std::min(64, 2 * fill), std::min(64, 4 * fill)})
          for (int atomic : {0, 1})
            for (int rw : {4, 8})
              for (int vw : widths)
                for (int rh : {2, 4, 8}) {
                  WgradConfig staged = wgrad_config(1, block, taps(p), splits, atomic, rw, std::min(vw, rw), rh);
                  staged.staged = true;
                  add(staged);
                }
    }
    return out;
  }
  const int elem = p.element_bytes();
  const auto tiled = [&](int rw, int tx, int ty, int vc, int halo, int filter, int rh, int rt = 0) {
    add(tiled_config(rw, tx, ty, vc, halo, filter, rh, rt));
  };
  // Rows per thread (each source row loaded once for all of them) only where there are rows.
  // 8 rows (runs of 4 only) for kernels of 5 rows or more, where each thread's rows share most
  // source rows: 14 source rows for 8 output rows of a 7x7 instead of 10 for 4.
  std::vector<int> row_counts = p.dst_h() > 1 ? std::vector<int>{1, 2, 4} : std::vector<int>{1};
  if (p.dst_h() > 1 && p.kh >= 5) row_counts.push_back(8);
  // Runs per thread (channel-first, one kernel row, vectors along W): 2, 4 or 8 runs a thread, a tile
  // apart, the thread's setup shared by them and their loads in flight together. (Channel-last
  // consecutive runs with the window carried in registers were tried: H200, NLC bf16 K=31, 106 us
  // against 94 for runs of 32; bench/NOTES.md.)
  const std::vector<int> run_counts = p.kh == 1 ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{1};
  for (int rw : {1, 2, 4, 8, 16, 32})
    for (int ty : {1, 2, 4, 8})
      for (int filter : {0, 1})
        for (int rh : row_counts) {
          if (rh == 8 && rw != 4) continue;
          if (!p.channel_last()) {
            if (rw >= 16) continue;
            for (int block : {64, 128, 256})
              for (int halo : {0, 1})
                for (int vw : {1, std::min(rw, 16 / elem)})  // vectors along W: the whole run, ≤ 16 bytes
                  for (int rt : run_counts) {
                    if ((rh > 1 && (halo || rw == 1)) || (vw > 1 && halo) || (rt > 1 && (vw == 1 || rh > 1))) continue;
                    tiled(rw, block / ty, ty, vw, halo, filter, rh, rt);
                    // The same thread's work as flat items (2D, taps in registers): no idle lanes
                    // where the plane is not a multiple of the tile.
                    if (ty == 1 && !halo && !filter && rt == 1) add(flat_config(rw, block, vw, rh));
                  }
          } else {
            // Runs of 8, 16 and 32 for 1D (K = 31: a window of 38 values serves 8 outputs, 46 serve 16,
            // 62 serve 32; H200, NLC bf16: runs of 4 230 us, of 8 135 us); runs of 8 and 16 in 2D for
            // kernels whose taps only fit in shared memory (31x31 NHWC bf16: runs of 4 1,288 us, of 8
            // 951 us); 8 rows per block for large kernels only (their shared-memory filter limits the
            // channels per block, so blocks grow along H instead).
            const bool large = taps(p) > kMaxFilterRegisters, one_d = p.dst_h() == 1;
            if ((rw == 8 && !one_d && !large) || (rw == 16 && !one_d && !large) || (rw == 32 && !one_d) ||
                (ty == 8 && taps(p) <= 64))
              continue;
            for (int vc = 1; vc * elem <= std::min(16, p.align_bytes); vc *= 2) {
              const std::int64_t items = p.c / vc * ceil_div(p.dst_w(), rw);  // (W run, channel vector) pairs
              for (int tx : {4, 8, 16, 32, 64, 128}) {
                if (tx * ty > 256 || (tx * ty < 64 && tx < items)) continue;  // small blocks only for short rows
                tiled(rw, tx, ty, vc, 0, filter, rh);
              }
            }
          }
        }
  if (p.channel_last()) {
    // Staged tiles: 32 or 64 channels (TX * VC) x TY runs of 2-8 outputs (2D) x RH rows, 64-256 threads,
    // one tile a block or 4 in turn; the taps in registers where they fit, else in shared memory; one
    // or two channels a thread.
    // 1D: runs of 4 to 32 (a K=31 window of 62 serves 32 outputs).
    for (int rw : p.dst_h() > 1 ? std::vector<int>{2, 4, 8} : std::vector<int>{4, 8, 16, 32})
      for (int ty : {1, 2, 4, 8})
        for (int rh : row_counts)
          for (int vc = 1; vc <= 2 && vc * elem <= std::min(16, p.align_bytes); vc *= 2)
            for (int channels : {32, 64})
              for (int rt : {1, 4}) {
                const int tx = channels / vc;
                if (tx * ty < 64 || tx * ty > 256 || (rh == 8 && rw != 4)) continue;
                tiled(rw, tx, ty, vc, 1, taps(p) * vc > kMaxFilterRegisters ? 1 : 0, rh, rt);
              }
    // Tensor-core tiles (16-bit types): 16 or 32 channels (32-byte sectors; 8 for kernels over 64 taps,
    // whose planes are large), 4 or 8 warps, 16 segments as 16 / 8 / 4 rows (2D) or 16 runs of one row
    // (1D), 1-8 n-tiles of 8 outputs a segment.
    for (int cb : taps(p) > kMaxFilterRegisters ? std::vector<int>{8, 16, 32} : std::vector<int>{16, 32})
      for (int warps : {4, 8})
        for (int tr : p.dst_h() > 1 ? std::vector<int>{16, 8, 4} : std::vector<int>{1})
          for (int nt = 1; nt <= 8; ++nt) add(mma_config(cb, tr, nt, warps));
  }
  return out;
}

namespace {

// `config` if `portable`, else the first of the steps' successive edits of it that is; nullopt if none is.
template <class C>
struct Same {
  using type = C;
};

template <class C, class Portable>
std::optional<Config> first_portable(C config, const Portable& portable,
                                     std::initializer_list<std::function<void(typename Same<C>::type&)>> steps) {
  for (const auto& step : steps) {
    if (portable(config)) return Config(config);
    step(config);
  }
  if (portable(config)) return Config(config);
  return std::nullopt;
}

}  // namespace

namespace {

// The analytic rule (one rule serves sm_80..sm_100 today).
Config rule_config(const Problem& p) {
  // The shapes of the exhaustive winners on the benchmark suites (H200,
  // bench/NOTES.md, "weight-gradient vectors and rows, pipelined row windows"); each falls back step by step
  // (no vectors, shared-memory filter, fewer rows) where a problem does not allow it.
  // Valid, and within the shared memory every device gives a block without opting in.
  const auto portable = [&p](const Config& v) {
    return is_valid(p, v) && geometry(p, v, 1).dynamic_smem <= kMaxSmem;
  };
  // Channel-first 2D output rows under 64 that runs of 8 do not divide (ConvNeXt's 28, 14, 7): they
  // rank tiles another way than whole rows (bench/NOTES.md, "ragged rows").
  const bool ragged = !p.channel_last() && p.dst_h() > 1 && p.dst_w() % 8 != 0 && p.dst_w() < 64;
  // The rule's config, else its fallbacks (each step applied to the last), else what the space offers.
  std::optional<Config> ruled;
  if (p.direction == DwDirection::backward_weight) {
    WgradConfig c;
    c.channels_per_block = p.channel_last() ? static_cast<int>(std::min<std::int64_t>(32, next_pow2(p.c))) : 1;
    c.position_threads = 256 / c.channels_per_block;
    c.taps_per_block = std::min(taps(p), 16);
    if (p.activation != Activation::none) {
      // The fused weight gradient: register-tiled runs with every tap (the channel-first rule below
      // sets them too, with vectors).
      c.taps_per_block = taps(p);
      c.outputs_per_thread = p.dst_w() >= 8 ? 8 : 4;
    }
    // Channel-first rows whose runs of 8 leave a partial run (ConvNeXt's 28 x 28, 14 x 14, 7 x 7): runs
    // of 4 in place of 8, no staged planes, 256 threads, no split. H200, exhaustive (2026-12-01), NCHW
    // f32 7x7 32x192x28x28: 36.5 us for 4 rows of runs of 4 with 256 threads and no split (the winner),
    // against 98.7 for the staged planes with runs of 8 this rule took; 3x3 32x288x28x28: 2 rows of
    // runs of 4, 256 threads, no split, the winner (bench/NOTES.md, "ragged rows").
    if (!p.channel_last() && p.dtype == DType::f32 && p.dst_h() > 1 && p.dst_w() >= 4 && taps(p) >= 25 &&
        taps(p) <= kMaxAccumulators && !ragged) {
      // 2D f32 kernels of 25-64 taps: x planes staged in shared memory, 4 rows of runs of 8 (4 for rows
      // shorter than 8), 128 threads, splits that fill whole waves. H100, NCHW f32 7x7: 54.8 us against
      // 69.5 for the register tiles below; 3x3: 54.4 against 51.6, so 3x3 stays below (5x5 is not
      // measured; bench/NOTES.md, "from staged x planes", probe-9).
      WgradConfig staged = wgrad_config(1, 128, taps(p), wgrad_staged_splits(p), 0, p.dst_w() >= 8 ? 8 : 4, 4, 4);
      staged.staged = true;
      const std::vector<int> widths = wgrad_widths(p);  // f32: {0, 4}, {0, 2} or {0}
      for (auto vc = widths.rbegin(); vc != widths.rend(); ++vc) {  // widest first, scalars last
        staged.vector_channels = std::max(1, *vc);
        if (portable(staged)) return staged;
      }
    }
    if (!p.channel_last() && p.dst_w() >= 4 && (taps(p) <= kMaxAccumulators || (p.kh > 1 && p.kw <= 32))) {
      // Register-tiled runs of 8 outputs (4 for rows shorter than 8) read as 4-element vectors along
      // W: every tap (2D: 2 rows of them, 128 threads; H200, exhaustive, NCHW f32 7x7 82.3 us and 3x3
      // 47.7 against 91.8 for 2 rows of runs of 4 and 52.1 for one row of runs of 8,
      // bench/NOTES.md, "three hypotheses, one kept"), or one kernel row per block column (runs of 4, 128
      // threads) for kernels over 64 taps.
      const bool every_tap = taps(p) <= kMaxAccumulators;
      c.outputs_per_thread = every_tap && p.dst_w() >= 8 && !ragged ? 8 : 4;
      c.rows_per_thread = every_tap && p.dst_h() > 1 ? (ragged && taps(p) >= 25 ? 4 : 2) : 1;
      c.position_threads = every_tap && (p.dst_h() == 1 || ragged) ? 256 : 128;
      c.taps_per_block = every_tap ? taps(p) : p.kw;
      c.vector_channels = 16 / p.element_bytes() >= 4 ? 4 : 1;
      if (p.activation != Activation::none && p.dst_h() == 1 && p.element_bytes() == 2 && p.dst_w() >= 16 &&
          every_tap) {
        // The fused 16-bit 1D weight gradient: runs of 16 read as 8-wide (16-byte) vectors, 128
        // threads. H200, exhaustive (2026-12-01), NCL bf16 K=4 SiLU at 4x2048x4096, 8x4096x2048 and
        // 8x8192x1024: the winner each time, against 1.27-1.32x for runs of 8, 4-wide, 256 threads
        // (bench/NOTES.md, "ragged rows").
        c.outputs_per_thread = 16;
        c.vector_channels = 8;
        c.position_threads = 128;
      }
    }
    int blocks_per_sm = 5;
    if (p.channel_last() && p.dst_h() == 1 && p.kw >= 16 && taps(p) <= kMaxAccumulators && p.dst_w() >= 16) {
      // Long 1D kernels, channel-last: register-tiled runs of 16 with every tap, 8 channels x 32 run
      // threads, splits for one block an SM (their ~230 registers a thread leave room for no second).
      // H200, exhaustive, NLC f32 K=63 16x256x4096: 178.9 us with 8 splits, the winner, 211.4 with the
      // 32 that 5 blocks an SM would give, against 2,030 us for the untiled kernel that was the only
      // choice while windows were held to 64 registers (bench/NOTES.md, "long 1D kernels").
      c.channels_per_block = 8;
      c.position_threads = 32;
      c.taps_per_block = taps(p);
      c.outputs_per_thread = 16;
      blocks_per_sm = 1;
    }
    // Split the reduction until the grid fills ~blocks_per_sm blocks per SM, each split keeping 4+ tiles a thread.
    const std::int64_t blocks = ceil_div(p.c, c.channels_per_block) * ceil_div(taps(p), c.taps_per_block);
    const std::int64_t tiles = wgrad_tiles(p, c);
    c.splits = 1;
    // Ragged rows with a block for every SM or more: no split (both recorded ones won without).
    const bool unsplit = ragged && c.position_threads == 256 && blocks >= 132;
    while (!unsplit && c.splits < 128 && blocks * c.splits < blocks_per_sm * 132 &&
           tiles / (c.splits * 2) >= 4 * c.position_threads)
      c.splits *= 2;
    ruled = first_portable(c, portable,
                           {[](WgradConfig& v) { v.vector_channels = v.vector_channels > 1 ? 2 : 1; },
                            [](WgradConfig& v) { v.vector_channels = 1; }, [](WgradConfig& v) { v.rows_per_thread = 1; },
                            [](WgradConfig& v) { v.outputs_per_thread = 4; }, [](WgradConfig& v) { v.splits = 1; }});
  } else {
    TiledConfig c;
    const int rw_base = p.direction == DwDirection::backward_data ? p.sw : 1;
    const bool two_d = p.dst_h() > 1;
    c.outputs_per_thread = rw_base * std::max(1, 4 / rw_base);
    c.vector_channels = 1;
    c.rows_per_thread = two_d ? 4 : 1;
    c.smem_filter = false;
    if (p.channel_last() && p.dst_h() > 1 && taps(p) > 9) {
      // 16-bit 2D kernels of 10+ taps: tensor-core tiles (their rules: 16-byte loads, backward_data with
      // stride 1). First choice, 16 rows x one run of 8 * nt columns, nt the fewest n-tiles whose tiles
      // cover the row in as many tiles as runs of 64 would. H100 probe, NHWC bf16 16 channels, 8 warps
      // (bench/NOTES.md, "tensor-core tiles against the L1"): 7x7 32x96x56x56 38.1 us with nt = 7 against 39.8 for
      // 16 rows x 32 columns (4 warps) and 40.8 for 8 rows x 2 runs of 32; 31x31 16x128x56x56 with 8
      // channels and nt = 7 against 124.5 with 8. Smaller tiles where an output does not fill them;
      // within 96 KiB of shared memory (every sm_80+ device).
      const std::int64_t w_tiles = ceil_div(p.dst_w(), 64);
      const int nt = static_cast<int>(std::clamp<std::int64_t>(ceil_div(p.dst_w(), 8 * w_tiles), 1, 8));
      const auto mma_rule = taps(p) > kMaxFilterRegisters
                                ? std::vector<Config>{mma_config(8, 16, nt, 8), mma_config(8, 16, 4, 8), mma_config(8, 8, 4, 8),
                                                      mma_config(8, 8, 2, 8), mma_config(8, 4, 2, 8), mma_config(8, 4, 1, 8)}
                                : std::vector<Config>{mma_config(16, 16, nt, 8), mma_config(16, 8, 4, 4), mma_config(16, 8, 2, 4),
                                                      mma_config(16, 4, 2, 4), mma_config(16, 4, 1, 4)};
      for (const Config& m : mma_rule)
        if (is_valid(p, m) && geometry(p, m, 1).dynamic_smem <= 2 * kMaxSmem) return m;
    }
    if (p.channel_last() && p.dst_h() == 1 && p.kh == 1 && p.kw >= 16 && p.direction == DwDirection::forward) {
      // 16-bit 1D forward kernels of 16+ taps: tensor-core tiles of 16 channels, 16 runs of 56 outputs,
      // 4 warps. H100, exhaustive, NLC bf16 K=31 16x512x4096: 71.8 us, the winner, against 79.1 for the
      // staged tile below (bench/NOTES.md, "tensor-core tiles against the L1"). backward_data
      // was not measured and keeps the rule below.
      const Config m = mma_config(16, 1, 7, 4);
      if (is_valid(p, m) && geometry(p, m, 1).dynamic_smem <= 2 * kMaxSmem) return m;
    }
    if (p.channel_last()) {
      // 2D: scalar channels, runs of 4, four rows, 64 x 2 threads, taps in registers up to 64 (the
      // H200 exhaustive winners, bench/NOTES.md, "channel-last mapping, cost-model refit", or within 12 % of
      // them); 1D: 8-byte vectors, runs of 8; 1D kernels of 16+ taps: scalar channels and the longest
      // run whose window fits (H200, NLC bf16 K=31: runs of 32 93.7 us, of 8 ~135 us).
      c.vector_channels = two_d ? 1 : std::max(1, std::min(8, p.align_bytes) / p.element_bytes());
      c.threads_x = 64;
      c.threads_y = two_d ? 2 : 1;
      c.smem_filter = false;
      if (!two_d) c.outputs_per_thread = rw_base * std::max(1, 8 / rw_base);
      if (!two_d && p.kw >= 16) {
        c.vector_channels = 1;
        // Windows from global memory may be long (K = 63: runs of 32 read 94 values; H200, exhaustive,
        // NLC f32 16x256x4096: forward 107.7 us, the winner, against 109.5 for runs of 16 and 735 for
        // the runs of 2 that fit 64 registers; bench/NOTES.md, "long 1D kernels").
        for (int rw : {32, 16}) {
          if (rw % rw_base != 0 || window(dir_index(p.direction), p.kw, p.sw, p.dw, p.pad_left, rw) > kMaxLongWindowRegisters)
            continue;
          c.outputs_per_thread = rw;
          break;
        }
        // Staged tiles of the same runs where the channels allow 16-byte copies: 32 channels x 4 runs
        // a block. H100, exhaustive, NLC bf16 K=31 16x512x4096: 80.0 us, the winner, against 96.4 for
        // the global-memory form above (bench/NOTES.md, "staged channel-last tiles").
        const Config s = tiled_config(c.outputs_per_thread, 32, 4, 1, 1, 0, 0, 0);
        if (is_valid(p, s) && geometry(p, s, 1).dynamic_smem <= 2 * kMaxSmem) return s;
      }
      if (two_d && taps(p) > 9 && taps(p) <= kMaxFilterRegisters) {
        // Kernels of 10-64 taps: staged tiles of 32 channels x 2 runs of 4 x 4 rows, 4 tiles a block
        // (more runs, then fewer rows, where a problem does not allow it). Measured forward only;
        // backward_data takes the same kernel with its windows reversed. H100, exhaustive: NHWC bf16
        // 7x7 32x96x56x56 54.75 us, the winner, against 69.1 for the best global-memory form; NHWC f32
        // 7x7 32x384x14x14 22.20 (runs 4 wide) against 21.59 for the winner and 26.0
        // (bench/NOTES.md, "staged channel-last tiles"). 3x3 kernels stay below: staged tiles
        // were 1.4 % (NHWC bf16) and 2.6 % (NHWC f32 stride 2) slower there. Their tiles may opt in to
        // up to 96 KiB: every supported device (sm_80+) gives a block at least 99 KiB.
        for (int rh : {4, 2})
          for (int ty : {2, 4}) {
            const Config s = tiled_config(rw_base * std::max(1, 4 / rw_base), 32, ty, 1, 1, 0, rh, 4);
            if (is_valid(p, s) && geometry(p, s, 1).dynamic_smem <= 2 * kMaxSmem) return s;
          }
      }
      if (two_d && taps(p) > kMaxFilterRegisters) {
        // Taps only shared memory holds (31x31): runs of 16 share each 46-value window row; 8 x 8
        // threads keep the filter's channels within 48 KiB. H200, NHWC bf16 31x31: 909 us, the
        // exhaustive winner (bench/NOTES.md, "the heuristic that was never timed"), against
        // 7,018 us for the single-output variant this rule fell back to before.
        c.outputs_per_thread = rw_base * std::max(1, 16 / rw_base);
        c.threads_x = 8, c.threads_y = 8, c.rows_per_thread = 1, c.smem_filter = true;
      }
    } else {
      // 16 x 8 threads (2D) or 64 (1D), runs of 4 read as 4-element vectors along W; 1D: 4 runs a
      // thread, as many as the row holds (H100, NCL bf16 K=4: 93.5 us against 110.3 for the best
      // single-run variant; f32 within 1.5 % of its best, bench/NOTES.md, "runs per thread for 1D kernels").
      c.threads_y = two_d ? 8 : 1;
      c.threads_x = two_d ? 16 : 64;
      c.vector_channels = std::min(c.outputs_per_thread, std::min(16, p.align_bytes) / p.element_bytes());
      c.runs_per_thread = two_d ? 1 : 4;
      const bool fused_data = p.fused_data();
      if (fused_data || p.seq_idx) {
        // The fused data gradient and seq_idx masked in the kernel: runs of 8 read as 16-byte vectors
        // (8 for f32: two a run), 2 runs a thread; the fused data gradient with seq_idx one run and its
        // taps in shared memory (fewer registers beside its three windows). H100, NCL bf16 K=4
        // 8x2048x4096 SiLU, tuned winners: fused data gradient 163.8 us against 227.4 for the rule
        // above (runs of 4, 4 a thread); forward with seq_idx 121.6 against 130.0; the fused data
        // gradient with seq_idx 240.9 and 240.4 in two runs, against 301.7 for the rule above and 259.0
        // with its taps in registers (bench/NOTES.md, "the fused data gradient").
        c.outputs_per_thread = 8;
        c.vector_channels = std::min(8, std::min(16, p.align_bytes) / p.element_bytes());
        c.runs_per_thread = fused_data && p.seq_idx ? 1 : 2;
        c.smem_filter = fused_data && p.seq_idx;
      }
      if (two_d && taps(p) > kMaxFilterRegisters) {
        // Taps only shared memory holds (31x31): runs of 8 on 8 x 8 threads, the halo tile and the
        // filter in shared memory. H200, NCHW f32 31x31: 367 us, the tuned winner of the 2026-11-25
        // benchmark, against 1,571 us for the 32 x 2 runs of 4 this rule fell back to before. Rows of
        // 32 or fewer take runs of 4 (a tile 32 wide): H200, exhaustive (2026-12-01), 16x256x31x31
        // forward and backward_data 1.67x and 1.73x the winner with runs of 8, the winner with runs of 4;
        // at 56 and 112 runs of 8 win by 10-15 % (bench/NOTES.md, "ragged rows").
        c.outputs_per_thread = rw_base * std::max(1, (p.dst_w() > 32 ? 8 : 4) / rw_base);
        c.threads_x = 8, c.threads_y = 8, c.vector_channels = 1, c.rows_per_thread = 1;
        c.smem_halo = true, c.smem_filter = true;
      }
      if (two_d && !p.channel_last() && p.dtype == DType::f32 && p.kh >= 7 && taps(p) <= kMaxFilterRegisters &&
          p.sh == 1 && p.sw == 1 && (ragged || p.direction == DwDirection::backward_data)) {
        // f32 kernels of 7+ rows: tiles of runs of 4 x 4 rows on 8 x 8 threads for ragged rows, 16 x 8
        // for backward_data on whole rows. Exhaustive, NCHW f32 7x7 (bench/NOTES.md, "tiles for 7x7"):
        // backward_data 32x192x28x28 the winner on the H200 and the H100, against 1.27x and 1.15x for the
        // flat items below; 32x96x56x56 16 x 8 the H200's winner (flat 1.27x), on the H100 1.065x
        // (flat 1.083x); forward 32x192x28x28 8 x 8 the winner (flat 1.23x).
        const Config t = tiled_config(4, ragged ? 8 : 16, 8, 4, 0, 0, 4);
        if (portable(t)) return t;
      }
      if (two_d && taps(p) <= kMaxFilterRegisters) {
        // The same thread's work (runs of 4, 4 rows, vectors along W) as flat items in blocks of 128:
        // no lanes idle where a tile does not divide the plane, and no narrowing for small planes.
        // H100, exhaustive, 32x144x56x56 3x3: 48.2 -> 44.0 us forward, 48.3 -> 44.2 backward_data;
        // 32x96x56x56 7x7: 60.0 -> 56.9 forward, 56.7 -> 57.7 backward_data
        // (bench/NOTES.md, "the CPU-only changes measured, flat items").
        // Fewer rows where the output has fewer (or backward_data's stride does not divide 4), then
        // narrower vectors; the tiled rule below where no flat form fits. f32 kernels of 5 rows or
        // fewer take 2 rows: H200, exhaustive (2026-12-01), the eight NCHW f32 3x3 problems recorded,
        // 1.00-1.13x the winner against 1.14-1.96x for 4 rows; H100 (2026-11-25) 3x3 1.000-1.016x against
        // 1.004-1.082x, 5x5 1.120x against 1.158x. 7x7 keeps 4 rows (H100 56x56 1.07-1.08x against
        // 1.14-1.21x), and so does bf16 (H100 NCHW bf16 3x3 64x64: 1.005x against 1.172x for 2 rows;
        // bench/NOTES.md, "rows a thread for small kernels").
        const bool two_rows = p.kh <= 5 && p.dtype == DType::f32;
        for (int rh : {two_rows ? 2 : c.rows_per_thread, 2, 0})
          for (int vc = c.vector_channels; vc >= 1; vc /= 2) {
            const Config f = flat_config(c.outputs_per_thread, 128, vc, rh);
            if (portable(f)) return f;
          }
      }
      while (c.runs_per_thread > 1 && c.threads_x * c.outputs_per_thread * c.runs_per_thread > next_pow2(p.dst_w()))
        c.runs_per_thread /= 2;
      // Small planes: narrower tiles (taller blocks), then fewer rows of threads.
      while (two_d && c.threads_x > 4 && c.threads_x * c.outputs_per_thread > 2 * next_pow2(p.dst_w()))
        c.threads_x /= 2, c.threads_y *= 2;
      while (c.threads_y > 1 && c.threads_y * c.rows_per_thread > next_pow2(p.dst_h())) c.threads_y /= 2;
    }
    ruled = first_portable(c, portable,
                           {[](TiledConfig& v) { v.vector_channels = std::max(1, v.vector_channels / 2); },
                            [](TiledConfig& v) { v.vector_channels = 1; }, [](TiledConfig& v) { v.smem_filter = true; },
                            [](TiledConfig& v) { v.rows_per_thread = v.rows_per_thread > 1 ? 2 : 1; },
                            [](TiledConfig& v) { v.threads_x = 32, v.threads_y = v.threads_y > 1 ? 2 : 1; },
                            [](TiledConfig& v) { v.rows_per_thread = 1; }});
  }
  if (ruled) return *ruled;
  // The first tiled (or wgrad) variant of the space beyond the seed designs, else a seed.
  const auto seeds_of_p = seed_configs(p);
  const auto is_seed = [&](const Config& v) {
    return std::any_of(seeds_of_p.begin(), seeds_of_p.end(), [&](const auto& s) { return s.second == v; });
  };
  for (const auto& candidate : enumerate(p))
    if (candidate.kernel() != Kernel::direct && !is_seed(candidate) && portable(candidate)) return candidate;
  for (const auto& candidate : enumerate(p))
    if (candidate.kernel() != Kernel::direct && portable(candidate)) return candidate;
  const auto seeds = seed_configs(p);
  if (!seeds.empty()) return seeds.front().second;
  throw Error(Error::Context{"dwconv", p.key(), "", "", ""}, "no valid variant for this problem");
}

}  // namespace

Config heuristic_config(const Problem& p, int cc_major, const std::string& gpu_model) {
  const Config rule = rule_config(p);
  if (const auto learned = learned_config(p, rule, cc_major, gpu_model)) return *learned;
  return rule;
}

Geometry geometry(const Problem& p, const Config& config, std::int64_t batch) {
  Geometry g;
  const std::int64_t dst_h = p.dst_h(), dst_w = p.dst_w();
  switch (config.kernel()) {
    case Kernel::direct: {
      const std::int64_t total = batch * p.c * dst_h * dst_w;
      g.block = 256;
      g.grid_x = static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(total, 256), 1, 1 << 20));
      break;
    }
    case Kernel::tiled: {
      const TiledConfig& c = config.tiled();
      g.block = static_cast<unsigned>(c.threads_x * c.threads_y);
      const int dir = dir_index(p.direction);
      if (!p.channel_last() && c.flat) {
        g.grid_x = static_cast<unsigned>(ceil_div(flat_items(p, c, batch), c.threads_x));
      } else if (!p.channel_last()) {
        const std::int64_t w_tiles = ceil_div(dst_w, c.threads_x * c.outputs_per_thread * c.runs_per_thread);
        g.grid_x = static_cast<unsigned>(batch * p.c * w_tiles);
        g.grid_y = static_cast<unsigned>(ceil_div(dst_h, c.threads_y * c.rows_per_thread));
        std::size_t floats = c.smem_filter ? std::size_t((taps(p) + 3) / 4 * 4) : 0;
        if (c.smem_halo)
          floats += std::size_t(window(dir, p.kh, p.sh, p.dh, p.pad_top, c.threads_y)) *
                    std::size_t(window(dir, p.kw, p.sw, p.dw, p.pad_left, c.threads_x * c.outputs_per_thread));
        g.dynamic_smem = floats * 4;
      } else if (c.smem_halo) {
        // Staged tiles (channel tiles x images x H tiles x W tiles), RT consecutive ones a block.
        g.grid_x = static_cast<unsigned>(ceil_div(staged_tiles(p, c, batch), c.runs_per_thread));
        g.dynamic_smem = staged_smem_bytes(p, c);
      } else {
        // (W run, channel vector) pairs of a row over blocks of threads_x; the shared filter holds
        // the taps of threads_x channel vectors.
        const std::int64_t vectors = p.c / c.vector_channels;
        g.grid_x = static_cast<unsigned>(ceil_div(vectors * ceil_div(dst_w, c.outputs_per_thread), c.threads_x));
        g.grid_y = static_cast<unsigned>(batch * ceil_div(dst_h, c.threads_y * c.rows_per_thread));
        g.dynamic_smem = c.smem_filter ? std::size_t(taps(p)) * c.threads_x * c.vector_channels * 4 : 0;
      }
      break;
    }
    case Kernel::mma: {
      const MmaConfig& c = config.mma();
      const MmaTile m = mma_tile(p, c);
      g.block = static_cast<unsigned>(32 * c.warps);
      g.grid_x = static_cast<unsigned>(mma_tiles(p, c, m, batch));
      g.dynamic_smem = mma_smem_bytes(p, c, m);
      break;
    }
    case Kernel::wgrad: {
      const WgradConfig& c = config.wgrad();
      g.block = static_cast<unsigned>(c.channels_per_block * c.position_threads);
      const std::int64_t columns = ceil_div(p.c, c.channels_per_block) * ceil_div(taps(p), c.taps_per_block);
      g.grid_x = static_cast<unsigned>(columns);
      g.grid_y = static_cast<unsigned>(c.splits);
      if (c.staged) g.dynamic_smem = wgrad_plane_bytes(p, c);
      if (c.splits > 1 || c.atomic) {
        const std::size_t cols = std::size_t(taps(p) + 1);
        const std::size_t floats = std::size_t(p.c) * cols * (c.atomic ? 1 : std::size_t(c.splits));
        const std::size_t counters = std::size_t(columns) * 4;
        g.workspace_bytes = (floats * 4 + 255) / 256 * 256 + counters;
        g.counter_bytes = c.atomic ? g.workspace_bytes : counters;
      }
      break;
    }
  }
  return g;
}

double model_bytes(const Problem& p, std::int64_t batch) {
  const double elem = p.element_bytes();
  const double in = double(batch) * double(p.c) * double(p.h) * double(p.w);
  const double out = double(batch) * double(p.c) * double(p.out_h()) * double(p.out_w());
  const double weights = double(p.c) * taps(p);
  const double dy = p.gradient_prep ? out : 0.0;  // the gradient prep reads dy too
  // The fused weight gradient reads the forward's weight and bias too; the fused data gradient x and
  // the bias; seq_idx is an int32 a position.
  const double fused = p.fused_weight() ? weights + double(p.c) : p.fused_data() ? in + double(p.c) : 0.0;
  const double seq = p.seq_idx ? double(batch) * double(p.w) * 4.0 / elem : 0.0;
  return elem * (in + out + dy + weights + fused + seq + (p.bias ? double(p.c) : 0.0));
}

double model_flops(const Problem& p, std::int64_t batch) {
  return 2.0 * double(batch) * double(p.c) * double(p.out_h()) * double(p.out_w()) * taps(p);
}

namespace {

// A kernel's template arguments as its name expression writes them. Arguments added to a kernel
// after its first version have defaults that keep the older variants' behaviour; a trailing run of
// them at their defaults is left out, so those variants keep their names (and stored binaries).
class TemplateArgs {
 public:
  explicit TemplateArgs(std::string first) : written_{std::move(first)} {}
  template <class T>
  TemplateArgs& add(const T& value) {
    written_.push_back(fmt::format("{}", value));
    trailing_ = written_.size();
    return *this;
  }
  /// Arguments written together or not at all: left out while every one is at its default.
  TemplateArgs& optional(std::initializer_list<std::pair<int, int>> values_and_defaults) {
    bool all_default = true;
    for (const auto& [value, default_value] : values_and_defaults) {
      written_.push_back(std::to_string(value));
      all_default = all_default && value == default_value;
    }
    if (!all_default) trailing_ = written_.size();
    return *this;
  }
  /// The shape constants C, SRC_H, SRC_W, DST_H, DST_W (kvt_shape_fits): `p`'s where it has a fixed
  /// shape (Problem::fixed_shape), else left out (0: at run time).
  TemplateArgs& shape_of(const Problem& p) {
    const bool fixed = p.fixed_shape();
    const auto size = [fixed](std::int64_t value) { return fixed ? int(value) : 0; };
    return optional({{size(p.c), 0}, {size(p.src_h()), 0}, {size(p.src_w()), 0}, {size(p.dst_h()), 0},
                     {size(p.dst_w()), 0}});
  }
  std::string name(const char* kernel) const {
    return fmt::format("{}<{}>", kernel, fmt::join(written_.begin(), written_.begin() + trailing_, ", "));
  }

 private:
  std::vector<std::string> written_;
  std::size_t trailing_ = 1;  // arguments up to the last one that is not a left-out default
};

// The epilogue EPI is the forward kernels' last template argument (default 0), but for the shape
// constants after it (the tiled kernel's after SEQ).
std::string kernel_name(const Problem& p, const TiledConfig& c) {
  return TemplateArgs(problem_args(p))
      .add(c.outputs_per_thread).add(c.threads_x).add(c.threads_y).add(c.vector_channels)
      .add(int(c.smem_halo)).add(int(c.smem_filter)).add(int(p.bias))
      .optional({{c.rows_per_thread, 1}}).optional({{c.runs_per_thread, 1}}).optional({{int(c.flat), 0}})
      .optional({{p.epilogue(), 0}}).optional({{int(p.seq_idx), 0}})
      .shape_of(p)
      .name("kvt_dwconv_tiled");
}

std::string kernel_name(const Problem& p, const DirectConfig& c) {
  return TemplateArgs(problem_args(p)).add(int(c.coalesced)).add(int(p.bias)).optional({{p.epilogue(), 0}})
      .name("kvt_dwconv_direct");
}

std::string kernel_name(const Problem& p, const MmaConfig& c) {
  return TemplateArgs(problem_args(p))
      .add(c.channels_per_block).add(c.tile_rows).add(c.segment_tiles).add(c.warps).add(mma_tile(p, c).pitch)
      .add(int(p.bias)).optional({{p.epilogue(), 0}}).shape_of(p)
      .name("kvt_dwconv_mma");
}

std::string kernel_name(const Problem& p, const WgradConfig& c) {
  if (c.staged)
    return TemplateArgs(kernel_type(p.dtype))
        .add(p.kh).add(p.kw).add(p.sh).add(p.sw).add(p.dh).add(p.dw).add(p.pad_top).add(p.pad_left)
        .add(c.position_threads).add(int(c.atomic)).add(int(p.bias)).add(c.outputs_per_thread)
        .add(c.rows_per_thread).add(c.vector_channels).shape_of(p)
        .name("kvt_dwconv_wgrad_staged");
  // RH and VC (register-tiled runs only) come together.
  return TemplateArgs(kernel_type(p.dtype))
      .add(int(p.channel_last())).add(p.kh).add(p.kw).add(p.sh).add(p.sw).add(p.dh).add(p.dw).add(p.pad_top)
      .add(p.pad_left).add(c.channels_per_block).add(c.position_threads).add(c.taps_per_block).add(int(c.atomic))
      .add(int(p.bias)).optional({{c.outputs_per_thread, 1}}).optional({{c.rows_per_thread, 1}, {c.vector_channels, 1}})
      .optional({{-1, -1}}).optional({{p.epilogue(), 0}, {int(p.seq_idx), 0}})  // PIPE at its default
      .shape_of(p)
      .name("kvt_dwconv_wgrad");
}

std::string kernel_name(const Problem& p, const Config& c) {
  return std::visit([&p](const auto& typed) { return kernel_name(p, typed); }, c.variant());
}

}  // namespace

detail::CompileRequest compile_request(const Problem& p, const Config& c, const std::string& arch) {
  detail::CompileRequest r;
  r.program_name = "dwconv.cu";
  r.source = embedded::dwconv_cu;
  r.headers = headers();
  r.arch = arch;
  r.name_expressions = {kernel_name(p, c)};
  return r;
}

detail::CompileRequest reference_request(const Problem& p, const std::string& arch) {
  detail::CompileRequest r;
  r.program_name = "dwconv.cu";
  r.source = embedded::dwconv_cu;
  r.headers = headers();
  r.arch = arch;
  r.name_expressions = {TemplateArgs(problem_args(p))
                            .add(int(p.bias)).optional({{p.epilogue(), 0}}).optional({{int(p.seq_idx), 0}})
                            .name("kvt_dwconv_reference"),
                        fmt::format("kvt_compare<{}>", kernel_type(p.dtype)),
                        fmt::format("kvt_fill_random<{}>", kernel_type(p.dtype))};
  return r;
}

std::string template_hash() {
  return detail::sources_hash({embedded::dwconv_cu, embedded::common_cuh, embedded::dwconv_params_h,
                              embedded::dwconv_mma_cuh, embedded::dwconv_tiled_cuh,
                              embedded::dwconv_tiled_first_cuh, embedded::dwconv_tiled_last_cuh,
                              embedded::dwconv_activation_cuh}, kDescriptionVersion);
}

}  // namespace kvtune::dwconv
