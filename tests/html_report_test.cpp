// The HTML reports as a person sees them: each page opened in headless
// Chromium (Debian's package), its charts measured in the rendered DOM by a
// probe script added to a copy of the page (the pages themselves carry no
// script), no console message allowed, and a screenshot kept in
// build/tests/screenshots/.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "polyhal/app/html_reports.hpp"
#include "polyhal/error.hpp"
#include "synthetic_tasks.hpp"
#include "test_support.hpp"

namespace polyhal {
namespace {

std::string chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (std::filesystem::exists(path)) return path;
  return {};
}

struct Chart {
  std::string kind, title;
  double width = 0, height = 0;
  int series = 0, marks = 0;  ///< marks: lines, bars and dots with a size
};

struct Rendered {
  std::vector<Chart> charts;
  std::vector<std::string> console;  ///< every console message (none expected)
  std::filesystem::path screenshot;
};

// Measures every chart as laid out: its SVG's box, its series, and the
// drawn marks (polylines, bars, dots) that have a size.
constexpr const char* kProbe = R"(<script>
const charts = [...document.querySelectorAll('figure.chart')].map(f => {
  const svg = f.querySelector('svg');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const marks = [...f.querySelectorAll('g.series polyline, g.series rect, g.series circle')]
      .filter(e => { const b = e.getBBox(); return b.width > 0 || b.height > 0; }).length;
  return [f.dataset.chart, f.querySelector('figcaption').textContent, box.width, box.height,
          f.querySelectorAll('g.series').length, marks].join('\t');
});
document.body.setAttribute('data-probe', charts.join('\n'));
</script>)";

/// Opens `page` in Chromium: the probe's measurements, the console, and a
/// screenshot named `name`.
Rendered render(const std::filesystem::path& page, const std::string& name) {
  Rendered out;
  std::ifstream in(page);
  std::stringstream html;
  html << in.rdbuf();
  std::string probed = html.str();
  const auto end = probed.rfind("</body>");
  EXPECT_NE(end, std::string::npos);
  probed.insert(end, kProbe);
  const auto probe_file = page.parent_path() / (name + ".probe.html");
  std::ofstream(probe_file) << probed;
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--enable-logging=stderr --v=0";
  const auto dom =
      test::run_command(fmt::format("{} {} --dump-dom file://{} 2>{}/console.txt", chromium(),
                                    flags, probe_file.string(), page.parent_path().string()));
  EXPECT_EQ(dom.exit_code, 0) << dom.output;
  std::ifstream console(page.parent_path() / "console.txt");
  for (std::string line; std::getline(console, line);)
    if (line.find(":CONSOLE") != std::string::npos) out.console.push_back(line);
  const std::regex attribute("data-probe=\"([^\"]*)\"");
  std::smatch match;
  EXPECT_TRUE(std::regex_search(dom.output, match, attribute)) << "the probe did not run";
  std::stringstream lines(match.size() > 1 ? match[1].str() : "");
  for (std::string line; std::getline(lines, line);) {
    std::stringstream fields(line);
    Chart c;
    std::string width, height, series, marks;
    std::getline(fields, c.kind, '\t');
    std::getline(fields, c.title, '\t');
    std::getline(fields, width, '\t');
    std::getline(fields, height, '\t');
    std::getline(fields, series, '\t');
    std::getline(fields, marks, '\t');
    c.width = std::stod(width);
    c.height = std::stod(height);
    c.series = std::stoi(series);
    c.marks = std::stoi(marks);
    out.charts.push_back(c);
  }
  // The screenshot of the page itself (without the probe), kept for people.
  const std::filesystem::path shots =
      std::filesystem::path(POLYHAL_TEST_OUTPUT_DIR) / "screenshots";
  std::filesystem::create_directories(shots);
  out.screenshot = shots / (name + ".png");
  const auto shot = test::run_command(
      fmt::format("{} {} --window-size=1200,1600 --screenshot={} file://{} 2>/dev/null", chromium(),
                  flags, out.screenshot.string(), page.string()));
  EXPECT_EQ(shot.exit_code, 0) << shot.output;
  return out;
}

void expect_drawn(const Rendered& page, std::size_t charts) {
  EXPECT_TRUE(page.console.empty()) << fmt::format("{}", fmt::join(page.console, "\n"));
  EXPECT_GE(page.charts.size(), charts);
  for (const auto& c : page.charts) {
    EXPECT_GT(c.width, 100) << c.title;
    EXPECT_GT(c.height, 50) << c.title;
    EXPECT_GE(c.marks, c.series) << c.title << ": a series drew nothing";
    EXPECT_GT(c.marks, 0) << c.title;
  }
  ASSERT_TRUE(std::filesystem::exists(page.screenshot));
  // A blank page compresses to a few hundred bytes; charts do not.
  EXPECT_GT(std::filesystem::file_size(page.screenshot), 20000u) << page.screenshot;
}

const Chart* chart_titled(const Rendered& page, const std::string& title) {
  for (const auto& c : page.charts)
    if (c.title == title) return &c;
  return nullptr;
}

class HtmlReport : public ::testing::Test {
 protected:
  void SetUp() override {
    if (chromium().empty())
      GTEST_SKIP() << "chromium is not installed (apt install chromium; scripts/install-deps.sh "
                      "does): the pages are not opened";
  }
};

// Two fine-tuning runs, their metrics as one page: every training curve and
// the evaluation's exact match and F1 per epoch, both runs overlaid.
TEST_F(HtmlReport, RunReportDrawsEveryCurveAndOverlaysTwoRuns) {
  test::TempDir dir;
  test::write_synthetic_vocab(dir);
  dir.write("train.json", test::squad_json(600, "t", 1));
  dir.write("dev.json", test::squad_json(100, "d", 2));
  const auto config = dir.write(
      "squad.yaml",
      "backend: cpu\ntask: squad\nmodel: {preset: tiny, seq_len: 32, vocab_size: 64, dropout: "
      "0.0}\ndata: {vocab: vocab.txt}\nbatch: {micro: 32}\n"
      "optimizer: {name: adamw, learning_rate: 0.0005, max_grad_norm: 1.0}\n"
      "finetune: {train_file: train.json, eval_file: dev.json, output_dir: out, epochs: 3, "
      "max_query_length: 8}\n");
  for (const char* lr : {"0.0005", "0.002"}) {
    const auto r = test::run_polyhal(
        fmt::format("run --config {} --set optimizer.learning_rate={} --metrics-out {}/lr{}.jsonl",
                    config.string(), lr, dir.path().string(), lr));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const auto one = dir.path() / "one.html", both = dir.path() / "both.html";
  auto r = test::run_polyhal(
      fmt::format("report {}/lr0.0005.jsonl --output {}", dir.path().string(), one.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("report of 1 run"), std::string::npos) << r.output;
  r = test::run_polyhal(fmt::format("report {}/lr0.0005.jsonl {}/lr0.002.jsonl -o {}",
                                    dir.path().string(), dir.path().string(), both.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const auto single = render(one, "run-report");
  expect_drawn(single, 6);
  for (const char* title : {"Loss", "Learning rate", "Gradient norm (before clipping)",
                            "Throughput", "eval: f1", "eval: exact"})
    EXPECT_NE(chart_titled(single, title), nullptr) << title;
  const auto compared = render(both, "run-report-compared");
  expect_drawn(compared, 6);
  ASSERT_NE(chart_titled(compared, "Loss"), nullptr);
  EXPECT_EQ(chart_titled(compared, "Loss")->series, 2) << "both runs' losses";
  ASSERT_NE(chart_titled(compared, "eval: f1"), nullptr);
  EXPECT_EQ(chart_titled(compared, "eval: f1")->series, 2);
}

// The memory pages: the IPU model's pipeline per IPU, per tile and in
// Streaming Memory (--compile-only); Gaudi's HBM (validate); the CPU's plan
// beside the measured peak (after a run).
TEST_F(HtmlReport, MemoryPagesShowEachDeviceKind) {
  test::TempDir dir;
  const auto configs = std::filesystem::path(POLYHAL_SOURCE_DIR) / "configs";
  auto r = test::run_polyhal(fmt::format("run --config {} --compile-only --report {}",
                                         (configs / "pretrain-bert-large-phase1-ipu.yaml").string(),
                                         (dir.path() / "ipu").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto ipu = render(dir.path() / "ipu" / "memory.html", "memory-ipu");
  expect_drawn(ipu, 3);
  ASSERT_FALSE(ipu.charts.empty());
  EXPECT_EQ(ipu.charts[0].series, 4) << "one bar per pipeline stage's IPU";
  EXPECT_NE(chart_titled(ipu, "Per tile (KiB of each of 1472 tiles), an even spread"), nullptr);
  EXPECT_NE(chart_titled(ipu, "Streaming Memory per IPU (MiB, off chip)"), nullptr);

  r = test::run_polyhal(fmt::format("validate --config {} --report {}",
                                    (configs / "pretrain-bert-large-phase1-gaudi.yaml").string(),
                                    (dir.path() / "gaudi").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_drawn(render(dir.path() / "gaudi" / "memory.html", "memory-gaudi"), 1);

  r = test::run_polyhal(fmt::format("run --config {} --report {}",
                                    (configs / "bert-demo-cpu.yaml").string(),
                                    (dir.path() / "cpu").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto cpu = render(dir.path() / "cpu" / "memory.html", "memory-cpu");
  expect_drawn(cpu, 1);
  ASSERT_FALSE(cpu.charts.empty());
  EXPECT_EQ(cpu.charts[0].series, 2) << "the plan and the measured peak";
}

// Bad metrics: the file and line, before anything is written.
TEST(HtmlReportInput, AMetricsLineThatIsNotJsonNamesFileAndLine) {
  test::TempDir dir;
  const auto bad = dir.write("bad.jsonl", "{\"event\":\"step\",\"step\":1,\"loss\":2}\nnot json\n");
  test::expect_config_error([&] { read_run_metrics(bad); }, "bad.jsonl:2: not a JSON object");
  test::expect_config_error([&] { read_run_metrics(dir.path() / "missing.jsonl"); },
                            "no such metrics file");
  const auto empty = dir.path() / "empty";
  std::filesystem::create_directories(empty);
  test::expect_config_error([&] { read_run_metrics(empty); }, "no metrics (*.jsonl) files");
  const auto r =
      test::run_polyhal(fmt::format("report {} -o {}/r.html", bad.string(), dir.path().string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.jsonl:2"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "r.html"));
  // Non-finite losses (written as null) break the curve instead of failing.
  const auto gaps = dir.write(
      "gaps.jsonl",
      "{\"event\":\"step\",\"step\":1,\"loss\":2}\n{\"event\":\"step\",\"step\":2,\"loss\":null}\n"
      "{\"event\":\"step\",\"step\":3,\"loss\":1.5}\n");
  const auto runs = read_run_metrics(gaps);
  ASSERT_EQ(runs.size(), 1u);
  const std::string html = run_report_html(runs);
  EXPECT_NE(html.find("<circle"), std::string::npos) << "lone points drawn as dots";
  EXPECT_EQ(html.find("<script"), std::string::npos) << "the page carries no script";
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"))
      << "nothing is loaded from the network";
}

}  // namespace
}  // namespace polyhal
