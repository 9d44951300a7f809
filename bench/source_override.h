#pragma once
// --source DIR for the bench programs that compile kernel templates (ptx_digest, variant_time): a
// request's program and whichever of its headers DIR (or DIR/..) holds replace the embedded copies,
// so one build compiles two trees (e.g. DIR = a `git worktree` of an old commit's
// kernel_templates/dwconv).

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "core/nvrtc.h"
#include "kvtune/error.h"

namespace kvtune::bench {

// The text of DIR/name (or DIR/../name), kept for the run; null when neither exists. Not thread-safe:
// prepare the requests on one thread (the texts stay put afterwards), then compile them on any.
inline const std::string* source_file(const std::string& dir, const std::string& name) {
  static std::map<std::string, std::string> files;
  for (const auto& path : {std::filesystem::path(dir) / name, std::filesystem::path(dir) / ".." / name}) {
    if (!std::filesystem::exists(path)) continue;
    auto [it, inserted] = files.try_emplace(path.string());
    if (inserted) {
      std::ifstream in(path, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      it->second = text.str();
    }
    return &it->second;
  }
  return nullptr;
}

inline void use_sources(detail::CompileRequest& request, const std::string& dir) {
  const std::string* main = source_file(dir, request.program_name);
  if (!main) throw Error(fmt::format("--source: no {} in {}", request.program_name, dir));
  request.source = *main;
  for (auto& header : request.headers)
    if (const std::string* text = source_file(dir, header.name)) header.text = *text;
}

}  // namespace kvtune::bench
