// Fuzz target: the stored-key decoders. The input is a problem key, then optionally a newline and
// a config as JSON text. Read by: each registered family's problem_from_key (kernel_templates/*/
// *_family.h), the splitter they share (core/key_text.h split_key, key_value, key_number), and
// the tools' view of both, every operator's OpHandler::key_info and check_config (tools/ops.h,
// op_*.cpp).
//
// Contracts checked:
//   - problem_from_key never throws, and a problem it returns has exactly this key;
//   - key_info never throws; at most one operator recognizes a key, and only a key that starts
//     with its name; what it reports is usable (a description, finite non-negative models);
//   - check_config returns a label or throws InputError; it accepts no config for a key that
//     key_info refuses;
//   - split_key's parts joined with ',' give the key back; key_value and key_number agree with
//     their definitions.

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "fuzz/fuzz_support.h"
#include "core/key_text.h"
#include "lib/src/families.h"
#include "tools/common.h"
#include "tools/ops.h"

namespace {

using kvtune::fuzz::expect;
using kvtune::fuzz::finding;
namespace tools = kvtune::tools;

void check_splitter(const std::string& key) {
  using kvtune::detail::key_number;
  using kvtune::detail::key_value;
  const auto parts = kvtune::detail::split_key(key);
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i) joined += (i == 0 ? "" : ",") + parts[i];
  expect(joined == key, "split_key parts do not join back to the key");
  for (const auto& part : parts) {
    const auto eq = part.find('=');
    const std::string prefix = part.substr(0, eq == std::string::npos ? 0 : eq + 1);
    const auto value = key_value(part, prefix);
    expect(value && prefix + *value == part, "key_value(part, its own prefix) is not the rest of the part");
    const auto number = key_number(value);
    if (number) {
      expect(*number >= 0 && !value->empty() && value->find_first_not_of("0123456789") == std::string::npos,
             "key_number accepted '" + *value + "'");
      expect(std::stoll(*value) == *number, "key_number('" + *value + "') is " + std::to_string(*number));
    }
  }
}

template <class Decode>
void check_decoder(const char* family, const std::string& key, Decode decode) {
  try {
    if (const auto problem = decode(key))
      expect(problem->key() == key, std::string(family) + "::problem_from_key(" + key + ") has the key " +
                                        problem->key());
  } catch (const std::exception& e) {
    finding(std::string(family) + "::problem_from_key threw: " + e.what() + "\n  key: " + key);
  }
}

// Every registered family's key decoder (lib/src/families.h).
template <class... F>
void check_decoders(const std::string& key, std::tuple<F...>*) {
  (check_decoder(F::kOp, key, F::from_key), ...);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input = kvtune::fuzz::as_text(data, size);
  const auto newline = input.find('\n');
  const std::string key = input.substr(0, newline);
  check_splitter(key);
  check_decoders(key, static_cast<kvtune::detail::Families*>(nullptr));

  std::optional<nlohmann::json> config;
  if (newline != std::string::npos) {
    try {
      config = tools::parse_json_text(input.substr(newline + 1), "config");
    } catch (const tools::InputError&) {
    } catch (const std::exception& e) {
      finding(std::string("parse_json_text threw something other than InputError: ") + e.what());
    }
  }

  int recognized = 0;
  for (const auto& handler : tools::handlers()) {
    bool known = false;
    for (int cc_major : {0, 7, 9}) {
      std::optional<tools::KeyInfo> info;
      try {
        info = handler->key_info(key, cc_major);
      } catch (const std::exception& e) {
        finding(handler->name() + "::key_info threw: " + e.what() + "\n  key: " + key);
      }
      if (!info) continue;
      known = true;
      expect(key.rfind(handler->name() + ",", 0) == 0, handler->name() + " recognizes a key of another name: " + key);
      expect(!info->describe.empty(), "empty description of " + key);
      expect(std::isfinite(info->model_bytes) && info->model_bytes >= 0 && std::isfinite(info->model_flops) &&
                 info->model_flops >= 0,
             "unusable byte or flop model for " + key);
    }
    recognized += known;
    if (!config) continue;
    try {
      const std::string label = handler->check_config(key, *config);
      expect(known, handler->name() + "::check_config accepted a config for a key its key_info refuses: " + key);
      expect(!label.empty(), "check_config returned an empty label for " + key);
    } catch (const tools::InputError&) {
    } catch (const std::exception& e) {
      finding(handler->name() + "::check_config threw something other than InputError: " + e.what() +
              "\n  key: " + key + "\n  config: " + config->dump());
    }
  }
  expect(recognized <= 1, "more than one operator recognizes " + key);
  return 0;
}
