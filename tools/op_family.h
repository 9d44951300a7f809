#pragma once
// The tools' operator handler, written once against the family traits (kernel_templates/*/*_traits.h,
// registered in lib/src/families.h) and a family's tool side (tools/op_<family>.cpp: what a shapes
// entry holds, the suites, and how a call of a problem is made): FamilyHandler and FamilyProblem,
// with the variants tuning would try, the check of a stored config, what a stored key tells the
// report, and the device buffers of a library call. The family's own functions (is_runnable with a
// reason, model_bytes, model_flops) are found in its namespace by argument-dependent lookup.

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/cuda_check.h"
#include "lib/src/families.h"
#include "tools/common.h"
#include "tools/ops.h"

namespace kvtune::tools {

/// One device allocation, every byte set to `fill`, freed on scope exit.
class DeviceMemory {
 public:
  DeviceMemory(std::size_t bytes, int fill) {
    detail::cuda_check(cudaMalloc(&ptr_, bytes), fmt::format("cudaMalloc of {}", format_bytes(double(bytes))).c_str());
    detail::cuda_check(cudaMemset(ptr_, fill, bytes), "cudaMemset");
  }
  ~DeviceMemory() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* ptr() const { return ptr_; }
  char* bytes() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

/// OpProblem::variants: every variant a tuning of `p` would try on `arch` ("sm_90").
template <class F>
std::vector<Variant> family_variants(const typename F::Problem& p, const std::string& arch) {
  std::vector<Variant> out;
  for (const auto& config : detail::tuning_configs<F>(p, detail::parse_arch(arch) / 10))
    out.push_back(Variant{config.label(), config.to_json(), F::compile_request(p, config, arch)});
  return out;
}

/// OpHandler::check_config: the canonical label of a stored config that runs correctly on its
/// problem (pruned from the space or not: seeds are valid too); InputError naming what is wrong.
template <class F>
std::string family_check_config(const std::string& problem_key, const nlohmann::json& config) {
  const auto p = F::from_key(problem_key);
  if (!p) throw InputError(fmt::format("'{}' is not a {} problem key", problem_key, F::kOp));
  typename F::Config c;
  try {
    c = F::Config::from_json(config);
  } catch (const Error& e) {
    throw InputError(fmt::format("config {} of {}: {}", config.dump(), problem_key, e.cause()));
  }
  std::string why;
  if (!is_runnable(*p, c, &why))
    throw InputError(fmt::format("config {} is not a valid variant of {}: {}", c.label(), problem_key, why));
  return c.label();
}

/// OpHandler::key_info: `describe(problem)` and `seed_label(problem)` are the handler's.
template <class F, class Describe, class SeedLabel>
std::optional<KeyInfo> family_key_info(const std::string& problem_key, int cc_major, const std::string& gpu_model,
                                       Describe describe, SeedLabel seed_label) {
  const auto p = F::from_key(problem_key);
  if (!p) return std::nullopt;
  KeyInfo info;
  info.describe = describe(*p);
  try {
    info.seed_label = seed_label(*p);
    info.heuristic_label = F::heuristic(*p, cc_major, gpu_model).label();
  } catch (const Error&) {
    // A key with no valid variant (hand-made): no designs to compare with.
  }
  info.model_bytes = model_bytes(*p, F::batch(*p));
  info.model_flops = model_flops(*p, F::batch(*p));
  return info;
}

/// OpHandler::from_key: the stored key's problem (F::from_key), `rebuild` makes it the tool's problem
/// (through a shapes entry, so that the entry checks apply; InputError when they refuse it), and the
/// result must give the key back. nullptr, with `why` when not null, otherwise.
template <class F, class Rebuild>
std::unique_ptr<OpProblem> family_from_key(const std::string& problem_key, std::string* why, Rebuild rebuild) {
  const auto fail = [why](std::string reason) -> std::unique_ptr<OpProblem> {
    if (why != nullptr) *why = std::move(reason);
    return nullptr;
  };
  const auto p = F::from_key(problem_key);
  if (!p) return fail(fmt::format("not a {} problem key this build can read", F::kOp));
  std::unique_ptr<OpProblem> problem;
  try {
    problem = rebuild(*p);
  } catch (const InputError& error) {
    return fail(error.what());
  }
  if (problem->key() != problem_key)
    return fail(fmt::format("the tool cannot reproduce this key (its call gives {})", problem->key()));
  return problem;
}

/// The end of every family's run_library: the call's arguments must make the problem's own key
/// (`made_key`); then the library chooses the variant (`variant()`: it tunes or loads) and makes one
/// real call through its dispatch path (`call()`). Returns the variant's label.
template <class Variant, class Call>
std::string call_library(const OpProblem& self, const std::string& made_key, Variant variant, Call call) {
  if (made_key != self.key())
    throw Error(Error::Context{self.op(), self.key(), "", "", ""},
                fmt::format("the tool's call gives the key {} instead", made_key));
  const std::string label = variant();
  call();
  detail::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the call");
  return label;
}

/// model_bytes of the family's namespace (argument-dependent lookup) for `p` at its batch.
template <class F>
double family_model_bytes(const typename F::Problem& p) {
  return model_bytes(p, F::batch(p));
}

/// A problem of family F parsed from a shapes entry. `Side` is the family's tool side:
///   using Entry: a parsed entry, with the member `problem` (F::Problem, its batch bucketed as the
///     library keys the call) and whatever else the call needs;
///   std::int64_t call_size(const Entry&): the batch (rows) of the call the tool makes;
///   std::string describe(const F::Problem&, std::int64_t call_size): one short human line;
///   nlohmann::json entry_of(const Entry&): the shapes entry, every field explicit;
///   SpaceSize space(const F::Problem&): the declared axes' sizes;
///   std::string run_library(const Entry&, const OpProblem& self, Context&): the call (OpProblem::run_library);
/// and for FamilyHandler: fields(), suite_names(), suite(name), parse(entry, where), seed_label(problem)
///   and entry_of_key(problem): the shapes entry of a stored key's problem, a call of the key's batch
///   (InputError when the tool cannot express it).
template <class F, class Side>
class FamilyProblem final : public OpProblem {
 public:
  using Entry = typename Side::Entry;
  explicit FamilyProblem(Entry entry) : e_(std::move(entry)) {}

  std::string op() const override { return F::kOp; }
  std::string key() const override { return e_.problem.key(); }
  std::string describe() const override { return Side::describe(e_.problem, Side::call_size(e_)); }
  std::string buckets() const override { return bucket_spec(F::batch(e_.problem), F::exact(e_.problem)); }
  nlohmann::json to_json() const override { return Side::entry_of(e_); }
  SpaceSize space() const override { return Side::space(e_.problem); }
  std::vector<Variant> variants(const std::string& arch) const override { return family_variants<F>(e_.problem, arch); }
  double model_bytes() const override { return family_model_bytes<F>(e_.problem); }
  std::string run_library(Context& context) const override { return Side::run_library(e_, *this, context); }

 private:
  Entry e_;
};

/// The OpHandler of family F (see FamilyProblem for `Side`).
template <class F, class Side>
class FamilyHandler final : public OpHandler {
 public:
  using Problem = FamilyProblem<F, Side>;

  std::string name() const override { return F::kOp; }
  std::string template_hash() const override { return F::template_hash(); }
  std::vector<std::string> suite_names() const override { return Side::suite_names(); }
  std::vector<nlohmann::json> suite(const std::string& name) const override { return Side::suite(name); }
  std::string fields() const override { return Side::fields(); }
  std::unique_ptr<OpProblem> parse(const nlohmann::json& entry, const std::string& where) const override {
    return std::make_unique<Problem>(Side::parse(entry, where));
  }
  std::optional<KeyInfo> key_info(const std::string& problem_key, int cc_major,
                                  const std::string& gpu_model = {}) const override {
    return family_key_info<F>(
        problem_key, cc_major, gpu_model, [](const typename F::Problem& p) { return Side::describe(p, F::batch(p)); },
        [](const typename F::Problem& p) { return Side::seed_label(p); });
  }
  std::unique_ptr<OpProblem> from_key(const std::string& problem_key, std::string* why) const override {
    return family_from_key<F>(problem_key, why, [](const typename F::Problem& p) {
      // Through the shapes entry of a call of the key's batch, so that the entry checks apply; its
      // batch key is then made the stored one (exact, or a bucket of custom bounds).
      typename Side::Entry e = Side::parse(Side::entry_of_key(p), "its problem");
      e.problem = F::with_batch(e.problem, F::batch(p), F::exact(p));
      return std::make_unique<Problem>(std::move(e));
    });
  }
  std::string check_config(const std::string& problem_key, const nlohmann::json& config) const override {
    return family_check_config<F>(problem_key, config);
  }
};

}  // namespace kvtune::tools
