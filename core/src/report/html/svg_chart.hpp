#pragma once
// Charts as inline SVG, written by polyhal (no chart library to vendor):
// line charts of metrics over steps, and stacked horizontal bars of memory.
// Each chart is a <figure class="chart" data-chart=KIND> holding one <svg>,
// its series marked class="series" with data-name, so a test can find
// what rendered in the DOM.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace polyhal::html {

struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  ///< (x, y); non-finite y breaks the line
  bool dashed = false;
};

struct LineChart {
  std::string title;
  std::string x_label = "step";
  std::string y_label;
  std::vector<LineSeries> series;
  bool log_y = false;  ///< log10 axis (needs positive values; others are skipped)
  int width = 540, height = 260;
};

/// The chart, or an empty string when no series has a point to draw.
std::string line_chart(const LineChart& chart);

struct BarSegment {
  std::string kind;  ///< the legend entry (same kind: same colour in every bar)
  double value = 0;
  std::string tooltip;
};

struct Bar {
  std::string label;
  std::vector<BarSegment> segments;
  std::optional<double> limit;  ///< a capacity, drawn as a red mark
};

struct BarChart {
  std::string title;
  std::string unit = "MiB";
  std::vector<Bar> bars;
  int width = 1000;
};

/// Horizontal stacked bars, one per row, with a shared legend.
std::string stacked_bars(const BarChart& chart);

/// "1.5k", "0.002", "3.2e-05": short tick labels.
std::string tick_label(double value);

}  // namespace polyhal::html
