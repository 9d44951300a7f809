#include "tools/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "kvtune/kvtune.h"
#include "core/hash.h"
#include "tools/common.h"
#include "tools/ops.h"

namespace kvtune::tools {
namespace {

// Colours: winner green, seed orange, heuristic blue, other variants grey.
constexpr const char* kWinner = "#1b9e45";
constexpr const char* kSeed = "#e8730c";
constexpr const char* kHeuristic = "#2166ac";
constexpr const char* kOther = "#9a9a9a";
constexpr const char* kCeiling = "#b2182b";

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v, int decimals = 1) { return fmt::format("{:.{}f}", v, decimals); }

// "1.5 us", "2.30 ms"
std::string time_text(double ms) {
  if (ms < 0) return "-";
  if (ms < 1) return fmt::format("{:.2f} µs", ms * 1000);
  return fmt::format("{:.3f} ms", ms);
}

std::string speedup_text(double x) { return x > 0 ? fmt::format("{:.2f}×", x) : "-"; }

// Everything the charts and tables need about one winner.
struct Row {
  const CacheEntry* entry = nullptr;
  std::string describe;
  std::optional<KeyInfo> info;
  std::vector<cache::Trial> trials;  // newest run
  double winner_ms = -1;
  double winner_gbps = 0;
  double seed_ms = -1;
  double heuristic_ms = -1;
  double seed_gbps = 0;
  int ok = 0;
  int failed = 0;
  double flops_rate() const {  // GFLOP/s
    return info && winner_ms > 0 ? info->model_flops / (winner_ms * 1e-3) / 1e9 : 0;
  }
  double intensity() const {  // FLOP per byte
    return info && info->model_bytes > 0 ? info->model_flops / info->model_bytes : 0;
  }
};

Row make_row(cache::Store& store, const CacheEntry& e) {
  Row r;
  r.entry = &e;
  const cache::Winner& w = e.winner;
  if (const OpHandler* handler = find_handler(w.op))
    r.info = handler->key_info(w.problem_key, e.device ? e.device->cc_major : 0, e.device ? e.device->name : std::string());
  r.describe = r.info ? r.info->describe : w.problem_key;
  r.trials = latest_run(store.trials(w.problem_key, w.device_id, w.template_hash));
  r.winner_ms = w.median_ms;
  r.winner_gbps = w.gbps;
  for (const auto& t : r.trials) {
    if (t.status != "ok") {
      ++r.failed;
      continue;
    }
    ++r.ok;
    if (r.info && t.label == r.info->seed_label) {
      r.seed_ms = t.median_ms;
      r.seed_gbps = t.gbps;
    }
    if (r.info && t.label == r.info->heuristic_label) r.heuristic_ms = t.median_ms;
    if (r.winner_ms <= 0 && t.label == w.label) {
      r.winner_ms = t.median_ms;
      r.winner_gbps = t.gbps;
    }
  }
  return r;
}

// --- SVG helpers --------------------------------------------------------------------------------

struct LogAxis {
  double lo, hi;  // decades (log10)
  double a, b;    // pixel range
  double operator()(double v) const { return a + (std::log10(v) - lo) / (hi - lo) * (b - a); }
};

LogAxis log_axis(double min_value, double max_value, double a, double b) {
  double lo = std::floor(std::log10(std::max(min_value, 1e-30)));
  double hi = std::ceil(std::log10(std::max(max_value, 1e-30)));
  if (hi <= lo) hi = lo + 1;
  return LogAxis{lo, hi, a, b};
}

std::string decade_label(int decade) {
  const double v = std::pow(10.0, decade);
  if (decade >= 0 && decade < 7) return fmt::format("{:.0f}", v);
  if (decade < 0 && decade > -4) return fmt::format("{:.{}f}", v, -decade);
  return fmt::format("1e{}", decade);
}

std::string svg_open(const char* css_class, int width, int height, const std::string& label) {
  return fmt::format(
      "<svg class=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"{}\">\n<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n",
      css_class, width, height, width, height, esc(label), width, height);
}

std::string text(double x, double y, const std::string& s, const char* anchor = "start", int size = 11,
                 const char* fill = "#222", const char* extra = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\" fill=\"{}\"{}>{}</text>\n", x,
                     y, size, anchor, fill, extra, esc(s));
}

std::string line(double x1, double y1, double x2, double y2, const char* stroke, double width = 1,
                 const char* dash = "") {
  return fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n", x1, y1,
      x2, y2, stroke, width, *dash ? fmt::format(" stroke-dasharray=\"{}\"", dash) : "");
}

// Deterministic jitter in [-1, 1] for dot plots.
double jitter(const std::string& seed) {
  return double(detail::hash64(seed) % 2001) / 1000.0 - 1.0;
}

// --- charts ---------------------------------------------------------------------------------------

std::string roofline_chart(const std::vector<Row>& rows, const cache::Ceilings* ceilings) {
  const int W = 700, H = 420, left = 78, right = 24, top = 36, bottom = 56;
  const double copy = ceilings ? ceilings->copy_gbps : 0, fma = ceilings ? ceilings->fma_gflops : 0;
  double x_min = 1e30, x_max = 0, y_min = 1e30, y_max = 0;
  for (const auto& r : rows) {
    if (r.flops_rate() <= 0 || r.intensity() <= 0) continue;
    x_min = std::min(x_min, r.intensity());
    x_max = std::max(x_max, r.intensity());
    y_min = std::min(y_min, r.flops_rate());
    y_max = std::max(y_max, r.flops_rate());
    if (r.seed_ms > 0) y_min = std::min(y_min, r.info->model_flops / (r.seed_ms * 1e-3) / 1e9);
  }
  const bool any = x_max > 0;
  if (!any) x_min = 0.1, x_max = 10, y_min = 1, y_max = 1000;
  if (copy > 0 && fma > 0) x_max = std::max(x_max, fma / copy * 2);
  if (fma > 0) y_max = std::max(y_max, fma * 1.5);
  if (copy > 0) y_max = std::max(y_max, std::min(fma > 0 ? fma : 1e30, copy * x_max));
  const LogAxis x = log_axis(x_min / 2, x_max * 2, left, W - right);
  const LogAxis y = log_axis(y_min / 2, y_max * 1.5, H - bottom, top);

  std::string s = svg_open("roofline", W, H, "roofline chart");
  s += text(W / 2.0, 20, "Roofline: attained GFLOP/s against arithmetic intensity", "middle", 13, "#222",
            " font-weight=\"bold\"");
  // Grid and axes.
  for (int d = static_cast<int>(x.lo); d <= static_cast<int>(x.hi); ++d) {
    const double px = x(std::pow(10.0, d));
    s += line(px, top, px, H - bottom, "#e6e6e6");
    s += text(px, H - bottom + 16, decade_label(d), "middle", 10, "#555");
  }
  for (int d = static_cast<int>(y.lo); d <= static_cast<int>(y.hi); ++d) {
    const double py = y(std::pow(10.0, d));
    s += line(left, py, W - right, py, "#e6e6e6");
    s += text(left - 6, py + 3, decade_label(d), "end", 10, "#555");
  }
  s += line(left, H - bottom, W - right, H - bottom, "#444");
  s += line(left, top, left, H - bottom, "#444");
  s += text((left + W - right) / 2.0, H - 14, "arithmetic intensity (FLOP / byte, model)", "middle", 11);
  s += fmt::format("<text x=\"16\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#222\" "
                   "transform=\"rotate(-90 16 {:.1f})\">attained GFLOP/s</text>\n",
                   (top + H - bottom) / 2.0, (top + H - bottom) / 2.0);

  // Ceilings: memory roof (copy bandwidth x intensity) up to the FMA roof.
  const double x_lo = std::pow(10.0, x.lo), x_hi = std::pow(10.0, x.hi);
  if (copy > 0) {
    const double ridge = fma > 0 ? fma / copy : x_hi;
    const double end = std::min(ridge, x_hi);
    s += fmt::format("<path class=\"ceiling copy\" d=\"M {:.1f} {:.1f} L {:.1f} {:.1f}\" stroke=\"{}\" "
                     "stroke-width=\"2\" fill=\"none\"/>\n",
                     x(x_lo), y(std::max(copy * x_lo, std::pow(10.0, y.lo))), x(end), y(copy * end), kCeiling);
    s += text(x(x_lo) + 8, y(copy * x_lo * 1.6) - 6, fmt::format("copy {:.0f} GB/s", copy), "start", 10, kCeiling);
  }
  if (fma > 0) {
    const double start = copy > 0 ? std::max(fma / copy, x_lo) : x_lo;
    s += fmt::format("<path class=\"ceiling fma\" d=\"M {:.1f} {:.1f} L {:.1f} {:.1f}\" stroke=\"{}\" "
                     "stroke-width=\"2\" fill=\"none\"/>\n",
                     x(start), y(fma), x(x_hi), y(fma), kCeiling);
    s += text(x(x_hi) - 4, y(fma) - 6, fmt::format("f32 FMA {:.0f} GFLOP/s", fma), "end", 10, kCeiling);
  }
  if (copy <= 0 || fma <= 0)
    s += text(W / 2.0, top + 18,
              copy <= 0 && fma <= 0 ? "ceiling not measured" : (copy <= 0 ? "copy ceiling not measured"
                                                                             : "FMA ceiling not measured"),
              "middle", 12, kCeiling, " class=\"no-ceiling\"");
  if (!any) s += text(W / 2.0, (top + H - bottom) / 2.0, "no timed problems", "middle", 12, "#777");

  // Points: seed (hollow), winner (filled), joined by a thin line.
  for (const auto& r : rows) {
    if (r.flops_rate() <= 0 || r.intensity() <= 0) continue;
    const double px = x(r.intensity()), py = y(r.flops_rate());
    if (r.seed_ms > 0) {
      const double sy = y(r.info->model_flops / (r.seed_ms * 1e-3) / 1e9);
      s += line(px, sy, px, py, "#bbbbbb");
      s += fmt::format("<circle class=\"seed\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"1.5\"><title>{} seed {}</title></circle>\n",
                       px, sy, kSeed, esc(r.describe), esc(time_text(r.seed_ms)));
    }
    s += fmt::format("<circle class=\"point winner\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\" "
                     "fill-opacity=\"0.8\"><title>{}: {} ({:.0f} GB/s, {:.0f} GFLOP/s)</title></circle>\n",
                     px, py, kWinner, esc(r.describe), esc(time_text(r.winner_ms)), r.winner_gbps, r.flops_rate());
  }
  // Legend.
  const double lx = left + 12, ly = top + 34;
  s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\"/>\n", lx, ly, kWinner);
  s += text(lx + 10, ly + 4, "winner", "start", 10);
  s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                   lx + 70, ly, kSeed);
  s += text(lx + 80, ly + 4, "seed design", "start", 10);
  return s + "</svg>\n";
}

std::string bandwidth_chart(const std::vector<Row>& rows, const cache::Ceilings* ceilings) {
  const double copy = ceilings ? ceilings->copy_gbps : 0;
  const int W = 700, label_w = 280, right = 60, top = 40, row_h = 22;
  const int H = top + row_h * static_cast<int>(rows.size()) + 30;
  double scale_max = copy;
  for (const auto& r : rows) scale_max = std::max({scale_max, r.winner_gbps, r.seed_gbps});
  if (scale_max <= 0) scale_max = 1;
  scale_max *= 1.05;
  const auto px = [&](double v) { return label_w + v / scale_max * (W - label_w - right); };
  std::string s = svg_open("bandwidth", W, H, "attained bandwidth per problem");
  s += text(W / 2.0, 20, "Attained bandwidth (model bytes / time) per problem", "middle", 13, "#222",
            " font-weight=\"bold\"");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const double y0 = top + row_h * static_cast<double>(i);
    s += text(label_w - 8, y0 + 15, r.describe, "end", 10);
    s += fmt::format("<rect class=\"bar winner\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"14\" fill=\"{}\">"
                     "<title>{}: {:.0f} GB/s</title></rect>\n",
                     label_w, y0 + 4, std::max(0.0, px(r.winner_gbps) - label_w), kWinner, esc(r.describe),
                     r.winner_gbps);
    const std::string value = copy > 0 ? fmt::format("{:.0f} ({:.0f}%)", r.winner_gbps, 100 * r.winner_gbps / copy)
                                       : fmt::format("{:.0f}", r.winner_gbps);
    // Near the top of the scale the value goes inside its bar, clear of the copy line.
    if (r.winner_gbps > 0.75 * scale_max)
      s += text(px(r.winner_gbps) - 4, y0 + 15, value, "end", 9, "#ffffff");
    else
      s += text(px(r.winner_gbps) + 4, y0 + 15, value, "start", 9, "#333");
    if (r.seed_gbps > 0)
      s += fmt::format("<rect class=\"seed\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"3\" height=\"20\" fill=\"{}\">"
                       "<title>seed {:.0f} GB/s</title></rect>\n",
                       px(r.seed_gbps) - 1.5, y0 + 1, kSeed, r.seed_gbps);
  }
  const double bottom = top + row_h * static_cast<double>(rows.size());
  s += line(label_w, top, label_w, bottom, "#444");
  if (copy > 0) {
    s += fmt::format("<line class=\"ceiling copy\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                     "stroke-width=\"2\" stroke-dasharray=\"5,3\"/>\n",
                     px(copy), top - 6, px(copy), bottom, kCeiling);
    s += text(px(copy), bottom + 14, fmt::format("copy {:.0f} GB/s", copy), "middle", 10, kCeiling);
  } else {
    s += text(W - right, bottom + 14, "ceiling not measured", "end", 10, kCeiling, " class=\"no-ceiling\"");
  }
  s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"10\" height=\"8\" fill=\"{}\"/>\n", label_w, bottom + 7,
                   kWinner);
  s += text(label_w + 14, bottom + 14, "winner", "start", 10);
  s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"3\" height=\"10\" fill=\"{}\"/>\n", label_w + 64, bottom + 6,
                   kSeed);
  s += text(label_w + 72, bottom + 14, "seed design", "start", 10);
  return s + "</svg>\n";
}

std::string speedup_chart(const std::vector<Row>& rows) {
  const int W = 700, label_w = 280, right = 60, top = 44, row_h = 26;
  const int H = top + row_h * static_cast<int>(rows.size()) + 30;
  double scale_max = 1.0;
  for (const auto& r : rows) {
    if (r.seed_ms > 0 && r.winner_ms > 0) scale_max = std::max(scale_max, r.seed_ms / r.winner_ms);
    if (r.heuristic_ms > 0 && r.winner_ms > 0) scale_max = std::max(scale_max, r.heuristic_ms / r.winner_ms);
  }
  scale_max *= 1.1;
  const auto px = [&](double v) { return label_w + v / scale_max * (W - label_w - right); };
  std::string s = svg_open("speedup", W, H, "speedup of the winner");
  s += text(W / 2.0, 20, "Speedup of the winner over the seed design and over the heuristic", "middle", 13, "#222",
            " font-weight=\"bold\"");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const double y0 = top + row_h * static_cast<double>(i);
    s += text(label_w - 8, y0 + 16, r.describe, "end", 10);
    const auto bar = [&](double value, double dy, const char* fill, const char* what) {
      if (value <= 0) {
        s += text(label_w + 4, y0 + dy + 8, fmt::format("{} not timed", what), "start", 8, "#888");
        return;
      }
      s += fmt::format("<rect class=\"bar {}\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"9\" fill=\"{}\">"
                       "<title>{} {:.2f}x</title></rect>\n",
                       what, label_w, y0 + dy, px(value) - label_w, fill, what, value);
      s += text(px(value) + 4, y0 + dy + 8, speedup_text(value), "start", 9, "#333");
    };
    bar(r.seed_ms > 0 && r.winner_ms > 0 ? r.seed_ms / r.winner_ms : 0, 3, kSeed, "seed");
    bar(r.heuristic_ms > 0 && r.winner_ms > 0 ? r.heuristic_ms / r.winner_ms : 0, 13, kHeuristic, "heuristic");
  }
  const double bottom = top + row_h * static_cast<double>(rows.size());
  s += line(label_w, top, label_w, bottom, "#444");
  s += line(px(1), top - 4, px(1), bottom, "#444", 1, "3,3");
  s += text(px(1), bottom + 14, "1× (no gain)", "middle", 10);
  s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"10\" height=\"8\" fill=\"{}\"/>\n", label_w, 26.0, kSeed);
  s += text(label_w + 14, 33, "over the seed design", "start", 10);
  s += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"10\" height=\"8\" fill=\"{}\"/>\n", label_w + 140, 26.0,
                   kHeuristic);
  s += text(label_w + 154, 33, "over the heuristic", "start", 10);
  return s + "</svg>\n";
}

std::string distribution_chart(const Row& r) {
  const int W = 700, H = 92, left = 20, right = 20;
  const double mid = 40;
  double lo = 1e30, hi = 0;
  for (const auto& t : r.trials)
    if (t.status == "ok" && t.median_ms > 0) lo = std::min(lo, t.median_ms), hi = std::max(hi, t.median_ms);
  std::string s = svg_open("distribution", W, H, "variant times of " + r.describe);
  if (hi <= 0) {
    s += text(W / 2.0, 40, "no timed variants", "middle", 11, "#777");
    return s + "</svg>\n";
  }
  // Microseconds on a log axis fitted to the data (not to whole decades: the spread is often small).
  const LogAxis x{std::log10(lo * 1000 / 1.08), std::log10(hi * 1000 * 1.08), double(left), double(W - right)};
  for (int d = static_cast<int>(std::floor(x.lo)); d <= static_cast<int>(std::ceil(x.hi)); ++d) {
    for (int m = 1; m < 10; ++m) {
      const double v = m * std::pow(10.0, d);
      if (v < std::pow(10.0, x.lo) || v > std::pow(10.0, x.hi)) continue;
      const double px = x(v);
      s += line(px, 14, px, 66, m == 1 ? "#d0d0d0" : "#f0f0f0");
      if (m == 1 || m == 2 || m == 5 || x.hi - x.lo < 0.5)
        s += text(px, 80, fmt::format("{:g} µs", v), "middle", 9, "#666");
    }
  }
  std::string marks;
  for (const auto& t : r.trials) {
    if (t.status != "ok" || t.median_ms <= 0) continue;
    const double px = x(t.median_ms * 1000), py = mid + 18 * jitter(t.label);
    const bool winner = t.label == r.entry->winner.label;
    const bool seed = r.info && t.label == r.info->seed_label;
    const bool heuristic = r.info && t.label == r.info->heuristic_label;
    const std::string title = fmt::format("<title>{} {}</title>", esc(t.label), esc(time_text(t.median_ms)));
    if (!winner && !seed && !heuristic) {
      s += fmt::format("<circle class=\"variant\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\" "
                       "fill-opacity=\"0.55\">{}</circle>\n",
                       px, py, kOther, title);
      continue;
    }
    // Marked variants go on the centre line, drawn last so that they stay visible.
    if (heuristic)
      marks += fmt::format("<rect class=\"heuristic\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"9\" height=\"9\" fill=\"none\" "
                           "stroke=\"{}\" stroke-width=\"2\">{}</rect>\n",
                           px - 4.5, mid - 4.5, kHeuristic, title);
    if (seed)
      marks += fmt::format("<path class=\"seed\" d=\"M {:.1f} {:.1f} l 6 10 l -12 0 z\" fill=\"none\" stroke=\"{}\" "
                           "stroke-width=\"2\">{}</path>\n",
                           px, mid - 6, kSeed, title);
    if (winner)
      marks += fmt::format("<path class=\"winner\" d=\"M {:.1f} {:.1f} l 6 6 l -6 6 l -6 -6 z\" fill=\"{}\">{}</path>\n",
                           px, mid - 6, kWinner, title);
  }
  s += marks;
  s += text(left, 10, fmt::format("{} timed, {} failed", r.ok, r.failed), "start", 9, "#555");
  return s + "</svg>\n";
}

// --- page ------------------------------------------------------------------------------------------

constexpr const char* kStyle = R"css(
body { font-family: "DejaVu Sans", Arial, Helvetica, sans-serif; color: #222; margin: 24px; max-width: 1500px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 36px; border-bottom: 2px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin-top: 24px; }
p.meta { color: #555; font-size: 13px; margin-top: 0; }
table { border-collapse: collapse; font-size: 11px; margin: 8px 0 16px 0; }
th, td { border: 1px solid #d4d4d4; padding: 2px 5px; text-align: left; white-space: nowrap; }
td.message { white-space: normal; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.winner td { background: #e7f5ea; }
tr.stale td { color: #999; }
.charts, .problems { display: flex; flex-wrap: wrap; gap: 0 16px; }
.problem { width: 704px; }
.problem h3 { margin: 12px 0 2px 0; }
.problem p.meta { font-size: 11px; margin: 0; }
svg { border: 1px solid #e0e0e0; margin: 6px 0; }
details { margin: 4px 0 10px 0; }
summary { cursor: pointer; font-size: 12px; color: #444; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: middle; }
)css";

std::string td(const std::string& s, bool numeric = false) {
  return numeric ? "<td class=\"num\">" + esc(s) + "</td>" : "<td>" + esc(s) + "</td>";
}

std::string device_section(cache::Store& store, const cache::DeviceRow* device, const std::string& device_id,
                           const std::vector<const CacheEntry*>& entries, const cache::Ceilings* ceilings) {
  std::vector<Row> rows;
  for (const auto* e : entries) rows.push_back(make_row(store, *e));
  std::string h;
  const std::string name = device ? device->name : "unknown device";
  h += fmt::format("<section class=\"device\" id=\"device-{}\">\n<h2>{} <small>({})</small></h2>\n", esc(device_id),
                   esc(name), esc(device_id));
  if (device)
    h += fmt::format("<p class=\"meta\">compute capability {}.{}, {} SMs, {} L2, {} memory, driver {}, NVRTC {}, "
                     "kvtune {}</p>\n",
                     device->cc_major, device->cc_minor, device->sm_count, format_bytes(double(device->l2_bytes)),
                     format_bytes(double(device->memory_bytes)), device->driver_version, device->nvrtc_version,
                     esc(device->kvtune_version));
  if (ceilings && (ceilings->copy_gbps > 0 || ceilings->fma_gflops > 0))
    h += fmt::format("<p class=\"meta\">Measured ceilings: copy {} GB/s (1 GiB device-to-device, read + write), "
                     "f32 FMA {} GFLOP/s, {} UTC</p>\n",
                     ceilings->copy_gbps > 0 ? num(ceilings->copy_gbps, 0) : "not measured",
                     ceilings->fma_gflops > 0 ? num(ceilings->fma_gflops, 0) : "not measured",
                     format_time(ceilings->measured_at));
  else
    h += "<p class=\"meta\">Ceilings: not measured on this device (kvtune-tune measures them when it tunes).</p>\n";

  h += "<div class=\"charts\">\n" + roofline_chart(rows, ceilings) + bandwidth_chart(rows, ceilings) +
       speedup_chart(rows) + "</div>\n";

  // The table behind the charts.
  const double copy = ceilings ? ceilings->copy_gbps : 0;
  h += "<h3>Winners</h3>\n<table class=\"winners\">\n<tr><th>id</th><th>problem</th><th>winner</th><th>time</th>"
       "<th>GB/s</th><th>% of copy</th><th>GFLOP/s</th><th>FLOP/B</th><th>seed time</th><th>× seed</th>"
       "<th>heuristic time</th><th>× heuristic</th><th>variants ok / failed</th><th>origin</th>"
       "<th>stale</th></tr>\n";
  for (const auto& r : rows) {
    const auto& w = r.entry->winner;
    h += fmt::format("<tr class=\"{}\">", r.entry->stale() ? "stale" : "fresh");
    h += td(r.entry->id) + td(r.describe) + td(w.label) + td(time_text(r.winner_ms), true) +
         td(r.winner_gbps > 0 ? num(r.winner_gbps, 0) : "-", true) +
         td(copy > 0 && r.winner_gbps > 0 ? num(100 * r.winner_gbps / copy) : "-", true) +
         td(r.flops_rate() > 0 ? num(r.flops_rate(), 0) : "-", true) +
         td(r.intensity() > 0 ? num(r.intensity(), 2) : "-", true) + td(time_text(r.seed_ms), true) +
         td(r.seed_ms > 0 && r.winner_ms > 0 ? speedup_text(r.seed_ms / r.winner_ms) : "-", true) +
         td(time_text(r.heuristic_ms), true) +
         td(r.heuristic_ms > 0 && r.winner_ms > 0 ? speedup_text(r.heuristic_ms / r.winner_ms) : "-", true) +
         td(fmt::format("{} / {}", r.ok, r.failed), true) + td(w.origin) +
         td(r.entry->stale() ? "yes" : "no");
    h += "</tr>\n";
  }
  h += "</table>\n";

  h += "<h3>Variant times per problem</h3>\n<p class=\"legend\">"
       "<span><span class=\"swatch\" style=\"background:#1b9e45\"></span>winner</span>"
       "<span><span class=\"swatch\" style=\"border:2px solid #e8730c\"></span>seed design</span>"
       "<span><span class=\"swatch\" style=\"border:2px solid #2166ac\"></span>heuristic</span>"
       "<span><span class=\"swatch\" style=\"background:#9a9a9a\"></span>other variants</span></p>\n"
       "<div class=\"problems\">\n";
  for (const auto& r : rows) {
    const auto& w = r.entry->winner;
    h += fmt::format("<div class=\"problem\" id=\"entry-{}\">\n<h3>{} <small>[{}]</small></h3>\n", esc(r.entry->id),
                     esc(r.describe), esc(r.entry->id));
    h += fmt::format("<p class=\"meta\">key {}; winner {} at {}; seed {}; heuristic {}</p>\n", esc(w.problem_key),
                     esc(w.label), esc(time_text(r.winner_ms)), esc(r.info ? r.info->seed_label : "-"),
                     esc(r.info ? r.info->heuristic_label : "-"));
    h += distribution_chart(r);
    h += fmt::format("<details><summary>all {} variants of this run</summary>\n<table class=\"trials\">\n"
                     "<tr><th>variant</th><th>status</th><th>time</th><th>GB/s</th><th>spread</th><th>role</th>"
                     "<th>message</th></tr>\n",
                     r.trials.size());
    std::vector<cache::Trial> sorted = r.trials;
    std::stable_sort(sorted.begin(), sorted.end(), [](const cache::Trial& a, const cache::Trial& b) {
      const double ta = a.status == "ok" ? a.median_ms : 1e30, tb = b.status == "ok" ? b.median_ms : 1e30;
      return ta < tb;
    });
    for (const auto& t : sorted) {
      std::string role;
      if (t.label == w.label) role = "winner";
      if (r.info && t.label == r.info->seed_label) role += role.empty() ? "seed" : ", seed";
      if (r.info && t.label == r.info->heuristic_label) role += role.empty() ? "heuristic" : ", heuristic";
      h += fmt::format("<tr{}>", t.label == w.label ? " class=\"winner\"" : "");
      h += td(t.label) + td(t.status) + td(time_text(t.median_ms), true) +
           td(t.gbps > 0 ? num(t.gbps, 0) : "-", true) +
           td(t.status == "ok" ? fmt::format("{:.1f}%", 100 * t.spread) : "-", true) + td(role) +
           "<td class=\"message\">" + esc(t.message.substr(0, 160)) + "</td>";
      h += "</tr>\n";
    }
    h += "</table></details>\n</div>\n";
  }
  return h + "</div>\n</section>\n";
}

}  // namespace

std::string render_report(cache::Store& store, const CacheView& view, const ReportOptions& options) {
  // Entries per device, in the view's order.
  std::vector<std::string> device_order;
  std::map<std::string, std::vector<const CacheEntry*>> by_device;
  int shown = 0;
  for (const auto& e : view.entries) {
    if (!options.op.empty() && e.winner.op != options.op) continue;
    if (!device_matches(e.winner.device_id, e.device, options.device)) continue;
    if (!options.include_stale && e.stale()) continue;
    if (by_device.find(e.winner.device_id) == by_device.end()) device_order.push_back(e.winner.device_id);
    by_device[e.winner.device_id].push_back(&e);
    ++shown;
  }
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", esc(options.title), kStyle);
  h += fmt::format("<h1>{}</h1>\n<p class=\"meta\">{} entries on {} device{} from {}; kvtune {}; generated {} UTC. "
                   "Times are medians of the stored trials (CUDA events, inputs rotated beyond L2); bandwidth is the "
                   "operator's model bytes (each input read once, each output written once) over time.</p>\n",
                   esc(options.title), shown, device_order.size(), device_order.size() == 1 ? "" : "s",
                   esc(options.source.empty() ? "an in-memory cache" : options.source), kvtune::version(),
                   format_time(unix_now()));
  if (device_order.empty()) h += "<p>The cache holds no tuned problems.</p>\n";
  // Summary of devices.
  if (!device_order.empty()) {
    h += "<table class=\"devices\">\n<tr><th>device</th><th>id</th><th>problems</th><th>copy GB/s</th>"
         "<th>FMA GFLOP/s</th></tr>\n";
    for (const auto& id : device_order) {
      const auto& first = *by_device[id].front();
      const auto it = view.ceilings.find(id);
      const cache::Ceilings* c = it == view.ceilings.end() ? nullptr : &it->second;
      h += "<tr>" + td(first.device ? first.device->name : "unknown") +
           fmt::format("<td><a href=\"#device-{}\">{}</a></td>", esc(id), esc(id)) +
           td(std::to_string(by_device[id].size()), true) +
           td(c && c->copy_gbps > 0 ? num(c->copy_gbps, 0) : "not measured", true) +
           td(c && c->fma_gflops > 0 ? num(c->fma_gflops, 0) : "not measured", true) + "</tr>\n";
    }
    h += "</table>\n";
  }
  for (const auto& id : device_order) {
    const auto& entries = by_device[id];
    const auto it = view.ceilings.find(id);
    h += device_section(store, entries.front()->device ? &*entries.front()->device : nullptr, id, entries,
                        it == view.ceilings.end() ? nullptr : &it->second);
  }
  return h + "</body>\n</html>\n";
}

}  // namespace kvtune::tools
