#pragma once
// The dwconv family's variants: one value type per kernel of dwconv.cu, each with its own fields,
// equality and label, and Config, the variant of the four that the tuner, the cache and the tools
// carry. JSON: a config's kernel and its own fields under the short names of its label; files
// written before the types split (every kernel's fields in one object, the others zero) still load.
// Labels and NVRTC names are those of the earlier single struct, so caches keep their entries.

#include <cstdint>
#include <string>
#include <variant>

#include <nlohmann/json_fwd.hpp>

namespace kvtune::dwconv {

/// Which kernel of the template a variant uses (mma: dwconv_mma.cuh, tensor cores, 16-bit channel-last).
enum class Kernel : std::uint8_t { tiled, direct, wgrad, mma };

/// kvt_dwconv_tiled (forward, backward_data; dwconv_tiled.cuh): register tiles over the output.
struct TiledConfig {
  int outputs_per_thread = 1;  // RW: consecutive outputs along W per thread
  int threads_x = 32;          // TX: along W (channel-first) or along C (channel-last)
  int threads_y = 1;           // TY: output rows per block (channel-last staged: runs along W per block)
  int vector_channels = 1;     // VC: channels per vector access (channel-last); channel-first:
                               // elements per vector access along W (1: scalars)
  bool smem_halo = false;      // the block's source tile staged in shared memory (channel-first:
                               // TY rows x TX runs; channel-last: TX * VC channels x TY runs x RH rows)
  bool smem_filter = false;    // taps in shared memory instead of registers
  int rows_per_thread = 1;     // RH: consecutive output rows per thread, each source row loaded once
                               // for all of them (channel-first: global-memory halo only)
  int runs_per_thread = 1;     // RT: runs per thread, TX * RW outputs apart, every window's loads
                               // issued first (channel-first, one kernel row); channel-last staged
                               // tiles: tiles per block, taken in turn
  bool flat = false;           // no tiles: thread g of the grid takes item g of (plane, RH rows, run),
                               // TX threads a block, TY = 1 (channel-first, taps in registers)

  bool operator==(const TiledConfig& o) const;
  std::string label() const;
};

/// kvt_dwconv_direct: one output per thread, the seed study's naive and coalesced designs.
struct DirectConfig {
  bool coalesced = false;  // threads over the output's fastest axis instead of over channels

  bool operator==(const DirectConfig& o) const { return coalesced == o.coalesced; }
  std::string label() const;
};

/// kvt_dwconv_wgrad and kvt_dwconv_wgrad_staged (backward_weight): blocks of channels x position
/// threads reduce dy * x over N x Ho x Wo for a column of taps.
struct WgradConfig {
  int channels_per_block = 1;  // CT
  int position_threads = 1;    // PY
  int taps_per_block = 1;      // TG
  int splits = 1;              // slices of the N x Ho x Wo reduction
  bool atomic = false;         // partials added with atomics (deterministic = false only)
  int outputs_per_thread = 1;  // RW: register-tiled runs of dy along W with every tap (1: none)
  int vector_channels = 1;     // VC: vectors along W of the runs (channel-first)
  int rows_per_thread = 1;     // RH: rows of runs per thread
  bool staged = false;         // whole x planes in shared memory, two in turn (label ",staged")

  bool operator==(const WgradConfig& o) const;
  std::string label() const;
};

/// kvt_dwconv_mma (forward, backward_data; dwconv_mma.cuh): a block's 16 segments are tile_rows
/// output rows x 16 / tile_rows runs of 8 * segment_tiles outputs along W, of channels_per_block
/// channels, computed by `warps` warps.
struct MmaConfig {
  int channels_per_block = 8;  // CB: 8..64, a multiple of 8
  int tile_rows = 1;           // TR: 1, 2, 4, 8 or 16
  int segment_tiles = 1;       // NT: n-tiles of 8 outputs a segment
  int warps = 1;

  bool operator==(const MmaConfig& o) const;
  std::string label() const;
};

/// One variant of the family: exactly one kernel's config. Equality compares the kernel and its
/// fields; the accessors of another kernel's type throw kvtune::Error (a bug in the caller).
class Config {
 public:
  using Variant = std::variant<TiledConfig, DirectConfig, WgradConfig, MmaConfig>;  // in Kernel's order

  Config() = default;  // a tiled config with the type's defaults
  Config(const TiledConfig& c) : v_(c) {}   // NOLINT(google-explicit-constructor): configs are values
  Config(const DirectConfig& c) : v_(c) {}  // NOLINT(google-explicit-constructor)
  Config(const WgradConfig& c) : v_(c) {}   // NOLINT(google-explicit-constructor)
  Config(const MmaConfig& c) : v_(c) {}     // NOLINT(google-explicit-constructor)

  Kernel kernel() const { return static_cast<Kernel>(v_.index()); }
  const Variant& variant() const { return v_; }
  const TiledConfig& tiled() const;
  const DirectConfig& direct() const;
  const WgradConfig& wgrad() const;
  const MmaConfig& mma() const;
  TiledConfig& tiled();
  WgradConfig& wgrad();
  MmaConfig& mma();

  bool operator==(const Config& o) const { return v_ == o.v_; }
  bool operator!=(const Config& o) const { return !(v_ == o.v_); }
  std::string label() const;
  nlohmann::json to_json() const;
  /// Throws kvtune::Error naming the field on a malformed object (unknown kernel, a missing or
  /// non-integer field, a flag other than 0/1, a nonzero field of another kernel).
  static Config from_json(const nlohmann::json& j);

 private:
  Variant v_;
};

const char* to_string(Kernel kernel);

}  // namespace kvtune::dwconv
