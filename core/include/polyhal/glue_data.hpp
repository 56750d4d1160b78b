#pragma once
/// @file glue_data.hpp
/// The nine GLUE tasks in their official TSV layouts (the files of
/// gluebenchmark.com, as BERT's run_classifier.py and Hugging Face's GLUE
/// processors read them): which columns hold the sentences and the label,
/// the label set, and the task's metrics.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace polyhal {

struct GlueTaskInfo {
  std::string name;  ///< cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli
  std::vector<std::string> labels;   ///< the label set in label-id order; empty: regression (STS-B)
  bool pair = false;                 ///< two sentences per example
  std::vector<std::string> metrics;  ///< accuracy, f1, matthews, pearson, spearman
  bool header = true;           ///< the files start with a header line (CoLA's train/dev do not)
  int text_a = 0, text_b = -1;  ///< column of each sentence (-1: none)
  int label = -1;               ///< column of the label; negative counts from the end
};

/// The task named `name` (case-insensitive; "sst2", "stsb", "mnli_mismatched" also accepted).
/// Throws ConfigError listing the tasks for an unknown name.
const GlueTaskInfo& glue_task(const std::string& name);

struct GlueExample {
  std::int64_t line = 0;  ///< 1-based line in its file
  std::string text_a, text_b;
  std::int64_t label = -1;  ///< classification: index into GlueTaskInfo::labels (-1: unlabelled)
  double score = 0;         ///< STS-B: the similarity score
};

struct GlueFile {
  std::vector<GlueExample> examples;
  std::int64_t skipped = 0;  ///< QQP rows with missing columns, skipped as the reference does
};

/// Reads a train or dev TSV of `task` (labelled), or a test TSV (`labelled`
/// false: the label column is not read). Throws ConfigError naming the file,
/// the line and the problem for a row with too few columns, a label outside
/// the task's label set or a score that is not a number.
GlueFile read_glue_tsv(const std::filesystem::path& file, const GlueTaskInfo& task,
                       bool labelled = true);

}  // namespace polyhal
