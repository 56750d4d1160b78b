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
#include "polyhal/app/glue_tasks.hpp"
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

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
