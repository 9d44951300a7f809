#pragma once
/// @file error.h
/// The one exception type kvtune throws.

#include <stdexcept>
#include <string>
#include <vector>

namespace kvtune {

/// Every failure kvtune reports is a kvtune::Error. Its message names the operator, the problem,
/// the variant (config label) where one is involved, the device, and the underlying
/// CUDA / NVRTC / SQLite text. The parts are also available as fields.
class Error : public std::runtime_error {
 public:
  struct Context {
    std::string op;       ///< "normalize", "dwconv", "cache", "nvrtc", ...
    std::string problem;  ///< problem key or a description of the arguments
    std::string variant;  ///< config label, empty when no variant is involved
    std::string device;   ///< device name and ordinal, empty when none is involved
    std::string field;    ///< the offending argument field for validation errors
  };

  explicit Error(const std::string& what) : std::runtime_error(what) {}
  Error(Context context, const std::string& cause)
      : std::runtime_error(format(context, cause)), context_(std::move(context)), cause_(cause) {}

  const Context& context() const noexcept { return context_; }
  const std::string& cause() const noexcept { return cause_; }

 private:
  static std::string format(const Context& c, const std::string& cause) {
    std::string s = "kvtune";
    if (!c.op.empty()) s += " " + c.op;
    s += ": " + cause;
    if (!c.field.empty()) s += " [field " + c.field + "]";
    if (!c.problem.empty()) s += " [problem " + c.problem + "]";
    if (!c.variant.empty()) s += " [variant " + c.variant + "]";
    if (!c.device.empty()) s += " [device " + c.device + "]";
    return s;
  }

  Context context_;
  std::string cause_;
};

}  // namespace kvtune

namespace kvtune {

/// An NVRTC compilation failure: the log, the options and the name expressions as fields.
class CompileError : public Error {
 public:
  CompileError(Context context, const std::string& cause, std::string log, std::vector<std::string> options,
               std::vector<std::string> name_expressions)
      : Error(std::move(context), cause + (log.empty() ? std::string() : "\n--- NVRTC log ---\n" + log)),
        log_(std::move(log)),
        options_(std::move(options)),
        name_expressions_(std::move(name_expressions)) {}
  const std::string& log() const noexcept { return log_; }
  const std::vector<std::string>& options() const noexcept { return options_; }
  const std::vector<std::string>& name_expressions() const noexcept { return name_expressions_; }

 private:
  std::string log_;
  std::vector<std::string> options_;
  std::vector<std::string> name_expressions_;
};

}  // namespace kvtune
