// CPU tests of normalize's split rows (rows wider than one block, issue 25): every width from 1 to
// 2^31 - 1 has a valid variant in every mode, dtype and alignment, forward and backward; split
// variants' labels, keys, workspace layout and validation; every kind of split kernel compiles.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile_batches.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kernel_templates/normalize/normalize_split.h"
#include "sample.h"

using namespace kvtune;
using normalize::Config;
using normalize::Problem;

namespace {

constexpr std::int64_t kMaxCols = (std::int64_t(1) << 31) - 1;

// The width classes of the issue: 1, odd, 2^k, 2^k + 1, just above what one block holds, 2^20 and
// more, 2^31 - 1.
const std::vector<std::int64_t>& width_classes() {
  static const std::vector<std::int64_t> widths = {1,          37,          1024,         1025,          65536,
                                                    65537,      262144,      262145,       524289,        1 << 20,
                                                    (1 << 20) + 1, (1 << 22) + 3, std::int64_t(1) << 30, kMaxCols};
  return widths;
}

Problem forward(DType dtype, NormMode mode, std::int64_t cols, int align, std::int64_t rows = 4) {
  Problem p;
  p.dtype = dtype;
  p.mode = mode;
  p.cols = cols;
  p.rows = rows;
  p.align_bytes = align;
  p.gamma = true;
  p.beta = mode != NormMode::rmsnorm;
  p.mean_out = mode != NormMode::rmsnorm;
  p.rstd_out = true;
  return p;
}

Problem backward(DType dtype, NormMode mode, std::int64_t cols, int align, bool grads, bool saved, std::int64_t rows = 4) {
  Problem p;
  p.backward = true;
  p.dtype = dtype;
  p.mode = mode;
  p.cols = cols;
  p.rows = rows;
  p.align_bytes = align;
  p.gamma = grads;
  p.dgamma = grads;
  p.dbeta = grads && mode != NormMode::rmsnorm;
  p.saved_stats = saved;
  return p;
}

// The alignment classes a call of `cols` columns can have: every pointer 16-byte aligned with a
// row pitch that keeps it, and only element alignment.
std::vector<int> alignments(DType dtype, std::int64_t cols) {
  const int elem = dtype == DType::f32 ? 4 : 2;
  std::vector<int> out = {elem};
  int a = elem;
  while (a < 16 && (cols * elem) % (2 * a) == 0) a *= 2;
  if (a != elem) out.push_back(a);
  return out;
}

std::vector<Problem> every_width_problem() {
  std::vector<Problem> out;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16})
    for (NormMode mode : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm})
      for (std::int64_t cols : width_classes())
        for (int align : alignments(dtype, cols)) {
          out.push_back(forward(dtype, mode, cols, align));
          out.push_back(forward(dtype, mode, cols, align, 65536));
          for (bool grads : {false, true})
            for (bool saved : {false, true}) out.push_back(backward(dtype, mode, cols, align, grads, saved));
          out.push_back(backward(dtype, mode, cols, align, true, false, 65536));
        }
  return out;
}

// `c` is not runnable for `p`, for a reason that names `reason`.
void check_refused(const Problem& p, const Config& c, const std::string& reason) {
  std::string why;
  CHECK_FALSE(normalize::is_runnable(p, c, &why));
  INFO(why);
  CHECK(why.find(reason) != std::string::npos);
}

bool any_one_block(const std::vector<Config>& configs) {
  return std::any_of(configs.begin(), configs.end(), [](const Config& c) { return c.splits == 1; });
}

// Compiles, for sm_80 and sm_90, a sample (of `sample`, plus the first and last) of the variants
// `select` takes from each problem `problems(dtype, mode)` gives, over every dtype and mode;
// `check(p, selected)` sees each problem's selected variants first (none selected fails), and
// `check_request` each compile request. Returns the programs compiled.
template <class Problems, class Select, class Check, class CheckRequest>
std::size_t compile_one_pass_sample(std::size_t sample_every, Problems problems, Select select, Check check,
                                    CheckRequest check_request) {
  std::vector<detail::CompileRequest> batches;
  std::size_t variants = 0;
  const test::Sample sample{sample_every};
  for (const char* arch : {"sm_80", "sm_90"}) {
    std::vector<detail::CompileRequest> requests;
    for (DType dtype : {DType::f32, DType::f16, DType::bf16})
      for (NormMode mode : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm})
        for (const Problem& p : problems(dtype, mode)) {
          std::vector<Config> selected;
          for (const Config& c : normalize::enumerate(p))
            if (select(c)) selected.push_back(c);
          INFO(p.key());
          REQUIRE_FALSE(selected.empty());
          check(p, selected);
          std::vector<Config> chosen = sample.apply(selected, p.key() + arch);
          chosen.push_back(selected.front());
          chosen.push_back(selected.back());
          for (const Config& c : chosen) {
            const auto r = normalize::compile_request(p, c, arch);
            check_request(r);
            requests.push_back(r);
          }
          variants += chosen.size();
        }
    test::add_batched(batches, requests, 48);
  }
  return test::check_compiled(batches, variants);
}

}  // namespace

TEST_CASE("every width class has a valid variant, and the heuristic splits rows one block cannot hold",
          "[normalize][wide]") {
  for (const Problem& p : every_width_problem()) {
    INFO(p.key());
    const std::vector<Config> space = normalize::enumerate(p);
    REQUIRE_FALSE(space.empty());
    for (const Config& c : space) {  // the seed design (first) need only be runnable
      std::string why;
      INFO(c.label() << ": " << why);
      REQUIRE((normalize::is_valid(p, c, &why) || (c == space.front() && normalize::is_runnable(p, c, &why))));
    }
    const Config h = normalize::heuristic_config(p, 9);
    INFO(h.label());
    std::string why;
    CHECK(normalize::is_valid(p, h, &why));
    if (!any_one_block(space)) CHECK(h.splits > 1);
    // The split forms are points of the space wherever rows are wide.
    const bool wide = p.cols * p.element_bytes() >= normalize::split_rows::kMinRowBytes;
    CHECK(wide == std::any_of(space.begin(), space.end(), [](const Config& c) { return c.splits > 1; }));
    if (h.splits > 1) {
      CHECK(h.splits == normalize::split_rows::splits_for(p, h));
      CHECK(normalize::geometry(p, h, p.rows).workspace_bytes > 0);
    }
  }
}

TEST_CASE("split rows: few wide rows take the split form, many rows of one block's width do not", "[normalize][wide]") {
  // One row of 2^20 f32: a single block per row would use one SM.
  CHECK(normalize::heuristic_config(forward(DType::f32, NormMode::layernorm, 1 << 20, 16, 1), 9).splits > 1);
  CHECK(normalize::heuristic_config(backward(DType::bf16, NormMode::rmsnorm, 1 << 20, 16, true, true, 2), 9).splits > 1);
  // 16384 rows of 1024: one block per row fills the GPU.
  CHECK(normalize::heuristic_config(forward(DType::f32, NormMode::layernorm, 1024, 16, 16384), 9).splits == 1);
  // Just above the one-block limit of unaligned f16 (65,536 columns of 2-byte vectors).
  const Problem f16 = forward(DType::f16, NormMode::standardize, 65537, 2, 4096);
  CHECK_FALSE(any_one_block(normalize::enumerate(f16)));
  const Config h = normalize::heuristic_config(f16, 9);
  CHECK(h.splits > 1);
  CHECK(normalize::is_valid(f16, h));
}

TEST_CASE("split rows: the constraints say why", "[normalize][wide]") {
  const Problem p = forward(DType::f32, NormMode::layernorm, 1 << 20, 16, 8);
  Config c = normalize::split_rows::make(p, 256, 16, 4, 1, false);
  std::string why;
  REQUIRE(normalize::is_valid(p, c, &why));
  CHECK(c.splits == (1 << 20) / (256 * 4 * 4));
  Config wrong = c;
  wrong.splits += 1;
  check_refused(p, wrong, "splits must be the slices a row needs");
  wrong = c;
  wrong.rows_per_block = 2;
  check_refused(p, wrong, "rows per block");
  wrong = c;
  wrong.keep = normalize::Keep::reread;
  CHECK_FALSE(normalize::is_runnable(p, wrong, &why));
  wrong = c;
  wrong.items = 16;  // 256 bytes a thread
  wrong.splits = static_cast<int>(normalize::split_rows::splits_for(p, wrong));
  check_refused(p, wrong, "registers");
  wrong = c;
  wrong.splits = 0;
  CHECK_FALSE(normalize::is_runnable(p, wrong, &why));
  Problem misaligned = p;
  misaligned.align_bytes = 4;
  check_refused(misaligned, c, "alignment");
  // The backward: without saved statistics only recomputing variants.
  const Problem b = backward(DType::bf16, NormMode::layernorm, 1 << 20, 16, true, false, 8);
  Config bc = normalize::split_rows::make(b, 256, 16, 2, 1, false);
  check_refused(b, bc, "recomputes");
  bc.recompute = true;
  CHECK(normalize::is_valid(b, bc, &why));
}

TEST_CASE("split rows: labels, JSON and the space's uniqueness", "[normalize][wide]") {
  const Problem p = backward(DType::f16, NormMode::standardize, (1 << 20) + 1, 2, true, true, 4096);
  const auto space = normalize::enumerate(p);
  std::set<std::string> labels;
  int split = 0;
  for (const Config& c : space) {
    CHECK(labels.insert(c.label()).second);
    CHECK(Config::from_json(c.to_json()) == c);
    if (c.splits > 1) {
      ++split;
      CHECK(c.label().find(",split=" + std::to_string(c.splits)) != std::string::npos);
    }
  }
  CHECK(split > 0);
  const Config one_block = normalize::heuristic_config(forward(DType::f32, NormMode::layernorm, 1024, 16, 4096), 9);
  CHECK(one_block.to_json().count("split") == 0);
  CHECK(one_block.label().find("split") == std::string::npos);
  nlohmann::json j = normalize::split_rows::make(forward(DType::f32, NormMode::rmsnorm, 1 << 22, 16), 512, 16, 4, 1,
                                                 false)
                         .to_json();
  CHECK(j.at("split") == (1 << 22) / (512 * 16));
  j["split"] = "many";
  CHECK_THROWS_AS(Config::from_json(j), Error);
}

TEST_CASE("split rows: forward rows in chunks whose x stays in L2", "[normalize][wide]") {
  // 512 rows of 2^20 f32 (4 MiB each, 2 GiB of x): chunks of about 8 and 24 MiB, rounded down to
  // powers of two (2 and 4 rows), are points of the space; the heuristic takes none (they lost to
  // unchunked variants on an H100) and the cost model ranks them after the unchunked twins.
  const Problem p = forward(DType::f32, NormMode::layernorm, 1 << 20, 16, 512);
  std::set<int> chunks;
  for (const Config& c : normalize::enumerate(p))
    if (c.splits > 1) chunks.insert(c.row_chunk);
  CHECK(chunks == std::set<int>{0, 2, 4});
  CHECK(normalize::heuristic_config(p, 9).row_chunk == 0);
  Config h = normalize::heuristic_config(p, 9);
  h.row_chunk = 4;
  CHECK(normalize::is_valid(p, h));
  Config unchunked = h;
  unchunked.row_chunk = 0;
  CHECK(normalize::split_rows::predicted_seconds(p, unchunked, 132, 3e12) <
        normalize::split_rows::predicted_seconds(p, h, 132, 3e12));
  CHECK(h.label().find(",chunk=4") != std::string::npos);
  CHECK(Config::from_json(h.to_json()) == h);
  // The workspace holds one chunk: 4 rows' partials whatever the rows.
  CHECK(normalize::geometry(p, h, 512).workspace_bytes == normalize::geometry(p, h, 4).workspace_bytes);
  CHECK(normalize::geometry(p, h, 3).row_chunk == 3);
  // The backward has no chunks.
  const Problem b = backward(DType::f32, NormMode::layernorm, 1 << 20, 16, true, true, 512);
  for (const Config& c : normalize::enumerate(b)) CHECK(c.row_chunk == 0);
  Config bad = normalize::heuristic_config(b, 9);
  bad.row_chunk = 4;
  std::string why;
  check_refused(b, bad, "forward only");
  Config one_block = normalize::heuristic_config(forward(DType::f32, NormMode::layernorm, 1024, 16, 512), 9);
  one_block.row_chunk = 4;
  CHECK_FALSE(normalize::is_runnable(forward(DType::f32, NormMode::layernorm, 1024, 16, 512), one_block, &why));
  Config odd = h;
  odd.row_chunk = 3;
  CHECK(normalize::is_runnable(p, odd));  // runs, but not a point of the pruned space
  CHECK_FALSE(normalize::is_valid(p, odd, &why));
}

TEST_CASE("split rows: phases and workspace arrays laid out without overlap", "[normalize][wide]") {
  for (bool bwd : {false, true}) {
    for (std::int64_t cols : {std::int64_t(1) << 20, kMaxCols}) {
      for (std::int64_t rows : {std::int64_t(1), std::int64_t(3), std::int64_t(1000)}) {
        const Problem p = bwd ? backward(DType::f32, NormMode::layernorm, cols, 4, true, false, rows)
                              : forward(DType::f32, NormMode::layernorm, cols, 4, rows);
        const Config h = normalize::heuristic_config(p, 9);
        INFO(p.key() << " " << h.label());
        REQUIRE(h.splits > 1);
        const auto g = normalize::geometry(p, h, rows);
        CHECK(g.block == unsigned(h.threads_per_row));
        CHECK(g.phase_count >= 2);
        // The forward always merges in a phase of its own (its output phase reads three floats a
        // row); the backward merges in its output phases when the row has few slices.
        CHECK(g.direct == (bwd && h.splits <= normalize::split_rows::kDirectSplits));
        if (!bwd) CHECK(g.phase_count == 3);
        for (int i = 0; i < g.phase_count; ++i) {
          CHECK(g.phase_grid[i] >= 1);
          CHECK(g.phase_grid[i] <= (1u << 30));
          if (i > 0) CHECK(g.phases[i] > g.phases[i - 1]);
        }
        // Each array: [offset, offset + bytes) in order, inside the workspace, 256-byte aligned; the
        // forward's hold one chunk of rows.
        CHECK(g.row_chunk == (h.row_chunk == 0 ? rows : std::min<std::int64_t>(rows, h.row_chunk)));
        if (bwd) CHECK(h.row_chunk == 0);
        const std::int64_t chunk = g.row_chunk;
        const std::size_t partials = std::size_t(chunk) * std::size_t(h.splits) * 4;
        std::vector<std::pair<std::size_t, std::size_t>> arrays;
        if (!bwd) {  // each warp's statistics of its part of a slice, the row's shift and a count
          arrays.push_back({0, 4 * partials * std::size_t(h.threads_per_row / 32)});
          if (!g.direct) arrays.push_back({g.stat_final_offset, 3 * std::size_t(chunk) * 4});
        } else {
          arrays.push_back({0, 2 * partials});  // recompute: the statistics
          if (!g.direct) arrays.push_back({g.stat_final_offset, 2 * std::size_t(rows) * 4});
          arrays.push_back({g.sum_partials_offset, 3 * partials});
          if (!g.direct) arrays.push_back({g.sum_final_offset, 3 * std::size_t(rows) * 4});
          if (g.grad_groups > 1) arrays.push_back({g.grad_partials_offset, 2 * std::size_t(g.grad_groups) * std::size_t(cols) * 4});
        }
        for (std::size_t i = 0; i < arrays.size(); ++i) {
          CHECK(arrays[i].first % 256 == 0);
          CHECK(arrays[i].first + arrays[i].second <= g.workspace_bytes);
          if (i > 0) CHECK(arrays[i - 1].first + arrays[i - 1].second <= arrays[i].first);
        }
      }
    }
  }
}

TEST_CASE("split rows: the forward's workspace fields are validated before any GPU work", "[normalize][wide]") {
  NormalizeArgs a;
  a.x = a.y = reinterpret_cast<void*>(std::uintptr_t(1) << 20);
  a.rows = 2;
  a.cols = kMaxCols;  // the widest row: valid
  CHECK_NOTHROW(normalize::validate(a));
  a.cols = kMaxCols + 2;
  try {
    normalize::validate(a);
    FAIL("cols above 2^31 accepted");
  } catch (const Error& e) {
    CHECK(e.context().field == "cols");
  }
  a.cols = 1 << 20;
  a.workspace = reinterpret_cast<void*>((std::uintptr_t(1) << 30) + 64);
  a.workspace_bytes = 1 << 20;
  try {
    normalize::validate(a);
    FAIL("misaligned workspace accepted");
  } catch (const Error& e) {
    CHECK(e.context().field == "workspace");
  }
  // A workspace of 0 bytes is what normalize_workspace_size gives a call that needs none: valid here;
  // the call refuses it, naming workspace_bytes, when its variant needs more.
  a.workspace = reinterpret_cast<void*>(std::uintptr_t(1) << 30);
  a.workspace_bytes = 0;
  CHECK_NOTHROW(normalize::validate(a));
  // The backward checks its workspace fields the same way.
  NormalizeBackwardArgs b;
  b.x = b.dy = reinterpret_cast<void*>(std::uintptr_t(1) << 20);
  b.dx = reinterpret_cast<void*>(std::uintptr_t(1) << 40);
  b.rows = 2;
  b.cols = 1 << 20;
  CHECK_NOTHROW(normalize::validate(b));
  b.workspace = reinterpret_cast<void*>((std::uintptr_t(1) << 30) + 8);
  b.workspace_bytes = 4096;
  try {
    normalize::validate(b);
    FAIL("misaligned backward workspace accepted");
  } catch (const Error& e) {
    CHECK(e.context().field == "workspace");
  }
  b.workspace = reinterpret_cast<void*>(std::uintptr_t(1) << 30);
  b.workspace_bytes = 0;
  CHECK_NOTHROW(normalize::validate(b));
  // Sizes whose element count overflows stay errors naming the field.
  a.workspace = nullptr;
  a.rows = std::int64_t(1) << 40;
  a.cols = 1 << 20;
  try {
    normalize::validate(a);
    FAIL("overflowing rows x cols accepted");
  } catch (const Error& e) {
    CHECK(e.context().field == "rows");
  }
}

// Every kind of split kernel (forward: mode x affine x stats; backward: mode x gamma x grads x
// recompute) compiles for sm_80 and sm_90, with a seeded sample of slice shapes.
TEST_CASE("split-row kernels compile for sm_80 and sm_90", "[normalize][wide][nvrtc][compiles]") {
  std::vector<detail::CompileRequest> batches;
  std::size_t kernels = 0;
  const test::Sample sample{8};
  for (const char* arch : {"sm_80", "sm_90"}) {
    std::vector<detail::CompileRequest> requests;
    for (DType dtype : {DType::f32, DType::f16, DType::bf16})
      for (NormMode mode : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm}) {
        std::vector<Problem> problems;
        Problem plain = forward(dtype, mode, (1 << 20) + 1, dtype == DType::f32 ? 4 : 2);
        plain.gamma = plain.beta = plain.mean_out = plain.rstd_out = false;
        problems.push_back(plain);
        problems.push_back(forward(dtype, mode, 1 << 20, 16));
        problems.push_back(backward(dtype, mode, 1 << 20, 16, true, false, 1 << 12));
        problems.push_back(backward(dtype, mode, (1 << 20) + 1, dtype == DType::f32 ? 4 : 2, false, true));
        for (const Problem& p : problems) {
          std::vector<Config> split;
          for (const Config& c : normalize::enumerate(p))
            if (c.splits > 1) split.push_back(c);
          REQUIRE_FALSE(split.empty());
          std::vector<Config> chosen = sample.apply(split, p.key() + arch);
          chosen.push_back(normalize::heuristic_config(p, 9));
          for (const Config& c : chosen) {
            requests.push_back(normalize::compile_request(p, c, arch));
            kernels += requests.back().name_expressions.size();  // the phased forward: 3, one per phase
          }
        }
      }
    test::add_batched(batches, requests, 48);
  }
  const std::size_t total = test::check_compiled(batches, kernels);
  WARN("compiled " << total << " split-row normalize kernels for sm_80 and sm_90");
}

TEST_CASE("split rows: the cooperative one-pass form is a forward axis with its reasons", "[normalize][wide]") {
  // 128 rows of 2^20 f32: every forward split shape also has its one-pass twin (where a row's
  // slices are few enough threads), labelled ",coop", stored as "coop": true.
  const Problem p = forward(DType::f32, NormMode::layernorm, 1 << 20, 16, 128);
  const auto space = normalize::enumerate(p);
  std::size_t coop = 0;
  for (const Config& c : space) {
    if (!c.cooperative) continue;
    ++coop;
    INFO(c.label());
    CHECK(c.splits > 1);
    CHECK(c.row_chunk == 0);
    CHECK(c.label().find(",coop") != std::string::npos);
    CHECK(c.to_json().at("coop") == true);
    CHECK(Config::from_json(c.to_json()) == c);
    Config twin = c;
    twin.cooperative = false;
    CHECK(std::find(space.begin(), space.end(), twin) != space.end());
    CHECK(twin.label() + ",coop" == c.label());
    CHECK(std::int64_t(c.splits) * c.threads_per_row <= (std::int64_t(1) << 17));
  }
  CHECK(coop > 0);
  CHECK(normalize::heuristic_config(p, 9).cooperative == false);  // the heuristic keeps the phases
  for (const Config& c : space)
    if (!c.cooperative) CHECK(c.to_json().count("coop") == 0);
  // The backward has no one-pass form, nor do narrow rows.
  for (const Config& c : normalize::enumerate(backward(DType::f32, NormMode::layernorm, 1 << 20, 16, true, true, 128)))
    CHECK_FALSE(c.cooperative);
  for (const Config& c : normalize::enumerate(forward(DType::f32, NormMode::layernorm, 1024, 16, 128)))
    CHECK_FALSE(c.cooperative);

  Config c = normalize::split_rows::make(p, 256, 16, 4, 1, false);
  c.cooperative = true;
  std::string why;
  CHECK(normalize::is_valid(p, c, &why));
  Config chunked = c;
  chunked.row_chunk = 4;
  check_refused(p, chunked, "no row chunks");
  const Problem b = backward(DType::f32, NormMode::layernorm, 1 << 20, 16, true, true, 128);
  Config bc = normalize::split_rows::make(b, 256, 16, 2, 1, false);
  bc.cooperative = true;
  check_refused(b, bc, "forward only");
  Config one_block = normalize::heuristic_config(forward(DType::f32, NormMode::layernorm, 1024, 16, 512), 9);
  one_block.cooperative = true;
  check_refused(forward(DType::f32, NormMode::layernorm, 1024, 16, 512), one_block,
                "split rows' one-pass form or the backward's dgamma/dbeta sums");
  // A row of 2^22 f32 in slices of 1024 x 16 bytes: 2^18 threads, runnable where a GPU holds them
  // (the launch decides) but not a point of the pruned space.
  const Problem wide = forward(DType::f32, NormMode::standardize, 1 << 22, 16, 4);
  Config huge = normalize::split_rows::make(wide, 1024, 16, 1, 1, false);
  huge.cooperative = true;
  CHECK(normalize::is_runnable(wide, huge, &why));
  CHECK_FALSE(normalize::is_valid(wide, huge, &why));
  CHECK(why.find("2^17 threads") != std::string::npos);
  // A malformed flag is refused.
  nlohmann::json j = c.to_json();
  j["coop"] = "yes";
  CHECK_THROWS_AS(Config::from_json(j), Error);
}

TEST_CASE("split rows: the cooperative form's geometry, workspace and cost", "[normalize][wide]") {
  for (std::int64_t rows : {std::int64_t(1), std::int64_t(3), std::int64_t(1000)}) {
    const Problem p = forward(DType::bf16, NormMode::rmsnorm, (1 << 22) + 1, 2, rows);
    for (int items : {1, 8}) {  // 4097 and 513 slices a row (runnable; beyond the pruned space)
      Config c = normalize::split_rows::make(p, 1024, 2, items, 1, false);
      c.cooperative = true;
      INFO(c.label() << " rows=" << rows);
      REQUIRE(normalize::is_runnable(p, c));
      const auto g = normalize::geometry(p, c, rows);
      CHECK(g.cooperative);
      CHECK(g.phase_count == 1);
      CHECK(g.block == 1024u);
      CHECK(g.grid == unsigned(rows * c.splits));  // an upper bound: the launch takes the co-resident slots
      CHECK(g.row_chunk == rows);
      // Partials [rows][splits][3], 256-byte aligned; no counters (the barrier is the driver's).
      const std::size_t partials = std::size_t(rows) * std::size_t(c.splits) * 12;
      CHECK(g.workspace_bytes >= partials);
      CHECK(g.workspace_bytes < partials + 256);
      CHECK(g.workspace_bytes % 256 == 0);
    }
  }
  // The cost model ranks the one-pass form (2N bytes) ahead of its phased twin (3N) where a row's
  // slices fit the GPU at once and the rows take one round (H100: 132 SMs, 3 TB/s), behind it where
  // many rounds each pay their barrier (measured: 2 x 2^20 f32 17.0 us against 20.5; 128 x 2^20
  // 778 us against 585), and last where a row cannot fit.
  const Problem few = forward(DType::f32, NormMode::layernorm, 1 << 20, 16, 2);
  const Problem p = forward(DType::f32, NormMode::layernorm, 1 << 20, 16, 128);
  Config phased = normalize::split_rows::make(p, 512, 16, 4, 1, false);
  Config coop = phased;
  coop.cooperative = true;
  CHECK(normalize::predicted_seconds(few, coop, 132, 3e12) < normalize::predicted_seconds(few, phased, 132, 3e12));
  CHECK(normalize::predicted_seconds(p, coop, 132, 3e12) > normalize::predicted_seconds(p, phased, 132, 3e12));
  CHECK(normalize::predicted_seconds(p, coop, 132, 3e12) > 2.0 * 128 * (1 << 20) * 4 / 3e12);
  CHECK(normalize::predicted_seconds(p, coop, 2, 3e12) == 1.0);
}

// The one-pass cooperative kernels (mode x affine x stats x dtype, a sample of slice shapes, with
// and without the block-wide merge of more than 32 slices) compile for sm_80 and sm_90.
TEST_CASE("split rows: the cooperative kernels compile for sm_80 and sm_90", "[normalize][wide][nvrtc][compiles]") {
  const std::size_t total = compile_one_pass_sample(
      3,
      [](DType dtype, NormMode mode) {
        Problem plain = forward(dtype, mode, (1 << 20) + 1, dtype == DType::f32 ? 4 : 2);
        plain.gamma = plain.beta = plain.mean_out = plain.rstd_out = false;
        return std::vector<Problem>{plain, forward(dtype, mode, 1 << 20, 16)};
      },
      [](const Config& c) { return c.cooperative; },
      [](const Problem&, const std::vector<Config>& coop) {
        // Rows of more than 32 slices: the block-wide merge is compiled too.
        CHECK(std::any_of(coop.begin(), coop.end(), [](const Config& c) { return c.splits > 32; }));
      },
      [](const detail::CompileRequest& r) {
        REQUIRE(r.name_expressions.size() == 1);
        CHECK(r.name_expressions[0].rfind("kvt_normalize_split_coop<", 0) == 0);
      });
  WARN("compiled " << total << " cooperative split-row normalize variants for sm_80 and sm_90");
}

TEST_CASE("split rows: the cluster one-pass form is a forward axis with its reasons", "[normalize][wide]") {
  // 2048 rows of 65536 f32 (256 KiB): every forward split shape of at most 8 slices has its cluster
  // twins, labelled ",cluster", stored as "cluster": true (the slices in registers, and staged a row
  // ahead: keep=stage, dynamic shared memory of two slices); none of more slices.
  Problem p = forward(DType::f32, NormMode::rmsnorm, 1 << 16, 16, 2048);
  p.gamma = false;
  const auto space = normalize::enumerate(p);
  std::size_t clusters = 0, staged = 0, small_phased = 0;
  for (const Config& c : space) {
    if (c.splits > 1 && c.splits <= 8 && !c.cooperative && !c.cluster && c.row_chunk == 0) ++small_phased;
    if (!c.cluster) {
      CHECK(c.to_json().count("cluster") == 0);
      continue;
    }
    INFO(c.label());
    const auto g = normalize::geometry(p, c, p.rows);
    if (c.keep == normalize::Keep::staged) {
      ++staged;
      Config regs = c;
      regs.keep = normalize::Keep::registers;
      CHECK(std::find(space.begin(), space.end(), regs) != space.end());
      CHECK(g.dynamic_smem == 2 * std::size_t(c.items) * std::size_t(c.threads_per_row) * std::size_t(c.vector_bytes));
      CHECK(normalize::compile_request(p, c, "sm_90").name_expressions.at(0).find(", 0, 0, 1>") != std::string::npos);
      continue;
    }
    ++clusters;
    CHECK(g.dynamic_smem == 0);
    CHECK(c.splits > 1);
    CHECK(c.splits <= 8);
    CHECK_FALSE(c.cooperative);
    CHECK(c.row_chunk == 0);
    CHECK(c.row_loop == 1);  // rmsnorm without gamma: nothing to hold
    CHECK(c.to_json().at("cluster") == true);
    CHECK(Config::from_json(c.to_json()) == c);
    Config twin = c;
    twin.cluster = false;
    CHECK(std::find(space.begin(), space.end(), twin) != space.end());
    CHECK(twin.label() + ",cluster" == c.label());
    const auto r = normalize::compile_request(p, c, "sm_90");
    REQUIRE(r.name_expressions.size() == 1);
    CHECK(r.name_expressions[0].rfind("kvt_normalize_split_cluster<", 0) == 0);
  }
  CHECK(clusters > 0);
  CHECK(clusters == small_phased);
  CHECK(staged == clusters);  // 16-byte vectors: every one has a staged twin
  // The backward has none, nor do rows of more than 8 slices or narrow rows.
  for (const Config& c : normalize::enumerate(backward(DType::f32, NormMode::layernorm, 1 << 16, 16, true, true, 128)))
    CHECK_FALSE(c.cluster);
  for (const Config& c : normalize::enumerate(forward(DType::f32, NormMode::layernorm, 1 << 20, 16, 128)))
    CHECK_FALSE(c.cluster);
  for (const Config& c : normalize::enumerate(forward(DType::f32, NormMode::layernorm, 1024, 16, 128)))
    CHECK_FALSE(c.cluster);
  // The widths of the `[gpu]` cluster test have cluster variants in every dtype, aligned or not.
  for (DType dtype : {DType::f32, DType::f16, DType::bf16})
    for (std::int64_t cols : {std::int64_t(65537), std::int64_t(1) << 16, std::int64_t(100003), std::int64_t(49152)}) {
      const auto widths = normalize::enumerate(forward(dtype, NormMode::layernorm, cols, cols % 8 == 0 ? 16 : (dtype == DType::f32 ? 4 : 2), 300));
      INFO(to_string(dtype) << " cols=" << cols);
      CHECK(std::any_of(widths.begin(), widths.end(), [](const Config& w) { return w.cluster; }));
    }

  Config c = normalize::split_rows::make(p, 512, 16, 4, 1, false);  // 8 slices of 8192
  REQUIRE(c.splits == 8);
  c.cluster = true;
  std::string why;
  CHECK(normalize::is_valid(p, c, &why));
  Config both = c;
  both.cooperative = true;
  check_refused(p, both, "not both");
  Config chunked = c;
  chunked.row_chunk = 4;
  check_refused(p, chunked, "no row chunks");
  Config looped = c;
  looped.row_loop = 4;
  CHECK_FALSE(normalize::is_runnable(p, looped, &why));  // nothing to hold
  CHECK(why.find("needs gamma or beta") != std::string::npos);
  // With gamma: loop=4 twins that hold it, compiled with HOLD = 1.
  Problem affine = p;
  affine.gamma = true;
  std::size_t held = 0;
  for (const Config& a : normalize::enumerate(affine))
    if (a.cluster && a.row_loop == 4) {
      ++held;
      INFO(a.label());
      CHECK(a.label().find(",loop=4") != std::string::npos);
      const auto r = normalize::compile_request(affine, a, "sm_90");
      const std::string tail = a.keep == normalize::Keep::staged ? ", 0, 1, 1>" : ", 0, 1, 0>";  // RES, HOLD, STAGE
      CHECK(r.name_expressions.at(0).rfind(tail) == r.name_expressions.at(0).size() - tail.size());
    }
  CHECK(held > 0);
  Config many = normalize::split_rows::make(p, 256, 16, 4, 1, false);  // 16 slices
  REQUIRE(many.splits == 16);
  many.cluster = true;
  check_refused(p, many, "8 blocks");
  const Problem b = backward(DType::f32, NormMode::layernorm, 1 << 16, 16, true, true, 128);
  Config bc = normalize::split_rows::make(b, 512, 16, 2, 1, false);
  bc.cluster = true;
  check_refused(b, bc, "forward only");
  Config one_block = normalize::heuristic_config(forward(DType::f32, NormMode::layernorm, 1024, 16, 512), 9);
  one_block.cluster = true;
  check_refused(forward(DType::f32, NormMode::layernorm, 1024, 16, 512), one_block, "split rows' one-pass form");
  nlohmann::json j = c.to_json();
  j["cluster"] = 1.5;
  CHECK_THROWS_AS(Config::from_json(j), Error);

  // Geometry: one launch, clusters of `splits` blocks, one a row; partials [rows][splits][3].
  for (std::int64_t rows : {std::int64_t(1), std::int64_t(3), std::int64_t(2048)}) {
    const auto g = normalize::geometry(p, c, rows);
    INFO("rows=" << rows);
    CHECK(g.cluster == 8);
    CHECK_FALSE(g.cooperative);
    CHECK(g.phase_count == 1);
    CHECK(g.block == 512u);
    CHECK(g.grid == unsigned(rows * 8));
    const std::size_t partials = std::size_t(rows) * 8 * 12;
    CHECK(g.workspace_bytes >= partials);
    CHECK(g.workspace_bytes < partials + 256);
    CHECK(g.workspace_bytes % 256 == 0);
  }
  // The cost model: 2N bytes and a stall a row per cluster, so ahead of the phased twin (3N) and of
  // the cooperative twin (a grid-wide round a row slot); last where one cluster cannot be resident.
  Config phased = c;
  phased.cluster = false;
  Config coop = phased;
  coop.cooperative = true;
  const double t = normalize::predicted_seconds(p, c, 132, 4e12);
  CHECK(t < normalize::predicted_seconds(p, phased, 132, 4e12));
  CHECK(t < normalize::predicted_seconds(p, coop, 132, 4e12));
  CHECK(t > 2.0 * 2048 * 65536 * 4 / 4e12);
  CHECK(normalize::predicted_seconds(p, c, 2, 4e12) == 1.0);
}

// The one-pass cluster kernels (mode x affine x stats x dtype, a sample of slice shapes) compile for
// sm_90, and for sm_80 as a trap (the host never launches them there).
TEST_CASE("split rows: the cluster kernels compile for sm_80 and sm_90", "[normalize][wide][nvrtc][compiles]") {
  const std::size_t total = compile_one_pass_sample(
      4,
      [](DType dtype, NormMode mode) {
        Problem plain = forward(dtype, mode, (1 << 16) + 1, dtype == DType::f32 ? 4 : 2);
        plain.gamma = plain.beta = plain.mean_out = plain.rstd_out = false;
        Problem residual = forward(dtype, mode, 1 << 17, 16);
        residual.residual = residual.residual_out = true;
        return std::vector<Problem>{plain, forward(dtype, mode, 1 << 17, 16), residual};
      },
      [](const Config& c) { return c.cluster; }, [](const Problem&, const std::vector<Config>&) {},
      [](const detail::CompileRequest&) {});
  WARN("compiled " << total << " cluster split-row normalize variants for sm_80 and sm_90");
}

TEST_CASE("split rows: the output phase's row loop is a forward axis with gamma or beta", "[normalize][wide]") {
  // 64 rows of 2^22 bf16 layernorm: every phased split shape also has its loop=4 twin (never a
  // cooperative one); its output phase takes rows in groups of 4, the other phases every row.
  const Problem p = forward(DType::bf16, NormMode::layernorm, std::int64_t(1) << 22, 16, 64);
  std::size_t looped = 0, phased = 0;
  for (const Config& c : normalize::enumerate(p)) {
    if (c.splits == 1) continue;
    if (c.row_loop == 1) {
      phased += !c.cooperative && c.row_chunk == 0;
      continue;
    }
    ++looped;
    INFO(c.label());
    CHECK(c.row_loop == 4);
    CHECK_FALSE(c.cooperative);
    CHECK(c.label().find(",loop=4") != std::string::npos);
    CHECK(Config::from_json(c.to_json()) == c);
    const auto g = normalize::geometry(p, c, 64);
    REQUIRE(g.phase_count == 3);
    const std::int64_t rows = g.row_chunk;  // the rows of one group of launches (64 unchunked)
    CHECK(g.phase_grid[0] == unsigned(rows * c.splits));
    CHECK(g.phase_grid[2] == unsigned((rows + 3) / 4 * c.splits));
    CHECK(normalize::kernel_phases(p, c) == 3);
  }
  CHECK(phased > 0);
  CHECK(looped >= phased);  // each unchunked shape, and the chunked ones, have their twin
  CHECK(normalize::heuristic_config(p, 9).row_loop == 4);  // the tuned winners' choice (H200)
  // No gamma or beta, or fewer than 8 rows: no row loop in the pruned space (any power of two runs).
  Problem plain = p;
  plain.gamma = plain.beta = false;
  Problem few = p;
  few.rows = 4;
  for (const Problem& q : {plain, few})
    for (const Config& c : normalize::enumerate(q)) CHECK(c.row_loop == 1);
  Config odd = normalize::heuristic_config(plain, 9);
  odd.row_loop = 2;
  std::string why;
  CHECK(normalize::is_runnable(plain, odd, &why));
  CHECK_FALSE(normalize::is_valid(plain, odd, &why));
  CHECK(why.find("row loop is 4") != std::string::npos);
  odd.cooperative = true;
  check_refused(plain, odd, "cooperative one-pass form has no row loop");
}
