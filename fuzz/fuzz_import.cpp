// Fuzz target: `kvtune-cache import` without the command line: the input's bytes are the export
// file's text, read as the tool reads it (parse_json_text) and imported by tools/cache_view.h
// import_cache into an in-memory store.
//
// Contracts checked (tools/cache_view.h):
//   - malformed JSON and every bad document give InputError, and a refused document writes nothing;
//     any other exception is a finding;
//   - an accepted document imports every entry into an empty store; importing it again skips every
//     entry, and again with overwrite replaces every entry;
//   - what export_cache writes of the result imports again, and exporting that gives the same
//     devices and entries (export -> import is a fixed point).

#include <cstdint>
#include <memory>
#include <string>

#include "cache/store.h"
#include "fuzz/fuzz_support.h"
#include "tools/cache_view.h"
#include "tools/common.h"

namespace {

using kvtune::fuzz::expect;
using kvtune::fuzz::finding;
namespace tools = kvtune::tools;

kvtune::cache::Store& store() {
  static const auto instance = kvtune::cache::Store::open_existing(":memory:", true);
  return *instance;
}

std::size_t entry_count(kvtune::cache::Store& s) { return s.winners().size(); }

// An export without the time it was written (stored times are kept as given, so the rest of a
// re-export must be identical).
nlohmann::json without_export_time(nlohmann::json document) {
  document.erase("exported_at");
  return document;
}

tools::ImportSummary import_or_finding(const nlohmann::json& document, const char* what, bool overwrite) {
  try {
    return tools::import_cache(store(), document, what, overwrite);
  } catch (const std::exception& e) {
    finding(std::string(what) + " failed: " + e.what() + "\n  document: " + document.dump());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = kvtune::fuzz::as_text(data, size);
  store().clear();
  nlohmann::json document;
  try {
    document = tools::parse_json_text(text, "fuzz.json");
  } catch (const tools::InputError&) {
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("parse_json_text threw something other than InputError: ") + e.what());
  }

  tools::ImportSummary first;
  try {
    first = tools::import_cache(store(), document, "fuzz.json", false);
  } catch (const tools::InputError&) {
    expect(entry_count(store()) == 0 && store().devices().empty(), "a refused import wrote to the cache");
    return 0;
  } catch (const std::exception& e) {
    finding(std::string("import_cache threw something other than InputError: ") + e.what());
  }
  const int entries = static_cast<int>(document.at("entries").size());
  expect(first.imported == entries && first.replaced == 0 && first.skipped == 0,
         "an import into an empty cache did not import every entry once");
  expect(static_cast<int>(entry_count(store())) == entries, "the cache does not hold every imported entry");
  expect(first.devices == static_cast<int>(document.at("devices").size()), "not every device was imported");

  const tools::ImportSummary again = import_or_finding(document, "a second import of an accepted document", false);
  expect(again.skipped == entries && again.imported == 0 && again.replaced == 0,
         "a second import did not skip every entry");
  const tools::ImportSummary overwrite = import_or_finding(document, "an overwriting import", true);
  expect(overwrite.replaced == entries && overwrite.imported == 0 && overwrite.skipped == 0,
         "an overwriting import did not replace every entry");

  const nlohmann::json exported = tools::export_cache(store());
  store().clear();
  const tools::ImportSummary round = import_or_finding(exported, "importing the export of an import", false);
  expect(round.imported == entries, "the export of an import does not import every entry");
  const nlohmann::json reexported = tools::export_cache(store());
  expect(without_export_time(exported) == without_export_time(reexported),
         "export -> import -> export changed the document:\n  first:  " + without_export_time(exported).dump() +
             "\n  second: " + without_export_time(reexported).dump());
  return 0;
}
