#pragma once
// The split-row points of the normalize space (Config::splits > 1; kernels in normalize_split.cuh):
// their constraints, enumeration, heuristic choice, launch geometry and cost. normalize_family.cpp
// delegates here for every config with splits != 1.

#include <optional>
#include <string>
#include <vector>

#include "kernel_templates/normalize/normalize_family.h"

namespace kvtune::normalize::split_rows {

/// Rows of at least this many bytes get split variants in the space (narrower rows fill the GPU
/// with one block per row; every row a single block cannot hold is far wider).
constexpr std::int64_t kMinRowBytes = 64 * 1024;
/// Backward: at most this many slices per row are merged by each output block itself; more get a
/// merge phase. The forward always has its merge phase (normalize_split.cuh).
constexpr std::int64_t kDirectSplits = 32;

/// Elements per slice of a split config.
std::int64_t slice_elements(const Problem& p, const Config& c);
/// The slices a row of p.cols elements needs with `c`'s slice.
std::int64_t splits_for(const Problem& p, const Config& c);
/// The split config with `threads`, `vector_bytes` and `items` (and the backward's fields) for `p`.
Config make(const Problem& p, int threads, int vector_bytes, int items, int row_loop, bool recompute);

/// Constraints of a config with splits != 1 (prune: also the pruning rules).
bool check(const Problem& p, const Config& c, std::string* why, bool prune);
/// Appends the valid split variants of `p` (none for rows narrower than kMinRowBytes).
void enumerate(const Problem& p, std::vector<Config>& out);
/// The split variant the heuristic takes: when no one-block variant is valid, or when few wide rows
/// would leave most of the GPU idle with one block per row; nullopt otherwise.
std::optional<Config> heuristic(const Problem& p, bool one_block_valid);
/// Fills the split fields of `g` (grid of each phase, workspace layout) for `rows` rows.
void geometry(const Problem& p, const Config& c, std::int64_t rows, Geometry& g);
/// The cost model's estimate (seconds) of a split config.
double predicted_seconds(const Problem& p, const Config& c, int sm_count, double bandwidth);

}  // namespace kvtune::normalize::split_rows
