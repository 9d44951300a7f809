// The dwconv family's typed variants as values: equality, labels and JSON (dwconv_config.h).
#include "kernel_templates/dwconv/dwconv_config.h"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "kvtune/kvtune.h"

namespace kvtune::dwconv {
namespace {

template <class T, class V>
T& alternative(V& v) {
  auto* c = std::get_if<std::remove_const_t<T>>(&v);
  if (c == nullptr)
    throw Error(Error::Context{"dwconv", "", "", "", "config"},
                fmt::format("internal error: a {} config read as a {} one", to_string(static_cast<Kernel>(v.index())),
                            to_string(static_cast<Kernel>(V(std::in_place_type<std::remove_const_t<T>>).index()))));
  return *c;
}

// One JSON field of a kernel's config: its key and where it goes (an int, or a flag written 0 or 1).
struct Field {
  const char* key;
  std::variant<int*, bool*> dest;
  bool optional = false;     // absent in files older than the field: the type's default
  bool zero_is_one = false;  // a count the single struct wrote as 0 for one (rows, runs, vectors)
};

// Every key of the single struct the types replaced; a file of that form holds them all, with zeros
// in the fields of the other kernels.
constexpr const char* kLegacyKeys[] = {"rw", "tx", "ty", "vc", "halo", "filter", "rh", "rt", "flat", "coalesced",
                                       "ct", "py", "tg", "splits", "atomic", "tr", "nt", "warps"};

void read_fields(const nlohmann::json& j, const char* kernel, std::initializer_list<Field> fields) {
  for (const Field& f : fields) {
    if (!j.contains(f.key)) {
      if (f.optional) continue;
      throw std::invalid_argument(fmt::format("a {} config needs field '{}'", kernel, f.key));
    }
    const int v = detail::json_int(j, f.key);
    if (bool* const* flag = std::get_if<bool*>(&f.dest)) {
      if (v != 0 && v != 1) throw std::invalid_argument(fmt::format("field '{}' is a flag: 0 or 1, got {}", f.key, v));
      **flag = v == 1;
    } else {
      *std::get<int*>(f.dest) = f.zero_is_one && v == 0 ? 1 : v;
    }
  }
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    if (key == "kernel") continue;
    if (std::any_of(fields.begin(), fields.end(), [&](const Field& f) { return key == f.key; })) continue;
    const bool legacy = std::any_of(std::begin(kLegacyKeys), std::end(kLegacyKeys), [&](const char* k) { return key == k; });
    if (!legacy) throw std::invalid_argument(fmt::format("unknown field '{}'", key));
    if (detail::json_int(j, key.c_str()) != 0)
      throw std::invalid_argument(fmt::format("field '{}' is not a {} config's (nonzero)", key, kernel));
  }
}

}  // namespace

const char* to_string(Kernel kernel) {
  switch (kernel) {
    case Kernel::tiled: return "tiled";
    case Kernel::direct: return "direct";
    case Kernel::wgrad: return "wgrad";
    case Kernel::mma: return "mma";
  }
  return "?";
}

bool TiledConfig::operator==(const TiledConfig& o) const {
  return outputs_per_thread == o.outputs_per_thread && threads_x == o.threads_x && threads_y == o.threads_y &&
         vector_channels == o.vector_channels && smem_halo == o.smem_halo && smem_filter == o.smem_filter &&
         rows_per_thread == o.rows_per_thread && runs_per_thread == o.runs_per_thread && flat == o.flat;
}

std::string TiledConfig::label() const {
  return fmt::format("tiled,rw={},tx={},ty={},vc={},halo={},filter={}{}{}{}", outputs_per_thread, threads_x, threads_y,
                     vector_channels, smem_halo ? "smem" : "global", smem_filter ? "smem" : "reg",
                     rows_per_thread > 1 ? fmt::format(",rh={}", rows_per_thread) : "",
                     runs_per_thread > 1 ? fmt::format(",rt={}", runs_per_thread) : "", flat ? ",flat" : "");
}

std::string DirectConfig::label() const { return coalesced ? "direct,order=coalesced" : "direct,order=naive"; }

bool WgradConfig::operator==(const WgradConfig& o) const {
  return channels_per_block == o.channels_per_block && position_threads == o.position_threads &&
         taps_per_block == o.taps_per_block && splits == o.splits && atomic == o.atomic &&
         outputs_per_thread == o.outputs_per_thread && vector_channels == o.vector_channels &&
         rows_per_thread == o.rows_per_thread && staged == o.staged;
}

std::string WgradConfig::label() const {
  return fmt::format("wgrad,ct={},py={},tg={},split={},reduce={}{}{}{}{}", channels_per_block, position_threads,
                     taps_per_block, splits, atomic ? "atomic" : "ordered",
                     outputs_per_thread > 1 ? fmt::format(",rw={}", outputs_per_thread) : "",
                     vector_channels > 1 ? fmt::format(",vc={}", vector_channels) : "",
                     rows_per_thread > 1 ? fmt::format(",rh={}", rows_per_thread) : "", staged ? ",staged" : "");
}

bool MmaConfig::operator==(const MmaConfig& o) const {
  return channels_per_block == o.channels_per_block && tile_rows == o.tile_rows && segment_tiles == o.segment_tiles &&
         warps == o.warps;
}

std::string MmaConfig::label() const {
  return fmt::format("mma,cb={},tr={},nt={},warps={}", channels_per_block, tile_rows, segment_tiles, warps);
}

const TiledConfig& Config::tiled() const { return alternative<const TiledConfig>(v_); }
const DirectConfig& Config::direct() const { return alternative<const DirectConfig>(v_); }
const WgradConfig& Config::wgrad() const { return alternative<const WgradConfig>(v_); }
const MmaConfig& Config::mma() const { return alternative<const MmaConfig>(v_); }
TiledConfig& Config::tiled() { return alternative<TiledConfig>(v_); }
WgradConfig& Config::wgrad() { return alternative<WgradConfig>(v_); }
MmaConfig& Config::mma() { return alternative<MmaConfig>(v_); }

std::string Config::label() const {
  return std::visit([](const auto& c) { return c.label(); }, v_);
}

nlohmann::json Config::to_json() const {
  nlohmann::json j = {{"kernel", to_string(kernel())}};
  const auto flag = [](bool b) { return b ? 1 : 0; };
  switch (kernel()) {
    case Kernel::tiled: {
      const TiledConfig& c = tiled();
      j.update({{"rw", c.outputs_per_thread}, {"tx", c.threads_x}, {"ty", c.threads_y}, {"vc", c.vector_channels},
                {"halo", flag(c.smem_halo)}, {"filter", flag(c.smem_filter)}, {"rh", c.rows_per_thread},
                {"rt", c.runs_per_thread}, {"flat", flag(c.flat)}});
      break;
    }
    case Kernel::direct: j["coalesced"] = flag(direct().coalesced); break;
    case Kernel::wgrad: {
      const WgradConfig& c = wgrad();
      j.update({{"ct", c.channels_per_block}, {"py", c.position_threads}, {"tg", c.taps_per_block},
                {"splits", c.splits}, {"atomic", flag(c.atomic)}, {"rw", c.outputs_per_thread},
                {"vc", c.vector_channels}, {"rh", c.rows_per_thread}, {"halo", flag(c.staged)}});
      break;
    }
    case Kernel::mma: {
      const MmaConfig& c = mma();
      j.update({{"ct", c.channels_per_block}, {"tr", c.tile_rows}, {"nt", c.segment_tiles}, {"warps", c.warps}});
      break;
    }
  }
  return j;
}

Config Config::from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object()) throw std::invalid_argument(std::string("a config is an object, got ") + j.type_name());
    const auto kernel = j.at("kernel").get<std::string>();
    if (kernel == "tiled") {
      // rh, rt and flat are absent in files older than them.
      TiledConfig c;
      read_fields(j, "tiled", {{"rw", &c.outputs_per_thread},
                               {"tx", &c.threads_x},
                               {"ty", &c.threads_y},
                               {"vc", &c.vector_channels},
                               {"halo", &c.smem_halo},
                               {"filter", &c.smem_filter},
                               {"rh", &c.rows_per_thread, true, true},
                               {"rt", &c.runs_per_thread, true, true},
                               {"flat", &c.flat, true, false}});
      return c;
    }
    if (kernel == "direct") {
      DirectConfig c;
      read_fields(j, "direct", {{"coalesced", &c.coalesced}});
      return c;
    }
    if (kernel == "wgrad") {
      WgradConfig c;
      read_fields(j, "wgrad", {{"ct", &c.channels_per_block},
                               {"py", &c.position_threads},
                               {"tg", &c.taps_per_block},
                               {"splits", &c.splits},
                               {"atomic", &c.atomic},
                               {"rw", &c.outputs_per_thread, false, true},
                               {"vc", &c.vector_channels, false, true},
                               {"rh", &c.rows_per_thread, true, true},
                               {"halo", &c.staged}});
      return c;
    }
    if (kernel == "mma") {
      MmaConfig c;
      read_fields(j, "mma", {{"ct", &c.channels_per_block},
                             {"tr", &c.tile_rows},
                             {"nt", &c.segment_tiles},
                             {"warps", &c.warps}});
      return c;
    }
    throw std::invalid_argument("unknown kernel '" + kernel + "'");
  } catch (const std::exception& e) {
    throw Error(Error::Context{"dwconv", "", j.dump(), "", "config"}, std::string("malformed config: ") + e.what());
  }
}

}  // namespace kvtune::dwconv
