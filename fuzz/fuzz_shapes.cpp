// Fuzz target: the shapes-file reader (tools/ops.h load_shapes -> parse_entries -> each
// operator's OpHandler::parse), fed arbitrary bytes as the file's text.
//
// Contracts checked (tools/ops.h):
//   - load_shapes either returns problems or throws InputError; any other exception is a finding;
//   - every parsed problem's to_json() parses back to the same problem (same key, same to_json);
//   - its key is one its operator's key_info() recognizes, and only that operator's;
//   - its model bytes are positive and finite.

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "tools/common.h"
#include "tools/ops.h"

namespace {

using kvtune::fuzz::expect;
using kvtune::fuzz::finding;
namespace tools = kvtune::tools;

// load_shapes reads a path; the input goes through one scratch file per process.
const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/kvtune-fuzz-shapes-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) finding("cannot create the scratch file " + pattern);
    ::close(fd);
    std::atexit([] { ::unlink(scratch_path().c_str()); });
    return pattern;
  }();
  return path;
}

void check_problem(const tools::OpProblem& problem) {
  const std::string key = problem.key();
  const tools::OpHandler* handler = tools::find_handler(problem.op());
  expect(handler != nullptr, "a parsed problem names an operator without a handler: " + problem.op());
  expect(!problem.describe().empty(), "empty describe() for " + key);

  const nlohmann::json entry = problem.to_json();
  std::unique_ptr<tools::OpProblem> again;
  try {
    again = handler->parse(entry, "to_json()");
  } catch (const std::exception& e) {
    finding("to_json() of " + key + " does not parse back: " + e.what() + "\n  entry: " + entry.dump());
  }
  expect(again->key() == key, "to_json() parses back to another problem: " + key + " -> " + again->key() +
                                  "\n  entry: " + entry.dump());
  expect(again->to_json() == entry,
         "to_json() is not a fixed point for " + key + ": " + entry.dump() + " -> " + again->to_json().dump());

  for (const auto& other : tools::handlers()) {
    std::optional<tools::KeyInfo> info;
    try {
      info = other->key_info(key, 9);
    } catch (const std::exception& e) {
      finding(other->name() + "::key_info threw for the key of a parsed problem " + key + ": " + e.what());
    }
    if (other.get() == handler)
      expect(info.has_value(), "key_info does not recognize the key of a parsed problem: " + key);
    else
      expect(!info.has_value(), other->name() + " claims the key of a " + handler->name() + " problem: " + key);
  }
  const double bytes = problem.model_bytes();
  expect(std::isfinite(bytes) && bytes > 0, "model_bytes() of " + key + " is " + std::to_string(bytes));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = scratch_path();
  {
    FILE* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0)
      finding("cannot write the scratch file " + path);
  }
  std::vector<std::unique_ptr<tools::OpProblem>> problems;
  try {
    problems = tools::load_shapes(path);
  } catch (const tools::InputError&) {
    return 0;  // refused with the documented error
  } catch (const std::exception& e) {
    finding(std::string("load_shapes threw something other than InputError: ") + e.what());
  }
  for (const auto& problem : problems) check_problem(*problem);
  return 0;
}
