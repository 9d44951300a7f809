// kvtune-bench's mamba-train suite: the causal conv1d of a Mamba block in a training step (bias and
// SiLU fused, K = 4, bf16) in its three directions, plain (family dwconv) and with packed sequences
// (seq_idx) or a state handed over from a previous chunk (family dwconv_states: the tuned
// convolution plus its fix-up kernel).
#include <fmt/format.h>

#include "lib/src/families.h"
#include "tools/bench_rows.h"

namespace kvtune::bench {
namespace {

constexpr int kSequences = 8;  // packed sequences per row, of equal length

BenchProblem with_seq_idx(BenchProblem p) {
  DwConvArgs& a = std::get<DwConvArgs>(p.call);
  a.seq_idx = static_cast<const std::int32_t*>(passed());
  p.family = detail::DwConvStatesFamily::kOp;
  p.sequences = kSequences;
  const auto dash = p.id.find('-', p.id.find('/'));
  p.id = p.id.substr(0, dash) + "+seq_idx" + p.id.substr(dash);
  p.what += fmt::format(" +seq_idx ({} sequences a row)", kSequences);
  return p;
}

BenchProblem with_states(BenchProblem p) {
  DwConvArgs& a = std::get<DwConvArgs>(p.call);
  const void* marker = passed();
  if (a.direction == DwDirection::backward_data) {
    a.initial_state = marker;  // z is recomputed from it
    a.dinitial_state = passed();
  } else {
    a.initial_state = marker;
    if (a.direction == DwDirection::forward) a.final_state = passed();
  }
  p.family = detail::DwConvStatesFamily::kOp;
  const auto dash = p.id.find('-', p.id.find('/'));
  p.id = p.id.substr(0, dash) + "+states" + p.id.substr(dash);
  p.what += a.direction == DwDirection::forward          ? " +initial/final state"
            : a.direction == DwDirection::backward_data ? " +initial state, its gradient"
                                                         : " +initial state";
  return p;
}

}  // namespace

template <>
std::vector<BenchSuite> bench_suites<detail::DwConvStatesFamily>() {
  std::vector<BenchSuite> out;
  out.push_back({"mamba-train", [] {
    const std::string name = "mamba-train";
    const std::string src = "Mamba's causal conv1d in a training step (d_conv = 4, bias, SiLU; d_inner = 4096, "
                            "2048 tokens, batch 8, bf16): plain, packed sequences, a state from the previous chunk";
    const DwShape s{DwLayout::ncl, 8, 4096, 1, 2048, 4, 1, true};
    std::vector<BenchProblem> v;
    for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight}) {
      BenchProblem p = with_activation(dw(name, d, DType::bf16, s, src), Activation::silu);
      p.group = "mamba-train";
      v.push_back(p);
      v.push_back(with_seq_idx(p));
    }
    for (DwDirection d : {DwDirection::forward, DwDirection::backward_data}) {
      BenchProblem p = with_activation(dw(name, d, DType::bf16, s, src), Activation::silu);
      p.group = "mamba-train";
      v.push_back(with_states(p));
    }
    return v;
  }});
  return out;
}

}  // namespace kvtune::bench
