// GLUE TSV files: columns split on tabs only (csv.reader with quotechar None,
// as the reference readers), one example per line.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>

#include "polyhal/app/glue_data.hpp"
#include "polyhal/error.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

/// One GLUE line can be long (a QNLI paragraph), never this long.
constexpr std::size_t kMaxLineBytes = 1 << 20;

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> columns;
  std::size_t start = 0;
  while (true) {
    const std::size_t tab = line.find('\t', start);
    columns.push_back(
        line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return columns;
    start = tab + 1;
  }
}

}  // namespace

GlueFile read_glue_tsv(const std::filesystem::path& file, const GlueTaskInfo& task, bool labelled) {
  // Held in memory whole; GLUE's largest file (QQP's training set) is 40 MB.
  detail::refuse_special_or_oversized_file(file, std::uintmax_t{1} << 30, "GLUE file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the GLUE file", file.string()));
  GlueFile out;
  std::string line;
  std::int64_t number = 0;
  // A test file has a header and (index, sentence[, sentence]) columns.
  const bool header = task.header || !labelled;
  // Test files: CoLA and SST-2 are (index, sentence), QQP (id, question1,
  // question2); the others keep the columns of their dev files.
  int a = task.text_a, b = task.text_b;
  if (!labelled && (task.name == "cola" || task.name == "sst-2")) a = 1;
  if (!labelled && task.name == "qqp") a = 1, b = 2;
  if (!labelled && task.name == "ax") a = 1, b = 2;  // index, sentence1, sentence2
  while (std::getline(in, line)) {
    ++number;
    if (line.size() > kMaxLineBytes)
      throw ConfigError(
          fmt::format("{}:{}: line longer than {} bytes", file.string(), number, kMaxLineBytes));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1 && header) continue;
    if (line.empty()) continue;
    const auto columns = split_tabs(line);
    const auto count = static_cast<int>(columns.size());
    const int label_column = labelled ? (task.label < 0 ? count + task.label : task.label) : -1;
    const int needed = std::max({a, task.pair ? b : -1, label_column}) + 1;
    if (count < needed || (labelled && label_column < 0)) {
      if (task.name == "qqp") {  // the reference skips QQP's short rows
        ++out.skipped;
        continue;
      }
      throw ConfigError(
          fmt::format("{}:{}: {} has {} tab-separated columns, {} expects at least {}",
                      file.string(), number, "the row", count, task.name, needed));
    }
    GlueExample example;
    example.line = number;
    example.text_a = columns[static_cast<std::size_t>(a)];
    if (task.pair) example.text_b = columns[static_cast<std::size_t>(b)];
    if (labelled) {
      const std::string& value = columns[static_cast<std::size_t>(label_column)];
      if (task.labels.empty()) {
        double score = 0;
        const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), score);
        if (error != std::errc() || end != value.data() + value.size() || !std::isfinite(score)) {
          throw ConfigError(
              fmt::format("{}:{}: score \"{}\" is not a number", file.string(), number, value));
        }
        // STS-B's similarity is from 0 to 5 (GLUE's definition).
        if (score < 0.0 || score > 5.0) {
          throw ConfigError(fmt::format("{}:{}: score {} is outside STS-B's range [0, 5]",
                                        file.string(), number, value));
        }
        example.score = score;
      } else {
        const auto it = std::find(task.labels.begin(), task.labels.end(), value);
        if (it == task.labels.end()) {
          throw ConfigError(fmt::format("{}:{}: label \"{}\" is not one of {}'s labels ({})",
                                        file.string(), number, value, task.name,
                                        fmt::join(task.labels, ", ")));
        }
        example.label = it - task.labels.begin();
      }
    }
    out.examples.push_back(std::move(example));
  }
  return out;
}

}  // namespace polyhal
