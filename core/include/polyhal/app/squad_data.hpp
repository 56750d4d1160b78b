#pragma once
/// @file squad_data.hpp
/// SQuAD v1.1 and v2.0 in the official JSON layout: data[] articles with
/// paragraphs[] of a context and its qas[] (id, question, answers[] of text
/// and answer_start, and in v2.0 is_impossible). Offsets are in Unicode code
/// points of the context, as the official files count them (Python str).
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/error.hpp"

#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

struct SquadAnswer {
  std::string text;
  std::int64_t start = 0;  ///< code point offset of the answer in its context
};

struct SquadQuestion {
  std::string id, question;
  std::vector<SquadAnswer> answers;  ///< empty for an unanswerable (v2.0) question
  bool impossible = false;
  std::size_t context = 0;  ///< index into SquadFile::contexts
};

struct SquadFile {
  std::string version;  ///< the file's "version" ("1.1", "v2.0"), empty if absent
  std::vector<std::string> contexts;
  std::vector<SquadQuestion> questions;
  /// Answers whose text is not at their answer_start in the context: counted,
  /// the first few described (file, JSON path), and left out of `answers`.
  std::int64_t misplaced_answers = 0;
  std::vector<std::string> misplaced_examples;
  /// Answerable questions all of whose answers were misplaced: left out.
  std::int64_t dropped_questions = 0;
};

/// Reads an official SQuAD JSON file. Throws ConfigError naming the file and
/// the JSON path (data[3].paragraphs[0].qas[2].id) for a malformed file, a
/// missing or mistyped key, or a duplicate question id. Files above
/// `max_bytes` (default 128 MiB, three times SQuAD v2.0's training set) are
/// refused before they are read: the parsed JSON and the features take about
/// 36 times the file's size (a 128 MiB file about 4.6 GB).
SquadFile read_squad_json(const std::filesystem::path& file,
                          std::uintmax_t max_bytes = std::uintmax_t{128} << 20);

/// BERT's SQuAD features (run_squad.py / Hugging Face's
/// squad_convert_examples_to_features).
struct SquadFeatureSettings {
  std::int64_t max_seq_length = 384;
  std::int64_t doc_stride = 128;
  std::int64_t max_query_length = 64;
  bool training = false;  ///< set start/end positions from each question's first answer
  /// The most features (windows over all questions) to build; 0: no limit.
  /// Counted from the token counts before any feature is built, so the work
  /// a small request can cause is bounded (the server's serve.max_inputs).
  std::int64_t max_features = 0;
};

/// make_squad_features past SquadFeatureSettings::max_features.
class TooManySquadFeatures : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

/// One model input: [CLS] question [SEP] a window of the context [SEP].
struct SquadFeature {
  std::size_t question = 0;  ///< index into SquadFile::questions
  std::int64_t window = 0;   ///< which window of the context (doc_stride)
  std::vector<std::string> tokens;
  std::vector<std::int32_t> input_ids, token_type_ids, attention_mask;  ///< padded
  std::map<std::int64_t, std::int64_t> token_to_word;  ///< context tokens -> context word
  /// Per token: this window is the one where the token has the most context
  /// on both sides (post-processing only takes answers from there).
  std::vector<bool> max_context;
  /// Training: the answer's first and last token, both 0 ([CLS]) when the
  /// question has no answer or the answer is not inside this window.
  std::int32_t start_position = 0, end_position = 0;
};

struct SquadFeatures {
  std::vector<SquadFeature> features;
  /// Each context split on whitespace, as the answers are mapped back.
  std::vector<std::vector<std::string>> context_words;
  /// Training: answers whose words do not contain the answer text after
  /// tokenisation ("could not find answer" in the reference): skipped.
  std::int64_t unfound_answers = 0;
};

/// Each context is tokenized once, however many questions it has. Throws
/// ConfigError when max_seq_length leaves no room for the context, and
/// TooManySquadFeatures past settings.max_features.
SquadFeatures make_squad_features(const SquadFile& squad, const Tokenizer& tokenizer,
                                  const SquadFeatureSettings& settings);

}  // namespace polyhal
