// The dwconv family's cost model: predicted_seconds of a variant from its geometry (the busiest SM's
// instruction issue and bytes, waves, launches), the order in which budgeted tuning times variants.
// The space and its rules: dwconv_family.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv/dwconv_params.h"
#include "kernel_templates/dwconv/dwconv_sizes.h"

namespace kvtune::dwconv {

using namespace sizes;

namespace {

constexpr double kClock = 1.98e9;  // SM clock (H200), for the cost models

// The busiest SM of a grid (the tiled and weight-gradient cost models): it holds ceil(blocks / sms)
// blocks, per_sm of them at a time; its instructions issue at warp_ipc a warp (at most sm_ipc an SM),
// its bytes arrive at the rate its threads' loads in flight sustain (Little's law over a 1 us
// latency), at most sm_share times its even share of the bandwidth.
struct BusiestSm {
  double issue = 0, memory = 0;  // seconds
  double blocks = 0;              // its blocks
};
BusiestSm busiest_sm(double blocks, double block, double per_sm, double thread_instructions, double block_bytes,
                     double thread_in_flight, double sms, double bandwidth, double warp_ipc, double sm_ipc,
                     double sm_share) {
  constexpr double kLatency = 1e-6;  // seconds a load is in flight
  BusiestSm b;
  b.blocks = std::ceil(blocks / sms);
  const double threads = std::min(b.blocks, per_sm) * block;
  b.issue = b.blocks * thread_instructions * block / 32 / (kClock * std::min(sm_ipc, threads / 32 * warp_ipc));
  b.memory = b.blocks * block_bytes / std::min(sm_share * bandwidth / sms, threads * thread_in_flight / kLatency);
  return b;
}

}  // namespace

double compile_cost(const Problem& p, const Config& config) {
  // NVRTC's time grows with the unrolled body: on a 7x7 weight gradient (kvtune_compile_scaling
  // --each, 2 cores) 49 taps x runs of 8 x 4 rows took 1.71 s, 4 x 4 and 8 x 2 1.0 s, runs of 8
  // 0.67 s, of 4 0.5 s; 7 taps a block 0.2 s. Beyond kKvtUnrolledTaps taps, kernel rows loop
  // (two at a time in the tiles). A weight-gradient tile is compiled twice, whole and at the edges,
  // except with rows per thread and kKvtLoopedEdgeTaps taps or more (the edges: the whole body or a
  // loop of one dy row): 49 taps x runs of 8 x 4 rows then take 1.1 s (NHWC) and 0.9 s (NCHW, one
  // core, 2026-12-03).
  const int taps = p.kh * p.kw;
  const double unrolled = taps <= kKvtUnrolledTaps ? taps : 2 * p.kw;
  double body = unrolled;
  switch (config.kernel()) {
    case Kernel::tiled: {
      const TiledConfig& t = config.tiled();
      body *= double(t.outputs_per_thread) * t.rows_per_thread * t.runs_per_thread *
              (p.channel_last() ? t.vector_channels : 1);
      break;
    }
    case Kernel::direct: break;
    case Kernel::wgrad: {
      const WgradConfig& w = config.wgrad();
      // Whole and edge bodies of `rows` rows each (the scale above), or a looped edge of one row.
      const int rows = w.rows_per_thread;
      const bool looped = rows > 1 && taps >= kKvtLoopedEdgeTaps;
      body = double(std::min(w.taps_per_block, taps)) * w.outputs_per_thread * (looped ? (rows + 1) / 2.0 : rows);
      break;
    }
    case Kernel::mma: body *= config.mma().segment_tiles; break;
  }
  return 100 + body;
}

double predicted_seconds(const Problem& p, const Config& config, int sm_count, double bandwidth) {
  // Direct kernels: calibrated on the exhaustive H200 trials of 2026-11-22 (bench/NOTES.md, "cost model")
  // (issue time per instruction and SM). The tiled and weight-gradient models say where theirs come from.
  constexpr double kFma = 1e-9 / 16, kLoad = 1e-9 / 16;
  constexpr double kNaive = 4.0, kLaunch = 2e-6;
  constexpr double kLanesPerSm = 128;  // f32 FMA lanes (H200)
  const double elem = p.element_bytes();
  const double sms = sm_count;
  const int kh = p.kh, kw = p.kw, tap_count = kh * kw;
  const double batch = double(p.n), channels = double(p.c);
  const bool data = p.direction == DwDirection::backward_data;
  const double dst_h = double(p.dst_h()), dst_w = double(p.dst_w());
  const int sh = data ? 1 : p.sh, sw = data ? 1 : p.sw;
  // The gradient prep reads dy too; the fused data gradient reads x too.
  const double bytes = elem * batch * channels *
                       double(p.h * p.w * (p.fused_data() ? 2 : 1) + p.out_h() * p.out_w() * (p.gradient_prep ? 2 : 1));
  const double outputs = batch * channels * dst_h * dst_w;
  const auto fraction = [](double used, double tile) { return used / (std::ceil(used / tile) * tile); };
  switch (config.kernel()) {
    case Kernel::direct: {
      const auto& c = config.direct();
      const double penalty = c.coalesced ? 1.0 : kNaive;
      const double issue = outputs * (tap_count * kFma + tap_count * kLoad * penalty) / sms;
      return std::max(bytes / bandwidth * penalty, issue) + kLaunch;
    }
    case Kernel::mma: {
      const auto& c = config.mma();
      // Tensor-core tiles, a model from counts: the busiest SM's staging bytes at the rate its loads
      // in flight sustain (8 column pairs a thread), its MMAs (about 2 cycles an SM each for m16n8k16)
      // and ldmatrix reads (512 bytes at 128 a cycle), and its threads' instructions for staging (about
      // 12 a 16-byte vector) and the epilogue (about 4 an output); the tile's staged halo comes from L2,
      // at about twice the DRAM rate. A block loads, computes and stores one after another, so memory
      // runs at about half the rate the loads in flight would allow (kPhases; H100, the exhaustive
      // trials in bench/NOTES.md, "depthwise convolution on tensor cores": the memory-bound tiles ran 2-3.5x their
      // bytes at the copy rate). Registers: about 128 a thread, 80 for 8 warps (their launch bounds).
      constexpr double kMmaCycles = 2, kLdmatrixCycles = 4, kStageInstructions = 12, kOutputInstructions = 4;
      constexpr double kLatency = 1e-6, kPhases = 2;
      const double registers = c.warps == 8 ? 80 : 128;
      const MmaTile m = mma_tile(p, c);
      const double cb = c.channels_per_block, tr = c.tile_rows, nt = c.segment_tiles;
      const double block = 32.0 * c.warps;
      const double tiles = double(mma_tiles(p, c, m, p.n));
      const double smem = double(mma_smem_bytes(p, c, m)) + 1024;
      const double per_sm = std::max(1.0, std::floor(std::min({2048 / block, kSmemPerSm / smem, 65536 / (registers * block), 32.0})));
      const double sm_tiles = std::ceil(tiles / sms);  // the busiest SM's
      const double window_cols = std::min<double>(m.columns, window(dir_index(p.direction), kw, p.sw, p.dw, p.pad_left, m.tile_w));
      const double staged = cb * m.rows * window_cols;  // elements a tile loads
      const double mma = cb * kh * nt * m.steps, reads = cb * kh * m.blocks / 2.0;  // a tile's (reads: ldmatrix.x4)
      const double compute = sm_tiles * (mma * kMmaCycles + reads * kLdmatrixCycles) / kClock;
      const double instructions = sm_tiles * (staged / 8 * kStageInstructions + cb * tr * m.tile_w * kOutputInstructions) / 32;
      const double issue = instructions / (kClock * std::min(4.0, per_sm * block / 32 * 0.25));
      const double in_flight = std::min(staged * 2 / block, 8 * 32.0) * per_sm * block;  // bytes an SM
      const double tile_bytes = staged * 2 + cb * tr * m.tile_w * elem;
      const double memory = kPhases * std::max({bytes / bandwidth, sm_tiles * tile_bytes / (2 * bandwidth / sms),
                                                sm_tiles * tile_bytes / (in_flight / kLatency)});
      const double longest = std::max({memory, compute, issue});
      return longest + 0.25 * (memory + compute + issue - longest) + kLaunch;
    }
    case Kernel::tiled: {
      const auto& c = config.tiled();
      const double tx = c.threads_x, ty = c.threads_y, rw = c.outputs_per_thread;
      const double rh = c.rows_per_thread;
      const double vc = c.vector_channels;
      const double block = tx * ty;
      const double row_loads = (rw - 1) * sw + double(kw - 1) * p.dw + 1;
      // Source rows read per thread: KH per output row, or shared by RH output rows.
      const double rows_read = rh > 1 ? (rh - 1) * sh + double(kh - 1) * p.dh + 1 : kh;
      if (p.channel_last() && c.smem_halo) {
        // Channel-last staged tiles (a first model from instruction counts, in the units of the one
        // below): per output element the FMAs, the window's shared reads (one per VC-channel vector),
        // the taps (shared: one read per tap and row), and the block's staging (per staged element about
        // 1.5 instructions: its share of a 16-byte load and of shared stores, a conversion, the loop)
        // spread over the block's outputs. Resident warps from registers and from the tile's shared memory.
        constexpr double kStageCost = 1.5;
        const double channels_per_block = tx * vc, tile_w = ty * rw;
        const double staged_cols = (tile_w - 1) * sw + double(kw - 1) * p.dw + 1;
        const double efficiency = fraction(channels, channels_per_block) * fraction(dst_w, tile_w) * fraction(dst_h, rh);
        const double tiles = std::ceil(channels / channels_per_block) * std::ceil(dst_w / tile_w) * std::ceil(dst_h / rh) * batch;
        const double blocks = std::ceil(tiles / c.runs_per_thread);  // RT tiles a block
        double per_output = tap_count + rows_read * row_loads / (rw * rh * vc) + kStageCost * rows_read * staged_cols / (tile_w * rh);
        per_output += c.smem_filter ? tap_count / (rw * vc) : tap_count / (rw * rh * vc);
        const double registers = 24 + rw * rh * vc + row_loads * vc + (c.smem_filter ? 0 : tap_count * vc);
        const double smem = double(staged_smem_bytes(p, c)) + 1024;  // + the runtime's 1 KiB a block
        const double resident = std::min({64.0, 65536 / (std::max(registers, 32.0) * 32),
                                          std::min(std::floor(2048 / block), std::floor(kSmemPerSm / smem)) * block / 32,
                                          blocks * block / (sms * 32)});
        const double latency = std::min(1.0, resident / 8);
        const double issue = outputs * per_output / efficiency / (sms * kLanesPerSm * kClock) / std::sqrt(latency);
        const double memory = bytes / bandwidth / efficiency / latency;
        return std::max(issue, memory) + 0.25 * std::min(issue, memory) + kLaunch;
      }
      if (p.channel_last()) {
        // Channel-last (refit on every trial of the H200 exhaustive run in bench/NOTES.md, "channel-last
        // mapping, cost-model refit": the
        // model's 32 best hold a variant within 1.6 % of the exhaustive winner on all 7 problems, against
        // 2 of 7 before, which ranked 1-output, 8-channel, shared-filter variants first; they ran 3-7x
        // slower). Thread instructions per output element: the FMAs, the window's vector loads, the
        // filter's (registers: taps / run vector loads; shared: a 16-byte read per 4 channels and tap,
        // plus the block's staging, taps per block row of runs). Resident warps from registers
        // (accumulators, the double-buffered window, the taps) and block size; fewer than 8 a scheduler
        // pair cannot hide latency. Time: the larger of issue and memory plus a quarter of the other.
        const double items = channels / vc * std::ceil(dst_w / rw);  // (W run, channel vector) pairs a row
        const double efficiency = fraction(items, tx) * fraction(dst_h, ty * rh);
        const double blocks = std::ceil(items / tx) * batch * std::ceil(dst_h / (ty * rh));
        double per_output = tap_count + rows_read * row_loads / (rw * rh * vc);
        per_output += c.smem_filter ? tap_count * std::ceil(vc / 4) / (rw * vc) + tap_count / (ty * rw * rh)
                                    : tap_count / (rw * rh * vc);
        const double registers = 24 + rw * rh * vc + row_loads * vc * elem / 4 * 2 + (c.smem_filter ? 0 : tap_count * vc);
        // Shared filters over 48 KiB (large kernels) also limit the blocks an SM holds.
        const double smem = c.smem_filter ? tap_count * tx * vc * 4 + 1024 : 0;  // + the runtime's 1 KiB a block
        const double smem_blocks = smem > 0 ? std::floor(kSmemPerSm / smem) : 64;
        const double resident = std::min({64.0, 65536 / (std::max(registers, 32.0) * 32),
                                          std::min(std::floor(2048 / block), smem_blocks) * block / 32,
                                          blocks * block / (sms * 32)});
        const double latency = std::min(1.0, resident / 8);
        const double issue = outputs * per_output / efficiency / (sms * kLanesPerSm * kClock) / std::sqrt(latency);
        const double memory = bytes / bandwidth / efficiency / latency;
        return std::max(issue, memory) + 0.25 * std::min(issue, memory) + kLaunch;
      }
      // Channel-first, refit on the exhaustive H200 trials of the kernels as built (2D:
      // halo exchange; 1D: runs per thread; bench/NOTES.md, "the heuristic that was never timed").
      // The model before ranked the 2D winners 62nd-151st of ~300 and its budget-sized first picks
      // were 5.5-42 % slower: it saw no cost in the unpipelined row loop. As the weight gradient's: the
      // busiest SM decides, its threads' instructions (loads, shuffles of the halo exchange, FMAs, taps,
      // rows, stores, setup) at a warp's issue rate, and its blocks' bytes at the rate its loads in
      // flight sustain: one source row's vectors a thread, two with the pipelined row loop (rows per
      // thread), every run's with runs per thread; with the halo tile in shared memory, the tile's
      // share a thread. Held-out check: fitted on 7 of the 8 problems, the 8th's first picks within 2 %.
      constexpr double kLoadCost = 16, kSharedCost = 0.5, kShuffleCost = 1, kEdgeLoads = 0.1;
      constexpr double kSyncCost = 20, kTapCost = 1, kRowCost = 4, kSetupCost = 58.8, kStoreCost = 1;  // instructions
      constexpr double kSmIpc = 1.4, kWarpIpc = 0.14;  // instructions an SM, a warp issues a cycle
      constexpr double kSmShare = 0.75;
      const double rt = c.runs_per_thread;
      const double tile_w = tx * rw * rt, tile_h = ty * rh;
      double efficiency = fraction(dst_w, tile_w) * fraction(dst_h, tile_h);
      double blocks = batch * channels * std::ceil(dst_w / tile_w) * std::ceil(dst_h / tile_h);
      if (c.flat) {  // items over the whole grid: only the last block and partial runs/rows idle
        const double items = double(flat_items(p, c, p.n));
        efficiency = fraction(dst_w, rw) * fraction(dst_h, rh) * fraction(items, block);
        blocks = std::ceil(items / block);
      }
      // vc > 1: aligned vectors along W, one more than the window needs at worst; the halo exchange
      // loads a lane's own (shift) and takes the rest from its neighbours.
      const double row_vectors = vc > 1 ? std::ceil((row_loads + vc - 1) / vc) : row_loads;
      const double shift = vc > 1 ? rw * sw / vc : rw;
      const bool exchange = vc > 1 && !c.smem_halo && (rh > 1 || rt > 1) && row_vectors > shift;
      const double row_loads_issued = exchange ? shift + (row_vectors - shift) * kEdgeLoads : row_vectors;
      const double row_shuffles = exchange ? (row_vectors - shift) * vc : 0;
      const bool pipelined = rh > 1 || rt > 1;
      constexpr double kFlatSetup = 40;  // one more 32-bit division by a run-time count, and the item test (instructions)
      double per_thread = rh * rw * rt * tap_count + kRowCost * rows_read * rt + kSetupCost + kStoreCost * rh * rw * rt / vc +
                          (c.flat ? kFlatSetup : 0) +
                          (c.smem_filter ? kSharedCost * tap_count * rh * rt : kTapCost * tap_count);
      double in_flight;  // bytes a thread has in flight
      if (c.smem_halo) {
        const double tile = ((tile_h - 1) * sh + double(kh - 1) * p.dh + 1) * ((tile_w - 1) * sw + double(kw - 1) * p.dw + 1);
        per_thread += kSharedCost * rows_read * row_loads + kLoadCost * tile / block + kSyncCost;
        in_flight = tile / block * elem;
      } else {
        per_thread += (kLoadCost * row_loads_issued + kShuffleCost * row_shuffles) * rows_read * rt;
        in_flight = row_loads_issued * vc * elem * (rh > 1 ? 2 : 1) * rt;
      }
      const double registers = std::max(16.0, 24 + rh * rw + row_loads * (pipelined ? 2 : 1) + (c.smem_filter ? 0 : tap_count) +
                                                  (rt - 1) * row_vectors * vc);
      const double smem = double(geometry(p, config, 1).dynamic_smem);
      const double per_sm = std::max(1.0, std::floor(std::min({2048 / block, 65536 / (registers * block), 32.0,
                                                               smem > 0 ? kSmemPerSm / (smem + 1024) : 64.0})));
      const BusiestSm sm = busiest_sm(blocks, block, per_sm, per_thread, bytes / blocks, in_flight, sms, bandwidth,
                                      kWarpIpc, kSmIpc, kSmShare);
      return std::max(sm.issue, std::max(bytes / bandwidth / efficiency, sm.memory)) + kLaunch;
    }
    case Kernel::wgrad: {
      const auto& c = config.wgrad();
      // Refit on the exhaustive H200 trials of the kernels as built (pipelined rows for up to 32 taps,
      // one buffer above; bench/NOTES.md, "the weight-gradient cost model", 2026-11-25 afternoon).
      // The model before ranked the winners 19th of 28 (K=3), 33rd of 74 (7x7) and 11th of 29 (31x31,
      // its 9 first all 12x slower): it counted one load per position for untiled variants instead of
      // one per tap, and divided memory time by the thread count's share of the GPU, where 512 blocks
      // of 256 threads with 16-byte loads run at the copy rate. Here the busiest SM decides: its blocks'
      // instructions at a warp's issue rate, its blocks' bytes at the rate its loads in flight sustain.
      constexpr double kWarpIpc = 4.0 / 179;  // instructions a warp issues a cycle (latency-bound loops)
      constexpr double kLoadCost = 8, kRunCost = 20, kTapAddress = 4, kPositionCost = 10;  // instructions
      constexpr double kSmShare = 1.5;  // an SM's bandwidth at most this multiple of its even share
      constexpr double kReduceCost = 22.4, kSplitCost = 3e-6;  // instructions a reduced value and level; s
      const double ct = c.channels_per_block, py = c.position_threads, tg = c.taps_per_block;
      const double block = ct * py;
      const double columns = std::ceil(tap_count / tg);
      const double blocks = std::ceil(channels / ct) * columns * c.splits;
      const double positions = batch * double(p.out_h() * p.out_w());
      double instructions, registers, in_flight;  // whole grid; a thread's; bytes a thread has in flight
      double warp_ipc = kWarpIpc;
      // A register tile (both tiled forms): rh dy rows x rw outputs, vc-element vectors, the window of x
      // a run reads along W and the x rows a tile reads (every tap; the block column's kernel row).
      const double rw = c.outputs_per_thread, rh = c.rows_per_thread;
      const double vc = c.vector_channels;
      const double window = (rw - 1) * p.sw + (p.kw - 1) * p.dw + 1;
      const double rows_read = tg < tap_count ? 1 : rh > 1 ? (rh - 1) * p.sh + double(p.kh - 1) * p.dh + 1 : p.kh;
      const double row_vectors = std::ceil((window + vc - 1) / vc);
      const double plane = c.staged ? double(wgrad_plane_bytes(p, c)) / 2 : 0;  // bytes of one x plane
      if (c.staged) {
        // Staged x planes: a block copies each image's plane (one cp.async a vector), then its threads
        // take the plane's tiles: a dy run from global memory, each x row's window from shared memory,
        // the FMAs. Lanes past the plane's last tile idle. The copies of a whole plane are in flight
        // together, and the loop issues about every 5 cycles a warp (Nsight Compute, H100, NCHW f32 7x7:
        // 4.96 cycles an instruction; bench/NOTES.md, "from staged x planes").
        constexpr double kSharedLoad = 2, kCopyCost = 12;
        const double tiles = std::ceil(dst_h / rh) * std::ceil(dst_w / rw);
        const double plane_vectors = plane / (vc * elem);
        const double per_image = std::ceil(tiles / py) * py * (kLoadCost * rh * rw / vc + kSharedLoad * rows_read * row_vectors +
                                                               tg * rw * rh + kRunCost) +
                                 plane_vectors * kCopyCost;
        instructions = channels * c.splits * std::ceil(batch / c.splits) * per_image;
        registers = 24 + tg + rh * rw + window;
        in_flight = plane / py;
        warp_ipc = 1.0 / 5;
      } else if (c.outputs_per_thread > 1) {
        // Register tiling: a run of rw outputs (rh rows) loads its dy run and each x row's window once
        // for all KW taps (every kernel row, or the block column's one), as vc-element vectors.
        const double loads = rh * rw / vc + rows_read * row_vectors;
        const double buffers = tg <= 32 ? 2 : 1;  // the pipelined row loop's second window
        instructions = channels * columns * positions / (rw * rh) * (kLoadCost * loads + tg * rw * rh + kRunCost);
        registers = 24 + tg + rh * rw + window * buffers;
        in_flight = (rh * rw / vc + row_vectors * buffers) * vc * elem;
      } else {
        // A dy load and, per tap, an x load with its bounds tests and an FMA, every position.
        instructions = channels * columns * positions * (kLoadCost * (1 + tg) + kTapAddress * tg + tg + kPositionCost);
        registers = 32 + tg;
        in_flight = (1 + tg) * elem;
      }
      const double smem = c.staged ? 2 * plane + 2048 : 0;  // two planes + partials, reserved
      const double per_sm = std::max(1.0, std::floor(std::min({2048 / block, 65536 / (std::max(registers, 16.0) * block),
                                                               smem > 0 ? kSmemPerSm / smem : 64.0})));
      // Each block column reads x and dy; no cap on an SM's issue rate (64 warps stay under it).
      const BusiestSm sm = busiest_sm(blocks, block, per_sm, instructions / blocks / block, bytes * columns / blocks,
                                      in_flight, sms, bandwidth, warp_ipc, 4.0, kSmShare);
      const double memory = std::max(bytes * columns / bandwidth, sm.memory);
      const double reduce = std::ceil(sm.blocks / per_sm) * ct * (tg + 1) * kReduceCost * std::log2(std::max(py, 2.0)) / kClock +
                            (c.splits > 1 ? kSplitCost : 0);
      return std::max(sm.issue, memory) + 0.25 * std::min(sm.issue, memory) + reduce + kLaunch;
    }
  }
  return 1.0;
}

}  // namespace kvtune::dwconv
