// Task squad's data: SQuAD JSON files as model rows, and the reference's
// post-processing and scoring of the start/end logits.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "polyhal/app/eval_metrics.hpp"
#include "polyhal/app/packing.hpp"
#include "polyhal/app/squad_data.hpp"
#include "polyhal/app/squad_predictions.hpp"
#include "tasks/finetune/finetune_data.hpp"
#include "util/atomic_file.hpp"

namespace polyhal {
namespace {

/// The logit a packed feature's prediction sees at positions outside it.
constexpr float kNotThisFeature = -1e30f;

/// Where a feature sits in packed rows.
struct PackedPlace {
  std::int64_t row = 0, offset = 0;
};

/// One file read and cut into features.
struct SquadSplit {
  SquadFile file;
  SquadFeatures features;
  ModelRows rows;
  std::vector<PackedPlace> places;  ///< packed rows: each feature's place
};

/// A feature's tokens: [CLS] question [SEP] context [SEP], without padding.
std::int64_t feature_length(const SquadFeature& f) {
  return static_cast<std::int64_t>(std::count_if(f.attention_mask.begin(), f.attention_mask.end(),
                                                 [](auto m) { return m != 0; }));
}

/// Features packed into rows of `seq` tokens, at most `per_row` to a row:
/// each keeps its tokens and segment ids, its positions restart at 0, its
/// attention-mask value is its slot (1..per_row), and in training its answer
/// span moves to its place in the row. Returns each feature's place.
std::vector<PackedPlace> pack_features(const SquadFeatures& features, std::int64_t seq,
                                       std::int64_t per_row, const std::string& algorithm,
                                       bool training, ModelRows& rows,
                                       const std::filesystem::path& path) {
  std::vector<std::int64_t> lengths;
  lengths.reserve(features.features.size());
  for (const auto& f : features.features) lengths.push_back(feature_length(f));
  PackingStats stats;
  const auto packs = pack_sequences(lengths, seq, per_row, algorithm, &stats);
  std::vector<PackedPlace> places(features.features.size());
  rows.sequences_per_row = per_row;
  rows.packed_sequences = static_cast<std::int64_t>(features.features.size());
  const auto width = static_cast<std::size_t>(seq);
  for (std::size_t p = 0; p < packs.size(); ++p) {
    std::vector<std::int32_t> ids(width, 0), types(width, 0);
    std::vector<std::uint8_t> mask(width, 0);
    std::vector<std::uint16_t> positions(width, 0);
    std::size_t offset = 0;
    for (std::size_t slot = 0; slot < packs[p].size(); ++slot) {
      const auto index = static_cast<std::size_t>(packs[p][slot]);
      const SquadFeature& f = features.features[index];
      const auto length = static_cast<std::size_t>(lengths[index]);
      for (std::size_t t = 0; t < length; ++t) {
        ids[offset + t] = f.input_ids[t];
        types[offset + t] = f.token_type_ids[t];
        mask[offset + t] = static_cast<std::uint8_t>(slot + 1);
        positions[offset + t] = static_cast<std::uint16_t>(t);
      }
      places[index] = {static_cast<std::int64_t>(p), static_cast<std::int64_t>(offset)};
      if (training) {
        rows.start_positions.push_back(static_cast<std::int32_t>(offset) + f.start_position);
        rows.end_positions.push_back(static_cast<std::int32_t>(offset) + f.end_position);
      }
      offset += length;
    }
    for (auto slot = static_cast<std::int64_t>(packs[p].size()); training && slot < per_row;
         ++slot) {
      rows.start_positions.push_back(-100);
      rows.end_positions.push_back(-100);
    }
    rows.input_ids.insert(rows.input_ids.end(), ids.begin(), ids.end());
    for (const std::int32_t type : types)
      rows.token_type_ids.push_back(static_cast<std::uint8_t>(type != 0));
    rows.attention_mask.insert(rows.attention_mask.end(), mask.begin(), mask.end());
    rows.position_ids.insert(rows.position_ids.end(), positions.begin(), positions.end());
  }
  spdlog::info(
      "{}: {} features packed into {} rows ({}, at most {} a row): {:.1f}% of tokens are "
      "not padding (unpacked {:.1f}%), {:.2f}x fewer rows",
      path.string(), stats.sequences, stats.packs, algorithm, per_row, 100.0 * stats.efficiency(),
      100.0 * stats.unpacked_efficiency(), stats.speedup());
  return places;
}

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
  SquadData(const RunConfig& config, const TokenizerSpec& tokenizer, std::int64_t seq)
      : config_(config.section<FinetuneSection>()), tokenizer_(open_tokenizer(tokenizer)) {
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
      if (!s.places.empty()) {
        // A packed feature: its own tokens; the rest of the row is other
        // features' or padding, never an answer of this one.
        const auto [row, offset] = s.places[f];
        const auto first = outputs.begin() + static_cast<std::ptrdiff_t>(row * 2 * seq + offset);
        const auto length = static_cast<std::ptrdiff_t>(feature_length(s.features.features[f]));
        starts[f].assign(seq, kNotThisFeature);
        ends[f].assign(seq, kNotThisFeature);
        std::copy_n(first, length, starts[f].begin());
        std::copy_n(first + static_cast<std::ptrdiff_t>(seq), length, ends[f].begin());
        continue;
      }
      const auto row = outputs.begin() + static_cast<std::ptrdiff_t>(f * 2 * seq);
      starts[f].assign(row, row + static_cast<std::ptrdiff_t>(seq));
      ends[f].assign(row + static_cast<std::ptrdiff_t>(seq),
                     row + static_cast<std::ptrdiff_t>(2 * seq));
    }
    const auto answers =
        predict_squad_answers(s.file, s.features, starts, ends, *tokenizer_, prediction_);
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
    s->features = make_squad_features(s->file, *tokenizer_, settings);
    report_skipped(path, *s);
    s->rows.seq = settings_.max_seq_length;
    if (config_.packed) {
      s->places =
          pack_features(s->features, settings_.max_seq_length, config_.max_sequences_per_pack,
                        config_.packing_algorithm, settings.training, s->rows, path);
    }
    for (const auto& f : s->features.features) {
      if (config_.packed) break;
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
      s->places = {};
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
  std::unique_ptr<Tokenizer> tokenizer_;
  SquadFeatureSettings settings_;
  SquadPredictionSettings prediction_;
  std::array<std::unique_ptr<SquadSplit>, 3> splits_;
};

}  // namespace

std::unique_ptr<FinetuneData> open_squad_data(const RunConfig& config,
                                              const TokenizerSpec& tokenizer, std::int64_t seq) {
  return std::make_unique<SquadData>(config, tokenizer, seq);
}

}  // namespace polyhal
