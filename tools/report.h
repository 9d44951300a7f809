#pragma once
// `kvtune-cache report`: one self-contained HTML page (inline SVG and CSS, no script, no network)
// per cache: for each device a roofline chart (each tuned problem's attained FLOP/s against the
// measured copy-bandwidth and FMA ceilings), attained bandwidth per problem against the copy
// bandwidth, the speedup of the winner over the seed design and over the heuristic, the
// distribution of every problem's variant times with the winner, the seed and the heuristic
// marked, and the tables behind each chart.

#include <string>

#include "cache/store.h"
#include "tools/cache_view.h"

namespace kvtune::tools {

struct ReportOptions {
  std::string title = "kvtune tuning report";
  std::string source;      ///< the cache file, shown in the header
  std::string op;          ///< only this operator ("" = all)
  std::string device;      ///< only devices matching this filter ("" = all)
  bool include_stale = true;
};

std::string render_report(cache::Store& store, const CacheView& view, const ReportOptions& options);

}  // namespace kvtune::tools
