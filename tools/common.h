#pragma once
// What kvtune-tune and kvtune-cache share: exit codes and the two error kinds behind them, reading
// JSON files with line/column diagnostics, human tables, and the outermost error handler that
// turns every failure into one line on stderr.

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvtune/kvtune.h"
#include "core/json_fields.h"

namespace CLI {
class App;
}

namespace kvtune::tools {

/// Exit statuses of every tool.
enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

/// Bad usage or bad input (files, JSON, sizes, options): the tool exits with status 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The whole file; InputError when it is missing or unreadable.
std::string read_text_file(const std::string& path);
/// Writes (replaces) the file; kvtune::Error on failure.
void write_text_file(const std::string& path, const std::string& text);

/// 1-based line and column of byte offset `byte` (0-based) in `text`.
struct TextPosition {
  std::size_t line = 1;
  std::size_t column = 1;
};
TextPosition position_of(const std::string& text, std::size_t byte);

/// The deepest nesting of arrays and objects parse_json_text accepts (kvtune's own files use 5).
inline constexpr int kMaxJsonDepth = detail::kMaxJsonDepth;

/// Parses JSON; on malformed input throws InputError "NAME:LINE:COLUMN: malformed JSON: ..." (or
/// "NAME: malformed JSON: ..." for numbers beyond double range and nesting beyond kMaxJsonDepth).
nlohmann::json parse_json_text(const std::string& text, const std::string& name);
/// The JSON text the tools print and write: bytes that are not UTF-8 (a cache file can hold any)
/// become U+FFFD instead of failing the whole output. indent < 0: one line.
std::string json_text(const nlohmann::json& j, int indent = -1);
nlohmann::json parse_json_file(const std::string& path);

/// A text table with a header row; numeric-looking cells are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

bool stdout_is_terminal();
/// "1h02m", "3m20s", "12.3s"
std::string format_duration(double seconds);
/// "3.1 MiB"
std::string format_bytes(double bytes);
/// Microseconds with 2 decimals from milliseconds; "-" for a negative (untimed) value.
std::string format_us(double ms);
/// Current unix time in seconds.
std::int64_t unix_now();
/// "2026-11-21 14:03" (UTC) of unix seconds.
std::string format_time(std::int64_t unix_seconds);

/// Parses the command line. Help prints and returns 0; a parse error prints one line to stderr
/// and returns kExitUsage. Returns -1 when the program should go on.
int parse_command_line(CLI::App& app, int argc, char** argv, const char* tool);

/// Runs `body`, mapping exceptions to one line on stderr and an exit status: InputError and
/// invalid kvtune::cache::OpenError reasons -> 2, everything else -> 1.
int guarded_main(const char* tool, const std::function<int()>& body);

/// Shapes-entry field readers shared by the operator handlers. Each throws InputError starting
/// with `where` and naming the field.
/// An integer (a float with an integral value is accepted); absurd values are refused.
std::int64_t json_integer(const nlohmann::json& value, const std::string& field, const std::string& where);
/// entry[field] as a bool, `fallback` when absent.
bool json_bool(const nlohmann::json& entry, const char* field, const std::string& where, bool fallback);
/// entry[field] as a string, `fallback` when absent.
std::string json_string(const nlohmann::json& entry, const char* field, const std::string& where,
                        const std::string& fallback);
/// "f32", "f16", "bf16".
DType parse_dtype_name(const std::string& text, const std::string& where);
/// "ncl", "nlc", "nchw", "nhwc".
DwLayout parse_layout(const std::string& text, const std::string& where);
/// "forward", "backward_data", "backward_weight".
DwDirection parse_direction(const std::string& text, const std::string& where);
/// "none", "silu", "gelu_tanh", "gelu_erf", "relu".
Activation parse_activation(const std::string& text, const std::string& where);
/// The smallest power of two >= v (v >= 1): a shapes entry's batch bucket.
std::int64_t pow2_bucket(std::int64_t v);

}  // namespace kvtune::tools
