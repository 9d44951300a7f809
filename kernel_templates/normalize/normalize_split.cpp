#include "kernel_templates/normalize/normalize_split.h"

#include <algorithm>
#include <cmath>

namespace kvtune::normalize::split_rows {
namespace {

bool is_pow2(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

constexpr int kMaxItemBytes = 128;                        // registers one thread may keep per row
constexpr std::int64_t kMaxGrid = std::int64_t(1) << 30;  // blocks per launch (the kernels loop beyond)
// The backward's dgamma / dbeta partial rows: at most this many floats per gradient, unless one
// group (every row in one loop) needs no partial rows at all.
constexpr std::int64_t kMaxGradPartials = std::int64_t(1) << 24;

int grads(const Problem& p) { return p.backward ? int(p.dgamma) + int(p.dbeta) : 0; }
// Bytes of x (and dy, gamma) one thread keeps per slice: the pruned space keeps half the hard limit.
int item_bytes_limit(const Problem& p, bool prune) {
  const int limit = prune ? kMaxItemBytes / 2 : kMaxItemBytes;
  return p.backward ? limit / 2 : limit;
}
// The longest row loop worth trying: the forward's 4 with gamma or beta (its output phase shares
// them between rows), else 1 without dgamma/dbeta, else the first power of 4 that covers every row
// (one group).
std::int64_t row_loop_limit(const Problem& p) {
  if (!p.backward) return p.gamma || p.beta ? 4 : 1;
  if (grads(p) == 0) return 1;
  std::int64_t loop = 1;
  while (loop < p.rows && loop < (std::int64_t(1) << 30)) loop *= 4;
  return loop;
}
// Bytes of x a forward row chunk may hold so that its output phase re-reads x from L2 (every GPU
// of sm_80 and later has at least 40 MB of L2): two points of the space.
constexpr std::int64_t kChunkBytes[] = {8 << 20, 24 << 20};
// The cooperative form's row must be in flight at once: at most 2^17 threads (half of what an H100
// holds at full occupancy, 132 x 2048; the launch checks the actual device).
constexpr std::int64_t kMaxCoopThreads = std::int64_t(1) << 17;
// A thread-block cluster's blocks, at most (the portable limit of sm_90).
constexpr int kMaxClusterBlocks = 8;

std::int64_t floor_pow2(std::int64_t v) {
  std::int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
// Rows of a chunk of about `bytes` of x (at least one row).
int chunk_rows(const Problem& p, std::int64_t bytes) {
  const std::int64_t rows = std::max<std::int64_t>(1, bytes / (p.cols * p.element_bytes()));
  return static_cast<int>(std::min<std::int64_t>(floor_pow2(rows), 1 << 30));
}

std::int64_t groups(const Problem& p, const Config& c, std::int64_t rows) {
  return grads(p) > 0 ? ceil_div(rows, c.row_loop) : rows;
}

}  // namespace

std::int64_t slice_elements(const Problem& p, const Config& c) {
  return std::int64_t(c.items) * c.threads_per_row * (c.vector_bytes / p.element_bytes());
}

std::int64_t splits_for(const Problem& p, const Config& c) {
  return ceil_div(p.cols, std::max<std::int64_t>(1, slice_elements(p, c)));
}

Config make(const Problem& p, int threads, int vector_bytes, int items, int row_loop, bool recompute) {
  Config c;
  c.threads_per_row = threads;
  c.rows_per_block = 1;
  c.vector_bytes = vector_bytes;
  c.items = items;
  c.keep = Keep::registers;
  c.stat = Stat::two_pass;
  c.row_loop = row_loop;
  c.recompute = p.backward && recompute;
  c.splits = static_cast<int>(std::min<std::int64_t>(splits_for(p, c), 1 << 30));
  return c;
}

bool check(const Problem& p, const Config& c, std::string* why, bool prune) {
  const auto fail = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  const int elem = p.element_bytes();
  if (c.splits < 2) return fail("split rows: at least 2 splits");
  if (!is_pow2(c.threads_per_row) || c.threads_per_row < 32 || c.threads_per_row > 1024)
    return fail("split rows: threads per slice a power of two in 32..1024");
  if (c.rows_per_block != 1) return fail("split rows: one slice per block (rows per block 1)");
  if (c.stat != Stat::two_pass || (c.keep != Keep::registers && !(c.cluster && c.keep == Keep::staged)))
    return fail("split rows: slices in registers (the cluster form: or staged), two-pass");
  if (c.keep == Keep::staged && (p.residual || c.vector_bytes < 4))
    return fail("cluster, staged: no residual, vectors of 4 bytes or more (cp.async)");
  if (!is_pow2(c.vector_bytes) || c.vector_bytes > 16 || c.vector_bytes < elem)
    return fail("vector width: 1..16 bytes, at least one element");
  if (c.vector_bytes > p.align_bytes) return fail("vector width exceeds the pointers' alignment");
  if (c.items < 1 || std::int64_t{c.items} * c.vector_bytes > item_bytes_limit(p, prune))
    return fail("split rows: slice too large for registers");
  if (c.splits != splits_for(p, c)) return fail("split rows: splits must be the slices a row needs");
  if (!p.backward && c.recompute) return fail("recompute is a backward field");
  if (!is_pow2(c.row_loop) || c.row_loop > (1 << 30)) return fail("row loop: power of two");
  if (!p.backward && c.row_loop > 1 && c.cooperative) return fail("the cooperative one-pass form has no row loop");
  if (c.row_chunk < 0 || (p.backward && c.row_chunk != 0)) return fail("row chunks: forward only, at least 0");
  if (c.cooperative && p.backward) return fail("the cooperative one-pass form: forward only");
  if (c.cluster) {
    if (p.backward) return fail("the cluster one-pass form: forward only");
    if (c.cooperative) return fail("one pass: cooperative or cluster, not both");
    if (c.row_chunk != 0) return fail("the cluster one-pass form reads x once: no row chunks");
    if (c.row_loop != 1 && (c.row_loop != 4 || !(p.gamma || p.beta)))
      return fail("cluster: loop=4 (gamma / beta held for a block's rows) needs gamma or beta");
    if (c.splits > kMaxClusterBlocks) return fail("cluster: a row's slices exceed 8 blocks (the portable cluster)");
  }
  if (c.cooperative && c.row_chunk != 0)
    return fail("the cooperative one-pass form reads x once: no row chunks (they exist for the re-read)");
  if (p.backward && !p.saved_stats && !c.recompute) return fail("no saved statistics: the backward recomputes them");
  if (!prune) return true;
  if (p.cols * elem < kMinRowBytes) return fail("split rows only for rows of 64 KiB and more");
  if (c.threads_per_row < 128) return fail("split rows: at least 128 threads per slice");
  if (c.vector_bytes < std::min(4, p.align_bytes)) return fail("2-byte accesses only where alignment forces them");
  if (slice_elements(p, c) * elem < 8 * 1024) return fail("split rows: slices of at least 8 KiB");
  if (c.row_chunk != 0 && (!is_pow2(c.row_chunk) || c.row_chunk >= p.rows))
    return fail("split rows: a row chunk is a power of two below the rows");
  // A row's slices must all be co-resident: the launch checks the device; this drops what few GPUs hold.
  if (c.cooperative && std::int64_t{c.splits} * c.threads_per_row > kMaxCoopThreads)
    return fail("cooperative: a row's slices exceed 2^17 threads (half of an H100 at full occupancy)");
  // The forward's output phase: a row loop of 4 shares gamma / beta between rows.
  if (!p.backward && c.row_loop != 1 && (c.row_loop != 4 || !(p.gamma || p.beta) || p.rows < 8))
    return fail("split rows: the output phase's row loop is 4, with gamma or beta and 8 rows or more");
  if (p.backward) {
    if (grads(p) == 0 && c.row_loop != 1) return fail("split rows: a row loop only for dgamma/dbeta");
    if (grads(p) > 0) {
      const auto fits = [&](int loop) {
        const std::int64_t g = ceil_div(p.rows, loop);
        return g == 1 || g * p.cols <= kMaxGradPartials;
      };
      if (!fits(c.row_loop)) return fail("split rows: dgamma/dbeta partial rows too large");
      // A longer loop only when the next shorter one needs too much memory or too many blocks.
      if (c.row_loop > 1 && fits(c.row_loop / 4) && ceil_div(p.rows, c.row_loop / 4) * c.splits <= 4096)
        return fail("split rows: a row loop longer than needed");
      if (c.row_loop > 1 && (c.row_loop & 0x55555555) == 0) return fail("split rows: row loop a power of 4");
    }
  }
  return true;
}

void enumerate(const Problem& p, std::vector<Config>& out) {
  const int elem = p.element_bytes();
  if (p.cols * elem < kMinRowBytes) return;
  for (int vb = elem; vb <= std::min(16, p.align_bytes); vb *= 2)
    for (int threads : {128, 256, 512, 1024})
      for (int items = 1; items * vb <= item_bytes_limit(p, true); items *= 2)
        for (std::int64_t loop = 1; loop <= row_loop_limit(p); loop *= 4)
          for (bool recompute : {false, true}) {
            Config c = make(p, threads, vb, items, static_cast<int>(loop), recompute);
            if (!check(p, c, nullptr, true) || std::find(out.begin(), out.end(), c) != out.end()) continue;
            out.push_back(c);
            if (p.backward) continue;
            Config one_pass = c;  // the cooperative one-pass form of the same slices
            one_pass.cooperative = true;
            if (c.row_loop == 1 && check(p, one_pass, nullptr, true)) out.push_back(one_pass);
            one_pass.cooperative = false;  // and in clusters (loop=4: gamma / beta held; staged next rows)
            one_pass.cluster = true;
            if (check(p, one_pass, nullptr, true)) out.push_back(one_pass);
            one_pass.keep = Keep::staged;
            if (check(p, one_pass, nullptr, true)) out.push_back(one_pass);
            for (std::int64_t bytes : kChunkBytes) {  // rows in groups whose x stays in L2
              c.row_chunk = chunk_rows(p, bytes);
              if (check(p, c, nullptr, true) && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
            }
          }
}

std::optional<Config> heuristic(const Problem& p, bool one_block_valid) {
  const int elem = p.element_bytes();
  // Few wide rows: one block per row would leave most SMs idle.
  const bool few_wide = p.rows < 64 && p.cols * elem >= 4 * kMinRowBytes;
  if (one_block_valid && !few_wide) return std::nullopt;
  for (bool prune : {true, false}) {
    for (int vb = std::min(16, p.align_bytes); vb >= elem; vb /= 2) {
      // The largest slice that still gives at least 512 blocks, else the smallest valid one (the
      // most blocks); per slice size the backward's shortest valid row loop, the forward's longest
      // (loop=4 where valid: the tuned winner of 3 of the 4 normalize-wide rows with gamma or beta
      // and 8 rows or more, 9-14 % ahead; 128 x 2^20 f32 5 % behind; H200, bench/NOTES.md
      // 2026-11-29). Never row chunks: on an H100 every chunked variant lost to its unchunked twin
      // (bench/NOTES.md, 2026-11-26 23:46).
      std::optional<Config> chosen;
      const std::int64_t longest = row_loop_limit(p);
      for (int items = item_bytes_limit(p, prune) / vb; items >= 1; items /= 2) {
        for (std::int64_t loop = p.backward ? 1 : longest; loop >= 1 && loop <= longest;
             loop = p.backward ? loop * 4 : loop / 4) {
          const Config c = make(p, 256, vb, items, static_cast<int>(loop), !p.saved_stats);
          if (!check(p, c, nullptr, prune)) continue;
          chosen = c;
          break;
        }
        if (chosen && p.rows * chosen->splits >= 512) return *chosen;
      }
      if (chosen) return *chosen;
    }
  }
  return std::nullopt;
}

void geometry(const Problem& p, const Config& c, std::int64_t rows, Geometry& g) {
  g.block = static_cast<unsigned>(c.threads_per_row);
  g.dynamic_smem = 0;
  const std::int64_t splits = c.splits;
  const auto grid = [](std::int64_t blocks) { return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxGrid)); };
  g.direct = splits <= kDirectSplits;
  g.phase_count = 0;
  const auto add = [&g](int phase, unsigned blocks) {
    g.phases[g.phase_count] = phase;
    g.phase_grid[g.phase_count] = blocks;
    ++g.phase_count;
  };
  // Forward rows in chunks: every phase runs over one chunk, then the next (the workspace holds one).
  if (!p.backward && c.row_chunk != 0) rows = std::min<std::int64_t>(rows, c.row_chunk);
  g.row_chunk = rows;
  const std::size_t partials = std::size_t(rows) * std::size_t(splits) * 4;  // bytes per float per slice
  const std::size_t finals = std::size_t(rows) * 4;
  if (!p.backward && c.cluster) {
    // One launch of clusters of `splits` blocks; its grid (a cluster a row here) is cut to the
    // clusters the device holds at once at launch, each looping over its rows.
    g.cluster = static_cast<int>(splits);
    if (c.keep == Keep::staged)  // two stages of the block's slice
      g.dynamic_smem = 2 * std::size_t(c.items) * std::size_t(c.threads_per_row) * std::size_t(c.vector_bytes);
    add(0, static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, kMaxGrid / splits) * splits));
    g.workspace_bytes = align256(3 * partials);  // [rows][splits][3], as the cooperative form's
    g.grid = g.phase_grid[0];
    return;
  }
  if (!p.backward && c.cooperative) {
    // One launch; its grid (rows * splits here) is cut to the co-resident row slots at launch.
    g.cooperative = true;
    add(0, grid(rows * splits));
    g.workspace_bytes = align256(3 * partials);  // [rows][splits][3]; the barrier is the driver's
    g.grid = g.phase_grid[0];
    return;
  }
  if (!p.backward) {
    // The forward's phase 1 always runs: it leaves each row's mean, scale and shift as floats, so
    // the output phase holds no float64 merge state next to its slice (fewer registers, more
    // blocks an SM; bench/NOTES.md, 2026-11-29).
    g.direct = false;
    add(0, grid(rows * splits));
    add(1, grid(rows));
    add(2, grid(ceil_div(rows, c.row_loop) * splits));
    g.stat_final_offset = align256(partials * std::size_t(c.threads_per_row / 32) * 4);  // 4 floats a warp
    g.workspace_bytes = align256(g.stat_final_offset + 3 * finals);
    g.grid = g.phase_grid[0];
    return;
  }
  std::size_t at = 0;
  if (c.recompute) {
    add(0, grid(rows * splits));
    at = align256(2 * partials);
    if (!g.direct) {
      add(1, grid(rows));
      g.stat_final_offset = at;
      at = align256(at + 2 * finals);
    }
  }
  add(2, grid(rows * splits));
  g.sum_partials_offset = at;
  at = align256(at + 3 * partials);
  if (!g.direct) {
    add(3, grid(rows));
    g.sum_final_offset = at;
    at = align256(at + 3 * finals);
  }
  const std::int64_t group_count = groups(p, c, rows);
  add(4, grid(group_count * splits));
  g.grad_groups = grads(p) > 0 ? static_cast<int>(std::min<std::int64_t>(group_count, 1 << 30)) : 1;
  if (grads(p) > 0 && g.grad_groups > 1) {
    add(5, grid(ceil_div(p.cols, c.threads_per_row)));
    g.grad_partials_offset = at;
    at = align256(at + std::size_t(grads(p)) * std::size_t(g.grad_groups) * std::size_t(p.cols) * 4);
  }
  g.workspace_bytes = at;
  g.grid = g.phase_grid[0];
}

namespace {

constexpr double kOnePassLatency = 0.7e-6;  // DRAM load latency, s (as predicted_seconds')
constexpr double kOnePassLaunch = 2e-6;

// Blocks of a one-pass variant an SM holds, from its registers: the kept slice (and `held` rows of
// gamma / beta beside it) on about 48 others (sm_90 builds: 64 at 64 bytes a thread).
double one_pass_blocks_per_sm(const Config& c, double held) {
  const double regs = 48.0 + c.items * c.vector_bytes / 4.0 * (1.0 + held);
  const double threads_per_sm = std::min(2048.0, std::floor(65536.0 / regs / 32.0) * 32.0);
  return std::min(32.0, std::floor(threads_per_sm / c.threads_per_row));
}

// The one-pass forms' bytes: 2N, and `extra`, at `efficiency` of `bandwidth`, with too few bytes in
// flight (`slots` rows' slices) to hide the latency charged as such.
double one_pass_memory(const Problem& p, const Config& c, double slots, double extra, double bandwidth,
                       double efficiency) {
  const double plane = double(p.rows) * double(p.cols) * p.element_bytes();
  const double in_flight = std::min(slots, double(p.rows)) * c.splits * c.threads_per_row * c.items * c.vector_bytes;
  return (2.0 * plane + extra) / (efficiency * bandwidth) *
         std::max(1.0, bandwidth * kOnePassLatency / std::max(in_flight, 1.0));
}

// The cooperative form: x read once and y written once by the co-resident row slots, round after
// round, each round ending in a wait for the row's slices (kBarrier) and a merge of S partials that
// every slice reads from L2 (S^2 x 12 bytes a row). The round's cost is an H100 measurement: a
// round reads, waits, merges and writes in lockstep, so nothing overlaps its barrier (bench/NOTES.md,
// "one pass").
double cooperative_seconds(const Problem& p, const Config& c, int sm_count, double bandwidth) {
  constexpr double kBarrier = 12e-6;   // one round's arrival, wait, merge and unoverlapped latencies
  constexpr double kL2Factor = 3.0;    // L2 bandwidth relative to DRAM's
  const double slots = std::floor(double(sm_count) * one_pass_blocks_per_sm(c, 0.0) / double(c.splits));
  if (slots < 1) return 1.0;  // a row's slices cannot be co-resident: last
  const double rounds = std::ceil(double(p.rows) / slots);
  const double merge_bytes = double(p.rows) * double(c.splits) * double(c.splits) * 12.0 / kL2Factor;
  return one_pass_memory(p, c, slots, merge_bytes, bandwidth, 1.0) + 2 * kOnePassLaunch + rounds * kBarrier;
}

// The cluster form: x read once and y written once by clusters that take rows in turn. Its blocks
// run their slice's passes (statistics, the centred sums of layernorm and standardize, the output)
// with nothing else of the row to overlap, so instruction issue bounds it as often as the bytes do.
// Fitted on the H200 recording of six problems with rows of 256 KiB to 1 MiB (2026-12-03,
// tests/data/trials/2026-12-03-h200-cluster-rows): bytes at 80 % of the copy rate; about 0.1 ns a
// pass and element on each SM with 8 elements a vector (16-byte bf16 vectors; 4-byte ones twice
// that; rmsnorm 2 passes, the others 3.25); the larger of the two, then each row's chain (barrier,
// the merge's L2 round trip, and the loads unless staged a row ahead) over the clusters resident at once.
double cluster_seconds(const Problem& p, const Config& c, int sm_count, double bandwidth) {
  constexpr double kPass = 0.1e-9;      // seconds a pass and element on one SM, 8 elements a vector
  constexpr double kEfficiency = 0.8;  // of the copy rate, x and y streamed by the clusters
  const double row_stall = c.keep == Keep::staged ? 0.25e-6 : 2e-6;
  const double held = c.row_loop > 1 ? double(p.gamma) + double(p.beta) : 0.0;  // gamma / beta beside the slice
  double per_sm = one_pass_blocks_per_sm(c, held);
  if (c.keep == Keep::staged)  // 227 KiB of shared memory an SM (sm_90)
    per_sm = std::min(per_sm, std::floor(227.0 * 1024 / (2.0 * c.items * c.threads_per_row * c.vector_bytes)));
  const double clusters = std::floor(double(sm_count) * per_sm / double(c.splits));
  if (clusters < 1) return 1.0;
  const double elements = double(p.rows) * double(p.cols);
  const double memory = one_pass_memory(p, c, clusters, 0.0, bandwidth, kEfficiency);
  const double vector_elements = double(c.vector_bytes) / p.element_bytes();
  const double passes = p.mode == NormMode::rmsnorm ? 2.0 : 3.25;
  const double issue = elements / double(sm_count) * passes * kPass * (1.0 + 4.0 / vector_elements) / 1.5;
  const double stalls = std::ceil(double(p.rows) / clusters) * row_stall / std::max(1.0, per_sm);
  return std::max(memory, issue) + kOnePassLaunch + stalls;
}

}  // namespace

double predicted_seconds(const Problem& p, const Config& c, int sm_count, double bandwidth) {
  constexpr double kLatency = 0.7e-6;  // DRAM load latency, s (as the one-block model's)
  // One dependent launch of a phase: the launch plus the ramp and drain of a short grid (H100: row
  // chunks of 2-3 phases cost 20-30 us a chunk beyond their bytes).
  constexpr double kLaunch = 8e-6;
  constexpr double kL2Bytes = 40e6;    // a re-read of this much in flight is served by L2
  if (c.cooperative) return cooperative_seconds(p, c, sm_count, bandwidth);
  if (c.cluster) return cluster_seconds(p, c, sm_count, bandwidth);
  Geometry g;
  geometry(p, c, p.rows, g);
  const double elem = p.element_bytes();
  const double plane = double(p.rows) * double(p.cols) * elem;
  // Forward: x read twice, y written; backward: x (and dy) read in each pass, dx written. The
  // second read comes from L2 when the rows of one group of launches fit there.
  const double chunks = c.row_chunk == 0 ? 1.0 : std::ceil(double(p.rows) / double(c.row_chunk));
  const double reread = plane / chunks <= kL2Bytes ? 0.2 : 1.0;
  double bytes = p.backward ? plane * (3 + 2 * reread + (c.recompute ? reread : 0)) : plane * (2 + reread);
  // The forward's output phase reads gamma / beta once per row loop, mostly from L2 (about half the
  // cost of DRAM bytes: H200, 64 x 2^22 bf16, bench/NOTES.md 2026-11-29).
  if (!p.backward) bytes += 0.5 * double(p.gamma + p.beta) * double(p.rows) / c.row_loop * double(p.cols) * elem;
  bytes += double(grads(p)) * double(g.grad_groups > 1 ? g.grad_groups : 0) * double(p.cols) * 8;
  const double blocks = double(p.rows) * double(c.splits);
  const double per_sm = std::max(1, std::min(16, 2048 / c.threads_per_row));
  const double resident = std::min(blocks, double(sm_count) * per_sm);
  const double in_flight = resident * c.threads_per_row * c.items * c.vector_bytes;
  const double memory = bytes / bandwidth * std::max(1.0, bandwidth * kLatency / std::max(in_flight, 1.0));
  // Phase 1 (or 3) merges a row's partials in one block: one per slice, the forward's one per warp.
  const double partials = p.backward ? double(c.splits) : double(c.splits) * (c.threads_per_row / 32);
  const double merge = g.direct ? 0 : partials / c.threads_per_row * kLatency;
  return memory + chunks * g.phase_count * kLaunch + merge;
}

}  // namespace kvtune::normalize::split_rows
