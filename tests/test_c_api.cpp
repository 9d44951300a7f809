// The C ABI (kvtune/kvtune_c.h): struct layouts and versioning, error codes with the field and
// message of the thread's last error, no exception crossing the boundary, the no-GPU path; [gpu]:
// a caller-owned workspace for backward_weight.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu_support.h"
#include "kvtune/kvtune.h"
#include "kvtune/kvtune_c.h"

namespace {

// The layouts the Python package's ctypes structs mirror (python/kvtune/_capi.py): a change here is
// an ABI change.
static_assert(sizeof(kvt_context_options) == 80, "kvt_context_options layout");
static_assert(sizeof(kvt_normalize_args) == 152, "kvt_normalize_args layout");
static_assert(offsetof(kvt_normalize_args, residual) == 120 && offsetof(kvt_normalize_args, ld_residual_out) == 144,
              "normalize residual offsets (appended after the 120 bytes of the first layout)");
static_assert(sizeof(kvt_normalize_backward_args) == 160 && offsetof(kvt_normalize_backward_args, dresidual_out) == 144,
              "kvt_normalize_backward_args layout (dresidual_out appended after the first 144 bytes)");
static_assert(offsetof(kvt_normalize_args, x) == 24 && offsetof(kvt_normalize_args, rstd) == 96 &&
                  offsetof(kvt_normalize_args, workspace) == 104 && offsetof(kvt_normalize_args, workspace_bytes) == 112,
              "normalize offsets");
static_assert(sizeof(kvt_dwconv_args) == 216, "kvt_dwconv_args layout");
static_assert(offsetof(kvt_dwconv_args, x) == 96 && offsetof(kvt_dwconv_args, workspace_bytes) == 168 &&
                  offsetof(kvt_dwconv_args, activation) == 176 && offsetof(kvt_dwconv_args, initial_state) == 184 &&
                  offsetof(kvt_dwconv_args, seq_idx) == 208,
              "dwconv offsets");
static_assert(sizeof(kvt_counters) == 144, "kvt_counters layout");
// The enums mirror the C++ ones value for value.
static_assert(KVT_BF16 == static_cast<int>(kvtune::DType::bf16) && KVT_NORM_RMSNORM == static_cast<int>(kvtune::NormMode::rmsnorm) &&
                  KVT_DW_NHWC == static_cast<int>(kvtune::DwLayout::nhwc) &&
                  KVT_DW_BACKWARD_WEIGHT == static_cast<int>(kvtune::DwDirection::backward_weight) &&
                  KVT_ACT_RELU == static_cast<int>(kvtune::Activation::relu) &&
                  KVT_ACT_GELU_ERF == static_cast<int>(kvtune::Activation::gelu_erf) &&
                  KVT_POLICY_RECORD == static_cast<int>(kvtune::Policy::record),
              "enum values");

// A context with an in-memory cache and the heuristic policy: nothing on disk, nothing tuned.
struct TestContext {
  kvt_context* context = nullptr;
  TestContext() {
    kvt_context_options o;
    kvt_context_options_init(&o);
    o.cache_path = "";
    o.policy = KVT_POLICY_HEURISTIC;
    REQUIRE(kvt_context_create(&o, &context) == KVT_OK);
    REQUIRE(context != nullptr);
  }
  ~TestContext() { kvt_context_destroy(context); }
};

// Aligned, never dereferenced without a GPU (validation fails or there is no device first).
void* fake(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

kvt_normalize_args valid_normalize() {
  kvt_normalize_args a;
  kvt_normalize_args_init(&a);
  a.x = fake(0x100000);
  a.y = fake(0x200000);
  a.rows = 64;
  a.cols = 128;
  a.mode = KVT_NORM_LAYERNORM;
  return a;
}

kvt_dwconv_args valid_dwconv() {
  kvt_dwconv_args a;
  kvt_dwconv_args_init(&a);
  a.layout = KVT_DW_NCL;
  a.n = 2, a.c = 64, a.w = 256;
  a.kernel_w = 4;
  a.causal = 1;
  a.x = fake(0x100000), a.weight = fake(0x200000), a.y = fake(0x300000);
  return a;
}

void check_error(kvt_status status, kvt_status expected, const char* field, const char* message_part) {
  INFO("status " << kvt_status_name(status) << ": " << kvt_last_error_message());
  CHECK(status == expected);
  CHECK(kvt_last_error_status() == expected);
  CHECK(std::string(kvt_last_error_field()) == field);
  CHECK_THAT(kvt_last_error_message(), Catch::Contains(message_part));
}

}  // namespace

TEST_CASE("C ABI: version, status names, initialized structs", "[c_api]") {
  CHECK(std::string(kvt_version()) == kvtune::version());
  CHECK(kvt_abi_version() == KVT_ABI_VERSION);
  CHECK(std::string(kvt_status_name(KVT_OK)) == "KVT_OK");
  CHECK(std::string(kvt_status_name(KVT_ERROR_NO_GPU)) == "KVT_ERROR_NO_GPU");
  CHECK(std::string(kvt_status_name(99)) == "KVT_ERROR_UNKNOWN");

  kvt_normalize_args n;
  std::memset(&n, 0xff, sizeof n);
  kvt_normalize_args_init(&n);
  const kvtune::NormalizeArgs cpp_n;
  CHECK(n.struct_size == sizeof n);
  CHECK(n.eps == cpp_n.eps);
  CHECK((n.x == nullptr && n.gamma == nullptr && n.mean == nullptr && n.rows == 0 && n.ddof == 0));

  kvt_dwconv_args d;
  std::memset(&d, 0xff, sizeof d);
  kvt_dwconv_args_init(&d);
  const kvtune::DwConvArgs cpp_d;
  CHECK(d.struct_size == sizeof d);
  CHECK(d.layout == static_cast<int>(cpp_d.layout));
  CHECK((d.h == 1 && d.kernel_h == 1 && d.stride_w == 1 && d.dilation_h == 1 && d.deterministic == 1));
  CHECK((d.workspace == nullptr && d.workspace_bytes == 0 && d.causal == 0));
  CHECK(d.activation == static_cast<int>(cpp_d.activation));

  kvt_context_options o;
  kvt_context_options_init(&o);
  CHECK(o.struct_size == sizeof o);
  CHECK((o.policy == KVT_POLICY_DEFAULT && o.cache_path == nullptr && o.budget_variants < 0));

  kvt_normalize_args_init(nullptr);  // no-ops, no crash
  kvt_dwconv_args_init(nullptr);
  kvt_context_options_init(nullptr);
}

TEST_CASE("C ABI: invalid normalize arguments name the field", "[c_api]") {
  TestContext t;
  check_error(kvt_normalize(t.context, nullptr, nullptr), KVT_ERROR_INVALID_ARGUMENT, "args", "args is a null pointer");

  auto a = valid_normalize();
  a.x = nullptr;
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "x", "x is a null pointer");
  a = valid_normalize();
  a.rows = 0;
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "rows", "rows must be positive");
  a = valid_normalize();
  a.dtype = 7;
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "dtype", "no meaning for value 7");
  a = valid_normalize();
  a.mode = -1;
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "mode", "mode");
  a = valid_normalize();
  a.eps = -1;
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "eps", "eps must be finite");
  a = valid_normalize();
  a.mode = KVT_NORM_RMSNORM;
  a.beta = fake(0x400000);
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "beta", "rmsnorm takes no beta");
  a = valid_normalize();
  a.y = fake(0x100004);  // partial overlap with x
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "y", "partially overlaps");

  // The message names the problem too, as kvtune::Error's does.
  a = valid_normalize();
  a.ld_x = 3;
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "ld_x", "rows=64 cols=128");

  char label[64] = "unchanged";
  size_t length = 7;
  a = valid_normalize();
  a.x = nullptr;
  check_error(kvt_normalize_variant(t.context, &a, nullptr, label, sizeof label, &length), KVT_ERROR_INVALID_ARGUMENT,
              "x", "null pointer");
  CHECK(std::string(label) == "unchanged");
}

TEST_CASE("C ABI: the normalize backward, its defaults and invalid arguments naming the field", "[c_api]") {
  kvt_normalize_backward_args init;
  std::memset(&init, 0xff, sizeof init);
  kvt_normalize_backward_args_init(&init);
  const kvtune::NormalizeBackwardArgs cpp;
  CHECK(init.struct_size == sizeof init);
  CHECK(sizeof init == 160);  // LP64: python/kvtune/_capi.py mirrors it
  CHECK(init.eps == cpp.eps);
  CHECK((init.x == nullptr && init.dgamma == nullptr && init.workspace == nullptr && init.workspace_bytes == 0));

  TestContext t;
  const auto valid = [] {
    kvt_normalize_backward_args a;
    kvt_normalize_backward_args_init(&a);
    a.mode = KVT_NORM_LAYERNORM;
    a.x = fake(0x100000), a.dy = fake(0x200000), a.dx = fake(0x300000);
    a.rows = 64, a.cols = 128;
    return a;
  };
  check_error(kvt_normalize_backward(t.context, nullptr, nullptr), KVT_ERROR_INVALID_ARGUMENT, "args",
              "args is a null pointer");
  auto a = valid();
  a.dy = nullptr;
  check_error(kvt_normalize_backward(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "dy", "dy is a null pointer");
  a = valid();
  a.dgamma = fake(0x400000);
  check_error(kvt_normalize_backward(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "dgamma", "needs the forward's gamma");
  a = valid();
  a.mode = 9;
  check_error(kvt_normalize_backward(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "mode", "mode");
  a = valid();
  a.rstd = static_cast<const float*>(fake(0x400000));
  check_error(kvt_normalize_backward(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "mean", "together");
  size_t bytes = 5;
  a = valid();
  a.ld_dx = 7;
  check_error(kvt_normalize_backward_workspace_size(t.context, &a, nullptr, &bytes), KVT_ERROR_INVALID_ARGUMENT,
              "ld_dx", "ld_dx");
  CHECK(bytes == 0);
  check_error(kvt_normalize_backward_workspace_size(t.context, &a, nullptr, nullptr), KVT_ERROR_INVALID_ARGUMENT,
              "bytes", "null pointer");
  char label[16] = "unchanged";
  a = valid();
  a.x = nullptr;
  check_error(kvt_normalize_backward_variant(t.context, &a, nullptr, label, sizeof label, nullptr),
              KVT_ERROR_INVALID_ARGUMENT, "x", "null pointer");
  CHECK(std::string(label) == "unchanged");
}

TEST_CASE("C ABI: invalid dwconv arguments name the field", "[c_api]") {
  TestContext t;
  auto a = valid_dwconv();
  a.weight = nullptr;
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "weight", "weight is a null pointer");
  a = valid_dwconv();
  a.c = -3;
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "c", "c must be positive");
  a = valid_dwconv();
  a.layout = 4;
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "layout", "layout");
  a = valid_dwconv();
  a.direction = 3;
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "direction", "direction");
  a = valid_dwconv();
  a.pad_left = 1;  // with causal
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "causal", "causal sets the padding");
  a = valid_dwconv();
  a.direction = KVT_DW_BACKWARD_WEIGHT;  // needs x, dy, dweight
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "dy", "dy is a null pointer");
  a = valid_dwconv();
  a.dtype = KVT_F16;
  a.x = fake(0x100001);
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "x", "aligned to 2 bytes");
  a = valid_dwconv();
  a.activation = 5;
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "activation", "no meaning for value 5");
  a = valid_dwconv();
  a.direction = KVT_DW_BACKWARD_DATA;  // with an activation: dy, x, weight -> dx
  a.dy = fake(0x400000), a.dx = fake(0x500000), a.x = nullptr;
  a.activation = KVT_ACT_SILU;
  check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "x", "x is a null pointer");

  size_t bytes = 123;
  a = valid_dwconv();
  a.y = nullptr;
  check_error(kvt_dwconv_workspace_size(t.context, &a, nullptr, &bytes), KVT_ERROR_INVALID_ARGUMENT, "y",
              "y is a null pointer");
  CHECK(bytes == 0);
  a = valid_dwconv();
  check_error(kvt_dwconv_workspace_size(t.context, &a, nullptr, nullptr), KVT_ERROR_INVALID_ARGUMENT, "bytes",
              "bytes is a null pointer");
}

TEST_CASE("C ABI: struct_size versioning", "[c_api]") {
  TestContext t;
  auto a = valid_normalize();
  a.struct_size = 0;
  check_error(kvt_normalize(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "struct_size", "set it to sizeof");

  // A newer caller's larger struct: accepted when the unknown tail is zero (validation then runs
  // on the known fields), refused when it sets fields this library cannot honour.
  struct Newer {
    kvt_normalize_args args;
    std::uint64_t future_field;
  } newer{valid_normalize(), 0};
  newer.args.struct_size = sizeof newer;
  newer.args.x = nullptr;
  check_error(kvt_normalize(t.context, &newer.args, nullptr), KVT_ERROR_INVALID_ARGUMENT, "x", "null pointer");
  newer.future_field = 1;
  check_error(kvt_normalize(t.context, &newer.args, nullptr), KVT_ERROR_INVALID_ARGUMENT, "struct_size",
              "use a newer libkvtune");

  // An older caller's smaller struct keeps the defaults of the fields it lacks: here everything
  // after `workspace`, so workspace_bytes is 0 whatever follows in memory.
  struct Older {
    kvt_dwconv_args args;
  } older{valid_dwconv()};
  older.args.struct_size = offsetof(kvt_dwconv_args, workspace_bytes);
  older.args.workspace_bytes = 12345;
  older.args.c = 0;
  check_error(kvt_dwconv(t.context, &older.args, nullptr), KVT_ERROR_INVALID_ARGUMENT, "c", "c must be positive");
  // A struct from before `activation`: no activation, whatever follows in memory.
  older.args = valid_dwconv();
  older.args.struct_size = offsetof(kvt_dwconv_args, activation);
  older.args.activation = 99;
  older.args.c = 0;
  check_error(kvt_dwconv(t.context, &older.args, nullptr), KVT_ERROR_INVALID_ARGUMENT, "c", "c must be positive");
  // A struct from before the states: none, whatever follows in memory; with them, their rules apply.
  older.args = valid_dwconv();
  older.args.struct_size = offsetof(kvt_dwconv_args, initial_state);
  older.args.seq_idx = static_cast<const int32_t*>(fake(0x400001));
  older.args.c = 0;
  check_error(kvt_dwconv(t.context, &older.args, nullptr), KVT_ERROR_INVALID_ARGUMENT, "c", "c must be positive");
  auto states = valid_dwconv();
  states.causal = 0;
  states.final_state = fake(0x400000);
  check_error(kvt_dwconv(t.context, &states, nullptr), KVT_ERROR_INVALID_ARGUMENT, "final_state", "causal 1D");
  states = valid_dwconv();
  states.initial_state = fake(0x400000);
  states.seq_idx = static_cast<const int32_t*>(fake(0x500000));
  check_error(kvt_dwconv(t.context, &states, nullptr), KVT_ERROR_INVALID_ARGUMENT, "seq_idx", "initial state");

  kvt_counters counters;
  counters.struct_size = 2;
  check_error(kvt_get_counters(t.context, &counters), KVT_ERROR_INVALID_ARGUMENT, "struct_size", "set it to sizeof");
  check_error(kvt_get_counters(t.context, nullptr), KVT_ERROR_INVALID_ARGUMENT, "out", "null pointer");
}

TEST_CASE("C ABI: contexts and their options", "[c_api]") {
  check_error(kvt_context_create(nullptr, nullptr), KVT_ERROR_INVALID_ARGUMENT, "out", "out is a null pointer");

  kvt_context_options o;
  kvt_context_options_init(&o);
  o.cache_path = "";
  kvt_context* c = reinterpret_cast<kvt_context*>(0x1);
  o.policy = 9;
  check_error(kvt_context_create(&o, &c), KVT_ERROR_INVALID_ARGUMENT, "policy", "no meaning for value 9");
  CHECK(c == nullptr);
  o.policy = KVT_POLICY_DEFAULT;
  o.log_level = "loud";
  check_error(kvt_context_create(&o, &c), KVT_ERROR_INVALID_ARGUMENT, "log_level", "loud");
  o.log_level = nullptr;
  o.buckets = "8,4";
  CHECK(kvt_context_create(&o, &c) == KVT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kvt_last_error_field()) == "buckets");
  o.buckets = nullptr;

  o.policy = KVT_POLICY_CACHED;
  o.budget_variants = 0;
  REQUIRE(kvt_context_create(&o, &c) == KVT_OK);
  kvt_counters counters;
  counters.struct_size = sizeof counters;
  REQUIRE(kvt_get_counters(c, &counters) == KVT_OK);
  CHECK((counters.calls == 0 && counters.tunes == 0 && counters.compiles == 0));
  CHECK(counters.struct_size == sizeof counters);
  CHECK(kvt_wait_background(c) == KVT_OK);
  kvt_context_destroy(c);
  kvt_context_destroy(nullptr);

  kvt_context* d1 = nullptr;
  kvt_context* d2 = nullptr;
  REQUIRE(kvt_default_context(&d1) == KVT_OK);
  REQUIRE(kvt_default_context(&d2) == KVT_OK);
  CHECK((d1 != nullptr && d1 == d2));
  kvt_context_destroy(d1);  // a no-op for the default context
  CHECK(kvt_get_counters(d1, &counters) == KVT_OK);
}

TEST_CASE("C ABI: the last error is per thread and survives successful calls", "[c_api]") {
  TestContext t;
  auto a = valid_normalize();
  a.cols = 0;
  REQUIRE(kvt_normalize(t.context, &a, nullptr) == KVT_ERROR_INVALID_ARGUMENT);
  std::string other_message = "unset", other_field = "unset";
  kvt_status other_status = KVT_ERROR_INTERNAL;
  std::thread([&] {
    other_message = kvt_last_error_message();
    other_field = kvt_last_error_field();
    other_status = kvt_last_error_status();
  }).join();
  CHECK(other_message.empty());
  CHECK(other_field.empty());
  CHECK(other_status == KVT_OK);
  kvt_counters counters;
  counters.struct_size = sizeof counters;
  REQUIRE(kvt_get_counters(t.context, &counters) == KVT_OK);
  CHECK(std::string(kvt_last_error_field()) == "cols");
  CHECK(counters.calls == 0);  // validation failed before dispatch
}

TEST_CASE("C ABI: no GPU gives a clear status, never an exception", "[c_api]") {
  std::string why;
  if (kvtune::test::gpu_available(&why)) {
    WARN("SKIPPED (needs a machine without a GPU): the fake device pointers would be launched on");
    return;
  }
  TestContext t;
  auto n = valid_normalize();
  check_error(kvt_normalize(t.context, &n, nullptr), KVT_ERROR_NO_GPU, "", "no CUDA device available");
  auto d = valid_dwconv();
  check_error(kvt_dwconv(t.context, &d, nullptr), KVT_ERROR_NO_GPU, "", "no CUDA device available");
  size_t bytes = 99;
  check_error(kvt_dwconv_workspace_size(t.context, &d, nullptr, &bytes), KVT_ERROR_NO_GPU, "", "no CUDA device");
  CHECK(bytes == 0);
  char label[8];
  check_error(kvt_dwconv_variant(t.context, &d, nullptr, label, sizeof label, nullptr), KVT_ERROR_NO_GPU, "",
              "needs an NVIDIA GPU");
  // The default context takes the same path (created from the environment on first use).
  const kvt_status status = kvt_normalize(nullptr, &n, nullptr);
  CHECK((status == KVT_ERROR_NO_GPU || status == KVT_ERROR_INVALID_ARGUMENT));  // the latter: a bad KVTUNE_* variable
}

TEST_CASE("C ABI: a caller-owned backward_weight workspace", "[c_api][gpu]") {
  KVTUNE_REQUIRE_GPU();
  TestContext t;
  // A 3x3 NCHW weight gradient: the heuristic splits the N*H*W reduction on most GPUs.
  const int n = 16, c = 96, h = 56, w = 56;
  const std::size_t x_count = std::size_t(n) * c * h * w;
  std::vector<float> host(x_count);
  for (std::size_t i = 0; i < x_count; ++i) host[i] = float((i * 7919) % 1000) / 500.f - 1.f;
  void *x = nullptr, *dy = nullptr, *dw_pool = nullptr, *dw_own = nullptr, *db = nullptr;
  REQUIRE(cudaMalloc(&x, x_count * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dy, x_count * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dw_pool, c * 9 * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dw_own, c * 9 * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&db, c * 4) == cudaSuccess);
  REQUIRE(cudaMemcpy(x, host.data(), x_count * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(dy, host.data(), x_count * 4, cudaMemcpyHostToDevice) == cudaSuccess);

  kvt_dwconv_args a;
  kvt_dwconv_args_init(&a);
  a.direction = KVT_DW_BACKWARD_WEIGHT;
  a.layout = KVT_DW_NCHW;
  a.n = n, a.c = c, a.h = h, a.w = w;
  a.kernel_h = a.kernel_w = 3;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 1;
  a.x = x, a.dy = dy, a.dweight = dw_pool, a.dbias = db;
  size_t bytes = 0;
  REQUIRE(kvt_dwconv_workspace_size(t.context, &a, nullptr, &bytes) == KVT_OK);
  char label[256];
  REQUIRE(kvt_dwconv_variant(t.context, &a, nullptr, label, sizeof label, nullptr) == KVT_OK);
  INFO("variant " << label << ", workspace " << bytes << " bytes");
  REQUIRE(kvt_dwconv(t.context, &a, nullptr) == KVT_OK);  // kvtune's pool

  void* workspace = nullptr;
  REQUIRE(cudaMalloc(&workspace, bytes + 256) == cudaSuccess);
  a.dweight = dw_own;
  a.workspace = workspace;
  if (bytes > 0) {
    a.workspace_bytes = bytes - 1;
    check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "workspace_bytes", "needs");
    a.workspace = static_cast<char*>(workspace) + 4;
    a.workspace_bytes = bytes;
    check_error(kvt_dwconv(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "workspace", "256 bytes");
    a.workspace = workspace;
  } else {
    WARN("the variant needs no workspace on this GPU: only the equality below is checked");
  }
  a.workspace_bytes = bytes;
  REQUIRE(kvt_dwconv(t.context, &a, nullptr) == KVT_OK);
  std::vector<float> from_pool(c * 9), from_own(c * 9);
  REQUIRE(cudaMemcpy(from_pool.data(), dw_pool, c * 9 * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  REQUIRE(cudaMemcpy(from_own.data(), dw_own, c * 9 * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(from_pool == from_own);  // deterministic: bitwise equal
  for (void* p : {x, dy, dw_pool, dw_own, db, workspace}) cudaFree(p);
}

static_assert(sizeof(kvt_dwconv_decode_args) == 120, "kvt_dwconv_decode_args layout");
static_assert(offsetof(kvt_dwconv_decode_args, kernel_w) == 32 && offsetof(kvt_dwconv_decode_args, x) == 56 &&
                  offsetof(kvt_dwconv_decode_args, state_indices) == 104 &&
                  offsetof(kvt_dwconv_decode_args, overlap_prologue) == 112,
              "kvt_dwconv_decode_args offsets");

TEST_CASE("C ABI: the dwconv decode step, its defaults and invalid arguments naming the field", "[c_api][decode]") {
  kvt_dwconv_decode_args a;
  std::memset(&a, 0x5a, sizeof a);
  kvt_dwconv_decode_args_init(&a);
  CHECK(a.struct_size == sizeof(kvt_dwconv_decode_args));
  CHECK(a.seqlen == 1);
  CHECK(a.kernel_w == 4);
  CHECK(a.state_len == 0);
  CHECK(a.state_slots == 0);
  CHECK(a.activation == KVT_ACT_NONE);
  CHECK(a.cache_seqlens == nullptr);
  CHECK(a.state_indices == nullptr);
  CHECK(a.overlap_prologue == 0);
  TestContext t;
  const auto valid = [] {
    kvt_dwconv_decode_args v;
    kvt_dwconv_decode_args_init(&v);
    v.dtype = KVT_BF16, v.batch = 8, v.channels = 64;
    v.x = fake(0x100000), v.weight = fake(0x200000), v.y = fake(0x300000), v.state = fake(0x400000);
    return v;
  };
  a = valid();
  a.state = nullptr;
  check_error(kvt_dwconv_decode(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "state", "state is a null pointer");
  a = valid();
  a.activation = 7;
  check_error(kvt_dwconv_decode(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "activation", "no meaning for value 7");
  a = valid();
  a.kernel_w = 1;
  check_error(kvt_dwconv_decode(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "kernel_w", "2..63");
  a = valid();
  a.state_len = 8;  // without cache_seqlens: exactly kernel_w - 1
  check_error(kvt_dwconv_decode(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "state_len", "exactly kernel_w - 1");
  a.cache_seqlens = static_cast<const int32_t*>(fake(0x500000));  // a circular buffer of 8 is fine
  a.state_slots = 4;
  check_error(kvt_dwconv_decode(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "state_slots", ">= batch");
  a.state = fake(0x500000);  // the state over the positions it is read with
  a.state_slots = 0;
  check_error(kvt_dwconv_decode(t.context, &a, nullptr), KVT_ERROR_INVALID_ARGUMENT, "state",
              "state overlaps cache_seqlens");
  a = valid();
  a.y = fake(0x100040);
  char label[64] = "untouched";
  check_error(kvt_dwconv_decode_variant(t.context, &a, nullptr, label, sizeof label, nullptr), KVT_ERROR_INVALID_ARGUMENT,
              "y", "y overlaps x");
  CHECK(std::string(label) == "untouched");
  // A newer caller's struct with an unknown field set is refused; an older (shorter) one keeps the defaults.
  struct Newer {
    kvt_dwconv_decode_args args;
    std::int64_t extra;
  } newer{valid(), 1};
  newer.args.struct_size = sizeof newer;
  check_error(kvt_dwconv_decode(t.context, &newer.args, nullptr), KVT_ERROR_INVALID_ARGUMENT, "struct_size",
              "larger than this kvtune knows");
}
