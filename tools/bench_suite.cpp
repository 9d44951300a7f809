// kvtune-bench suites: the registry's families' suites (tools/bench_<family>.cpp), their listing and
// JSON form, and each row's bytes and FLOPs model. Sizes are chosen so that `--suite all` tunes at
// most 70 problems and every problem but the small normalize shapes and the decode steps moves more
// than twice an H100/H200 L2 per call.
#include "tools/bench_suite.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include <fmt/format.h>

#include "kernel_templates/dwconv/dwconv_family.h"
#include "kernel_templates/dwconv_decode/dwconv_decode_family.h"
#include "kernel_templates/normalize/normalize_family.h"
#include "lib/src/families.h"

namespace kvtune::bench {
namespace {

// Distinct, widely spaced, 256-byte aligned stand-ins: the models only read the alignment and
// which optional tensors are passed.
void* fake_pointer(int index) { return reinterpret_cast<void*>(std::uintptr_t(index) << 36); }

template <class... F>
std::vector<BenchSuite> registry_suites(std::tuple<F...>*) {
  std::vector<BenchSuite> out;
  const auto append = [&out](std::vector<BenchSuite> more) {
    for (auto& s : more) out.push_back(std::move(s));
  };
  (append(bench_suites<F>()), ...);
  return out;
}

// The models of each public call, with its tensors made stand-ins and its markers kept.
double bytes_of(NormalizeArgs a) {
  a.x = fake_pointer(1);
  a.y = fake_pointer(2);
  return normalize::model_bytes(normalize::make_problem(a), a.rows);
}
double flops_of(NormalizeArgs a) {
  a.x = fake_pointer(1);
  a.y = fake_pointer(2);
  return normalize::model_flops(normalize::make_problem(a), a.rows);
}

// The backward: x and dy read, dx written, gamma, the saved statistics and dgamma/dbeta (the
// partial rows of the dgamma/dbeta reduction are workspace, not counted).
double bytes_of(NormalizeBackwardArgs a) {
  a.x = a.dy = fake_pointer(1);
  a.dx = fake_pointer(2);
  return normalize::model_bytes(normalize::make_problem(a), a.rows);
}
double flops_of(NormalizeBackwardArgs a) {
  a.x = a.dy = fake_pointer(1);
  a.dx = fake_pointer(2);
  return normalize::model_flops(normalize::make_problem(a), a.rows);
}

double bytes_of(const DwConvArgs& args) {
  const DwConvArgs a = with_stand_in_tensors(args);
  const dwconv::Problem p = dwconv::make_problem(a);
  const double elem = p.element_bytes();
  double bytes = dwconv::model_bytes(p, a.n);
  const double x = double(a.n) * double(a.c) * double(a.h) * double(a.w);
  // With an activation the backward directions recompute z: backward_data reads x too, and both
  // read the bias. The fused 1D forms' problems count them (model_bytes); the plain problem the
  // two-kernel form runs on the gradient prep's output reads neither.
  if (a.activation != Activation::none && a.direction != DwDirection::forward && p.activation == Activation::none) {
    if (a.direction == DwDirection::backward_data) bytes += elem * x;
    if (a.bias != nullptr && !p.bias) bytes += elem * double(a.c);
  }
  if (a.direction == DwDirection::backward_weight && a.dbias != nullptr) bytes += elem * double(a.c);
  // States: each read or written once, [n, c, (K - 1) * dilation]; seq_idx: int32 [n, w].
  const double state = double(a.n) * double(a.c) * double((a.kernel_w - 1) * a.dilation_w);
  for (const void* s : {static_cast<const void*>(a.initial_state), static_cast<const void*>(a.final_state),
                        static_cast<const void*>(a.dinitial_state)})
    if (s != nullptr) bytes += elem * state;
  if (a.seq_idx != nullptr && !p.seq_idx) bytes += 4.0 * double(a.n) * double(a.w);  // else in model_bytes
  return bytes;
}
double flops_of(const DwConvArgs& args) {
  const DwConvArgs a = with_stand_in_tensors(args);
  return dwconv::model_flops(dwconv::make_problem(a), a.n);
}

dwconv_decode::Problem decode_problem(DwConvDecodeArgs a) {
  a.x = a.weight = fake_pointer(1);
  a.y = a.state = fake_pointer(2);
  return dwconv_decode::make_problem(a);
}
double bytes_of(const DwConvDecodeArgs& a) { return dwconv_decode::model_bytes(decode_problem(a), a.batch); }
double flops_of(const DwConvDecodeArgs& a) { return dwconv_decode::model_flops(decode_problem(a), a.batch); }

// The fields both normalize calls share.
template <class Args>
void add_norm_fields(nlohmann::json& j, const char* call, const Args& a) {
  j["call"] = call;
  j["dtype"] = to_string(a.dtype);
  j["mode"] = to_string(a.mode);
  j["rows"] = a.rows;
  j["cols"] = a.cols;
  j["eps"] = a.eps;
  j["ddof"] = a.ddof;
  j["gamma"] = a.gamma != nullptr;
}

void add_fields(nlohmann::json& j, const NormalizeArgs& a) {
  add_norm_fields(j, "normalize", a);
  j["beta"] = a.beta != nullptr;
  if (a.residual != nullptr) j["residual"] = true;  // y = norm(x + residual); also written: residual_out
  if (a.residual_out != nullptr) j["residual_out"] = true;
}

void add_fields(nlohmann::json& j, const NormalizeBackwardArgs& a) {
  add_norm_fields(j, "normalize_backward", a);
  j["saved"] = a.rstd != nullptr;  // the forward's mean/rstd read (else recomputed)
  j["dgamma"] = a.dgamma != nullptr;
  j["dbeta"] = a.dbeta != nullptr;
  if (a.dresidual_out != nullptr) j["dresidual"] = true;
}

void add_fields(nlohmann::json& j, const DwConvArgs& a) {
  j["call"] = "dwconv";
  j["dtype"] = to_string(a.dtype);
  j["direction"] = to_string(a.direction);
  j["layout"] = to_string(a.layout);
  j["n"] = a.n;
  j["c"] = a.c;
  j["h"] = a.h;
  j["w"] = a.w;
  j["kernel_h"] = a.kernel_h;
  j["kernel_w"] = a.kernel_w;
  j["stride_h"] = a.stride_h;
  j["stride_w"] = a.stride_w;
  j["dilation_h"] = a.dilation_h;
  j["dilation_w"] = a.dilation_w;
  j["pad_top"] = a.pad_top;
  j["pad_bottom"] = a.pad_bottom;
  j["pad_left"] = a.pad_left;
  j["pad_right"] = a.pad_right;
  j["causal"] = a.causal;
  j["bias"] = a.bias != nullptr;
  j["dbias"] = a.dbias != nullptr;
  j["activation"] = to_string(a.activation);
  j["initial_state"] = a.initial_state != nullptr;
  j["final_state"] = a.final_state != nullptr;
  j["dinitial_state"] = a.dinitial_state != nullptr;
  j["seq_idx"] = a.seq_idx != nullptr;
}

void add_fields(nlohmann::json& j, const DwConvDecodeArgs& a) {
  j["call"] = "dwconv_decode";
  j["dtype"] = to_string(a.dtype);
  j["batch"] = a.batch;
  j["channels"] = a.channels;
  j["seqlen"] = a.seqlen;
  j["kernel_w"] = a.kernel_w;
  j["state_len"] = a.state_len == 0 ? a.kernel_w - 1 : a.state_len;
  j["circular"] = a.cache_seqlens != nullptr;
  j["state_indices"] = a.state_indices != nullptr;
  j["bias"] = a.bias != nullptr;
  j["activation"] = to_string(a.activation);
}

}  // namespace

void* passed() { return fake_pointer(3); }

DwConvArgs with_stand_in_tensors(DwConvArgs a) {
  a.x = a.dy = a.weight = fake_pointer(1);
  a.y = a.dx = a.dweight = fake_pointer(2);
  return a;
}

double BenchProblem::model_bytes() const {
  return std::visit([](const auto& a) { return bytes_of(a); }, call);
}

double BenchProblem::model_flops() const {
  return std::visit([](const auto& a) { return flops_of(a); }, call);
}

const std::vector<BenchSuite>& all_suites() {
  static const std::vector<BenchSuite> suites = registry_suites(static_cast<detail::Families*>(nullptr));
  return suites;
}

std::vector<std::string> suite_names() {
  std::vector<std::string> names;
  for (const auto& s : all_suites()) names.push_back(s.name);
  return names;
}

std::vector<BenchProblem> suite(const std::string& name, bool quick) {
  std::vector<std::string> names;  // "all", one suite, or a comma-separated list
  std::size_t begin = 0;
  while (begin <= name.size()) {
    const std::size_t end = std::min(name.find(',', begin), name.size());
    const std::string item = name.substr(begin, end - begin);
    if (item == "all") {
      for (const auto& s : all_suites()) names.push_back(s.name);
    } else if (!item.empty()) {
      names.push_back(item);
    }
    begin = end + 1;
  }
  if (names.empty()) throw Error("kvtune-bench: no suite named");
  std::vector<BenchProblem> out;
  for (const auto& n : names) {
    const auto it = std::find_if(all_suites().begin(), all_suites().end(), [&](const BenchSuite& s) { return s.name == n; });
    if (it == all_suites().end()) {
      std::string known;
      for (const auto& s : all_suites()) known += s.name + ", ";
      throw Error(fmt::format("kvtune-bench: unknown suite '{}' (known: {}all)", n, known));
    }
    auto problems = it->build();
    // Quick mode (smoke test): the first two problems of each suite.
    if (quick && problems.size() > 2) problems.resize(2);
    out.insert(out.end(), problems.begin(), problems.end());
  }
  return out;
}

nlohmann::json to_json(const BenchProblem& p) {
  nlohmann::json j = {{"id", p.id},
                      {"suite", p.suite},
                      {"what", p.what},
                      {"source", p.source},
                      {"family", p.family},
                      {"group", p.group},
                      {"model_bytes", p.model_bytes()},
                      {"model_flops", p.model_flops()}};
  std::visit([&j](const auto& a) { add_fields(j, a); }, p.call);
  if (p.sequences > 0) j["sequences"] = p.sequences;
  return j;
}

nlohmann::json suite_document(const std::string& name, bool quick) {
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : suite(name, quick)) problems.push_back(to_json(p));
  return {{"schema", "kvtune-bench-suite/1"}, {"suite", name}, {"quick", quick}, {"problems", problems}};
}

}  // namespace kvtune::bench
