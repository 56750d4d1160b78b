#pragma once
// Tasks squad and glue's config: their shared section `finetune` and their
// schemas.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "polyhal/app/config_schema.hpp"

namespace polyhal {

/// The most sequences one packed row may hold (the attention mask keeps a
/// sequence number per token in one byte).
inline constexpr std::int64_t kMaxSequencesPerPack = 64;

/// Tasks `squad` and `glue` (docs/finetuning.md). What runs follows the
/// files given (train_file: train, eval_file: evaluate after every epoch,
/// predict_file: predict) unless `do` lists it.
struct FinetuneSection {
  static constexpr const char* kSection = "finetune";
  bool train = false, eval = false, predict = false;
  std::filesystem::path train_file, eval_file, predict_file;
  /// eval/ and predict/ results, model/ (Hugging Face directory) at the end.
  std::filesystem::path output_dir;
  /// Passes over the training set; fractional as Habana's 0.5: that share
  /// of an epoch's steps (floor, at least one).
  double epochs = 2;
  /// > 0: at most this many optimizer steps (a cap on the epochs' steps;
  /// the schedule ends there).
  std::int64_t max_steps = 0;
  /// Linear warm-up over this share of the optimizer steps (the seeds'
  /// warmup_proportion); optimizer.warmup_steps, when given, wins.
  double warmup_proportion = 0.1;
  std::int64_t eval_batch = 0;  ///< rows per evaluation batch (0: batch.micro)
  // squad
  std::int64_t doc_stride = 128, max_query_length = 64;
  std::int64_t n_best_size = 20, max_answer_length = 30;
  double null_score_diff_threshold = 0.0;
  std::optional<bool> version_2_with_negative;  ///< unset: v2.0 when the file says so
  /// Packed features (Graphcore's packed SQuAD): up to max_sequences_per_pack
  /// features share a row of seq_len, packed by packing_algorithm (packing.hpp).
  bool packed = false;
  std::int64_t max_sequences_per_pack = 3;
  std::string packing_algorithm = "spfhp";  ///< spfhp | nnlshp
  // glue
  std::string glue_task;  ///< cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli
};

const TaskSchema& squad_schema();
const TaskSchema& glue_schema();

}  // namespace polyhal
