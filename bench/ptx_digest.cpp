// Digests of the PTX (or, with --sass, the machine code) each variant compiles to, for refactoring a
// kernel template without changing its code: run it before and after the change and compare the two
// outputs (bench/NOTES.md, "tiled kernel in parts", "the row-landing duplicate", "the fused residual
// add"). Variants with the same PTX instructions (in any order) differ at most in scheduling, which
// ptxas redoes; --sass compiles cubins (ptxas included, default arch sm_90) and digests each kernel's
// .text section byte for byte: equal digests are the same machine code, no GPU A/B needed.
//   kvtune_ptx_digest [--family dwconv|normalize] [--every K] [--kernel tiled|direct|wgrad|mma|all]
//                     [--arch compute_90|sm_90] [--sass] [--source DIR]
// --source DIR compiles DIR/dwconv.cu and whichever of its headers DIR holds instead of the
// embedded copies, so one build digests two trees (e.g. DIR = a `git worktree` of the old commit's
// kernel_templates/dwconv; common.cuh is looked for in DIR and DIR/..).
// Problems: forward and backward_data (backward_weight with --kernel wgrad or all) x the four layouts x
// f32/f16/bf16, with kernel sizes 3, 4, 7 and 31 rotating, stride and dilation 1 or 2, bias, and the
// SiLU epilogue on some forward problems; every K-th variant of each (default 1: all). --family
// normalize: forward and backward of f32/f16/bf16 x the three modes x widths 1 to 2^20 (one-block,
// split and cooperative kernels; --kernel is ignored). Prints one line a variant: "<digest>
// <instruction count> <name expression>" (PTX: see instruction_digest, order and register numbers do
// not count; SASS: 16-byte instructions), and each program's NVRTC time and the count on stderr.
// NVRTC only: runs without a GPU.
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/hash.h"
#include "bench/cubin_text.h"
#include "bench/source_override.h"
#include "core/nvrtc.h"
#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "kvtune/kvtune.h"

using namespace kvtune;

namespace {

void* fake(std::uintptr_t offset) { return reinterpret_cast<void*>(0x100000000ull + offset); }

DwConvArgs problem_args(DwDirection d, DwLayout l, DType t, int i) {
  DwConvArgs a;
  a.direction = d;
  a.layout = l;
  a.dtype = t;
  a.n = 4;
  a.c = 64;
  const int k = std::array<int, 4>{3, 4, 7, 31}[std::size_t(i % 4)];
  const int s = 1 + i % 2, dil = 1 + (i / 2) % 2;
  if (l == DwLayout::ncl || l == DwLayout::nlc) {
    a.h = 1, a.w = 96;
    a.kernel_w = k, a.stride_w = s, a.dilation_w = dil;
    a.causal = true;
  } else {
    a.h = a.w = 40;
    a.kernel_h = a.kernel_w = k;
    a.stride_h = a.stride_w = s;
    a.dilation_h = a.dilation_w = dil;
    a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = (k - 1) * dil / 2;
  }
  a.x = fake(0), a.weight = fake(1 << 20), a.y = fake(2 << 20), a.dy = fake(3 << 20);
  a.dx = fake(4 << 20), a.dweight = fake(5 << 20);
  if (d == DwDirection::forward && i % 2 == 0) a.bias = fake(6 << 20);
  if (d == DwDirection::forward && i % 3 == 0) a.activation = Activation::silu;
  if (d == DwDirection::backward_weight && i % 2 == 0) a.dbias = fake(7 << 20);
  return a;
}

// What a digest covers: the multiset of the entry's PTX instructions (opcode with its type suffixes,
// operands left out), so that the same instructions in another order or with other register numbers
// digest alike; returned with the instruction count.
std::pair<std::uint64_t, std::size_t> instruction_digest(std::string_view entry) {
  std::map<std::string, std::size_t> counts;
  std::size_t total = 0;
  std::istringstream lines{std::string(entry)};
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    const char c = line[first];
    if (c == '/' || c == '.' || c == '{' || c == '}' || c == '$' || c == ')' || c == '(') continue;
    auto end = line.find_first_of(" \t;", first);
    std::string op = line.substr(first, end - first);
    if (op[0] == '@') {  // a predicated instruction: the guard, then the opcode
      const auto next = line.find_first_not_of(" \t", end);
      const auto stop = line.find_first_of(" \t;", next);
      op = "@p " + line.substr(next, stop - next);
    }
    ++counts[op];
    ++total;
  }
  std::uint64_t h = detail::kFnvOffset;
  for (const auto& [op, n] : counts) h = detail::hash64(fmt::format("{} {};", op, n), h);
  return {h, total};
}

std::pair<std::uint64_t, std::size_t> sass_digest(std::string_view cubin, const std::string& lowered) {
  const std::string_view text = bench::kernel_text(cubin, lowered);
  return {detail::hash64(text, detail::kFnvOffset), text.size() / 16};
}

// Name expressions of the normalize family's variants (every K-th of each problem's space).
std::vector<detail::CompileRequest> normalize_requests(std::size_t every, const std::string& arch) {
  std::vector<detail::CompileRequest> out;
  std::size_t n = 0;
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (NormMode m : {NormMode::standardize, NormMode::layernorm, NormMode::rmsnorm})
      for (std::int64_t cols : {1, 37, 128, 1000, 4097, 16384, 65536, 1 << 20})
        for (bool backward : {false, true}) {
          normalize::Problem p;
          p.dtype = d, p.mode = m, p.cols = cols, p.rows = cols >= (1 << 20) ? 8 : 4096;
          p.gamma = m != NormMode::standardize;
          p.beta = m == NormMode::layernorm && !backward;
          p.rstd_out = !backward;
          p.mean_out = !backward && m != NormMode::rmsnorm;
          p.backward = backward, p.dgamma = backward && p.gamma, p.saved_stats = backward && cols % 2 == 0;
          for (const auto& c : normalize::enumerate(p))
            if (n++ % every == 0) out.push_back(normalize::compile_request(p, c, arch));
        }
  return out;
}

// The PTX of one entry: from ".entry NAME(" to the next entry's comment, or the end.
std::string_view entry_ptx(std::string_view ptx, const std::string& lowered) {
  const auto start = ptx.find(".entry " + lowered + "(");
  if (start == std::string_view::npos) throw Error("no PTX entry for " + lowered);
  auto end = ptx.find("// .globl", start);
  return ptx.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t every = 1;
  std::string kernel = "tiled", arch, source_dir, family = "dwconv";
  bool sass = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--every" && i + 1 < argc) every = std::max(1l, std::strtol(argv[++i], nullptr, 10));
    else if (arg == "--kernel" && i + 1 < argc) kernel = argv[++i];
    else if (arg == "--arch" && i + 1 < argc) arch = argv[++i];
    else if (arg == "--source" && i + 1 < argc) source_dir = argv[++i];
    else if (arg == "--family" && i + 1 < argc) family = argv[++i];
    else if (arg == "--sass") sass = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--family dwconv|normalize] [--every K] [--kernel tiled|direct|wgrad|mma|all] "
                   "[--arch compute_90|sm_90] [--sass] [--source DIR]\n",
                   argv[0]);
      return 2;
    }
  }
  if (arch.empty()) arch = sass ? "sm_90" : "compute_90";
  if (family != "dwconv" && family != "normalize") {
    std::fprintf(stderr, "--family: dwconv or normalize\n");
    return 2;
  }
  const auto keep = [&](const dwconv::Config& c) {
    return kernel == "all" || kernel == dwconv::to_string(c.kernel());
  };
  std::vector<DwDirection> directions = {DwDirection::forward, DwDirection::backward_data};
  if (kernel == "wgrad" || kernel == "all") directions.push_back(DwDirection::backward_weight);

  // One program a problem's kept variants (64 at most): the front end runs once per program.
  std::vector<detail::CompileRequest> programs;
  std::set<std::string> seen;  // a name expression once (problems of one key size share variants)
  const auto add = [&](detail::CompileRequest request) {
    if (!seen.insert(request.name_expressions.at(0)).second) return;
    if (!source_dir.empty()) bench::use_sources(request, source_dir);
    if (programs.empty() || programs.back().name_expressions.size() == 64 ||
        programs.back().source.data() != request.source.data() || programs.back().program_name != request.program_name ||
        programs.back().extra_options != request.extra_options) {
      programs.push_back(std::move(request));
    } else {
      programs.back().name_expressions.push_back(request.name_expressions.at(0));
    }
  };
  if (family == "normalize")
    for (auto& request : normalize_requests(every, arch)) add(std::move(request));
  int i = 0;
  for (DwDirection d : family == "dwconv" ? directions : std::vector<DwDirection>{})
    for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
      for (DType t : {DType::f32, DType::f16, DType::bf16}) {
        const auto problem = dwconv::make_problem(problem_args(d, l, t, i++));
        std::size_t n = 0;
        for (const auto& c : dwconv::enumerate(problem)) {
          if (!keep(c) || n++ % every != 0) continue;
          add(dwconv::compile_request(problem, c, arch));
        }
      }

  std::vector<std::vector<std::string>> lines(programs.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (std::size_t b = next++; b < programs.size(); b = next++) {
      try {
        const auto result = detail::nvrtc_compile(programs[b]);
        for (std::size_t k = 0; k < result.lowered_names.size(); ++k) {
          const auto [digest, count] = sass ? sass_digest(result.cubin, result.lowered_names[k])
                                            : instruction_digest(entry_ptx(result.cubin, result.lowered_names[k]));
          lines[b].push_back(fmt::format("{:016x} {:6d} {}", digest, count, programs[b].name_expressions[k]));
        }
        std::fprintf(stderr, "program %zu: %zu kernels, NVRTC %.1f s\n", b, result.lowered_names.size(), result.seconds);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "program %zu: %s\n", b, e.what());
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::max(2u, std::thread::hardware_concurrency()); ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  std::size_t count = 0;
  for (const auto& program : lines)
    for (const auto& line : program) std::printf("%s\n", line.c_str()), ++count;
  std::fprintf(stderr, "%zu variants in %zu programs\n", count, programs.size());
  return failed ? 1 : 0;
}
