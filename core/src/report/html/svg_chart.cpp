#include "report/html/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "report/html/html_page.hpp"

namespace polyhal::html {

namespace {

// A palette that stays apart for the colour-blind (Okabe-Ito, then greys).
constexpr const char* kColours[] = {"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9",
                                    "#d55e00", "#f0e442", "#000000", "#7f7f7f", "#bcbcbc"};
constexpr std::size_t kColourCount = sizeof(kColours) / sizeof(kColours[0]);

/// Ticks at 1, 2 or 5 x 10^k covering [low, high], about `count` of them.
std::vector<double> nice_ticks(double low, double high, int count) {
  if (!(high > low)) return {low};
  const double raw = (high - low) / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  // Ticks by index, never `t += step`: where low and high are adjacent
  // doubles (or huge), adding a tiny step stops moving t, and a loop on t
  // never ends (issue 53, item 1). A range no count of ticks can cover
  // gets its two ends.
  const double first = std::ceil(low / step), last = std::floor(high / step + 1e-9);
  if (!std::isfinite(step) || !(step > 0) || !std::isfinite(first) || !std::isfinite(last) ||
      last - first > 4.0 * count)
    return {low, high};
  std::vector<double> ticks;
  const int n = static_cast<int>(last - first);
  for (int k = 0; k <= n; ++k) {
    const double t = (first + k) * step;
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  if (ticks.empty()) return {low, high};
  return ticks;
}

}  // namespace

std::string tick_label(double value) {
  const double a = std::abs(value);
  if (a == 0) return "0";
  if (a >= 1e9) return fmt::format("{:g}G", value / 1e9);
  if (a >= 1e6) return fmt::format("{:g}M", value / 1e6);
  if (a >= 1e4) return fmt::format("{:g}k", value / 1e3);
  if (a < 1e-3) return fmt::format("{:.1e}", value);
  return fmt::format("{:.4g}", value);
}

namespace {

/// The legend, top right inside the plot (`right_edge`, `top`), on a
/// backing that keeps it legible.
std::string legend(const LineChart& chart, double right_edge, double top) {
  std::string out;
  std::size_t longest = 0;
  for (const auto& s : chart.series) longest = std::max(longest, s.name.size());
  out += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#ffffff\" "
      "fill-opacity=\"0.85\" stroke=\"#dde2e7\"/>",
      right_edge - 176, top + 3, 24.0 + 6.2 * static_cast<double>(longest),
      15.0 * static_cast<double>(chart.series.size()) + 6);
  double y = top + 14;
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"3\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
        right_edge - 170, y - 4, kColours[i % kColourCount], right_edge - 153, y,
        escape(chart.series[i].name));
    y += 15;
  }
  return out;
}

}  // namespace

std::string line_chart(const LineChart& chart) {
  const auto y_of = [&](double y) { return chart.log_y ? std::log10(y) : y; };
  const auto usable = [&](double y) { return std::isfinite(y) && (!chart.log_y || y > 0); };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  std::size_t points = 0;
  for (const auto& s : chart.series)
    for (const auto& [x, y] : s.points) {
      if (!usable(y) || !std::isfinite(x)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y_of(y));
      y1 = std::max(y1, y_of(y));
      ++points;
    }
  if (points == 0) return {};
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) {  // a flat line sits in the middle
    const double pad = std::abs(y0) > 0 ? std::abs(y0) * 0.1 : 1.0;
    y0 -= pad;
    y1 += pad;
  } else if (!chart.log_y) {
    const double pad = (y1 - y0) * 0.05;
    y0 = y0 >= 0 && y0 - pad < 0 ? 0 : y0 - pad;
    y1 += pad;
  }
  const double left = 62, right = 14, top = 12, bottom = 40;
  const double w = chart.width - left - right, h = chart.height - top - bottom;
  const auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * w; };
  const auto py = [&](double y) { return top + (1.0 - (y_of(y) - y0) / (y1 - y0)) * h; };
  const auto py_axis = [&](double axis) { return top + (1.0 - (axis - y0) / (y1 - y0)) * h; };

  std::string svg = fmt::format(
      "<figure class=\"chart\" data-chart=\"line\" data-series=\"{}\" data-points=\"{}\">"
      "<figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">",
      chart.series.size(), points, escape(chart.title), chart.width, chart.height, chart.width,
      chart.height, escape(chart.title));
  // Grid and ticks; a log axis ticks at 1, 2 and 5 x 10^k.
  std::vector<double> y_ticks = nice_ticks(y0, y1, 5);
  if (chart.log_y) {
    y_ticks.clear();
    for (double k = std::floor(y0); k <= std::ceil(y1); ++k)
      for (const double m : {1.0, 2.0, 5.0}) {
        const double t = k + std::log10(m);
        if (t >= y0 && t <= y1 && (m == 1.0 || y1 - y0 < 2.5)) y_ticks.push_back(t);
      }
  }
  for (const double t : y_ticks) {
    const double y = py_axis(t);
    svg += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e6e9ed\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
        left, left + w, y, y, left - 6, y + 4,
        escape(chart.log_y ? tick_label(std::pow(10.0, t)) : tick_label(t)));
  }
  for (const double t : nice_ticks(x0, x1, 6)) {
    const double x = px(t);
    svg += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c9d0d6\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
        x, x, top + h, top + h + 4, x, top + h + 16, escape(tick_label(t)));
  }
  svg += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
      "stroke=\"#9aa5af\"/>",
      left, top, w, h);
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>"
      "<text transform=\"translate(14 {:.1f}) rotate(-90)\" text-anchor=\"middle\">{}{}</text>",
      left + w / 2, static_cast<double>(chart.height) - 6, escape(chart.x_label), top + h / 2,
      escape(chart.y_label), chart.log_y ? " (log)" : "");
  // The series: a polyline per unbroken run of points, a dot for a lone one.
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const auto& s = chart.series[i];
    const char* colour = kColours[i % kColourCount];
    svg += fmt::format("<g class=\"series\" data-name=\"{}\"><title>{}</title>", escape(s.name),
                       escape(s.name));
    std::vector<std::pair<double, double>> run;
    const auto flush = [&] {
      if (run.size() == 1) {
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>",
                           run[0].first, run[0].second, colour);
      } else if (run.size() > 1) {
        svg += "<polyline fill=\"none\" stroke-width=\"1.6\" stroke=\"";
        svg += colour;
        svg += s.dashed ? "\" stroke-dasharray=\"5 3\" points=\"" : "\" points=\"";
        for (const auto& [x, y] : run) svg += fmt::format("{:.1f},{:.1f} ", x, y);
        svg += "\"/>";
      }
      run.clear();
    };
    for (const auto& [x, y] : s.points) {
      if (!usable(y) || !std::isfinite(x)) {
        flush();
        continue;
      }
      run.emplace_back(px(x), py(y));
    }
    flush();
    svg += "</g>";
  }
  if (chart.series.size() > 1) svg += legend(chart, left + w, top);
  return svg + "</svg></figure>";
}

std::string stacked_bars(const BarChart& chart) {
  std::vector<std::string> kinds;  // legend order: first seen
  double largest = 0;
  for (const auto& bar : chart.bars) {
    double total = 0;
    for (const auto& s : bar.segments) {
      total += std::max(0.0, s.value);
      if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) kinds.push_back(s.kind);
    }
    largest = std::max({largest, total, bar.limit.value_or(0.0)});
  }
  if (chart.bars.empty() || largest <= 0) return {};
  const double label_width = 230, right = 20, bar_height = 22, gap = 8, top = 8;
  const double axis_height = 28, legend_row = 18;
  const double w = chart.width - label_width - right;
  // The legend wraps to as many rows as its entries need.
  std::vector<std::pair<double, int>> legend;  // (x, row) per kind
  {
    double lx = label_width;
    int row = 0;
    for (const auto& kind : kinds) {
      const double item = 30 + 6.5 * static_cast<double>(kind.size());
      if (lx + item > label_width + w && lx > label_width) {
        lx = label_width;
        ++row;
      }
      legend.emplace_back(lx, row);
      lx += item;
    }
  }
  const double legend_height = legend_row * (legend.empty() ? 0 : legend.back().second + 1) + 6;
  const double height = top + static_cast<double>(chart.bars.size()) * (bar_height + gap) +
                        axis_height + legend_height;
  const auto ticks = nice_ticks(0, largest, 6);
  const double scale_max = std::max(largest, ticks.empty() ? largest : ticks.back());
  const auto px = [&](double v) { return label_width + v / scale_max * w; };
  std::string svg = fmt::format(
      "<figure class=\"chart\" data-chart=\"bars\" data-bars=\"{}\"><figcaption>{}</figcaption>"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} "
      "{:.0f}\" role=\"img\" aria-label=\"{}\">",
      chart.bars.size(), escape(chart.title), chart.width, height, chart.width, height,
      escape(chart.title));
  const double axis_y = top + static_cast<double>(chart.bars.size()) * (bar_height + gap);
  for (const double t : ticks) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e6e9ed\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
        px(t), px(t), top, axis_y, px(t), axis_y + 14, escape(tick_label(t)));
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                     label_width + w / 2, axis_y + 26, escape(chart.unit));
  double y = top;
  for (const auto& bar : chart.bars) {
    svg += fmt::format("<g class=\"series\" data-name=\"{}\">", escape(bar.label));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                       label_width - 8, y + bar_height / 2 + 4, escape(bar.label));
    double x = 0;
    for (const auto& s : bar.segments) {
      if (s.value <= 0) continue;
      const auto colour =
          static_cast<std::size_t>(std::find(kinds.begin(), kinds.end(), s.kind) - kinds.begin());
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\">"
          "<title>{}</title></rect>",
          px(x), y, px(x + s.value) - px(x), bar_height, kColours[colour % kColourCount],
          escape(s.tooltip.empty() ? fmt::format("{}: {:.1f} {}", s.kind, s.value, chart.unit)
                                   : s.tooltip));
      x += s.value;
    }
    if (bar.limit) {
      svg += fmt::format(
          "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c0392b\" "
          "stroke-width=\"2\"><title>capacity {:.1f} {}</title></line>",
          px(*bar.limit), px(*bar.limit), y - 3, y + bar_height + 3, *bar.limit, chart.unit);
    }
    svg += "</g>";
    y += bar_height + gap;
  }
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    const auto [lx, row] = legend[i];
    const double ly = axis_y + axis_height + 10 + legend_row * row;
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"11\" height=\"11\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
        lx, ly - 9, kColours[i % kColourCount], lx + 15, ly, escape(kinds[i]));
  }
  return svg + "</svg></figure>";
}

}  // namespace polyhal::html
