// polyhal report: a run's metrics as one page of charts.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "polyhal/app/html_reports.hpp"
#include "polyhal/app/json_input.hpp"
#include "polyhal/error.hpp"
#include "report/html/html_page.hpp"
#include "report/html/svg_chart.hpp"
#include "util/regular_file.hpp"

namespace polyhal {

namespace {

constexpr std::uintmax_t kMaxMetricsBytes = 256ull << 20;
constexpr std::size_t kMaxLineBytes = 16u << 20;
constexpr std::size_t kMaxPoints = 2000;
// A page of thousands of charts helps nobody and takes minutes to draw.
constexpr std::size_t kMaxEvaluationCharts = 200;

// Record keys that are bookkeeping, not a metric to chart.
const std::set<std::string> kNotMetrics = {"event",   "time",  "step",         "epoch",
                                           "seconds", "rows",  "sequences",    "masked_tokens",
                                           "skipped", "total", "HasAns_total", "NoAns_total"};

/// `record[key]` when it is a string, else `otherwise` (a hostile file may
/// hold any type anywhere).
std::string string_field(const nlohmann::json& record, const char* key,
                         const std::string& otherwise = "") {
  const auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

double number_field(const nlohmann::json& record, const char* key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : NAN;
}

RunMetrics read_one(const std::filesystem::path& file) {
  detail::refuse_special_or_oversized_file(file, kMaxMetricsBytes, "metrics file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the metrics file", file.string()));
  RunMetrics run;
  run.file = file;
  run.label = file.stem().string();
  std::string line;
  std::int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.size() > kMaxLineBytes)
      throw ConfigError(fmt::format("{}:{}: a line of {} bytes, more than a metrics record has",
                                    file.string(), number, line.size()));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json record = parse_json_input_or_discarded(line);
    if (record.is_discarded() || !record.is_object())
      throw ConfigError(fmt::format(
          "{}:{}: not a JSON object: a metrics file (polyhal run --metrics-out) has one per line",
          file.string(), number));
    const std::string event = string_field(record, "event");
    if (event == "step")
      run.steps.push_back(std::move(record));
    else if (event == "summary")
      run.summary = std::move(record);
    else if (record.contains("step") && record["step"].is_number())
      run.evaluations.push_back(std::move(record));
  }
  return run;
}

const nlohmann::json& record_of(const nlohmann::json& record) {
  return record;
}
const nlohmann::json& record_of(const nlohmann::json* record) {
  return *record;
}

/// (step, value) of `key` over `records` (records or pointers to them);
/// absent or non-numeric values skipped.
template <class Records>
std::vector<std::pair<double, double>> curve(const Records& records, const std::string& key) {
  std::vector<std::pair<double, double>> points;
  for (const auto& element : records) {
    const nlohmann::json& r = record_of(element);
    const auto it = r.find(key);
    if (it == r.end() || !r.contains("step") || !r["step"].is_number()) continue;
    const double step = r["step"].get<double>();
    if (it->is_number())
      points.emplace_back(step, it->get<double>());
    else if (it->is_null())  // a non-finite number is written as null
      points.emplace_back(step, std::nan(""));
  }
  if (points.size() <= kMaxPoints) return points;
  std::vector<std::pair<double, double>> thinned;
  const double stride = static_cast<double>(points.size() - 1) / (kMaxPoints - 1);
  for (std::size_t i = 0; i < kMaxPoints; ++i)
    thinned.push_back(
        points[static_cast<std::size_t>(std::llround(static_cast<double>(i) * stride))]);
  return thinned;
}

/// Whether a positive curve spans enough decades for a log axis.
bool wants_log(const std::vector<html::LineSeries>& series) {
  double low = INFINITY, high = 0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      if (y <= 0) return false;
      low = std::min(low, y);
      high = std::max(high, y);
    }
  return high > 0 && high / low > 50;
}

std::string text_of(const nlohmann::json& summary, const char* key) {
  if (!summary.is_object() || !summary.contains(key)) return "";
  const auto& v = summary[key];
  if (v.is_null()) return "";
  if (v.is_string()) return html::escape(v.get<std::string>());
  if (v.is_number_float()) return fmt::format("{:.4g}", v.get<double>());
  return html::escape(json_excerpt(v, 200));
}

}  // namespace

std::vector<RunMetrics> read_run_metrics(const std::filesystem::path& file_or_directory) {
  std::error_code error;
  if (std::filesystem::is_directory(file_or_directory, error)) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(file_or_directory))
      if (entry.path().extension() == ".jsonl" && entry.is_regular_file())
        files.push_back(entry.path());
    if (files.empty())
      throw ConfigError(fmt::format("{}: no metrics (*.jsonl) files in this directory",
                                    file_or_directory.string()));
    std::sort(files.begin(), files.end());
    std::vector<RunMetrics> runs;
    for (const auto& f : files) runs.push_back(read_one(f));
    return runs;
  }
  if (!std::filesystem::exists(file_or_directory, error))
    throw ConfigError(
        fmt::format("{}: no such metrics file or directory (write one with polyhal "
                    "run --metrics-out FILE)",
                    file_or_directory.string()));
  return {read_one(file_or_directory)};
}

namespace {

/// The step curves: one chart per quantity, a series per run (and, for one
/// run, the pre-training losses beside the total).
std::string training_charts(const std::vector<RunMetrics>& runs) {
  const bool several = runs.size() > 1;
  struct Quantity {
    const char* key;
    const char* title;
    const char* unit;
  };
  const Quantity quantities[] = {{"loss", "Loss", "loss"},
                                 {"learning_rate", "Learning rate", "learning rate"},
                                 {"loss_scale", "Loss scale", "scale"},
                                 {"grad_norm", "Gradient norm (before clipping)", "norm"},
                                 {"sequences_per_second", "Throughput", "sequences/s"}};
  std::string charts;
  for (const auto& q : quantities) {
    html::LineChart chart{q.title, "step", q.unit, {}, false, 540, 260};
    for (const auto& r : runs) {
      auto points = curve(r.steps, q.key);
      if (!points.empty()) chart.series.push_back({several ? r.label : q.key, points, false});
      if (!several && std::string(q.key) == "loss")
        for (const char* part : {"mlm_loss", "nsp_loss", "task_loss"}) {
          auto p = curve(r.steps, part);
          if (!p.empty()) chart.series.push_back({part, p, true});
        }
    }
    chart.log_y = std::string(q.key) != "loss" && wants_log(chart.series);
    charts += html::line_chart(chart);
  }
  return charts;
}

}  // namespace

std::string run_report_html(const std::vector<RunMetrics>& runs) {
  const bool several = runs.size() > 1;
  std::string body =
      fmt::format("<h1>polyhal run report</h1><p class=\"sub\">{}</p>",
                  html::escape(fmt::format("{} run{}: {}", runs.size(), several ? "s" : "", [&] {
                    std::string names;
                    for (const auto& r : runs)
                      names += (names.empty() ? "" : ", ") + r.file.string();
                    return names;
                  }())));
  // The summary table: one row per run.
  std::vector<std::vector<std::string>> rows;
  bool estimated = false;
  for (const auto& r : runs) {
    const auto& s = r.summary;
    const bool model = s.is_object() && string_field(s, "mode") == "model";
    estimated = estimated || model;
    std::string speed = text_of(s, "sequences_per_second");
    if (model && s.contains("estimated_sequences_per_second"))
      speed = text_of(s, "estimated_sequences_per_second") +
              " <span class=\"estimate\">estimated by the device model</span>";
    std::string last_eval;
    if (!r.evaluations.empty()) {
      const auto& e = r.evaluations.back();
      for (const auto& [k, v] : e.items())
        if (!kNotMetrics.contains(k) && v.is_number())
          last_eval +=
              fmt::format("{}{} {:.4g}", last_eval.empty() ? "" : ", ", k, v.get<double>());
      last_eval = html::escape(fmt::format("{} (step {}): {}", string_field(e, "event"),
                                           json_excerpt(e["step"]), last_eval));
    }
    rows.push_back(
        {html::escape(r.label), text_of(s, "task"), text_of(s, "model"),
         fmt::format("{} {}", text_of(s, "backend"), text_of(s, "device")), text_of(s, "precision"),
         text_of(s, "global_batch"), std::to_string(r.steps.size()),
         r.steps.empty() ? "" : fmt::format("{:.4f}", number_field(r.steps.back(), "loss")), speed,
         last_eval});
  }
  body += "<h2>Summary</h2>" +
          html::table({"run", "task", "model", "backend / device", "precision", "global batch",
                       "steps", "final loss", "sequences/s", "last evaluation"},
                      rows);
  if (estimated)
    body +=
        "<p class=\"note\">A device model's run trains on this host in simulation: its "
        "step times are the host's, its throughput is the model's estimate, not a "
        "measurement on the device.</p>";

  body += "<h2>Training</h2><div class=\"charts\">" + training_charts(runs) + "</div>";

  // Evaluation metrics: one chart per (event, metric), a series per run.
  std::map<std::string, html::LineChart> evals;
  for (const auto& r : runs)
    for (const auto& e : r.evaluations)
      for (const auto& [k, v] : e.items())
        if (!kNotMetrics.contains(k) && v.is_number()) {
          const std::string title = fmt::format("{}: {}", string_field(e, "event", "eval"), k);
          auto& chart = evals[title];
          if (chart.title.empty()) chart = {title, "step", k, {}, false, 540, 260};
          const std::string name = several ? r.label : k;
          if (std::none_of(chart.series.begin(), chart.series.end(),
                           [&](const auto& s) { return s.name == name; }))
            chart.series.push_back({name, {}, false});
        }
  // Each run's evaluations by event, once: a record of thousands of keys is
  // not copied for every key (that was quadratic).
  std::map<std::pair<const RunMetrics*, std::string>, std::vector<const nlohmann::json*>> by_event;
  for (const auto& r : runs)
    for (const auto& e : r.evaluations)
      by_event[{&r, string_field(e, "event", "eval")}].push_back(&e);
  std::size_t drawn = 0;
  for (auto& [title, chart] : evals) {
    if (drawn++ == kMaxEvaluationCharts) break;
    const auto colon = title.find(": ");
    const std::string event = title.substr(0, colon), key = title.substr(colon + 2);
    for (auto& s : chart.series)
      for (const auto& r : runs) {
        if (several && r.label != s.name) continue;
        const auto it = by_event.find({&r, event});
        if (it != by_event.end()) s.points = curve(it->second, key);
      }
  }
  if (!evals.empty()) {
    body += "<h2>Evaluation</h2><div class=\"charts\">";
    drawn = 0;
    for (const auto& [title, chart] : evals)
      if (drawn++ < kMaxEvaluationCharts) body += html::line_chart(chart);
    body += "</div>";
    if (evals.size() > kMaxEvaluationCharts)
      body += fmt::format(
          "<p class=\"note\">{} more evaluation metrics are not drawn (the first {} by name "
          "are).</p>",
          evals.size() - kMaxEvaluationCharts, kMaxEvaluationCharts);
  }
  body +=
      "<p class=\"note\">Written by polyhal report from the runs' --metrics-out files. "
      "Hover a curve for its name.</p>";
  return html::page(several ? "polyhal: runs compared" : "polyhal: " + runs.front().label, body);
}

}  // namespace polyhal
