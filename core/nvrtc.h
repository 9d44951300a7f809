#pragma once
// Run-time compilation of kernel templates with NVRTC: one program, one or more name expressions
// (template specializations), one architecture; the result is a cubin and the lowered names.

#include <string>
#include <string_view>
#include <vector>

namespace kvtune::detail {

struct HeaderSource {
  std::string name;  // as written in #include "..."
  std::string_view text;
};

struct CompileRequest {
  std::string program_name;  // e.g. "normalize.cu", appears in the log
  std::string_view source;
  std::vector<HeaderSource> headers;
  std::vector<std::string> name_expressions;  // e.g. "kvt_normalize<float, 32, 4, ...>"
  std::string arch;                           // "sm_90" (cubin) or "compute_90" (PTX only)
  std::vector<std::string> extra_options;
};

struct CompileResult {
  std::string cubin;
  std::vector<std::string> lowered_names;  // parallel to name_expressions
  std::string log;                         // warnings, when any
  double seconds = 0;
};

/// Compiles; throws kvtune::CompileError (with the NVRTC log) on failure.
CompileResult nvrtc_compile(const CompileRequest& request);

/// The options nvrtc_compile passes, in order (also part of the binary hash).
std::vector<std::string> nvrtc_options(const CompileRequest& request);

/// Stable hash of everything that determines the cubin: sources, options, names, NVRTC version.
std::string compile_hash(const CompileRequest& request);

/// Whether a stored binary (its compile hash, architecture and lowered kernel name) is the one this
/// build makes for `request`: the hash is compile_hash(request), the architecture request.arch, and
/// the lowered name demangles to the request's first name expression (with any defaulted template
/// arguments after it). A cache file is data; a cubin is code that runs in the caller's process, so
/// one that does not pass this is never loaded. `why` gets the first mismatch.
bool binary_matches_request(const std::string& hash, const std::string& arch, const std::string& lowered_name,
                            const CompileRequest& request, std::string* why = nullptr);

/// NVRTC version as major * 1000 + minor * 10 (13.0 -> 13000).
int nvrtc_version();

/// Architectures NVRTC can target, as compute capabilities times ten (80, 90, 100, ...).
std::vector<int> nvrtc_supported_archs();

/// "sm_90" (or "compute_90") -> 90 after checking NVRTC supports it and kvtune does (sm_80 and newer); throws
/// kvtune::Error otherwise.
int parse_arch(const std::string& arch);

}  // namespace kvtune::detail
