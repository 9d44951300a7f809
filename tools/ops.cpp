#include "tools/ops.h"

#include <tuple>

#include <fmt/format.h>

#include "lib/src/families.h"

#include "tools/common.h"

namespace kvtune::tools {

namespace {

// One handler per family of the registry (lib/src/families.h), in its order; a family without its
// tools side (tools/op_<family>.cpp, make_handler<F>) does not link.
std::vector<std::unique_ptr<OpHandler>> make_handlers() {
  std::vector<std::unique_ptr<OpHandler>> all;
  std::apply([&all](auto... family) { (all.push_back(make_handler<decltype(family)>()), ...); }, detail::Families{});
  return all;
}

}  // namespace

const std::vector<std::unique_ptr<OpHandler>>& handlers() {
  static const auto all = make_handlers();
  return all;
}

const OpHandler* find_handler(const std::string& op) {
  for (const auto& h : handlers())
    if (h->name() == op) return h.get();
  return nullptr;
}

const OpHandler& require_handler(const std::string& op, const std::string& where) {
  if (const OpHandler* h = find_handler(op)) return *h;
  const std::string prefix = where.empty() ? "" : where + ": ";
  throw InputError(fmt::format("{}unknown operator '{}' (known: {})", prefix, op, describe_operators()));
}

const OpHandler& handler_for_suite(const std::string& suite) {
  for (const auto& h : handlers())
    for (const auto& name : h->suite_names())
      if (name == suite) return *h;
  throw InputError(fmt::format("unknown suite '{}' (known: {})", suite, describe_suites()));
}

std::string describe_suites() {
  std::string out;
  const auto add = [&out](const std::string& text) { out += (out.empty() ? "" : ", ") + text; };
  for (const auto& h : handlers())
    for (const auto& name : h->suite_names()) add(name);
  return out;
}

std::string describe_operators() {
  std::string out;
  const auto add = [&out](const std::string& text) { out += (out.empty() ? "" : ", ") + text; };
  for (const auto& h : handlers()) add(h->name());
  return out;
}

std::vector<std::unique_ptr<OpProblem>> parse_entries(const nlohmann::json& entries, const std::string& source) {
  if (!entries.is_array())
    throw InputError(fmt::format("{}: expected an array of problems or {{\"problems\": [...]}}, got {}", source,
                                 entries.type_name()));
  std::vector<std::unique_ptr<OpProblem>> problems;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& entry = entries[i];
    const std::string where = fmt::format("{}: problems[{}]", source, i);
    if (!entry.is_object()) throw InputError(fmt::format("{}: expected an object, got {}", where, entry.type_name()));
    const auto op = entry.find("op");
    if (op == entry.end()) throw InputError(fmt::format("{}: missing field 'op' ({})", where, describe_operators()));
    if (!op->is_string()) throw InputError(fmt::format("{}: 'op' must be a string", where));
    problems.push_back(require_handler(op->get<std::string>(), where).parse(entry, where));
  }
  return problems;
}

std::vector<std::unique_ptr<OpProblem>> load_shapes(const std::string& path) {
  const nlohmann::json document = parse_json_file(path);
  if (document.is_object()) {
    for (const auto& [name, value] : document.items()) {
      (void)value;
      if (name != "problems")
        throw InputError(fmt::format("{}: unknown top-level field '{}' (expected 'problems')", path, name));
    }
    if (!document.contains("problems")) throw InputError(fmt::format("{}: missing field 'problems'", path));
    return parse_entries(document.at("problems"), path);
  }
  return parse_entries(document, path);
}

std::vector<std::unique_ptr<OpProblem>> load_suite(const std::string& suite) {
  const OpHandler& handler = handler_for_suite(suite);
  nlohmann::json entries = nlohmann::json::array();
  for (auto& entry : handler.suite(suite)) entries.push_back(std::move(entry));
  return parse_entries(entries, "suite " + suite);
}

std::unique_ptr<OpProblem> problem_from_stored_key(const std::string& op, const std::string& problem_key,
                                                   const std::string& template_hash, std::string& why) {
  const OpHandler* handler = find_handler(op);
  if (handler == nullptr) {
    why = fmt::format("operator {} is not available in this build", op.empty() ? "''" : op);
    return nullptr;
  }
  if (template_hash != handler->template_hash()) {
    why = fmt::format("recorded with another {} template ({}; this build's is {})", op, template_hash,
                      handler->template_hash());
    return nullptr;
  }
  std::string reason;
  auto problem = handler->from_key(problem_key, &reason);
  if (!problem) why = reason.empty() ? fmt::format("not a {} key this build can read", op) : reason;
  return problem;
}

std::string bucket_spec(std::int64_t size, bool exact) {
  if (exact) return "exact";
  if (size > 0 && (size & (size - 1)) == 0) return "pow2";
  return std::to_string(size);
}

}  // namespace kvtune::tools
