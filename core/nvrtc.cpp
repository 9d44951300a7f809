#include "core/nvrtc.h"

#include <cxxabi.h>
#include <nvrtc.h>

#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "kvtune/error.h"
#include "core/hash.h"

namespace kvtune::detail {
namespace {

Error::Context nvrtc_context(const CompileRequest& request) {
  std::string names;
  for (const auto& n : request.name_expressions) names += (names.empty() ? "" : "; ") + n;
  return Error::Context{"nvrtc", request.program_name + " " + request.arch, names, "", ""};
}

void check(nvrtcResult result, const char* what, const CompileRequest& request) {
  if (result != NVRTC_SUCCESS)
    throw Error(nvrtc_context(request), fmt::format("{} failed: {}", what, nvrtcGetErrorString(result)));
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    nvrtcDestroyProgram(p);
    delete p;
  }
};

}  // namespace

std::vector<std::string> nvrtc_options(const CompileRequest& request) {
  std::vector<std::string> options = {"--gpu-architecture=" + request.arch, "-std=c++17", "-DNDEBUG",
                                      "-default-device"};
  options.insert(options.end(), request.extra_options.begin(), request.extra_options.end());
  return options;
}

CompileResult nvrtc_compile(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  parse_arch(request.arch);
  std::vector<const char*> header_texts, header_names;
  std::vector<std::string> header_storage;
  header_storage.reserve(request.headers.size());
  for (const auto& h : request.headers) {
    header_storage.emplace_back(h.text);
    header_texts.push_back(header_storage.back().c_str());
    header_names.push_back(h.name.c_str());
  }
  const std::string source(request.source);
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram{});
  check(nvrtcCreateProgram(program.get(), source.c_str(), request.program_name.c_str(),
                           static_cast<int>(header_texts.size()), header_texts.data(), header_names.data()),
        "nvrtcCreateProgram", request);
  for (const auto& name : request.name_expressions)
    check(nvrtcAddNameExpression(*program, name.c_str()), "nvrtcAddNameExpression", request);

  const auto options = nvrtc_options(request);
  std::vector<const char*> option_ptrs;
  for (const auto& o : options) option_ptrs.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(*program, static_cast<int>(option_ptrs.size()), option_ptrs.data());

  CompileResult result;
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(*program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    result.log.resize(log_size);
    nvrtcGetProgramLog(*program, result.log.data());
    result.log.resize(log_size - 1);
  }
  if (compiled != NVRTC_SUCCESS)
    throw CompileError(nvrtc_context(request), fmt::format("compilation failed: {}", nvrtcGetErrorString(compiled)),
                       result.log, options, request.name_expressions);

  if (request.arch.rfind("compute_", 0) == 0) {
    // A virtual architecture: PTX only (front end and code generation, no ptxas).
    size_t ptx_size = 0;
    check(nvrtcGetPTXSize(*program, &ptx_size), "nvrtcGetPTXSize", request);
    result.cubin.resize(ptx_size);
    check(nvrtcGetPTX(*program, result.cubin.data()), "nvrtcGetPTX", request);
  } else {
    size_t cubin_size = 0;
    check(nvrtcGetCUBINSize(*program, &cubin_size), "nvrtcGetCUBINSize", request);
    result.cubin.resize(cubin_size);
    check(nvrtcGetCUBIN(*program, result.cubin.data()), "nvrtcGetCUBIN", request);
  }
  for (const auto& name : request.name_expressions) {
    const char* lowered = nullptr;
    check(nvrtcGetLoweredName(*program, name.c_str(), &lowered), "nvrtcGetLoweredName", request);
    result.lowered_names.emplace_back(lowered);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string compile_hash(const CompileRequest& request) {
  std::uint64_t h = hash64(request.program_name);
  h = hash64(request.source, h);
  for (const auto& header : request.headers) h = hash64(header.text, hash64(header.name, h));
  for (const auto& option : nvrtc_options(request)) h = hash64(option, h);
  for (const auto& name : request.name_expressions) h = hash64(name, h);
  h = hash64(std::to_string(nvrtc_version()), h);
  return hex64(h);
}

bool binary_matches_request(const std::string& hash, const std::string& arch, const std::string& lowered_name,
                            const CompileRequest& request, std::string* why) {
  const auto fail = [why](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (request.name_expressions.empty()) return fail("the request names no kernel");
  const std::string expected_hash = compile_hash(request);
  if (hash != expected_hash) return fail("its compile key " + hash + " is not this variant's " + expected_hash);
  if (arch != request.arch) return fail("it was built for " + arch + ", not " + request.arch);
  // Itanium mangling of a kernel: "_Z" <length> <name> "I" <template args> "E" <parameters>.
  if (lowered_name.size() > 4096 || lowered_name.rfind("_Z", 0) != 0)
    return fail("its kernel name '" + lowered_name.substr(0, 80) + "' is not a mangled kernel name");
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(lowered_name.c_str(), nullptr, nullptr, &status),
                                                   std::free);
  if (status != 0 || demangled == nullptr)
    return fail("its kernel name '" + lowered_name.substr(0, 80) + "' does not demangle");
  const std::string& expression = request.name_expressions.front();
  if (expression.empty() || expression.back() != '>') return fail("the name expression is not a template");
  // "void kvt_normalize<float, 32, ...>(KvtNormalizeParams)" for "kvt_normalize<float, 32, ...>";
  // template parameters with defaults follow the named ones.
  const std::string prefix = "void " + expression.substr(0, expression.size() - 1);
  const std::string text = demangled.get();
  if (text.compare(0, prefix.size(), prefix) != 0 || text.size() == prefix.size() ||
      (text[prefix.size()] != '>' && text[prefix.size()] != ','))
    return fail("its kernel '" + text.substr(0, 200) + "' is not " + expression);
  return true;
}

int nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
  return major * 1000 + minor * 10;
}

std::vector<int> nvrtc_supported_archs() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return {};
  std::vector<int> archs(static_cast<size_t>(count));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  return archs;
}

int parse_arch(const std::string& arch) {
  int value = 0;
  const size_t prefix = arch.rfind("compute_", 0) == 0 ? 8 : 3;
  bool ok = arch.size() > prefix && (prefix == 8 || arch.compare(0, 3, "sm_") == 0);
  for (size_t i = prefix; ok && i < arch.size(); ++i) {
    ok = (arch[i] >= '0' && arch[i] <= '9') || (i + 1 == arch.size() && (arch[i] == 'a' || arch[i] == 'f'));
    if (ok && arch[i] >= '0' && arch[i] <= '9') value = value * 10 + (arch[i] - '0');
  }
  const auto supported = nvrtc_supported_archs();
  if (!ok || std::find(supported.begin(), supported.end(), value) == supported.end())
    throw Error(Error::Context{"nvrtc", "", "", "", "arch"},
                fmt::format("unknown architecture '{}': NVRTC {}.{} supports {}", arch, nvrtc_version() / 1000,
                            nvrtc_version() % 1000 / 10, fmt::join(supported, ", ")));
  if (value < 80)
    throw Error(Error::Context{"nvrtc", "", "", "", "arch"},
                fmt::format("architecture '{}' is not supported: kvtune needs sm_80 or newer", arch));
  return value;
}

}  // namespace kvtune::detail
