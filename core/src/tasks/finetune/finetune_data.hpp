#pragma once
// Fine-tuning data (tasks squad and glue): each file as fixed-length model
// rows, and what evaluation and prediction make of the head's outputs
// (metrics, and the reference's output files).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "finetune_section.hpp"
#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

enum class Split : std::uint8_t { train, eval, predict };

/// Rows of one file, each [CLS] ... [SEP] padded to `seq`, or packed: up to
/// `sequences_per_row` such sequences side by side, then padding. Token
/// types and the attention mask are one byte per token: SQuAD's training set
/// at seq 384 takes 200 MB instead of 400.
struct ModelRows {
  std::int64_t seq = 0;
  /// Packed rows: sequence slots per row; 0 when each row is one sequence.
  std::int64_t sequences_per_row = 0;
  std::int64_t packed_sequences = 0;  ///< packed rows: sequences in all rows
  std::vector<std::int32_t> input_ids;
  /// The attention mask holds 1 or 0 (padding), or in packed rows each
  /// token's sequence 1..sequences_per_row (kernel.hpp attention_allows).
  std::vector<std::uint8_t> token_type_ids, attention_mask;
  std::vector<std::uint16_t> position_ids;  ///< packed rows: restarting per sequence
  /// Question answering: per row, or per sequence slot of packed rows (the
  /// token's index in its row, -100 for an empty slot).
  std::vector<std::int32_t> start_positions, end_positions;
  std::vector<std::int32_t> labels;  ///< classification
  std::vector<float> targets;        ///< regression

  std::int64_t count() const {
    return seq == 0 ? 0 : static_cast<std::int64_t>(input_ids.size()) / seq;
  }
  /// Sequences in all rows (count() unless packed).
  std::int64_t sequence_count() const { return sequences_per_row > 0 ? packed_sequences : count(); }
  /// Appends one row (exactly `seq` tokens each).
  void add(std::span<const std::int32_t> ids, std::span<const std::int32_t> types,
           std::span<const std::int32_t> mask);
  /// The rows `rows` (indices into this set) as one micro-batch, with labels.
  TrainingBatch batch(std::span<const std::int64_t> rows) const;
};

/// What one evaluation or prediction gave.
struct EvalReport {
  std::map<std::string, double> metrics;     ///< empty for prediction
  std::vector<std::filesystem::path> files;  ///< written
};

/// A task's files, read once, and its evaluation.
class FinetuneData {
 public:
  virtual ~FinetuneData() = default;
  virtual TaskHead head() const = 0;
  /// The rows of `split` (empty when the config gives no file for it).
  virtual const ModelRows& rows(Split split) const = 0;
  /// Floats per row in the head's output: 2 x seq (start then end logits)
  /// or num_labels.
  virtual std::int64_t output_width() const = 0;
  /// `outputs`: rows(split).count() x output_width(). Scores an eval split;
  /// writes the reference's files into `dir` unless it is empty.
  virtual EvalReport evaluate(Split split, const std::vector<float>& outputs,
                              const std::filesystem::path& dir) const = 0;
};

/// The head task `config.task` fine-tunes (squad: question answering; glue:
/// classification with the task's labels, or regression for STS-B). When
/// the start model's labels (`start_labels`, its id2label) are the task's
/// in another order or spelling, the head keeps the model's order, spelled
/// as the task spells them: its classes keep their meaning.
TaskHead finetune_head(const RunConfig& config, const std::vector<std::string>& start_labels);

/// Reads the files `config.finetune` names for task squad or glue, with the
/// tokenizer `tokenizer` (the model card's), into rows of `seq` tokens. Throws ConfigError naming
/// file, line or JSON path for bad data.
std::unique_ptr<FinetuneData> open_finetune_data(const RunConfig& config,
                                                 const TokenizerSpec& tokenizer, std::int64_t seq,
                                                 const TaskHead& head);

/// The two halves of open_finetune_data.
std::unique_ptr<FinetuneData> open_squad_data(const RunConfig& config,
                                              const TokenizerSpec& tokenizer, std::int64_t seq);
/// `head`: finetune_head's, whose label order the rows and predictions follow.
std::unique_ptr<FinetuneData> open_glue_data(const RunConfig& config,
                                             const TokenizerSpec& tokenizer, std::int64_t seq,
                                             const TaskHead& head);

}  // namespace polyhal
