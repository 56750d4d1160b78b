// Task squad's data: SQuAD JSON files as model rows, and the reference's
// post-processing and scoring of the start/end logits.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <nlohmann/json.hpp>

#include "polyhal/eval_metrics.hpp"
#include "polyhal/squad_data.hpp"
#include "polyhal/squad_predictions.hpp"
#include "tasks/finetune_data.hpp"
#include "util/atomic_file.hpp"

namespace polyhal {
namespace {

/// One file read and cut into features.
struct SquadSplit {
  SquadFile file;
  SquadFeatures features;
  ModelRows rows;
};

/// Misplaced and unfound answers are counted and shown, never silently wrong.
void report_skipped(const std::filesystem::path& path, const SquadSplit& split) {
  const auto& f = split.file;
  if (f.misplaced_answers > 0) {
    spdlog::warn(
        "{}: {} answer{} not found at their answer_start, skipped ({} question{} left "
        "out); first:",
        path.string(), f.misplaced_answers, f.misplaced_answers == 1 ? "" : "s",
        f.dropped_questions, f.dropped_questions == 1 ? "" : "s");
    for (const auto& example : f.misplaced_examples) spdlog::warn("  {}", example);
  }
  if (split.features.unfound_answers > 0) {
    spdlog::warn(
        "{}: {} answer{} not recoverable from the tokenised context, trained as no answer "
        "in their window (the reference's \"could not find answer\")",
        path.string(), split.features.unfound_answers,
        split.features.unfound_answers == 1 ? "" : "s");
  }
}

class SquadData final : public FinetuneData {
 public:
  SquadData(const RunConfig& config, const std::filesystem::path& vocab, std::int64_t seq)
      : config_(config.finetune), tokenizer_(vocab, config.data.lower_case) {
    settings_.max_seq_length = seq;
    settings_.doc_stride = config_.doc_stride;
    settings_.max_query_length = config_.max_query_length;
    prediction_.n_best = config_.n_best_size;
    prediction_.max_answer_length = config_.max_answer_length;
    prediction_.null_score_diff_threshold = config_.null_score_diff_threshold;
    prediction_.lower_case = config.data.lower_case;
    bool version_2 = false;
    if (config_.train) load(Split::train, config_.train_file, version_2);
    if (config_.eval) load(Split::eval, config_.eval_file, version_2);
    if (config_.predict) load(Split::predict, config_.predict_file, version_2);
    prediction_.version_2 = config_.version_2_with_negative.value_or(version_2);
    spdlog::info("SQuAD {}: null answers {}", prediction_.version_2 ? "v2.0" : "v1.1",
                 prediction_.version_2 ? "predicted against the score-difference threshold"
                                       : "never predicted");
  }

  TaskHead head() const override { return {TaskHead::Kind::question_answering, 2, {}}; }

  const ModelRows& rows(Split split) const override {
    static const ModelRows none;
    const auto& s = splits_[static_cast<std::size_t>(split)];
    return s ? s->rows : none;
  }

  std::int64_t output_width() const override { return 2 * settings_.max_seq_length; }

  EvalReport evaluate(Split split, const std::vector<float>& outputs,
                      const std::filesystem::path& dir) const override {
    const SquadSplit& s = *splits_.at(static_cast<std::size_t>(split));
    const auto seq = static_cast<std::size_t>(settings_.max_seq_length);
    const std::size_t count = s.features.features.size();
    std::vector<std::vector<float>> starts(count), ends(count);
    for (std::size_t f = 0; f < count; ++f) {
      const auto row = outputs.begin() + static_cast<std::ptrdiff_t>(f * 2 * seq);
      starts[f].assign(row, row + static_cast<std::ptrdiff_t>(seq));
      ends[f].assign(row + static_cast<std::ptrdiff_t>(seq),
                     row + static_cast<std::ptrdiff_t>(2 * seq));
    }
    const auto answers =
        predict_squad_answers(s.file, s.features, starts, ends, tokenizer_, prediction_);
    EvalReport report;
    if (!dir.empty()) report.files = write_predictions(answers, dir);
    if (split != Split::eval) return report;
    std::vector<SquadPrediction> scored;
    scored.reserve(answers.size());
    for (std::size_t q = 0; q < answers.size(); ++q) {
      SquadPrediction p{answers[q].id, answers[q].text, {}};
      for (const auto& gold : s.file.questions[q].answers) p.gold_answers.push_back(gold.text);
      scored.push_back(std::move(p));
    }
    const SquadScores scores = score_squad(scored);
    report.metrics = {
        {"exact", scores.exact}, {"f1", scores.f1}, {"total", static_cast<double>(scores.total)}};
    if (prediction_.version_2) {
      report.metrics["HasAns_exact"] = scores.has_answer_exact;
      report.metrics["HasAns_f1"] = scores.has_answer_f1;
      report.metrics["HasAns_total"] = static_cast<double>(scores.has_answer_total);
      report.metrics["NoAns_exact"] = scores.no_answer_exact;
      report.metrics["NoAns_f1"] = scores.no_answer_f1;
      report.metrics["NoAns_total"] = static_cast<double>(scores.no_answer_total);
    }
    return report;
  }

 private:
  void load(Split split, const std::filesystem::path& path, bool& version_2) {
    auto s = std::make_unique<SquadSplit>();
    s->file = read_squad_json(path);
    if (s->file.version.starts_with("v2") || s->file.version.starts_with("2")) version_2 = true;
    for (const auto& q : s->file.questions) version_2 = version_2 || q.impossible;
    SquadFeatureSettings settings = settings_;
    settings.training = split == Split::train;
    s->features = make_squad_features(s->file, tokenizer_, settings);
    report_skipped(path, *s);
    s->rows.seq = settings_.max_seq_length;
    for (const auto& f : s->features.features) {
      s->rows.add(f.input_ids, f.token_type_ids, f.attention_mask);
      if (settings.training) {
        s->rows.start_positions.push_back(f.start_position);
        s->rows.end_positions.push_back(f.end_position);
      }
    }
    spdlog::info("{}: {} questions in {} contexts -> {} features of {} tokens", path.string(),
                 s->file.questions.size(), s->file.contexts.size(), s->features.features.size(),
                 settings_.max_seq_length);
    if (settings.training) {
      // Training needs only the rows: free the tokens and maps.
      s->features = {};
      s->file = {};
    }
    splits_[static_cast<std::size_t>(split)] = std::move(s);
  }

  std::vector<std::filesystem::path> write_predictions(
      const std::vector<SquadAnswerPrediction>& answers, const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    nlohmann::ordered_json predictions = nlohmann::ordered_json::object();
    nlohmann::ordered_json nbest = nlohmann::ordered_json::object();
    nlohmann::ordered_json null_odds = nlohmann::ordered_json::object();
    for (const auto& a : answers) {
      predictions[a.id] = a.text;
      auto& list = nbest[a.id] = nlohmann::ordered_json::array();
      for (const auto& c : a.nbest) {
        list.push_back({{"text", c.text},
                        {"probability", c.probability},
                        {"start_logit", c.start_logit},
                        {"end_logit", c.end_logit}});
      }
      null_odds[a.id] = a.null_score_diff;
    }
    std::vector<std::filesystem::path> files{dir / "predictions.json",
                                             dir / "nbest_predictions.json"};
    detail::write_file_atomically(
        files[0],
        predictions.dump(4, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
    detail::write_file_atomically(
        files[1],
        nbest.dump(4, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
    if (prediction_.version_2) {
      files.push_back(dir / "null_odds.json");
      detail::write_file_atomically(
          files.back(),
          null_odds.dump(4, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
    }
    return files;
  }

  FinetuneSection config_;
  WordPieceTokenizer tokenizer_;
  SquadFeatureSettings settings_;
  SquadPredictionSettings prediction_;
  std::array<std::unique_ptr<SquadSplit>, 3> splits_;
};

}  // namespace

std::unique_ptr<FinetuneData> open_squad_data(const RunConfig& config,
                                              const std::filesystem::path& vocab,
                                              std::int64_t seq) {
  return std::make_unique<SquadData>(config, vocab, seq);
}

}  // namespace polyhal
