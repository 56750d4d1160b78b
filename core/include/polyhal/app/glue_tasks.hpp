#pragma once
/// @file glue_tasks.hpp
/// The nine GLUE tasks and the diagnostic set AX (the values of finetune.glue_task): each one's
/// label set, which is its classification head's, its metrics and the columns of its official TSV
/// files (glue_data.hpp reads them).
#include <string>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

struct GlueTaskInfo {
  std::string name;  ///< cola, sst-2, mrpc, sts-b, qqp, mnli, mnli-mm, qnli, rte, wnli, ax
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

}  // namespace polyhal
