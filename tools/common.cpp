#include "tools/common.h"

#include <limits>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cache/store.h"
#include "kvtune/error.h"
#include "core/json_fields.h"

namespace kvtune::tools {
namespace {

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

bool looks_numeric(const std::string& cell) {
  if (cell.empty() || cell == "-") return !cell.empty();
  std::size_t digits = 0;
  for (char c : cell) {
    if (std::isdigit(static_cast<unsigned char>(c))) ++digits;
    else if (std::strchr("+-.,%x ", c) == nullptr && c != 'e') return false;
  }
  return digits > 0;
}

// Display width: UTF-8 continuation bytes take no column.
std::size_t display_width(const std::string& s) {
  std::size_t width = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++width;
  return width;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return text.str();
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  out << text;
  out.close();
  if (!out) throw Error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

TextPosition position_of(const std::string& text, std::size_t byte) {
  TextPosition p;
  const std::size_t end = std::min(byte, text.size());
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++p.column;
    }
  }
  return p;
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& name) {
  try {
    return detail::parse_json_limited(text);
  } catch (const std::length_error& e) {
    throw InputError(fmt::format("{}: malformed JSON: {}", name, e.what()));
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the position of the character that could not be read.
    const TextPosition at = position_of(text, e.byte == 0 ? 0 : e.byte - 1);
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: " prefix.
    if (const auto colon = what.find(": "); what.rfind("[json.exception", 0) == 0 && colon != std::string::npos)
      what = what.substr(colon + 2);
    throw InputError(fmt::format("{}:{}:{}: malformed JSON: {}", name, at.line, at.column, first_line(what)));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: malformed JSON: {}", name, e.what()));
  } catch (const nlohmann::json::exception& e) {
    // Values the parser reads but cannot represent, such as a number beyond double range (1e999).
    std::string what = e.what();
    if (const auto bracket = what.find("] "); what.rfind("[json.exception", 0) == 0 && bracket != std::string::npos)
      what = what.substr(bracket + 2);
    throw InputError(fmt::format("{}: malformed JSON: {}", name, first_line(what)));
  }
}

nlohmann::json parse_json_file(const std::string& path) { return parse_json_text(read_text_file(path), path); }

std::string Table::render() const {
  std::vector<std::size_t> width(header_.size(), 0);
  std::vector<bool> numeric(header_.size(), true);
  for (std::size_t c = 0; c < header_.size(); ++c) width[c] = display_width(header_[c]);
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], display_width(row[c]));
      if (!looks_numeric(row[c])) numeric[c] = false;
    }
  }
  std::string out;
  const auto emit = [&](const std::vector<std::string>& row, bool header) {
    std::string line;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      const std::string pad(width[c] - display_width(cell), ' ');
      const bool right = numeric[c] && !header && !rows_.empty();
      line += right ? pad + cell : cell + (c + 1 < width.size() ? pad : "");
      if (c + 1 < width.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_, true);
  for (const auto& row : rows_) emit(row, false);
  return out;
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string format_us(double ms) { return ms < 0 ? "-" : fmt::format("{:.2f}", ms * 1000.0); }

std::int64_t unix_now() { return static_cast<std::int64_t>(std::time(nullptr)); }

std::string format_time(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &tm);
  return text;
}

int parse_command_line(CLI::App& app, int argc, char** argv, const char* tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s (see %s --help)\n", tool, first_line(e.what()).c_str(), tool);
    return kExitUsage;
  }
  return -1;
}

int guarded_main(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: %s\n", tool, first_line(e.what()).c_str());
    return kExitUsage;
  } catch (const cache::OpenError& e) {
    std::fprintf(stderr, "%s: %s\n", tool, first_line(e.cause()).c_str());
    return kExitUsage;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", tool, first_line(e.what()).c_str());
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", tool, first_line(e.what()).c_str());
    return kExitFailure;
  }
}

std::int64_t json_integer(const nlohmann::json& v, const std::string& field, const std::string& where) {
  if (v.is_number_unsigned()) {  // before is_number_integer(), which is true for unsigned numbers too
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw InputError(fmt::format("{}: '{}' = {} is absurd", where, field, u));
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<std::int64_t>(d);
    throw InputError(fmt::format("{}: '{}' must be an integer, got {}", where, field, v.dump()));
  }
  throw InputError(fmt::format("{}: '{}' must be an integer, got {}", where, field, v.type_name()));
}

bool json_bool(const nlohmann::json& entry, const char* field, const std::string& where, bool fallback) {
  if (!entry.contains(field)) return fallback;
  const auto& v = entry.at(field);
  if (!v.is_boolean()) throw InputError(fmt::format("{}: '{}' must be true or false, got {}", where, field, v.dump()));
  return v.get<bool>();
}

std::string json_string(const nlohmann::json& entry, const char* field, const std::string& where,
                        const std::string& fallback) {
  if (!entry.contains(field)) return fallback;
  const auto& v = entry.at(field);
  if (!v.is_string()) throw InputError(fmt::format("{}: '{}' must be a string, got {}", where, field, v.dump()));
  return v.get<std::string>();
}

DType parse_dtype_name(const std::string& text, const std::string& where) {
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    if (text == to_string(d)) return d;
  throw InputError(fmt::format("{}: unknown dtype '{}' (f32, f16, bf16)", where, text));
}

DwLayout parse_layout(const std::string& text, const std::string& where) {
  for (DwLayout l : {DwLayout::ncl, DwLayout::nlc, DwLayout::nchw, DwLayout::nhwc})
    if (text == to_string(l)) return l;
  throw InputError(fmt::format("{}: unknown layout '{}' (ncl, nlc, nchw, nhwc)", where, text));
}

DwDirection parse_direction(const std::string& text, const std::string& where) {
  for (DwDirection d : {DwDirection::forward, DwDirection::backward_data, DwDirection::backward_weight})
    if (text == to_string(d)) return d;
  throw InputError(
      fmt::format("{}: unknown direction '{}' (forward, backward_data, backward_weight)", where, text));
}

Activation parse_activation(const std::string& text, const std::string& where) {
  for (Activation a : {Activation::none, Activation::silu, Activation::gelu_tanh, Activation::gelu_erf, Activation::relu})
    if (text == to_string(a)) return a;
  throw InputError(fmt::format("{}: unknown activation '{}' (none, silu, gelu_tanh, gelu_erf, relu)", where, text));
}

std::int64_t pow2_bucket(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace kvtune::tools
