// Task glue's data: GLUE TSV files as model rows, and the task's metrics on
// the classifier's logits.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <sstream>

#include "polyhal/app/eval_metrics.hpp"
#include "polyhal/app/glue_data.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/error.hpp"
#include "tasks/finetune/finetune_data.hpp"
#include "util/atomic_file.hpp"

namespace polyhal {
namespace {

class GlueData final : public FinetuneData {
 public:
  GlueData(const RunConfig& config, const TokenizerSpec& tokenizer, std::int64_t seq,
           const TaskHead& head)
      : task_(glue_task(config.section<FinetuneSection>().glue_task)),
        head_(head),
        task_of_class_(task_index_of(task_, head_)),
        tokenizer_(open_tokenizer(tokenizer)) {
    const auto& f = config.section<FinetuneSection>();
    if (f.train) load(Split::train, f.train_file, true, seq);
    if (f.eval) load(Split::eval, f.eval_file, true, seq);
    if (f.predict) load(Split::predict, f.predict_file, false, seq);
  }

  TaskHead head() const override { return head_; }
  const ModelRows& rows(Split split) const override {
    return rows_[static_cast<std::size_t>(split)];
  }
  std::int64_t output_width() const override { return head_.num_labels; }

  EvalReport evaluate(Split split, const std::vector<float>& outputs,
                      const std::filesystem::path& dir) const override {
    const bool regression = task_.labels.empty();
    const auto width = static_cast<std::size_t>(head_.num_labels);
    const std::size_t count = outputs.size() / width;
    std::vector<std::int64_t> classes;
    std::vector<double> scores;
    for (std::size_t r = 0; r < count; ++r) {
      const auto row = outputs.begin() + static_cast<std::ptrdiff_t>(r * width);
      if (regression) {
        scores.push_back(*row);
      } else {
        // The head's class in the task's order (the model's own order may differ).
        classes.push_back(task_of_class_[static_cast<std::size_t>(
            std::max_element(row, row + static_cast<std::ptrdiff_t>(width)) - row)]);
      }
    }
    EvalReport report;
    if (!dir.empty()) {
      // The GLUE submission layout: index, then the label (or score).
      std::filesystem::create_directories(dir);
      std::ostringstream tsv;
      tsv << "index\tprediction\n";
      for (std::size_t r = 0; r < count; ++r) {
        tsv << r << '\t';
        if (regression) {
          tsv << fmt::format("{:.3f}", scores[r]);
        } else {
          tsv << task_.labels[static_cast<std::size_t>(classes[r])];
        }
        tsv << '\n';
      }
      report.files.push_back(dir / "predictions.tsv");
      detail::write_file_atomically(report.files.back(), tsv.str());
    }
    if (split != Split::eval) return report;
    const ModelRows& gold = rows(split);
    for (const auto& metric : task_.metrics) {
      double value = 0;
      if (metric == "accuracy") value = accuracy(classes, labels(gold));
      if (metric == "f1") value = binary_f1(classes, labels(gold));
      if (metric == "matthews") value = matthews_correlation(classes, labels(gold));
      if (metric == "pearson")
        value = pearson_correlation(scores, {gold.targets.begin(), gold.targets.end()});
      if (metric == "spearman")
        value = spearman_correlation(scores, {gold.targets.begin(), gold.targets.end()});
      report.metrics[metric] = value;
    }
    return report;
  }

 private:
  /// Gold labels in the task's order (the rows hold the head's classes).
  std::vector<std::int64_t> labels(const ModelRows& rows) const {
    std::vector<std::int64_t> out;
    for (const std::int32_t c : rows.labels)
      out.push_back(task_of_class_[static_cast<std::size_t>(c)]);
    return out;
  }

  /// The head's class of the task's label `task_label`.
  std::int32_t class_of_task(std::int64_t task_label) const {
    const auto it = std::find(task_of_class_.begin(), task_of_class_.end(), task_label);
    return static_cast<std::int32_t>(it - task_of_class_.begin());
  }

  /// For each of the head's classes, its index among the task's labels
  /// (identity unless the start model orders them otherwise).
  static std::vector<std::int64_t> task_index_of(const GlueTaskInfo& task, const TaskHead& head) {
    std::vector<std::int64_t> out;
    for (std::size_t k = 0; k < task.labels.size(); ++k) {
      const auto it = k < head.labels.size()
                          ? std::find(task.labels.begin(), task.labels.end(), head.labels[k])
                          : task.labels.end();
      out.push_back(it == task.labels.end() ? static_cast<std::int64_t>(k)
                                            : it - task.labels.begin());
    }
    return out;
  }

  void load(Split split, const std::filesystem::path& path, bool labelled, std::int64_t seq) {
    const GlueFile file = read_glue_tsv(path, task_, labelled);
    ModelRows& rows = rows_[static_cast<std::size_t>(split)];
    rows.seq = seq;
    for (const auto& example : file.examples) {
      const Encoding e = tokenizer_->encode(
          example.text_a, task_.pair ? std::optional<std::string>(example.text_b) : std::nullopt,
          seq);
      rows.add(e.input_ids, e.token_type_ids, e.attention_mask);
      if (!labelled) continue;
      if (task_.labels.empty()) {
        rows.targets.push_back(static_cast<float>(example.score));
      } else {
        rows.labels.push_back(class_of_task(example.label));
      }
    }
    spdlog::info("{}: {} {} examples{}", path.string(), file.examples.size(), task_.name,
                 file.skipped > 0
                     ? fmt::format(" ({} malformed rows skipped, as the reference)", file.skipped)
                     : "");
    if (file.examples.empty()) throw ConfigError(fmt::format("{}: no examples", path.string()));
  }

  const GlueTaskInfo& task_;
  TaskHead head_;
  std::vector<std::int64_t> task_of_class_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::array<ModelRows, 3> rows_;
};

}  // namespace

std::unique_ptr<FinetuneData> open_glue_data(const RunConfig& config,
                                             const TokenizerSpec& tokenizer, std::int64_t seq,
                                             const TaskHead& head) {
  return std::make_unique<GlueData>(config, tokenizer, seq, head);
}

}  // namespace polyhal
